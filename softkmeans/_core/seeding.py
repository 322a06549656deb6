"""Starting centroids: the separation of those that coincide."""

import numpy as np

from .responsibilities import HARD

__all__ = ["separate_coincident"]



def separate_coincident(engine, centers):
    """Move every starting centroid equal to an earlier one onto a far observation.

    Equal centroids get equal distances to every observation, hence equal
    responsibilities at every temperature (the engines make them tie
    exactly; a hard tie goes to the first, which leaves the others empty),
    so no update ever separates them. They come from an array ``init`` with
    equal rows, and from draws on data with duplicate rows. As K-Means
    relocates an empty cluster, each copy after the first moves in turn
    onto the observation (of positive weight) farthest from the centroids
    placed so far, the first such in the order of X. When every observation
    already lies on a centroid (X has fewer distinct rows than there are
    centroids) the remaining copies stay where they are.

    Parameters
    ----------
    engine : engine object
        Bound to the data (see :mod:`softkmeans._engines`).
    centers : ndarray of shape (n_clusters, n_features)
        Starting centroids.

    Returns
    -------
    ndarray of shape (n_clusters, n_features), float64
        ``centers`` with its copies moved (a new array).
    """
    centers = np.array(centers, dtype=np.float64)
    if len(set(np.einsum("ij,ij->i", centers, centers).tolist())) == centers.shape[0]:
        return centers  # distinct squared norms: no two centroids are equal
    _, first = np.unique(centers, axis=0, return_index=True)  # -0.0 equals 0.0 here
    if first.size == centers.shape[0]:
        return centers
    placed = np.zeros(centers.shape[0], dtype=bool)
    placed[first] = True
    nearest = engine.estep(centers[placed], HARD, with_sums=False).dmin
    farthest = np.where(engine.sample_weight > 0, nearest, 0.0)
    for j in np.flatnonzero(~placed):
        i = int(np.argmax(farthest))
        point = engine.row(i)
        # rounding leaves a point on a centroid a tiny positive distance from it
        if not farthest[i] > 0 or (centers[placed] == point).all(axis=1).any():
            break
        centers[j], placed[j] = point, True
        np.minimum(farthest, engine.sq_distances(point[None])[:, 0], out=farthest)
    return centers
