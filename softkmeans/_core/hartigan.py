"""Hartigan's single-observation moves: the refinement of a Lloyd fixed point.

At a Lloyd fixed point every observation is nearest to its own centroid,
yet moving it to another cluster can still lower ``J``, because both means
move with it. Moving observation ``x`` (weight ``w``) from cluster ``a``
(mass ``m_a``) to cluster ``b`` changes ``J`` by exactly

``w m_b / (m_b + w) ||x - mu_b||^2 - w m_a / (m_a - w) ||x - mu_a||^2``

(Hartigan and Wong, "A K-means clustering algorithm", Applied Statistics
28(1), 1979; Telgarsky and Vattani, "Hartigan's method: k-means clustering
without Voronoi", AISTATS 2010). Every fixed point of these moves is a
Lloyd fixed point, not conversely.

:func:`hartigan_moves` refines a partition of the whole data: each sweep
screens every observation in blocks of rows (one matrix product per block,
as a Lloyd pass; CSR rows stay sparse there) and visits the candidates, best
first, as dense rows, with the compiled
loop of :mod:`softkmeans._core.hartigan_loops`, which decides each move
against the means as the earlier moves left them, from distances computed
by subtraction. The other functions here serve it and the merge-and-split
search of :mod:`softkmeans._core.split_merge`.
"""

import numpy as np
import scipy.sparse as sp

from .hartigan_loops import add_to_clusters, hartigan_visits
from .row_blocks import dense_rows, row_slices

__all__ = ["distances_to_own", "hartigan_moves", "nearest_labels",
           "partition_sums", "weighted_row_sum"]

#: The screening keeps an observation whose gain is above ``-slack`` times its removal gain:
#: its expanded distances carry rounding that the compiled loop's distances have not.
_SCREEN_SLACK = 1e-6


def _blocks(X, n_clusters):
    """``(rows, float64 block)`` of X, blocks of distances to ``n_clusters`` centroids
    (:func:`.row_blocks.row_slices`): dense rows, or CSR rows of a sparse X (the screening
    only multiplies them)."""
    for rows in row_slices(X.shape[0], n_clusters, min_rows=64):
        yield rows, (X[rows].astype(np.float64) if sp.issparse(X) else dense_rows(X, rows))


def _row_sq_norms(block):
    """``||x_i||^2`` of the rows of a dense or CSR block."""
    if sp.issparse(block):
        return np.asarray(block.multiply(block).sum(axis=1)).ravel()
    return np.einsum("ij,ij->i", block, block)


def _means(sums, masses):
    """The clusters' means; zeros for a cluster without mass."""
    means = np.zeros_like(sums)
    full = masses > 0
    means[full] = sums[full] / masses[full, None]
    return means


def weighted_row_sum(rows, weights):
    """``sum_i w_i x_i`` of dense or CSR rows, a float64 vector."""
    if sp.issparse(rows):
        return np.asarray(rows.T @ weights, dtype=np.float64).ravel()
    return weights @ rows


def distances_to_own(X, centers, labels):
    """``||x_i - centers[labels_i]||^2`` of every row: by subtraction for dense rows,
    expanded from the stored entries (and at least 0) for CSR ones."""
    if not sp.issparse(X):
        return np.sum((X - centers[labels]) ** 2, axis=1)
    out = np.empty(X.shape[0])
    centers_sq = np.einsum("ij,ij->i", centers, centers)
    for rows, block in _blocks(X, len(centers)):
        own = labels[rows]
        products = np.asarray(block @ centers.T)[np.arange(own.size), own]
        out[rows] = np.maximum(_row_sq_norms(block) - 2.0 * products + centers_sq[own], 0.0)
    return out


def partition_sums(X, weights, labels, n_clusters):
    """Weighted sums (float64) and masses of the clusters of a partition of X."""
    sums, masses = np.zeros((n_clusters, X.shape[1])), np.zeros(n_clusters)
    for rows, block in _blocks(X, n_clusters):
        if sp.issparse(block):
            members = sp.csr_matrix((weights[rows], (labels[rows], np.arange(block.shape[0]))),
                                    shape=(n_clusters, block.shape[0]))
            sums += (members @ block).toarray()
            masses += np.bincount(labels[rows], weights=weights[rows], minlength=n_clusters)
        else:
            add_to_clusters(block, weights[rows], labels[rows], sums, masses)
    return sums, masses


def nearest_labels(X, centers):
    """Index of the nearest of ``centers`` to each row of X (int64)."""
    centers_sq = np.einsum("ij,ij->i", centers, centers)
    labels = np.empty(X.shape[0], dtype=np.int64)
    for rows, block in _blocks(X, len(centers)):
        labels[rows] = np.argmin(centers_sq - 2.0 * np.asarray(block @ centers.T), axis=1)
    return labels


def _screen(X, weights, labels, sums, masses):
    """Observations whose move to another cluster may lower ``J``, best first."""
    full = masses > 0
    means = _means(sums, masses)
    means_sq = np.einsum("ij,ij->i", means, means)
    found, gains = [], []
    for rows, block in _blocks(X, len(masses)):
        w, own = weights[rows], labels[rows]
        dist = _row_sq_norms(block)[:, None] - 2.0 * np.asarray(block @ means.T) + means_sq
        np.maximum(dist, 0.0, out=dist)
        index = np.arange(own.size)
        m_own = masses[own]
        with np.errstate(divide="ignore", invalid="ignore"):
            removal = np.where(m_own > w, w * m_own / (m_own - w) * dist[index, own], -np.inf)
            addition = w[:, None] * masses / (masses + w[:, None]) * dist
        addition[:, ~full] = np.inf
        addition[index, own] = np.inf
        gain = removal - addition.min(axis=1)
        keep = np.flatnonzero((gain > -_SCREEN_SLACK * np.abs(removal)) & (w > 0))
        found.append(keep + rows.start)
        gains.append(gain[keep])
    found, gains = np.concatenate(found), np.concatenate(gains)
    return found[np.argsort(-gains, kind="stable")]


def hartigan_moves(X, sample_weight, labels, n_clusters, *, max_sweeps):
    """Move single observations between clusters while ``J`` goes down.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
    sample_weight : ndarray of shape (n_samples,)
    labels : ndarray of shape (n_samples,)
        The partition to improve (a Lloyd fixed point's labels).
    n_clusters : int
    max_sweeps : int
        Cap on the screening passes over X.

    Returns
    -------
    centers : ndarray of shape (n_clusters, n_features)
        The means of the improved partition; a cluster without mass gets a
        mean of zeros (callers reseed it).
    n_moves : int
        Observations moved.
    """
    weights = np.asarray(sample_weight, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64).copy()
    sums, masses = partition_sums(X, weights, labels, n_clusters)
    n_moves = 0
    for _ in range(max_sweeps):
        candidates = _screen(X, weights, labels, sums, masses)
        if candidates.size == 0:
            break
        visited = labels[candidates]
        rows = X[candidates].astype(np.float64) if sp.issparse(X) else dense_rows(X, candidates)
        moved, _, _ = hartigan_visits(rows, weights[candidates], visited, sums, masses, 1)
        labels[candidates] = visited
        n_moves += moved
        if moved == 0:
            break
    return _means(sums, masses), n_moves
