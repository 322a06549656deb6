"""How engines that compute in float32 keep their numbers in float32's range and precision.

Engines that form ``||c||^2 - 2 x.c`` in float32 (the numba engine's dense
kernels, the GPU engine) lose about ``2^-24 ||x||^2`` to rounding: data far
from the origin against their spread (raw pixel values, coordinates) would
lose most of the digits of their distances, and soft responsibilities at
``1 / (2 sigma^2)`` times them would be wrong. Distances, responsibilities and
margins do not change when the data and the centroids move together, so such
engines subtract :func:`float32_shift` from the data and the centroids before
the cross term.

Sample weights enter float32 products too: the engines divide them by
:func:`power_of_two_scale` (exactly) so that the largest lies in ``[1, 2)``,
and multiply the sums back, so that tiny or huge weights neither underflow
nor overflow.
"""

import numpy as np

from ._namespace import to_numpy

__all__ = ["CENTERING_RATIO", "CENTERING_SAMPLE", "float32_shift", "power_of_two_scale"]

#: Dense float32 data whose mean lies farther from the origin than this many times their spread
#: (squared lengths) are centred (see :func:`float32_shift`).
CENTERING_RATIO = 16.0
#: Rows (evenly spaced) from which :func:`float32_shift` estimates the mean and spread.
CENTERING_SAMPLE = 4096


def float32_shift(X):
    """The point to subtract from dense float32 ``X`` before its distances, or None.

    Mean and spread are estimated on :data:`CENTERING_SAMPLE` evenly spaced
    rows (copied to the host when ``X`` is a CuPy array); the shift is their
    mean rounded to float32, which any point near the data would serve as
    well. None for float64 data, and for data whose mean lies within
    ``sqrt(CENTERING_RATIO)`` spreads of the origin.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Dense data, numpy or CuPy.

    Returns
    -------
    shift : float64 ndarray of shape (n_features,) or None
        Exactly representable in float32.
    """
    if X.dtype != np.float32 or X.shape[0] == 0:
        return None
    sample = np.asarray(to_numpy(X[::max(1, X.shape[0] // CENTERING_SAMPLE)]), dtype=np.float64)
    shift = sample.mean(axis=0).astype(np.float32).astype(np.float64)
    spread = float(np.mean(np.einsum("ij,ij->i", sample - shift, sample - shift)))
    return shift if shift @ shift > CENTERING_RATIO * spread else None


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
    return 2.0 ** (np.frexp(largest)[1] - 1) if largest > 0 else 1.0
