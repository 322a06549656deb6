"""
Annealing paths on the four planar datasets
============================================

Deterministic annealing starts above the critical temperature
``sigma^2 = lambda_max``, where every softmax centroid sits at the data mean, and
lowers the temperature step by step. The centroids split off along the data's
main directions and end at a K-Means fixed point. The red stars mark the point
Lloyd's algorithm reaches from the same k-means++ start; on ambiguous data the
annealed endpoint can have a lower distortion ``J``.
"""

import matplotlib.pyplot as plt
import numpy as np

from softkmeans import AnnealedKMeans
from softkmeans.datasets import PLANAR, load

N_SAMPLES, N_TEMPERATURES = 300, 40
# sphinx_gallery_start_ignore
# The tests run every example at a small size.
import os  # noqa: E402

if os.environ.get("SOFTKMEANS_EXAMPLE_SMALL") == "1":
    N_SAMPLES, N_TEMPERATURES = 100, 8
# sphinx_gallery_end_ignore

fig, axes = plt.subplots(1, len(PLANAR), figsize=(4 * len(PLANAR), 4))
for ax, name in zip(axes, PLANAR, strict=True):
    X, k = load(name, n_samples=N_SAMPLES)
    model = AnnealedKMeans(n_clusters=k, strategy="paper", n_temperatures=N_TEMPERATURES,
                           random_state=0, record_path="centers").fit(X)
    lloyd = AnnealedKMeans(n_clusters=k, strategy="paper", schedule=[1e-12], random_state=0).fit(X)
    path = np.concatenate([stage["centers"] for stage in model.path_])
    ax.scatter(X[:, 0], X[:, 1], s=4, c="lightgrey")
    for j in range(k):
        ax.plot(path[:, j, 0], path[:, j, 1], lw=1)
    ax.plot(*model.cluster_centers_.T, "ko", ms=5)
    ax.plot(*lloyd.cluster_centers_.T, "r*", ms=12)
    ax.set_title(f"{name}: J = {model.inertia_:.1f} (Lloyd {lloyd.inertia_:.1f})", fontsize=9)
    ax.set_aspect("equal")
fig.tight_layout()
plt.show()
