r"""
Finite identification with entmax
=================================

At a fixed configuration of centroids, softmax responsibilities approach the hard
(one-hot) assignments only exponentially fast as sigma decreases, whereas entmax-1.5
responsibilities become exactly one-hot once :math:`\sigma` falls below
:math:`\sigma_{\mathrm{id}} = \sqrt{\Delta_{\min}} / 2`, :math:`\Delta_{\min}` being
the smallest assignment margin. The figure shows the largest deviation from the hard
assignments for both relaxations on the iris data, after one update started at a
K-Means fixed point (below :math:`\sigma_{\mathrm{id}}` the entmax update leaves
that point exactly in place). A single update is what the figure measures, so the
fits stop at ``max_iter=1`` and their ``ConvergenceWarning`` is silenced.
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from softkmeans import EntmaxKMeans, SoftKMeans
from softkmeans.datasets import load

N_RATIOS = 60
# sphinx_gallery_start_ignore
# The tests run every example at a small size.
import os  # noqa: E402

if os.environ.get("SOFTKMEANS_EXAMPLE_SMALL") == "1":
    N_RATIOS = 12
# sphinx_gallery_end_ignore

X, k = load("iris")
hard = EntmaxKMeans(n_clusters=k, sigma=1e-6, random_state=0).fit(X)  # Lloyd's fixed point
centers, margin = hard.cluster_centers_, hard.margin_min_
sigma_id = np.sqrt(margin) / 2
onehot = np.eye(k)[hard.labels_]

ratios = np.geomspace(0.3, 3.0, N_RATIOS)
errors = {"softmax": [], "entmax-1.5": []}
for ratio in ratios:
    for name, cls in (("softmax", SoftKMeans), ("entmax-1.5", EntmaxKMeans)):
        model = cls(n_clusters=k, sigma=ratio * sigma_id, init=centers, max_iter=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X)
        errors[name].append(np.abs(model.predict_proba(X) - onehot).max())

fig, ax = plt.subplots(figsize=(6, 4))
for name, err in errors.items():
    ax.semilogy(ratios, np.maximum(err, 1e-18), "o-", ms=3, label=name)
ax.axvline(1.0, color="k", ls="--", label="sigma_id")
ax.set_xscale("log")
ax.set_xlabel("sigma / sigma_id")
ax.set_ylabel("max |r - r_hard| (zeros drawn at 1e-18)")
ax.legend()
fig.tight_layout()
plt.show()
