"""Row kernels of the numba engine: one observation's responsibilities from its distances.

Every function here is compiled by numba and works on one row ``d`` of squared
distances (float64, length ``n_clusters``). They compute the same quantities as
:mod:`softkmeans._core.responsibilities` (the oracle) but only on the centroids
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
  (``NumbaEngine._add_skipped_weights``): they are its whole mass, and the
  oracle moves it to their weighted mean.
"""

import math
import warnings

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

from ..exceptions import CompilationCacheWarning

__all__ = ["JIT_OPTIONS", "INNER_JIT_OPTIONS", "HARD", "SOFTMAX", "ENTMAX", "KINDS",
           "SOFTMAX_SKIP_EPS", "exp_nonpositive", "exp_nonpositive32", "exp_as",
           "log1p_nonnegative", "nearest_two", "softmax_cutoff", "softmax_floor", "is_hard_row",
           "row_responsibilities", "row_given_nearest"]

#: Integer codes of :attr:`RelaxationSpec.kind` inside the kernels.
HARD, SOFTMAX, ENTMAX = 0, 1, 2
KINDS = {"hard": HARD, "softmax": SOFTMAX, "entmax": ENTMAX}

#: Softmax terms below this fraction of the second nearest centroid's weight are skipped.
SOFTMAX_SKIP_EPS = math.exp(-37.0)  # 8.5e-17 < 2**-53
_SOFTMAX_SKIP_LOG = 37.0
#: ``exp(-746)`` is 0 in float64.
_UNDERFLOW_LOG = 746.0

_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
# Taylor coefficients 1/j!, j = 13 .. 0: on |r| <= log(2)/2 the remainder is below 5e-18.
_C13, _C12, _C11, _C10, _C9, _C8, _C7, _C6, _C5, _C4, _C3, _C2, _C1, _C0 = (
    1.0 / math.factorial(j) for j in range(13, -1, -1)
)


def _cache_probe():
    """A function numba is asked to cache, to learn whether it can (:func:`_can_cache`)."""


def _can_cache():
    """Whether numba has a writable cache directory for the kernels of this package.

    numba looks for one next to the source files, then in the user's cache
    directory (``NUMBA_CACHE_DIR`` takes precedence over both). Where none is
    writable (a read-only installation and home directory, as in some
    containers and serverless runtimes) a function defined with
    ``cache=True`` fails to be defined at all; the kernels are then compiled
    without the cache, in every process, and a
    :class:`~softkmeans.exceptions.CompilationCacheWarning` says so once.
    """
    try:
        njit(cache=True)(_cache_probe)
    except RuntimeError as exc:
        warnings.warn(
            f"numba cannot cache softkmeans' kernels ({exc}): every process compiles them "
            "again, for several seconds on its first fit. Set the environment variable "
            "NUMBA_CACHE_DIR to a writable directory to keep them.",
            CompilationCacheWarning, stacklevel=2,
        )
        return False
    return True


#: numba options of every kernel: cached on disk where numba can (:func:`_can_cache`);
#: ``contract`` lets LLVM fuse multiply-adds (it changes results by rounding only; no other
#: fast-math flag is set, so inf, nan and underflow keep their IEEE behaviour); no wrapper
#: for calls from C, which numba would otherwise generate (and compile) for every function.
JIT_OPTIONS = {"cache": _can_cache(), "nogil": True, "fastmath": {"contract"},
               "no_cfunc_wrapper": True}
#: Options of a kernel that only other kernels call: no wrapper for calls from Python either.
INNER_JIT_OPTIONS = {**JIT_OPTIONS, "no_cpython_wrapper": True}
_JIT = JIT_OPTIONS
_INNER = INNER_JIT_OPTIONS


def _bitcast(source, target):
    """An intrinsic that reinterprets the bits of a ``source`` scalar as a ``target`` one.

    A no-op in machine code, which LLVM vectorizes.
    """
    target_ir = {types.float64: ir.DoubleType(), types.float32: ir.FloatType(),
                 types.int64: ir.IntType(64)}[target]

    @intrinsic
    def bitcast(typingctx, value):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], target_ir)

        return target(source), codegen

    return bitcast


_bits_as_float64 = _bitcast(types.int64, types.float64)
_bits_as_float32 = _bitcast(types.int32, types.float32)
_float64_bits = _bitcast(types.float64, types.int64)


@njit(**_JIT)
def exp_nonpositive(x):
    """``exp(x)`` for ``x <= 0`` in float64, branch-free so that loops over it vectorize.

    ``x = n log 2 + r`` with ``|r| <= log(2) / 2``; ``exp(r)`` by its Taylor
    polynomial of degree 13 and ``2^n`` as the product of two powers of two
    built from their exponent bits (so that results down to the smallest
    subnormal, and the underflow to 0 below -745.2, come out as in ``np.exp``).
    Measured: relative error at most 2.3e-16 against ``np.exp``.
    """
    x = max(x, -746.0)
    n = np.floor(x * _LOG2E + 0.5)
    r = x - n * _LN2_HI
    r = r - n * _LN2_LO
    p = _C13
    p = p * r + _C12
    p = p * r + _C11
    p = p * r + _C10
    p = p * r + _C9
    p = p * r + _C8
    p = p * r + _C7
    p = p * r + _C6
    p = p * r + _C5
    p = p * r + _C4
    p = p * r + _C3
    p = p * r + _C2
    p = p * r + _C1
    p = p * r + _C0
    n_all = np.int64(n)
    n_half = n_all >> 1
    scale_a = _bits_as_float64((n_half + 1023) << 52)
    scale_b = _bits_as_float64((n_all - n_half + 1023) << 52)
    return p * scale_a * scale_b


# fdlibm's minimax coefficients of log(1 + f) = 2s + s R(s^2), s = f / (2 + f).
_LG1, _LG2, _LG3, _LG4, _LG5, _LG6, _LG7 = (
    6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01,
    2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01,
    1.479819860511658591e-01,
)
#: Bits of sqrt(2) / 2 (float64): mantissas are brought into [sqrt(2) / 2, sqrt(2)).
_HALF_SQRT2_BITS = 0x3FE6A09E667F3BCD
_EXPONENT_MASK = -(1 << 52)  # 0xFFF0000000000000 as int64


@njit(**_JIT, error_model="numpy")  # no zero-division checks, which would stop vectorization
def log1p_nonnegative(x):
    """``log1p(x)`` for finite ``x >= 0`` in float64, branch-free so that loops over it vectorize.

    ``u = 1 + x`` is split into ``2^e m`` with ``m`` in ``[sqrt(2)/2, sqrt(2))``
    and ``log(m)`` evaluated as in fdlibm (``s = (m - 1) / (m + 1)``, a
    degree-14 polynomial in ``s``); the rounding of ``1 + x`` is added back as
    ``(x - (u - 1)) / u``, so that ``log1p(x) = x`` to rounding for tiny
    ``x``. Measured: relative error at most 2.3e-16 against ``np.log1p``.
    """
    u = 1.0 + x
    correction = (x - (u - 1.0)) / u
    bits = _float64_bits(u)
    shifted = bits - _HALF_SQRT2_BITS  # integer arithmetic only: no branch, no select
    e = shifted >> 52
    m = _bits_as_float64(bits - (shifted & _EXPONENT_MASK))
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    t1 = w * (_LG2 + w * (_LG4 + w * _LG6))
    t2 = z * (_LG1 + w * (_LG3 + w * (_LG5 + w * _LG7)))
    half_f2 = 0.5 * f * f
    n = np.float64(e)
    log_u = n * _LN2_HI - ((half_f2 - (s * (half_f2 + t1 + t2) + n * _LN2_LO)) - f)
    return log_u + correction


_F32 = np.float32


@njit(**_JIT)
def exp_nonpositive32(x):
    """``exp(x)`` in float32 for ``-80 <= x <= 0`` (smaller ``x`` give ``exp(-80)``).

    Cephes' ``expf``: ``x = n log 2 + r``, a degree-7 minimax polynomial for
    ``exp(r)``, ``2^n`` from its exponent bits; about 1 ulp of float32. Used
    for dense float32 chunks, where it runs 16 lanes wide.
    """
    x = max(_F32(x), _F32(-80.0))
    n = np.floor(x * _F32(_LOG2E) + _F32(0.5))
    r = x - n * _F32(0.693359375)
    r = r - n * _F32(-2.12194440e-4)
    p = _F32(1.9875691500e-4)
    p = p * r + _F32(1.3981999507e-3)
    p = p * r + _F32(8.3334519073e-3)
    p = p * r + _F32(4.1665795894e-2)
    p = p * r + _F32(1.6666665459e-1)
    p = p * r + _F32(5.0000001201e-1)
    p = p * (r * r) + r + _F32(1.0)
    return p * _bits_as_float32((np.int32(n) + np.int32(127)) << np.int32(23))


def exp_as(like, x):
    """``exp(x)`` (``x <= 0``) in the precision of the array ``like`` (numba only)."""
    raise NotImplementedError("exp_as is only callable from numba-compiled code")


@overload(exp_as, jit_options=_JIT)
def _exp_as(like, x):
    if like.dtype == types.float32:
        return lambda like, x: exp_nonpositive32(x)
    return lambda like, x: exp_nonpositive(x)


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
def _sorted_candidate(s, power_two, csum, csum_sq):
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
        cand = _sorted_candidate(s, power_two, csum, csum_sq)
        support += (cand <= srt[s]) if power_two else (cand < srt[s])
    support = max(support, 1)
    csum = csum_sq = 0.0
    for s in range(support):
        csum += srt[s]
        csum_sq += srt[s] * srt[s]
    return _sorted_candidate(support - 1, power_two, csum, csum_sq)


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
