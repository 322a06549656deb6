"""One centroid more: the best of a few rows drawn by their distance to the centroids.

A partition into ``k`` clusters grown from one into ``k - 1`` by cutting a
cluster keeps the other ``k - 2`` clusters where they were; in data without
separated clusters the best partition into ``k`` can move every border. The
global k-means algorithm (Likas, Vlassis and Verbeek, "The global k-means
clustering algorithm", Pattern Recognition 36(2), 2003) starts Lloyd's
algorithm from the ``k - 1`` centroids and one row; its fast variant takes
the row that lowers the nearest-centroid ``J`` most, a bound on what the
descent reaches. :func:`best_insertion` scores :data:`CANDIDATES` rows
drawn with probabilities proportional to their weighted squared distance to
the nearest centroid (as k-means++ draws a seed) rather than every row.
"""

import numpy as np

from .hartigan import distances_to_own, nearest_labels
from .row_blocks import dense_rows, float64_blocks

__all__ = ["CANDIDATES", "best_insertion"]

#: Rows scored as the new centroid.
CANDIDATES = 16


def best_insertion(rows, weights, centers, rng):
    """``centers`` and, last, the one of :data:`CANDIDATES` rows drawn (without
    replacement, with ``rng``, a ``RandomState``) that lowers ``J`` of the nearest-centroid
    partition most as a centroid more; None when every row lies on a centroid.

    Parameters
    ----------
    rows : ndarray or CSR matrix of shape (n_rows, n_features)
    weights : ndarray of shape (n_rows,)
    centers : ndarray of shape (n_clusters, n_features)
    rng : RandomState

    Returns
    -------
    ndarray of shape (n_clusters + 1, n_features) or None
    """
    near = distances_to_own(rows, centers, nearest_labels(rows, centers))
    potential = weights * near
    total = potential.sum()
    p = potential / total if total > 0 else potential
    count = min(CANDIDATES, np.count_nonzero(p))  # of p: a subnormal potential may round to 0
    if count == 0:
        return None
    drawn = rng.choice(len(potential), count, replace=False, p=p)
    points = dense_rows(rows, drawn)
    points_sq = np.einsum("ij,ij->i", points, points)
    gains = np.zeros(count)
    for index, block in float64_blocks(rows, width=count):
        sq = np.einsum("ij,ij->i", block, block)[:, None] - 2.0 * block @ points.T + points_sq
        gains += weights[index] @ np.maximum(near[index, None] - sq, 0.0)
    return np.vstack([centers, points[np.argmax(gains)]])
