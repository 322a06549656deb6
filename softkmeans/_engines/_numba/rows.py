"""Row kernels of the numba engine: one observation's responsibilities from its distances.

Every function here is compiled by numba and works on one row ``d`` of squared
distances (float64, length ``n_clusters``). They compute the same quantities as
the reference kernels (:class:`softkmeans._engines._array_kernels.ArrayKernels`,
the oracle), written once more for one row at a time, but only on the centroids
that can carry a responsibility, and they write those responsibilities
compactly: ``idx[:m]`` (centroid indices) and ``val[:m]`` (their weights).

Pruning, exactly:

- entmax-alpha: a centroid with ``d_ij - dmin_i >= 2 sigma^2 / (alpha - 1)`` has
  a zero responsibility (Lemma 19 of the paper), so only the others are sorted
  (or bisected); a row with a single candidate is hard and costs a Lloyd row.
- softmax: a centroid whose weight ``exp(-(d_ij - dmin_i) / (2 sigma^2))`` is
  below :data:`SOFTMAX_SKIP_EPS` times the weight of the second nearest
  centroid (or underflows to 0 in float64) gets exactly 0. The weights are
  summed as ``1 + S_i`` with ``S_i`` at least the second nearest's weight, so a
  skipped term is below the floating point resolution of ``S_i`` (and of
  ``1 + S_i``): the responsibilities change by less than ``SOFTMAX_SKIP_EPS``
  and ``S_i`` (hence the gap ``J - F``) by a relative
  ``(n_clusters - 2) * SOFTMAX_SKIP_EPS`` at most. A row whose second nearest
  weight underflows is one-hot and costs a Lloyd row. A centroid that only
  skipped weights reach gets them back after the pass, from the engine
  (``NumbaEngine._sum_exactly``): they are its whole mass, and the
  oracle moves it to their weighted mean.
"""

import math

import numpy as np
from numba import njit

from ..._jit import INNER_JIT_OPTIONS
from .elementary import exp_nonpositive, log1p_nonnegative

__all__ = ["HARD", "SOFTMAX", "ENTMAX", "KINDS", "SOFTMAX_SKIP_EPS", "nearest_two",
           "softmax_cutoff", "softmax_floor", "sorted_candidate", "is_hard_row",
           "row_responsibilities", "row_given_nearest"]

#: Integer codes of :attr:`RelaxationSpec.kind` inside the kernels.
HARD, SOFTMAX, ENTMAX = 0, 1, 2
KINDS = {"hard": HARD, "softmax": SOFTMAX, "entmax": ENTMAX}

#: Softmax terms below this fraction of the second nearest centroid's weight are skipped.
SOFTMAX_SKIP_EPS = math.exp(-37.0)  # 8.5e-17 < 2**-53
_SOFTMAX_SKIP_LOG = 37.0
#: ``exp(-746)`` is 0 in float64.
_UNDERFLOW_LOG = 746.0

_INNER = INNER_JIT_OPTIONS


@njit(**_INNER)
def nearest_two(d):
    """Index of the smallest entry of ``d`` (first on ties), it, and the second smallest.

    The second smallest is ``inf`` when ``d`` has a single entry.
    """
    label = 0
    first = d[0]
    second = np.inf
    for j in range(1, d.shape[0]):
        v = d[j]
        if v < first:
            second = first
            first = v
            label = j
        elif v < second:
            second = v
    return label, first, second


@njit(**_INNER)
def softmax_cutoff(dmin, second, tau):
    """Largest squared distance whose softmax weight is kept (see the module docstring).

    Beyond ``dmin + 746 tau`` the weight underflows to 0 in float64 anyway.
    """
    return min(second + _SOFTMAX_SKIP_LOG * tau, dmin + _UNDERFLOW_LOG * tau)


@njit(**_INNER)
def softmax_floor(dmin, second, tau):
    """:func:`softmax_cutoff` as the smallest kept exponent ``-(d - second) / tau``."""
    return max(-_SOFTMAX_SKIP_LOG, (second - dmin) / tau - _UNDERFLOW_LOG)


@njit(**_INNER)
def is_hard_row(kind, dmin, second, tau, alpha):
    """Whether the row's responsibilities are exactly one-hot at its nearest centroid."""
    if kind == SOFTMAX:
        return second > dmin + _UNDERFLOW_LOG * tau
    if kind == ENTMAX:
        return not second - dmin < tau / (alpha - 1.0)
    return True


@njit(**_INNER)
def _softmax(d, label, dmin, second, tau, idx, val):
    """Softmax weights of the centroids that matter; returns (m, row_gap)."""
    skip = softmax_cutoff(dmin, second, tau)
    m = 0
    for j in range(d.shape[0]):
        if j != label and d[j] <= skip:
            idx[m] = j
            val[m] = -(d[j] - dmin) / tau
            m += 1
    others = 0.0
    for q in range(m):
        val[q] = exp_nonpositive(val[q])
        others += val[q]
    total = 1.0 + others
    for q in range(m):
        val[q] /= total
    idx[m] = label
    val[m] = 1.0 / total
    return m + 1, tau * log1p_nonnegative(others)


@njit(**_INNER)
def _sort_descending(u, m, out):
    """``out[:m] = u[:m]`` sorted in decreasing order (Shell sort, gaps 1, 4, 13, 40, ...).

    Written out rather than ``np.sort``: it is as fast on the few candidates
    of an entmax row and compiles in a fraction of the time.
    """
    for q in range(m):
        out[q] = u[q]
    gap = 1
    while 3 * gap + 1 < m:
        gap = 3 * gap + 1
    while gap > 0:
        for q in range(gap, m):
            v = out[q]
            p = q
            while p >= gap and out[p - gap] < v:
                out[p] = out[p - gap]
                p -= gap
            out[p] = v
        gap //= 3


@njit(**_INNER)
def sorted_candidate(s, power_two, csum, csum_sq):
    """Threshold candidate for support size ``s + 1`` from the running sums."""
    count = s + 1.0
    if power_two:
        mean = csum / count
        delta = (1.0 - count * (csum_sq / count - mean * mean)) / count
        return mean - math.sqrt(max(delta, 0.0))
    return (csum - 1.0) / count


@njit(**_INNER)
def _threshold_sorted(u, m, power_two, work):
    """Exact entmax threshold for alpha = 1.5 (``power_two``) or 2 from the candidates ``u[:m]``.

    As in the oracle, the support size is the number of sizes ``s`` whose
    candidate threshold lies below the ``s``-th largest value.
    """
    srt = work  # sorted into its first m entries
    _sort_descending(u, m, srt)
    csum = csum_sq = 0.0
    support = 0
    for s in range(m):
        csum += srt[s]
        csum_sq += srt[s] * srt[s]
        cand = sorted_candidate(s, power_two, csum, csum_sq)
        support += (cand <= srt[s]) if power_two else (cand < srt[s])
    support = max(support, 1)
    csum = csum_sq = 0.0
    for s in range(support):
        csum += srt[s]
        csum_sq += srt[s] * srt[s]
    return sorted_candidate(support - 1, power_two, csum, csum_sq)


@njit(**_INNER)
def _power(x, p):
    """``x ** p`` for ``x >= 0``: multiplications for the powers of alpha = 1.5 and 2.

    libm's ``pow`` costs tens of nanoseconds, several times an entmax row's
    other work at a few candidates; ``p`` is one of 2, 1 (``1 / (alpha - 1)``)
    and 1.5, 2 (``alpha``) for those ``alpha``.
    """
    if p == 2.0:
        return x * x
    if p == 1.0:
        return x
    if p == 1.5:
        return x * math.sqrt(x)
    return x**p


@njit(**_INNER)
def _threshold_bisection(u, m, exponent, n_clusters):
    """Entmax threshold by 80 halvings, with the oracle's bracket ``[-1, -(1/k)^(alpha-1)]``."""
    lo = -1.0
    hi = -((1.0 / n_clusters) ** (1.0 / exponent))
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        mass = 0.0
        for q in range(m):
            mass += _power(max(u[q] - mid, 0.0), exponent)
        if mass >= 1.0:
            lo = mid
        else:
            hi = mid
    return lo


@njit(**_INNER)
def _entmax(d, label, dmin, second, tau, alpha, idx, val, work):
    """Entmax-alpha responsibilities on the support window; returns (m, row_gap)."""
    width = tau / (alpha - 1.0)
    m = np.intp(0)  # not the literal 0, for which numba would compile the callees once more
    for j in range(d.shape[0]):
        if d[j] - dmin < width:
            idx[m] = j
            val[m] = -(alpha - 1.0) * (d[j] - dmin) / tau
            m += 1
    u = val  # the candidates' scores, its first m entries: no view (a reference count per row)
    exponent = 1.0 / (alpha - 1.0)
    if alpha == 1.5 or alpha == 2.0:
        t = _threshold_sorted(u, m, alpha == 1.5, work)
    else:
        t = _threshold_bisection(u, m, exponent, d.shape[0])
    total = 0.0
    for q in range(m):
        val[q] = _power(max(u[q] - t, 0.0), exponent)
        total += val[q]
    power_sum = 0.0
    excess = 0.0
    kept = 0
    for q in range(m):
        r = val[q] / total
        if r > 0.0:
            power_sum += _power(r, alpha)
            excess += r * (d[idx[q]] - dmin)
            idx[kept] = idx[q]
            val[kept] = r
            kept += 1
    entropy = (1.0 - power_sum) / (alpha * (alpha - 1.0))
    return kept, tau * entropy - excess


@njit(**_INNER)
def row_responsibilities(d, kind, tau, alpha, idx, val, work):
    """Nonzero responsibilities of one row, and its nearest-centroid summary.

    Parameters
    ----------
    d : float64 array of shape (n_clusters,)
        Squared distances of the row.
    kind : int
        :data:`HARD`, :data:`SOFTMAX` or :data:`ENTMAX`.
    tau, alpha : float
        ``2 sigma^2`` and the entmax order.
    idx : int array of shape (n_clusters + 1,), val : float64 array of same shape
        Outputs: ``idx[:m]``, ``val[:m]`` are the centroids with a nonzero
        responsibility and their responsibilities.
    work : float64 array of shape (n_clusters,)
        Scratch space.

    Returns
    -------
    m : int
    label : int
    dmin, margin, row_gap : float
        ``row_gap = dmin - row_objective``.
    """
    label, dmin, second = nearest_two(d)
    margin = second - dmin if d.shape[0] > 1 else 0.0
    m, gap = row_given_nearest(d, kind, label, dmin, second, tau, alpha, idx, val, work)
    return m, label, dmin, margin, gap


@njit(**_INNER)
def row_given_nearest(d, kind, label, dmin, second, tau, alpha, idx, val, work):
    """:func:`row_responsibilities` once the nearest two are known; returns (m, row_gap)."""
    if is_hard_row(kind, dmin, second, tau, alpha):
        idx[0] = label
        val[0] = 1.0
        return 1, 0.0
    if kind == SOFTMAX:
        return _softmax(d, label, dmin, second, tau, idx, val)
    return _entmax(d, label, dmin, second, tau, alpha, idx, val, work)
