"""Compiled arithmetic of the alternating update (:mod:`softkmeans._core.optimize`).

An update works on ``k x d`` values: the weighted means, the shared variance,
the centroids' step and their distance from the data, and every other update a
SQUAREM extrapolation. Done by numpy, that is a dozen calls, each of which costs
far more than its arithmetic once a pass over the data has pushed numpy's code
out of the processor's caches; here it is one compiled call per update. So are
the start of a run (the seeds' distances) and the checks at its end
(duplicated centroids, and a floor of the critical temperature). The functions
return scalars only: a returned array would be boxed by Python calls, during
which an interrupt leaves an exception set behind the result.
"""

import math

import numpy as np
from numba import njit

from .._jit import JIT_OPTIONS, read_only

__all__ = ["NO_ORIGIN", "PAIR_WORK", "compile_update_loops", "extrapolate", "has_close_pair",
           "near_zero_rows", "relative_weighted_sums", "scatter_floor", "update_terms"]

#: ``origin`` for the origin itself.
NO_ORIGIN = np.empty(0)


@njit(**JIT_OPTIONS)
def update_terms(sums, masses, fallback, centers, origin, total, to_float32, new):
    """The closed-form update of ``centers`` from one pass's statistics, and its terms.

    ``new[j] = sums[j] / masses[j]``, or ``fallback[j]`` where ``masses[j]`` is
    not positive, rounded to float32 when ``to_float32``. All arrays are
    float64; ``origin`` is a point ``c`` (empty: the origin).

    Returns
    -------
    smallest : float
        The smallest mass.
    explained : float
        ``sum_j m_j ||sums_j / m_j - c||^2`` over the centroids with mass, the
        unrounded means, each mass brought to the unit of ``total``
        (``m_j total / sum_l m_l``, the sum over the positive masses): the scatter of the means
        (:func:`~softkmeans._core.optimize.mixture_variance`).
    step : float
        ``||new - centers||_F^2``.
    largest : float
        ``max_j ||new_j - c||^2``.
    """
    k, d = sums.shape
    shifted = origin.shape[0] > 0
    smallest, held = np.inf, 0.0
    for j in range(k):
        smallest = min(smallest, masses[j])
        held += masses[j] if masses[j] > 0 else 0.0
    ratio = total / held if held > 0 else 0.0
    explained, step, largest = 0.0, 0.0, 0.0
    for j in range(k):
        mass = masses[j]
        spread, norm = 0.0, 0.0
        for f in range(d):
            c = origin[f] if shifted else 0.0
            if mass > 0:
                value = sums[j, f] / mass
                spread += (value - c) * (value - c)
            else:
                value = fallback[j, f]
            if to_float32:
                value = np.float64(np.float32(value))
            new[j, f] = value
            step += (value - centers[j, f]) * (value - centers[j, f])
            norm += (value - c) * (value - c)
        if mass > 0:
            explained += mass * ratio * spread
        largest = max(largest, norm)
    return smallest, explained, step, largest


@njit(**JIT_OPTIONS)
def extrapolate(first, second, third, max_step, origin, to_float32, point):
    """The SQUAREM extrapolation of three successive iterates of a fixed-point map.

    With ``r = second - first`` and ``v = third - 2 second + first``, ``point``
    becomes ``first - 2 a r + a^2 v`` at ``a = -||r|| / ||v||`` (Varadhan and
    Roland's third scheme), ``a`` held in ``[-max_step, -1]`` (``a = -1``
    gives ``third``, the plain update; so does ``v = 0``), rounded to float32
    when ``to_float32``. Returns ``max_j ||point_j - c||^2``, ``c`` the point
    ``origin`` (empty: the origin).
    """
    k, d = first.shape
    r_sq, v_sq = 0.0, 0.0
    for j in range(k):
        for f in range(d):
            r = second[j, f] - first[j, f]
            v = third[j, f] - second[j, f] - r
            r_sq += r * r
            v_sq += v * v
    a = -1.0
    if v_sq > 0:
        a = -min(max(math.sqrt(r_sq) / math.sqrt(v_sq), 1.0), max_step)
    shifted = origin.shape[0] > 0
    largest = 0.0
    for j in range(k):
        norm = 0.0
        for f in range(d):
            if v_sq > 0:
                r = second[j, f] - first[j, f]
                v = third[j, f] - second[j, f] - r
                value = first[j, f] - 2.0 * a * r + a * a * v
            else:
                value = third[j, f]
            if to_float32:
                value = np.float64(np.float32(value))
            point[j, f] = value
            c = origin[f] if shifted else 0.0
            norm += (value - c) * (value - c)
        largest = max(largest, norm)
    return largest


#: :func:`has_close_pair` compares every pair of ``k`` centroids of ``d`` features where
#: ``k^2 d`` is at most this; beyond, a tree is the cheaper search.
PAIR_WORK = 1 << 18


@njit(**JIT_OPTIONS)
def has_close_pair(centers, radius_sq):
    """Whether two rows of ``centers`` lie within ``sqrt(radius_sq)`` of each other: their
    squared distance, from exact differences, at most ``radius_sq``."""
    k, d = centers.shape
    for a in range(k):
        for b in range(a + 1, k):
            sq = 0.0
            for f in range(d):
                sq += (centers[a, f] - centers[b, f]) * (centers[a, f] - centers[b, f])
            if sq <= radius_sq:
                return True
    return False


@njit(**JIT_OPTIONS)
def scatter_floor(sums, masses, rounding):
    """``trace(B) / rank``, ``B`` the scatter of the means ``c_j = sums_j / masses_j`` of the
    centroids with mass about their weighted mean ``m``, each ``||c_j - m||`` first lowered
    by ``rounding`` times ``||c_j|| + ||m||``; the rank is at most ``min(k - 1, d)`` for
    ``k`` centroids with mass (0 below 1). See
    :func:`~softkmeans._core.temperature.lambda_max_floor`."""
    k, d = sums.shape
    held, total = 0, 0.0
    mean = np.zeros(d)
    for j in range(k):
        if masses[j] > 0:
            held += 1
            total += masses[j]
            for f in range(d):
                mean[f] += masses[j] * (sums[j, f] / masses[j])
    rank = min(held - 1, d)
    if rank < 1:
        return 0.0
    mean_sq = 0.0
    for f in range(d):
        mean[f] /= total
        mean_sq += mean[f] * mean[f]
    floor = 0.0
    for j in range(k):
        if masses[j] > 0:
            norm_sq, apart_sq = 0.0, 0.0
            for f in range(d):
                value = sums[j, f] / masses[j]
                norm_sq += value * value
                apart_sq += (value - mean[f]) * (value - mean[f])
            slack = rounding * (math.sqrt(norm_sq) + math.sqrt(mean_sq))
            floor += masses[j] * max(math.sqrt(apart_sq) - slack, 0.0) ** 2
    floor = floor / total / rank
    return floor if math.isfinite(floor) else 0.0


@njit(**JIT_OPTIONS)
def relative_weighted_sums(values, weights):
    """``(largest weight, sum_i r_i, sum_i r_i v_i, whether a positive value has a positive
    weight)`` with ``r_i`` the weights over the largest (non-negative): sums of huge weights
    times the values would overflow. All 0 where no weight is positive."""
    largest = 0.0
    for i in range(weights.shape[0]):
        largest = max(largest, weights[i])
    total, weighted, positive = 0.0, 0.0, False
    if not largest > 0:
        return largest, total, weighted, positive
    for i in range(weights.shape[0]):
        relative = weights[i] / largest
        total += relative
        weighted += values[i] * relative
        positive = positive or (values[i] > 0 and weights[i] > 0)
    return largest, total, weighted, positive


@njit(**JIT_OPTIONS)
def near_zero_rows(dmin, labels, x_sq, c_sq, scale, rows):
    """Write into ``rows`` the observations whose positive ``dmin`` lies within
    ``scale (x_sq + c_sq[label])``, the rounding of a zero distance; returns how many.
    ``rows`` holds at least as many entries as ``dmin``."""
    count = 0
    for i in range(dmin.shape[0]):
        if dmin[i] > 0 and dmin[i] <= scale * (x_sq[i] + c_sq[labels[i]]):
            rows[count] = i
            count += 1
    return count


def compile_update_loops():
    """Compile, or load from numba's cache, the update's arithmetic."""
    centers = np.ones((2, 3))
    new = np.empty_like(centers)
    update_terms(centers, np.ones(2), centers, centers, NO_ORIGIN, 1.0, False, new)
    extrapolate(centers, centers, centers, 16.0, NO_ORIGIN, False, new)
    has_close_pair(centers, 1.0)
    scatter_floor(centers, np.ones(2), 1e-3)
    for weights in (np.ones(2), read_only(np.ones(2))):  # the engines keep theirs read-only
        relative_weighted_sums(np.ones(2), weights)
    for labels in (np.zeros(2, np.int32), np.zeros(2, np.intp)):  # of each engine
        near_zero_rows(np.ones(2), labels, np.ones(2), np.ones(2), 1.0, np.empty(2, np.intp))
