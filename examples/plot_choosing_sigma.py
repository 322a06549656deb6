r"""
Choosing sigma with GridSearchCV
================================

``SoftKMeans.score`` is the mean log-density of held-out data under the equal-weight
isotropic Gaussian mixture whose means are the centroids and whose variance is
:math:`\sigma^2`. Unlike the training objective :math:`-F_\sigma`, which grows with
:math:`\sigma` (a search over it would pick the largest), this cross-validated score
peaks where sigma matches the spread of the clusters, so a grid search over
``sigma`` is meaningful. The blobs below have a standard deviation of 0.5.

The grid runs on purpose past the critical temperature, where the centroids merge:
the fits there warn (``CriticalTemperatureWarning``, and a ``ConvergenceWarning``
for the clusters that merged), and their low score is what the search should see, so
the example silences those warnings.
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV

from softkmeans import SoftKMeans
from softkmeans.exceptions import CriticalTemperatureWarning

N_SAMPLES, N_SIGMAS = 600, 25
# sphinx_gallery_start_ignore
# The tests run every example at a small size.
import os  # noqa: E402

if os.environ.get("SOFTKMEANS_EXAMPLE_SMALL") == "1":
    N_SAMPLES, N_SIGMAS = 150, 8
# sphinx_gallery_end_ignore

X, _ = make_blobs(n_samples=N_SAMPLES, centers=4, cluster_std=0.5, random_state=0)
sigmas = np.geomspace(0.05, 5.0, N_SIGMAS)

search = GridSearchCV(SoftKMeans(n_clusters=4, random_state=0), {"sigma": sigmas}, cv=3)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", CriticalTemperatureWarning)
    warnings.simplefilter("ignore", ConvergenceWarning)
    search.fit(X)
scores = search.cv_results_["mean_test_score"]

fig, ax = plt.subplots(figsize=(6, 4))
ax.semilogx(sigmas, scores, "o-")
ax.axvline(search.best_params_["sigma"], color="k", ls="--",
           label=f"selected sigma = {search.best_params_['sigma']:.2f}")
ax.axvline(0.5, color="grey", ls=":", label="true cluster std = 0.5")
ax.set_xlabel("sigma")
ax.set_ylabel("held-out mean log-density (3-fold CV)")
ax.legend()
fig.tight_layout()
plt.show()
