"""Elementary functions of the kernels, written so that loops over them vectorize.

``exp`` of a non-positive argument in float64 and float32 and ``log1p`` of a
non-negative one, branch-free, with the accuracy of numpy's to a few ulps;
:func:`exp_as` picks the precision of an array inside compiled code.
"""

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

from ..._jit import JIT_OPTIONS

__all__ = ["exp_nonpositive", "exp_nonpositive32", "exp_as", "log1p_nonnegative"]

_JIT = JIT_OPTIONS

_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
# Taylor coefficients 1/j!, j = 13 .. 0: on |r| <= log(2)/2 the remainder is below 5e-18.
_C13, _C12, _C11, _C10, _C9, _C8, _C7, _C6, _C5, _C4, _C3, _C2, _C1, _C0 = (
    1.0 / math.factorial(j) for j in range(13, -1, -1)
)


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
