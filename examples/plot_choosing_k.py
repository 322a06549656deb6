"""
Choosing the number of clusters from one annealed fit
=====================================================

``AnnealedKMeans(n_clusters="auto", max_clusters=K)`` grows its codebook from one
codevector at the data mean, splitting one codevector at each phase transition,
so that one fit visits every ``k`` from 1 to ``K``. Each ``k`` is polished into a
K-Means fixed point and scored by the ICL (the BIC plus twice the posterior's
entropy) of two Gaussian mixtures of its clusters, a spherical one and one with
a principal axis per cluster; the smallest ICL is kept. Left: the phase
diagram, each ``k`` drawn over the temperatures at which it lasts. Right: the
polished distortion ``J``, the two ICLs and the spherical BIC against ``k``.
The data are seven blobs of unequal sizes.
"""

import matplotlib.pyplot as plt
import numpy as np

from softkmeans import AnnealedKMeans
from softkmeans.plotting import plot_cluster_path

MAX_SIZE, MAX_CLUSTERS = 300, 14
# sphinx_gallery_start_ignore
# The tests run every example at a small size.
import os  # noqa: E402

if os.environ.get("SOFTKMEANS_EXAMPLE_SMALL") == "1":
    MAX_SIZE, MAX_CLUSTERS = 60, 8
# sphinx_gallery_end_ignore

rng = np.random.default_rng(0)
centres = np.array([[0, 0], [6, 0], [0, 6], [6, 6], [12, 3], [3, 12], [12, 12]], dtype=float)
sizes = rng.integers(20, MAX_SIZE, len(centres))
X = np.vstack([c + rng.standard_normal((n, 2)) for c, n in zip(centres, sizes, strict=True)])

model = AnnealedKMeans(n_clusters="auto", max_clusters=MAX_CLUSTERS).fit(X)
print(f"chosen number of clusters: {model.n_clusters_}")

axes = plot_cluster_path(model)
axes[0].figure.suptitle(f"{len(X)} points, 7 blobs: n_clusters_ = {model.n_clusters_}")
plt.show()
