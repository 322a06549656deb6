"""Merge-and-split search around a K-Means fixed point.

A Lloyd fixed point can hold two centroids in one true cluster and one
centroid across two: no Lloyd step, and no single-observation move, takes a
centroid that far. A move of this search merges two clusters ``a`` and ``b``
and cuts a third, ``j``, across its principal axis at its mean, one half
staying ``j`` and the other becoming ``b``. That raises ``J`` by exactly
``m_a m_b / (m_a + m_b) ||mu_a - mu_b||^2`` and lowers it by the same
formula over the two halves. Hartigan's single-observation moves
(:mod:`softkmeans._core.hartigan`) then let the neighbourhood settle: the
observations of the three clusters and of their nearest neighbours are
visited, and every move is an exact change of ``J``. A move is kept when
``J`` went down. Moves are tried in the order of their net change before
settling, the :data:`MERGES` cheapest merges against the :data:`CUTS` most
profitable cuts, and a round ends at the first move kept. A round that keeps
none may then try a group transfer (:mod:`softkmeans._core.group_moves`): the
side of a cut of a cluster across its principal axis, at the threshold that
lowers ``J`` most, moved to a neighbouring cluster and settled the same way.
After a transfer kept, transfers come first until one fails.

The search runs on float64 rows (a sample of the data), dense or CSR; none
of its steps is random.
"""

from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from .centred_rows import CentredRows
from .group_moves import best_transfer
from .hartigan import distances_to_own, nearest_labels, partition_sums, weighted_row_sum
from .hartigan_loops import hartigan_visits

__all__ = ["AXIS_ITERATIONS", "AXIS_TOL", "EIGH_MAX_FEATURES", "SELECTED_EIGH_MIN", "Partition",
           "cheapest_merges", "merge_split_search", "principal_axis", "top_eigenpair",
           "widest_cut"]

#: Cheapest merges and most profitable cuts paired in one round of the search.
MERGES = 4
CUTS = 4
#: Pairs ranked by their exact merge cost per merge kept (see :func:`cheapest_merges`).
_MERGE_SCREEN = 16
#: Hartigan sweeps of the first settling and of a move's settling, which also ends after a
#: sweep that lowered ``J`` by at most ``_SETTLED`` of it.
_FIRST_SWEEPS = 50
_SETTLE_SWEEPS = 30
_SETTLED = 1e-5
#: A move's settling visits the observations of its three clusters and of the clusters
#: whose centroids are among the ``_NEIGHBOURS`` nearest to one of them: those across the
#: borders that the move shifts. A cell of a Voronoi diagram of points in the plane borders
#: six others on average (more in more dimensions); on data without cluster structure
#: (colours) a settling of fewer leaves the move's gain unpaid.
_NEIGHBOURS = 6
#: Up to this many features a cluster's principal axis comes from its scatter matrix,
#: beyond by power iterations, at most ``AXIS_ITERATIONS`` of them, which stop once an
#: axis changes by less than ``AXIS_TOL``. The cap binds on flat spectra (TF-IDF), where
#: the eigenvalues come out as Rayleigh quotients a little below them: a split or a cut
#: needs the axis only as a direction to cut along.
EIGH_MAX_FEATURES = 128
AXIS_ITERATIONS = 10
AXIS_TOL = 1e-6
#: Rows from which :func:`top_eigenpair` asks LAPACK for the largest eigenvalue alone.
SELECTED_EIGH_MIN = 24
#: The search ends once its settlings have visited this many rows per row of the sample
#: (a sweep over the sample visits one): a cap on its cost, some tens of Lloyd passes.
_VISITS_PER_ROW = 80
#: A move is kept when it lowers ``J`` by more than this fraction of it.
_PROGRESS = 1e-5


@dataclass
class Partition:
    """A partition of the rows, with its clusters' weighted sums and masses.

    Attributes
    ----------
    labels : ndarray of shape (n_rows,), int64
    sums : ndarray of shape (n_clusters, n_features)
    masses : ndarray of shape (n_clusters,)
    inertia : float
        ``J`` of the partition at its means.
    """

    labels: np.ndarray
    sums: np.ndarray
    masses: np.ndarray
    inertia: float

    @property
    def centers(self):
        """The clusters' means."""
        return self.sums / self.masses[:, None]

    @classmethod
    def of(cls, rows, weights, labels, n_clusters):
        """The partition ``labels`` of ``rows``, its sums and ``J`` computed afresh."""
        sums, masses = partition_sums(rows, weights, labels, n_clusters)
        means = sums / np.where(masses > 0, masses, 1.0)[:, None]
        inertia = float(weights @ distances_to_own(rows, means, labels))
        return cls(labels, sums, masses, inertia)


def _first_partition(rows, weights, centers):
    """The nearest-centroid partition of the rows, no cluster left empty (each empty one
    takes the row farthest from its centroid), settled by Hartigan's moves."""
    k = len(centers)
    labels = nearest_labels(rows, centers)
    empty = np.flatnonzero(np.bincount(labels, minlength=k) == 0)
    if empty.size:
        far = distances_to_own(rows, centers, labels)
        labels[np.argsort(-far, kind="stable")[:empty.size]] = empty
    point = Partition.of(rows, weights, labels, k)
    hartigan_visits(rows, weights, point.labels, point.sums, point.masses, _FIRST_SWEEPS,
                    _SETTLED * point.inertia)
    return Partition.of(rows, weights, point.labels, k)


def _ward(mass_a, mass_b, mean_a, mean_b):
    """``J`` of two groups merged at their common mean less ``J`` of the two apart."""
    return float(mass_a * mass_b / (mass_a + mass_b) * np.sum((mean_a - mean_b) ** 2))


def cheapest_merges(centers, masses, count):
    """The ``count`` pairs of clusters whose merges raise ``J`` least: ``(cost, a, b)`` each,
    cheapest first (ties in the order of ``(a, b)``).

    The pairs are screened by squared distances from the norms of the centroids less
    their weighted mean (``k^2`` entries, no ``k x k x d`` differences); the
    :data:`_MERGE_SCREEN` times ``count`` cheapest by that screen get their cost from
    their differences, which ranks them.
    """
    k = len(centers)
    # about their weighted mean: norms of data far from the origin would swamp the distances
    centred = centers - masses @ centers / max(float(masses.sum()), np.finfo(float).tiny)
    norms = np.einsum("ij,ij->i", centred, centred)
    sq = np.maximum(norms[:, None] + norms[None, :] - 2.0 * centred @ centred.T, 0.0)
    cost = masses[:, None] * masses[None, :] / (masses[:, None] + masses[None, :]) * sq
    cost[np.tril_indices(k)] = np.inf
    shortlist = min(cost.size, _MERGE_SCREEN * count)
    flat = np.argpartition(cost, shortlist - 1, axis=None)[:shortlist]
    found = []
    for a, b in zip(*np.unravel_index(np.sort(flat), cost.shape), strict=True):
        if np.isfinite(cost[a, b]):
            found.append((_ward(masses[a], masses[b], centers[a], centers[b]), int(a), int(b)))
    return sorted(found, key=lambda merge: merge[0])[:count]


def top_eigenpair(matrix):
    """``(largest eigenvalue, unit eigenvector)`` of a symmetric ``matrix``.

    From LAPACK's solver for selected eigenvalues from :data:`SELECTED_EIGH_MIN`
    rows on (faster there than finding all of them), from all of them below.
    """
    d = matrix.shape[0]
    if d < SELECTED_EIGH_MIN:
        values, vectors = np.linalg.eigh(matrix)
        return values[-1], vectors[:, -1]
    values, vectors = scipy.linalg.eigh(matrix, subset_by_index=[d - 1, d - 1], driver="evr")
    return values[0], vectors[:, 0]


def principal_axis(centred, weights, n_features):
    """Unit vector along the largest eigenvalue of the weighted scatter of ``centred``
    (dense rows, or :class:`CentredRows` beyond :data:`EIGH_MAX_FEATURES` features)."""
    if n_features <= EIGH_MAX_FEATURES:
        return top_eigenpair(centred.T @ (weights[:, None] * centred))[1]
    axis = np.random.RandomState(0).standard_normal(n_features)
    axis /= np.linalg.norm(axis)
    for _ in range(AXIS_ITERATIONS):
        projected = weights * (centred @ axis)
        if isinstance(centred, CentredRows):
            image = centred.transposed_times(projected[:, None])[0]
        else:
            image = centred.T @ projected
        norm = np.linalg.norm(image)
        if norm == 0:
            break
        image /= norm
        converged = abs(abs(image @ axis) - 1.0) < AXIS_TOL
        axis = image
        if converged:
            break
    return axis


def _principal_cut(rows, weights, members, center):
    """``(gain, moved, axis)``: the decrease of ``J`` when the cluster of ``members`` is cut
    across its principal axis at its mean, the members of the half that leaves, and the axis
    (None when a half is empty)."""
    block = rows[members]
    centred = CentredRows(block, center) if sp.issparse(block) else block - center
    axis = principal_axis(centred, weights[members], block.shape[1])
    side = centred @ axis > 0
    masses = [float(weights[members[part]].sum()) for part in (side, ~side)]
    if not min(masses) > 0:
        return None
    means = [weighted_row_sum(block[part], weights[members[part]]) / mass
             for part, mass in zip((side, ~side), masses, strict=True)]
    return _ward(*masses, *means), members[side], axis


def _cuts(rows, weights, point, count, cache):
    """The ``count`` most profitable cuts ``(gain, j, moved)`` of the clusters of ``point``.

    ``cache`` keeps each cluster's cut by its sums' bytes: a cluster whose
    sums did not change kept its members.
    """
    found = []
    centers = point.centers
    for j in range(len(point.masses)):
        key = point.sums[j].tobytes()
        if key not in cache:
            members = np.flatnonzero(point.labels == j)
            cache[key] = (None if members.size < 2
                          else _principal_cut(rows, weights, members, centers[j]))
        if cache[key] is not None:
            found.append((cache[key][0], j, cache[key][1]))
    return sorted(found, key=lambda cut: -cut[0])[:count]


def _nearest(centers, clusters):
    """For each of ``clusters``, the :data:`_NEIGHBOURS` ``+ 1`` clusters nearest to it,
    nearest first (itself among them but for exact duplicates of lower index)."""
    sq = np.sum((centers[clusters, None, :] - centers[None, :, :]) ** 2, axis=2)
    return np.argsort(sq, axis=1, kind="stable")[:, :_NEIGHBOURS + 1]


def _neighbourhood(centers, clusters):
    """``clusters`` and the :data:`_NEIGHBOURS` clusters nearest to each of them."""
    return np.union1d(clusters, _nearest(centers, clusters).ravel())


def _settle(rows, weights, labels, sums, masses, needed, settled):
    """Hartigan sweeps over ``rows`` (``labels``, ``sums`` and ``masses`` updated in place)
    until one lowers ``J`` by at most ``settled``, or until the sweeps left, each lowering it
    by no more than the last one did, could no longer lower it by ``needed`` in all (a
    settling's sweeps lower it less and less): ``(decrease, n_sweeps)``."""
    decrease, n_sweeps = 0.0, 0
    while n_sweeps < _SETTLE_SWEEPS:
        _, swept, _ = hartigan_visits(rows, weights, labels, sums, masses, 1)
        decrease += swept
        n_sweeps += 1
        if swept <= settled or decrease + swept * (_SETTLE_SWEEPS - n_sweeps) <= needed:
            break
    return decrease, n_sweeps


def _try_move(rows, weights, point, move):
    """The partition after ``move = (net, a, b, j, moved)`` and the settling, or None when
    ``J`` did not go down; and the rows visited by the settling, counted once per sweep."""
    net, a, b, j, moved = move
    labels, sums, masses = point.labels.copy(), point.sums.copy(), point.masses.copy()
    labels[labels == b] = a
    sums[a] += sums[b]
    masses[a] += masses[b]
    labels[moved] = b
    sums[b] = weighted_row_sum(rows[moved], weights[moved])
    masses[b] = weights[moved].sum()
    sums[j] -= sums[b]
    masses[j] -= masses[b]
    region = np.flatnonzero(np.isin(labels, _neighbourhood(sums / masses[:, None],
                                                           np.array([a, b, j]))))
    settled = labels[region]
    decrease, n_sweeps = _settle(rows[region], weights[region], settled, sums, masses,
                                 _PROGRESS * point.inertia - net, _SETTLED * point.inertia)
    visits = region.size * n_sweeps
    if not point.inertia - net - decrease < point.inertia * (1.0 - _PROGRESS):
        return None, visits
    labels[region] = settled
    candidate = Partition.of(rows, weights, labels, len(masses))
    return (candidate if candidate.inertia < point.inertia * (1.0 - _PROGRESS) else None), visits


def _best_transfers(rows, weights, point, cache, cuts):
    """``(change, a, b, moved)`` of each cluster ``a`` of ``point``: the best group transfer
    (:func:`.group_moves.best_transfer`) of a side of its cut across its principal axis to
    one of the :data:`_NEIGHBOURS` clusters nearest to it. ``cache`` keeps them by the sums'
    bytes of the cluster and of its neighbours, as ``cuts`` (:func:`_cuts`' cache) keeps
    cuts, whose principal axes they reuse."""
    centers = point.centers
    found = []
    for a in range(len(centers)):
        near = _nearest(centers, np.array([a]))[0]
        targets = near[near != a][:_NEIGHBOURS]
        key = point.sums[np.concatenate([[a], targets])].tobytes()
        if key not in cache:
            members = np.flatnonzero(point.labels == a)
            cache[key] = None
            if members.size > 1 and targets.size:
                centred = rows[members] - centers[a]
                cut = cuts.get(point.sums[a].tobytes())
                axis = (cut[2] if cut is not None
                        else principal_axis(centred, weights[members], rows.shape[1]))
                change, target, moved = best_transfer(centred, weights[members], axis,
                                                      centers[a] - centers[targets],
                                                      point.masses[targets])
                cache[key] = (change, a, int(targets[target]), members[moved])
        if cache[key] is not None:
            found.append(cache[key])
    return found


def _try_transfer(rows, weights, point, cache, cuts):
    """The partition after the group transfer (:func:`_best_transfers`) that lowers ``J``
    most, settled, or None when none lowers it by :data:`_PROGRESS` of it; and the rows
    visited by the settling. CSR rows (beyond :data:`EIGH_MAX_FEATURES` features) get no
    transfer: the running sums of a cluster's rows would be dense."""
    found = [] if sp.issparse(rows) else _best_transfers(rows, weights, point, cache, cuts)
    change, a, b, moved = min(found, key=lambda move: move[0], default=(0.0, 0, 0, None))
    if not change < -_PROGRESS * point.inertia:
        return None, 0
    labels = point.labels.copy()
    labels[moved] = b
    sums, masses = partition_sums(rows, weights, labels, len(point.masses))
    region = np.flatnonzero(np.isin(labels, _neighbourhood(point.centers, np.array([a, b]))))
    settled = labels[region]
    _, n_sweeps = _settle(rows[region], weights[region], settled, sums, masses, 0.0,
                          _SETTLED * point.inertia)
    labels[region] = settled
    return Partition.of(rows, weights, labels, len(point.masses)), region.size * n_sweeps


def widest_cut(rows, weights, centers, cache):
    """``centers`` and one more: the cluster (of the nearest-centroid partition of the rows)
    whose cut across its principal axis at its mean lowers ``J`` most, replaced by the means
    of its two halves; ``centers`` itself when no cluster can be cut.

    ``rows`` and ``weights`` as :func:`merge_split_search`'s; ``cache`` as :func:`_cuts`'s.
    """
    k = len(centers)
    point = Partition.of(rows, weights, nearest_labels(rows, centers), k)
    cuts = _cuts(rows, weights, point, 1, cache)
    if not cuts:
        return centers
    _, j, moved = cuts[0]
    moved_sum = weighted_row_sum(rows[moved], weights[moved])
    moved_mass = float(weights[moved].sum())
    staying = (point.sums[j] - moved_sum) / (point.masses[j] - moved_mass)
    return np.vstack([centers[:j], staying, centers[j + 1:], moved_sum / moved_mass])


def _try_merge_split(rows, weights, point, cache, budget):
    """The partition after the first of a round's merge-and-split moves (:func:`_try_move`)
    that lowers ``J``, or None; and the rows visited by the settlings, which stop once they
    reach ``budget``."""
    merges = cheapest_merges(point.centers, point.masses, MERGES)
    cuts = _cuts(rows, weights, point, CUTS + 2, cache)  # two may be of a merged pair
    moves = sorted(((gain - cost, a, b, j, moved) for cost, a, b in merges
                    for gain, j, moved in cuts if j not in (a, b)),
                   key=lambda move: -move[0])[:MERGES * CUTS]
    visited = 0
    for move in moves:
        found, visits = _try_move(rows, weights, point, move)
        visited += visits
        if found is not None or visited >= budget:
            return found, visited
    return None, visited


def merge_split_search(rows, weights, centers, *, max_rounds, transfers=False):
    """Settle the partition of ``centers``, then merge and split clusters while ``J`` drops.

    Parameters
    ----------
    rows : ndarray or CSR matrix of shape (n_rows, n_features), float64
    weights : ndarray of shape (n_rows,), float64
    centers : ndarray of shape (n_clusters, n_features)
    max_rounds : int
        Cap on the moves kept.
    transfers : bool, default=False
        Whether a round that keeps no merge-and-split move tries a group
        transfer (:func:`_try_transfer`), a move kept like the others.

    Returns
    -------
    Partition
        The best partition found: where a round keeps no move, or once the
        settlings have visited :data:`_VISITS_PER_ROW` rows per row.
    """
    point = _first_partition(rows, weights, centers)
    cache, transfer_cache, budget = {}, {}, _VISITS_PER_ROW * rows.shape[0]
    kinds = ("merge-split", "transfer") if transfers else ("merge-split",)
    for _ in range(max_rounds):
        for kind in kinds:
            if kind == "transfer":
                found, visits = _try_transfer(rows, weights, point, transfer_cache, cache)
            else:
                found, visits = _try_merge_split(rows, weights, point, cache, budget)
            budget -= visits
            if found is not None or budget <= 0:
                break
        if found is not None:
            point = found
        if found is None or budget <= 0:
            break
        # the kind of move kept comes first: a transfer is tried after every merge-and-split
        # move failed, and it changes only its neighbourhood
        kinds = kinds[::-1] if kind != kinds[0] else kinds
    return point
