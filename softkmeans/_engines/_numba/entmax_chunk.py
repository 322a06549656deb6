"""Entmax responsibilities of a dense chunk's soft rows, computed across the rows at once.

For alpha = 1.5 and 2 (the thresholds :mod:`.rows` finds by sorting), a
chunk's soft rows are taken together: each row's candidates (the centroids
within its support window, :mod:`.rows`) are packed in index order into
slots, and every later step is a loop over the rows for one slot at a time,
without branches, so that it vectorizes; the sort is an insertion network
over the slots. Visited one by one, rows cost branches that depend on the
data (the sort, the support count, the lengths of the loops), mispredicted
row after row.

Each row's arithmetic is that of :func:`.rows.row_given_nearest`, operation
for operation and in the same order (sums over the sorted scores, then over
the candidates in index order): a row gets the same bits either way. A row
with more candidates than the chunk's slots (at most :data:`MAX_SORTED`)
is left to that function.
"""

from collections import namedtuple

import numpy as np
from numba import njit

from ..._jit import INNER_JIT_OPTIONS
from .rows import sorted_candidate

__all__ = ["MAX_SORTED", "CompactRows", "sorted_entmax", "entmax_chunk", "no_rows",
           "compact_row"]

#: Most slots of a chunk (candidates of a row): the sort costs their number squared per row.
MAX_SORTED = 16

#: A chunk's soft rows, in row order: each row's number of candidates ``count``, its
#: candidates' centroids ``index[q, :count]`` and responsibilities ``resp[:count, q]`` (0
#: outside the support) when ``count[q]`` is at most the chunk's ``width`` (its slots), and its
#: ``gap`` (``dmin - row objective``).
CompactRows = namedtuple("CompactRows", ["count", "index", "resp", "gap", "width"])

_INNER = INNER_JIT_OPTIONS


@njit(**_INNER)
def sorted_entmax(alpha):
    """Whether entmax-``alpha`` thresholds are found by sorting (:func:`entmax_chunk` applies)."""
    return alpha == 1.5 or alpha == 2.0


@njit(**_INNER, error_model="numpy")  # no zero-division checks: the loops vectorize
def entmax_chunk(U, x_sq, per_row, tau, alpha):
    """The responsibilities of a chunk's soft rows (:data:`CompactRows`).

    ``U`` holds the chunk's ``||c||^2 - 2 x.c`` (centroid-major), ``x_sq``
    its rows' squared norms, ``per_row`` their ``dmin`` and ``hard``
    (:data:`.kernels.ChunkRows`); ``alpha`` is 1.5 or 2
    (:func:`sorted_entmax`). A row ``q`` with ``count[q] > width`` is left to
    :func:`.rows.row_given_nearest`.

    One function, its steps written out: numba optimizes a callee again
    inside every caller (see :mod:`.kernels`).
    """
    k, rows = U.shape
    first, hard = per_row.dmin, per_row.hard
    power_two = alpha == 1.5
    window = tau / (alpha - 1.0)
    cap = min(k, MAX_SORTED)
    n = 0
    for r in range(rows):
        n += not hard[r]
    # The candidates in index order, by row: every centroid is stored, the next one overwrites
    # it unless it is a candidate; those past the cap are not kept (slot cap is overwritten).
    count = np.empty(n, np.intp)
    index = np.empty((n, cap + 1), np.intp)
    excess_by_row = np.empty((n, cap + 1))  # d - dmin, d = max(||x||^2 + u, 0) in float64
    q = 0
    for r in range(rows):
        if hard[r]:
            continue
        c = 0
        x_sq_r, dmin = x_sq[r], first[r]
        for j in range(k):
            e = max(x_sq_r + np.float64(U[j, r]), 0.0) - dmin
            slot = min(c, cap)
            index[q, slot] = j
            excess_by_row[q, slot] = e
            c += e < window
        count[q] = c
        q += 1
    width = 0
    for q in range(n):
        width = min(max(width, count[q]), cap)
    # By slot from here on. The scores, and the scores sorted in decreasing order (-inf past a
    # row's candidates) by an insertion network.
    excess = np.empty((width, n))  # 0 past a row's candidates
    z = np.empty((width, n))  # the scores, then the weights, then the responsibilities
    top = np.full((width, n), -np.inf)
    carry = np.empty(n)
    scale = -(alpha - 1.0)
    for p in range(width):
        for q in range(n):
            excess[p, q] = excess_by_row[q, p] if p < count[q] else 0.0
            z[p, q] = scale * excess[p, q] / tau if p < count[q] else -np.inf
            carry[q] = z[p, q]
        for s in range(p + 1):
            for q in range(n):
                a, c = top[s, q], carry[q]
                top[s, q] = max(a, c)
                carry[q] = min(a, c)
    # The threshold: the support size is the number of sizes whose candidate threshold lies
    # below their last score.
    csum, csum_sq = np.zeros(n), np.zeros(n)
    support = np.zeros(n, np.intp)
    candidate = np.empty((width, n))
    for s in range(width):
        for q in range(n):
            used = s < count[q]
            v = top[s, q] if used else 0.0
            cs = csum[q] + v
            cs_sq = csum_sq[q] + v * v
            csum[q], csum_sq[q] = cs, cs_sq
            cand = sorted_candidate(s, power_two, cs, cs_sq)
            candidate[s, q] = cand
            below = cand <= v if power_two else cand < v
            support[q] += used & below
    threshold = np.empty(n)
    for s in range(width):
        for q in range(n):
            threshold[q] = candidate[s, q] if s == max(support[q], 1) - 1 else threshold[q]
    total = np.zeros(n)
    for p in range(width):
        for q in range(n):
            v = max(z[p, q] - threshold[q], 0.0)
            v = v * v if power_two else v
            z[p, q] = v
            total[q] += v
    weighted_excess = np.zeros(n)
    powers = top  # now r ** alpha, summed in a loop of their own: unfused, as the row kernel's
    for p in range(width):
        for q in range(n):
            r = z[p, q] / total[q]
            z[p, q] = r
            weighted_excess[q] += r * excess[p, q]
            powers[p, q] = r * np.sqrt(r) if power_two else r * r
    power_sum = np.zeros(n)
    for p in range(width):
        for q in range(n):
            power_sum[q] += powers[p, q]
    gap = np.empty(n)
    for q in range(n):
        entropy = (1.0 - power_sum[q]) / (alpha * (alpha - 1.0))
        gap[q] = tau * entropy - weighted_excess[q]
    return CompactRows(count, index, z, gap, width)


@njit(**_INNER)
def no_rows():
    """:data:`CompactRows` without a row, of :func:`entmax_chunk`'s types."""
    return CompactRows(np.empty(0, np.intp), np.empty((0, 1), np.intp), np.empty((0, 0)),
                       np.empty(0), np.intp(0))


@njit(**_INNER)
def compact_row(compact, q, idx, val):
    """Soft row ``q``'s nonzero responsibilities into ``idx``, ``val``; returns (m, row_gap)."""
    m = 0
    for p in range(compact.count[q]):
        v = compact.resp[p, q]
        if v > 0.0:
            idx[m] = compact.index[q, p]
            val[m] = v
            m += 1
    return m, compact.gap[q]
