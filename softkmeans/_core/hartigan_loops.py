"""Compiled loops of Hartigan's single-observation moves (:mod:`softkmeans._core.hartigan`).

The moves are sequential by nature: each one changes two means that the
next observation's decision reads. These loops visit rows given as a dense
float64 block, against cluster sums and masses that the caller owns and
that every move updates in place.

CSR rows have a loop of their own, whose distances are expanded from the
rows' stored entries. The distance of a dense row to a mean is inlined into the visit loop (numba's
``inline="always"``) and reads both in place: with a call per distance and
a row view per call, a visit cost about 30 ns per cluster at 2 or 3
features, against 3 ns inlined.
"""

import numpy as np
import scipy.sparse as sp
from numba import njit

from .._jit import JIT_OPTIONS, read_only

__all__ = ["add_to_clusters", "compile_local_search", "hartigan_visits"]

#: A move must lower ``J`` by more than this fraction of the observation's removal gain, so
#: that ties (equal gains, up to rounding) never send an observation back and forth.
MOVE_MARGIN = 1e-12
#: Features summed between two checks of a partial distance against the best so far.
_CHECK_EVERY = 32


@njit(**JIT_OPTIONS, inline="always")
def _scaled_sq_distance(rows, i, means, j, scale, bound):
    """``scale ||rows[i] - means[j]||^2``, or a partial sum of it once that reaches ``bound``.

    From 8 features on, four running sums (of the features whose index is 0,
    1, 2 or 3 modulo 4) give the processor independent additions; a single sum
    waits for each addition before the next.
    """
    d = rows.shape[1]
    if d < 8:
        total = 0.0
        for t in range(d):
            diff = rows[i, t] - means[j, t]
            total += diff * diff
        return scale * total
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    for start in range(0, d, _CHECK_EVERY):
        stop = min(start + _CHECK_EVERY, d)
        fours = start + (stop - start) // 4 * 4
        for t in range(start, fours, 4):
            e0 = rows[i, t] - means[j, t]
            e1 = rows[i, t + 1] - means[j, t + 1]
            e2 = rows[i, t + 2] - means[j, t + 2]
            e3 = rows[i, t + 3] - means[j, t + 3]
            s0 += e0 * e0
            s1 += e1 * e1
            s2 += e2 * e2
            s3 += e3 * e3
        for t in range(fours, stop):
            e0 = rows[i, t] - means[j, t]
            s0 += e0 * e0
        if scale * ((s0 + s1) + (s2 + s3)) >= bound:
            return scale * ((s0 + s1) + (s2 + s3))
    return scale * ((s0 + s1) + (s2 + s3))


@njit(**JIT_OPTIONS)
def _add_to_clusters(rows, weights, labels, sums, masses):
    """Add each row, times its weight, into its cluster's ``sums`` and its weight into ``masses``.

    Parameters
    ----------
    rows : ndarray of shape (n_rows, n_features), float64
    weights : ndarray of shape (n_rows,), float64
    labels : ndarray of shape (n_rows,), int64
    sums, masses : ndarrays of shape (n_clusters, n_features) and (n_clusters,), float64
        Updated in place.
    """
    for i in range(rows.shape[0]):
        j, w = labels[i], weights[i]
        masses[j] += w
        for t in range(rows.shape[1]):
            sums[j, t] += w * rows[i, t]


@njit(**JIT_OPTIONS)
def _hartigan_visits(rows, weights, labels, sums, masses, max_sweeps, min_decrease):
    """Visit ``rows`` in order, moving each to the cluster that lowers ``J`` most.

    Parameters
    ----------
    rows : ndarray of shape (n_rows, n_features), float64
        The observations visited.
    weights : ndarray of shape (n_rows,), float64
    labels : ndarray of shape (n_rows,), int64
        Their clusters; updated in place.
    sums, masses : ndarrays of shape (n_clusters, n_features) and (n_clusters,), float64
        Weighted sums and masses of every cluster over all observations (not
        only ``rows``); updated in place.
    max_sweeps : int
        Passes over ``rows``.
    min_decrease : float
        The passes stop after the first one whose moves lowered ``J`` by at
        most this (0: after the first one without a move).

    Returns
    -------
    n_moves : int
        Moves made.
    decrease : float
        The decrease of ``J`` that they made, the sum of each move's exact change.
    n_sweeps : int
        Passes made.
    """
    k, d = sums.shape
    means = np.zeros((k, d))
    for j in range(k):
        if masses[j] > 0:
            for t in range(d):
                means[j, t] = sums[j, t] / masses[j]
    n_moves, decrease, n_sweeps = 0, 0.0, 0
    while n_sweeps < max_sweeps:
        moved, before = 0, decrease
        n_sweeps += 1
        for i in range(rows.shape[0]):
            w, a = weights[i], labels[i]
            if not w > 0 or not masses[a] > w:
                continue
            removal = _scaled_sq_distance(rows, i, means, a, w * masses[a] / (masses[a] - w),
                                          np.inf)
            best, b = removal * (1.0 - MOVE_MARGIN), a
            for j in range(k):
                if j == a or not masses[j] > 0:
                    continue
                cost = _scaled_sq_distance(rows, i, means, j, w * masses[j] / (masses[j] + w), best)
                if cost < best:
                    best, b = cost, j
            if b == a:
                continue
            decrease += removal - best
            masses[a] -= w
            masses[b] += w
            for t in range(d):
                sums[a, t] -= w * rows[i, t]
                sums[b, t] += w * rows[i, t]
                means[a, t] = sums[a, t] / masses[a]
                means[b, t] = sums[b, t] / masses[b]
            labels[i] = b
            moved += 1
        n_moves += moved
        if moved == 0 or decrease - before <= min_decrease:
            break
    return n_moves, decrease, n_sweeps


@njit(**JIT_OPTIONS, inline="always")
def _row_dot(data, indices, start, stop, sums, j):
    """``x . sums[j]`` for the CSR row stored in ``data[start:stop]``."""
    total = 0.0
    for p in range(start, stop):
        total += data[p] * sums[j, indices[p]]
    return total


@njit(**JIT_OPTIONS)
def _hartigan_visits_csr(data, indices, indptr, weights, labels, sums, masses, max_sweeps,
                         min_decrease):
    """:func:`_hartigan_visits` over canonical CSR rows (``data``, ``indices``, ``indptr``:
    no column twice in a row; :func:`hartigan_visits` makes them so).

    A distance is expanded, ``||x||^2 - 2 x . s_j / m_j + ||s_j||^2 / m_j^2``, from the
    row's stored entries, the cluster sums ``s_j`` and their squared norms, which every
    move updates from the same products and every sweep recomputes exactly: a visit
    costs the row's entries times the clusters, a move twice its entries.
    """
    k, d = sums.shape
    sums_sq = np.empty(k)
    n_moves, decrease, n_sweeps = 0, 0.0, 0
    while n_sweeps < max_sweeps:
        for j in range(k):
            total = 0.0
            for t in range(d):
                total += sums[j, t] * sums[j, t]
            sums_sq[j] = total
        moved, before = 0, decrease
        n_sweeps += 1
        for i in range(indptr.size - 1):
            w, a = weights[i], labels[i]
            if not w > 0 or not masses[a] > w:
                continue
            start, stop = indptr[i], indptr[i + 1]
            x_sq = 0.0
            for p in range(start, stop):
                x_sq += data[p] * data[p]
            mass = masses[a]
            dot_a = _row_dot(data, indices, start, stop, sums, a)
            removal = w * mass / (mass - w) * max(
                x_sq - 2.0 * dot_a / mass + sums_sq[a] / (mass * mass), 0.0)
            best, b, dot_b = removal * (1.0 - MOVE_MARGIN), a, 0.0
            for j in range(k):
                if j == a or not masses[j] > 0:
                    continue
                mass = masses[j]
                dot = _row_dot(data, indices, start, stop, sums, j)
                cost = w * mass / (mass + w) * max(
                    x_sq - 2.0 * dot / mass + sums_sq[j] / (mass * mass), 0.0)
                if cost < best:
                    best, b, dot_b = cost, j, dot
            if b == a:
                continue
            decrease += removal - best
            masses[a] -= w
            masses[b] += w
            sums_sq[a] += w * w * x_sq - 2.0 * w * dot_a
            sums_sq[b] += w * w * x_sq + 2.0 * w * dot_b
            for p in range(start, stop):
                sums[a, indices[p]] -= w * data[p]
                sums[b, indices[p]] += w * data[p]
            labels[i] = b
            moved += 1
        n_moves += moved
        if moved == 0 or decrease - before <= min_decrease:
            break
    return n_moves, decrease, n_sweeps


def _inputs(rows, weights):
    """``rows`` and ``weights`` as the kernels' one compiled type: C-ordered float64, read-only.

    numba compiles a kernel once more for every new combination of layouts and
    write flags; read-only views of contiguous arrays keep it to one.
    """
    return tuple(read_only(np.ascontiguousarray(a, dtype=np.float64)) for a in (rows, weights))


def add_to_clusters(rows, weights, labels, sums, masses):
    """Add each row, times its weight, into its cluster's ``sums`` and its weight into ``masses``.

    ``labels`` (int64), ``sums`` and ``masses`` (float64) as in
    :func:`hartigan_visits`; ``sums`` and ``masses`` are updated in place.
    """
    _add_to_clusters(*_inputs(rows, weights), labels, sums, masses)


def hartigan_visits(rows, weights, labels, sums, masses, max_sweeps, min_decrease=0.0):
    """Visit ``rows`` (dense, or a SciPy CSR matrix) in order, moving each to the cluster
    that lowers ``J`` most.

    The arguments and results are those of the compiled loops,
    :func:`_hartigan_visits` and, for CSR rows, :func:`_hartigan_visits_csr`:
    ``labels`` (int64), ``sums`` and ``masses`` (float64) are updated in place.
    """
    if sp.issparse(rows):
        rows = sp.csr_matrix(rows)
        if not rows.has_canonical_format:
            rows = rows.copy()
            rows.sum_duplicates()
        csr = (read_only(np.ascontiguousarray(rows.data, dtype=np.float64)),
               read_only(np.ascontiguousarray(rows.indices, dtype=np.int64)),
               read_only(np.ascontiguousarray(rows.indptr, dtype=np.int64)))
        return _hartigan_visits_csr(*csr, _inputs(weights, weights)[0], labels, sums, masses,
                                    int(max_sweeps), float(min_decrease))
    return _hartigan_visits(*_inputs(rows, weights), labels, sums, masses, int(max_sweeps),
                            float(min_decrease))


def compile_local_search():
    """Compile, or load from numba's cache, the kernels of Hartigan's moves."""
    rows = np.random.default_rng(0).normal(size=(8, 3))
    labels, sums, masses = np.arange(8) % 2, np.zeros((2, 3)), np.zeros(2)
    add_to_clusters(rows, np.ones(8), labels, sums, masses)
    hartigan_visits(rows, np.ones(8), labels, sums, masses, 1)
    hartigan_visits(sp.csr_matrix(rows), np.ones(8), labels, sums, masses, 1)
