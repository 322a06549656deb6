"""How engines keep their numbers in the range and precision of their dtype.

Every engine forms squared distances as ``||x||^2 - 2 x.c + ||c||^2``, which
loses about ``u ||x||^2`` to rounding (``u`` the unit roundoff of the
arithmetic: float32 in the numba engine's dense kernels and the GPU engine,
float64 elsewhere): data far from the origin against their spread (raw pixel
values, coordinates, timestamps) would lose most of the digits of their
distances, and soft responsibilities at ``1 / (2 sigma^2)`` times them would
be wrong. Distances, responsibilities and margins do not change when the data
and the centroids move together, so the engines subtract
:func:`centering_shift` from dense data and the centroids before the cross
term, as scikit-learn's ``KMeans`` centres the data it fits (CSR data are
not shifted, which would fill them in).

Sample weights enter float32 products too: the engines divide them by
:func:`power_of_two_scale` (exactly) so that the largest lies in ``[1, 2)``,
and multiply the sums back, so that tiny or huge weights neither underflow
nor overflow.
"""

import math

import numpy as np
from numba import njit

from .._jit import JIT_OPTIONS
from ._namespace import host_dtype, to_numpy

__all__ = ["CENTERING_RATIO", "CENTERING_SAMPLE", "centering_shift", "power_of_two_scale",
           "squared_norm_limit"]

#: Dense data whose mean lies farther from the origin than this many times their spread
#: (squared lengths) are centred (see :func:`centering_shift`).
CENTERING_RATIO = 16.0
#: Rows (evenly spaced) from which :func:`centering_shift` estimates the mean and spread.
CENTERING_SAMPLE = 4096


def squared_norm_limit(dtype):
    """The largest squared norm whose squared distances stay finite in ``dtype``.

    ``max / 16`` of the dtype: for squared norms below it, every term of
    ``||x||^2 - 2 x.c + ||c||^2`` and the distance itself (at most
    ``2 ||x||^2 + 2 ||c||^2``) stay below ``max / 4``. The engines refuse data
    and centroids beyond it (:func:`softkmeans._engines.check_magnitude`).

    Parameters
    ----------
    dtype : dtype
        A float dtype (numpy's, or a namespace's float32 or float64).

    Returns
    -------
    float
    """
    return float(np.finfo(host_dtype(dtype)).max) / 16


def centering_shift(X, x_sq=None):
    """The point to subtract from dense ``X`` before its distances, or None.

    Mean and spread are estimated on :data:`CENTERING_SAMPLE` evenly spaced
    rows (copied to the host when ``X`` is a device array); the shift is their
    mean rounded to the dtype of X, which any point near the data would serve
    as well. None for data whose mean lies within ``sqrt(CENTERING_RATIO)``
    spreads of the origin.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
        Dense float32 or float64 data, numpy or of an array API namespace.
    x_sq : ndarray of shape (n_samples,), default=None
        The rows' squared norms in float64, where the caller has them (host
        numpy); None computes those of the sample.

    Returns
    -------
    shift : float64 ndarray of shape (n_features,) or None
        Exactly representable in the dtype of X.
    """
    if X.shape[0] == 0:
        return None
    step = max(1, X.shape[0] // CENTERING_SAMPLE)
    shift = np.empty(X.shape[1])
    # a writable C-ordered copy: one compiled type per dtype, whatever X's layout and flags
    sample = np.array(to_numpy(X[::step, :]), order="C")
    spread, shift_sq = _sample_terms(sample, _NO_NORMS if x_sq is None else x_sq, step, shift)
    # data too large for their dtype get no shift (the engines refuse them)
    return shift if shift_sq > CENTERING_RATIO * spread and math.isfinite(spread) else None


_NO_NORMS = np.empty(0)


@njit(**JIT_OPTIONS)
def _sample_terms(sample, x_sq, step, shift):
    """The sample's mean, rounded to its dtype, into ``shift``; returns the mean of
    ``||x - shift||^2`` over the sample and ``||shift||^2``.

    Sums in float64, in one compiled call (numpy's dozen calls cost more on small data).
    The squared norms of the rows are ``x_sq[::step]`` where ``x_sq`` is not empty. The
    mean of ``||x - shift||^2`` is expanded, so that no temporary of the sample's size is
    made; its rounding, about ``u`` times the squared norms, matters only for data far off
    the origin, which the test centres anyway.
    """
    n, d = sample.shape
    mean = np.zeros(d)
    for i in range(n):
        for f in range(d):
            mean[f] += np.float64(sample[i, f])
    cross, shift_sq = 0.0, 0.0
    for f in range(d):
        mean[f] /= n
        shift[f] = np.float64(sample.dtype.type(mean[f]))
        cross += mean[f] * shift[f]
        shift_sq += shift[f] * shift[f]
    norms = 0.0
    for i in range(n):
        if x_sq.shape[0] > 0:
            norms += x_sq[i * step]
        else:
            for f in range(d):
                norms += np.float64(sample[i, f]) * np.float64(sample[i, f])
    return norms / n - 2.0 * cross + shift_sq, shift_sq


def power_of_two_scale(weights):
    """The power of two that brings the largest of ``weights`` into ``[1, 2)``.

    Parameters
    ----------
    weights : ndarray of shape (n_samples,)
        Non-negative float64 weights.

    Returns
    -------
    scale : float
        1.0 when no weight is positive.
    """
    largest = float(weights.max(initial=0.0))
    return 2.0 ** int(np.frexp(largest)[1] - 1) if largest > 0 else 1.0
