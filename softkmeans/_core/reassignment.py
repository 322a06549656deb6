"""Centroids the data abandoned: which ones, and where they move.

A soft fit never gives a centroid exactly zero mass, so the relocation of
empty clusters that Lloyd's algorithm performs never happens to it: a
centroid that merged with another at a high temperature, or serves a handful
of observations, keeps its place. :func:`abandoned` finds them: mass below
``ratio`` times the largest (``MiniBatchKMeans``' rule), or a position that
another centroid shares up to :data:`DUPLICATE` of the temperature.
:func:`relocate` moves them as scikit-learn's greedy k-means++ draws seeds:
each onto the best of a few observations drawn with probability proportional
to their weighted squared distance to the nearest kept centroid (the one that
lowers the sum of those distances most), the distances updated after each.
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from .responsibilities import HARD
from .update_loops import PAIR_WORK, has_close_pair

__all__ = ["DUPLICATE", "ROUNDS", "Reassign", "abandoned", "relocate"]

#: Two centroids whose squared distance is at most this fraction of ``2 sigma^2`` take
#: every observation's responsibilities in the same ratio up to a relative change of
#: about ``2 sqrt(DUPLICATE * d_i / (2 sigma^2))``: one of them is a duplicate.
DUPLICATE = 0.05

#: Relocations a run may keep: each one is followed by the iterations to convergence.
ROUNDS = 10



@dataclass
class Reassign:
    """How a run relocates abandoned centroids (see :func:`abandoned`).

    Attributes
    ----------
    ratio : float
        A centroid whose mass is below ``ratio`` times the largest starves.
    rng : numpy.random.RandomState
        Of the draws (:func:`relocate`).
    rounds : int
        Relocations left to the run (updated).
    """

    ratio: float
    rng: np.random.RandomState
    rounds: int = ROUNDS


def abandoned(masses, centers, spec, ratio):
    """Indices (ascending) of the centroids to move.

    Parameters
    ----------
    masses : ndarray of shape (n_clusters,)
        Their (running) masses.
    centers : ndarray of shape (n_clusters, n_features)
    spec : RelaxationSpec
        The relaxation in use: duplicates are sought at its temperature (soft
        ones only; of two hard centroids in one place, one has no mass).
    ratio : float
        A centroid whose mass is below ``ratio`` times the largest starves.

    Returns
    -------
    ndarray of int
        Starving centroids (never the heaviest one), and of each group of
        duplicates every one but the first.
    """
    # Python floats: numpy's calls on k values cost more once a pass has pushed its code
    # out of the caches
    values = masses.tolist()
    largest = max(values)
    heaviest = values.index(largest)
    moving = [j for j, mass in enumerate(values) if mass < ratio * largest and j != heaviest]
    k, d = centers.shape
    radius_sq = DUPLICATE * spec.tau if spec.kind != "hard" else -1.0
    # the pairs from a tree, unless comparing every pair is cheap and finds none (within a
    # slack for the tree's own rounding)
    if radius_sq >= 0 and (k * k * d > PAIR_WORK
                           or has_close_pair(centers, radius_sq * (1.0 + 1e-9))):
        pairs = cKDTree(centers).query_pairs(np.sqrt(radius_sq), output_type="ndarray")
        if len(pairs):
            graph = sp.coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])),
                                  shape=(k, k))
            _, group = connected_components(graph, directed=False)
            # the first centroid of each group of duplicates stays (duplicates share their
            # mass about equally: an order by mass would follow each engine's rounding)
            stays = np.zeros(k, dtype=bool)
            stays[np.unique(group, return_index=True)[1]] = True
            moving = sorted(set(moving).union(np.flatnonzero(~stays).tolist()))
    return np.array(moving, dtype=np.intp)


def relocate(engine, centers, moving, rng):
    """``centers`` with the ``moving`` ones placed on observations drawn as greedy k-means++
    draws them (``2 + log(n_clusters)`` candidates each).

    Parameters
    ----------
    engine : engine object
        Bound to the data (see :mod:`softkmeans._engines`).
    centers : ndarray of shape (n_clusters, n_features), float64
    moving : ndarray of int
        From :func:`abandoned`.
    rng : numpy.random.RandomState

    Returns
    -------
    centers : ndarray of shape (n_clusters, n_features)
        A copy with the placed centroids moved.
    placed : int
        How many of ``moving`` were placed, in their order: the draws stop where
        every observation already sits on a kept or placed centroid (nothing
        to gain).
    """
    centers = centers.copy()
    kept = np.setdiff1d(np.arange(len(centers)), moving)
    # per-row values as numpy arrays (a blockwise engine's are computed once here)
    dmin = np.asarray(engine.estep(centers[kept], HARD, with_sums=False).dmin, dtype=float)
    weights = np.asarray(engine.sample_weight, dtype=float)
    weights = weights / weights.max()
    trials = 2 + int(np.log(len(centers)))  # as scikit-learn's greedy k-means++
    placed = 0
    for j in moving:
        cumulative = np.cumsum(weights * dmin)
        if not cumulative[-1] > 0:
            break
        draws = rng.uniform(size=trials) * cumulative[-1]
        rows = np.minimum(np.searchsorted(cumulative, draws, side="right"), len(dmin) - 1)
        candidates = np.vstack([engine.row(int(i)) for i in rows])
        nearer = np.minimum(dmin[:, None],
                            np.asarray(engine.sq_distances(candidates), dtype=float))
        best = int(np.argmin(weights @ nearer))
        centers[j], dmin = candidates[best], nearer[:, best]
        placed += 1
    return centers, placed
