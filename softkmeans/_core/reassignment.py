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
from scipy.spatial import cKDTree

from .responsibilities import RelaxationSpec

__all__ = ["DUPLICATE", "ROUNDS", "Reassign", "abandoned", "relocate"]

#: Two centroids whose squared distance is at most this fraction of ``2 sigma^2`` take
#: every observation's responsibilities in the same ratio up to a relative change of
#: about ``2 sqrt(DUPLICATE * d_i / (2 sigma^2))``: one of them is a duplicate.
DUPLICATE = 0.05

#: Relocations a run may keep: each one is followed by the iterations to convergence.
ROUNDS = 10

_HARD = RelaxationSpec("hard")


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
        Starving centroids, and of each group of duplicates every one but the
        first; never the heaviest centroid.
    """
    moving = masses < ratio * masses.max()
    if spec.kind != "hard":
        pairs = cKDTree(centers).query_pairs(np.sqrt(DUPLICATE * spec.tau),
                                             output_type="ndarray")
        moving[pairs.max(axis=1)] = True
    moving[np.argmax(masses)] = False
    return np.flatnonzero(moving)


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
    ndarray of shape (n_clusters, n_features)
        A copy. A centroid stays where every observation already sits on a kept
        or placed centroid (nothing to gain).
    """
    centers = centers.copy()
    kept = np.setdiff1d(np.arange(len(centers)), moving)
    dmin = engine.estep(centers[kept], _HARD, with_sums=False).dmin
    weights = engine.sample_weight / engine.sample_weight.max()
    trials = 2 + int(np.log(len(centers)))  # as scikit-learn's greedy k-means++
    for j in moving:
        cumulative = np.cumsum(weights * dmin)  # a dask array's per-row values stay lazy
        total = float(cumulative[-1])
        if not total > 0:
            break
        # the first rows whose cumulative sums exceed the draws (searchsorted, side="right")
        rows = [min(int((cumulative <= u * total).sum()), engine.n_samples - 1)
                for u in rng.uniform(size=trials)]
        candidates = np.vstack([engine.row(i) for i in rows])
        nearer = np.minimum(dmin[:, None], engine.sq_distances(candidates))
        best = int(np.argmin([float(v) for v in weights @ nearer]))
        centers[j], dmin = candidates[best], nearer[:, best]
    return centers
