"""Temperatures: the default sigma, the critical temperature, annealing schedules."""

import math

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, eigsh

from .responsibilities import SIGMA_MAX, SIGMA_MIN
from .row_blocks import float64_blocks, row_slices
from .update_loops import near_zero_rows, relative_weighted_sums, scatter_floor

__all__ = ["AUTO_SIGMA_SHRINK", "auto_sigma", "auto_sigma_at", "exact_zero_distances", "lambda_max",
           "lambda_max_floor", "paper_schedule", "relative_weighted_average", "weighted_mean"]

#: ``sigma="auto"`` runs at this fraction of the maximum-likelihood deviation of the isotropic
#: mixture. At the likelihood's own temperature, overlapping clusters or data without clusters
#: pull the centroids together (J up to 2.5% above Lloyd's from the same start on the quality
#: benchmark); at 0.85 of it J stays within 0.5%, and the temperature within 1.5x of the one a
#: cross-validated search over ``score`` picks.
AUTO_SIGMA_SHRINK = 0.85

#: Beyond this many features the leading eigenvalue is found iteratively.
_DENSE_EIG_MAX_FEATURES = 512

#: What :func:`lambda_max_floor` allows for the rounding of a pass's sums, relative to the
#: norms of the means: float32 products of the rows of a chunk err by about the chunk's
#: length (256 rows in the numba engine) times 2^-24 of those norms, typically its square
#: root on a device's long blocks.
_SUMS_ROUNDING = 1e-3


def auto_sigma(dmin, sample_weight, n_features, fallback_scale=1.0):
    """The starting temperature of ``sigma="auto"``.

    ``sigma`` is :data:`AUTO_SIGMA_SHRINK` times the deviation whose square is
    the weighted mean squared distance of the observations to their nearest
    initial centroid divided by the number of features: the
    maximum-likelihood variance of an isotropic Gaussian around each centroid
    of that hard partition (a squared distance grows with the number of
    features, a variance per feature does not). When every observation sits on a
    centroid (a zero mean distance) ``sigma^2`` is a tenth of ``fallback_scale``
    instead, or 0.1 when that is 0 too (all observations equal). The
    result is clipped to ``[SIGMA_MIN, SIGMA_MAX]`` (of
    :mod:`softkmeans._core.responsibilities`), which only data with squared
    distances below about ``1e-299`` or above ``1e301`` reach.

    Parameters
    ----------
    dmin : ndarray of shape (n_samples,)
        Squared distance of each observation to its nearest initial centroid.
    sample_weight : ndarray of shape (n_samples,)
    n_features : int
    fallback_scale : float, default=1.0
        A squared length of the data's scale (the estimators pass ``lambda_max``,
        which they compute anyway), used when the mean distance is 0.

    Returns
    -------
    float
    """
    return auto_sigma_at(relative_weighted_average(dmin, sample_weight), n_features,
                         fallback_scale)


def auto_sigma_at(mean_sq, n_features, fallback_scale=1.0):
    """:func:`auto_sigma` from the weighted mean squared distance ``mean_sq``."""
    if mean_sq > 0.0:
        sigma = AUTO_SIGMA_SHRINK * math.sqrt(mean_sq / n_features)
    else:
        sigma = math.sqrt(0.1 * (fallback_scale if fallback_scale > 0 else 1.0))
    return float(min(max(sigma, SIGMA_MIN), SIGMA_MAX))


def relative_weighted_average(values, weights):
    """``sum_i w_i v_i / sum_i w_i`` (a float) over the weights divided by the largest.

    Relative weights, as :func:`numpy.average` would sum them, without its
    checks: sums of huge weights times the values would overflow. The
    weights are non-negative and some are positive.
    """
    _, total, weighted, _ = relative_weighted_sums(np.ascontiguousarray(values, dtype=np.float64),
                                                   np.ascontiguousarray(weights, dtype=np.float64))
    return weighted / total


def exact_zero_distances(X, centers, labels, dmin, x_sq, unit_roundoff):
    """``dmin`` with exact zeros where an observation equals its nearest centroid.

    Engines compute squared distances as ``||x||^2 - 2 x.mu + ||mu||^2``, which
    leaves rounding noise of about ``unit_roundoff (||x||^2 + ||mu||^2)`` where
    the distance is 0, growing with the number of features ``d`` (the
    classical bound of a dot product is ``d`` unit roundoffs): the starting
    centroids drawn from the observations sit on some of them. The
    :func:`auto_sigma` rule needs those zeros exact (with as many clusters as
    distinct points, the noise alone would set sigma). Only the rows whose
    distance lies within ``(d + 2) unit_roundoff (||x||^2 + ||mu||^2)`` are
    compared with their centroid.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
    centers : ndarray of shape (n_clusters, n_features)
    labels, dmin : ndarray of shape (n_samples,)
        Nearest centroid and squared distance to it of each observation.
    x_sq : ndarray of shape (n_samples,)
        Squared norms of the observations.
    unit_roundoff : float
        Of the arithmetic that computed ``dmin``.

    Returns
    -------
    ndarray of shape (n_samples,)
        ``dmin`` itself (as float64) where no row lies within that noise.
    """
    centers = np.asarray(centers, dtype=np.float64)
    c_sq = np.einsum("ij,ij->i", centers, centers)
    scale = (X.shape[1] + 2) * unit_roundoff
    dmin = np.ascontiguousarray(dmin, dtype=np.float64)
    suspects = np.empty(len(dmin), dtype=np.intp)
    suspects = suspects[:near_zero_rows(dmin, np.ascontiguousarray(labels),
                                        np.ascontiguousarray(x_sq, dtype=np.float64), c_sq,
                                        scale, suspects)]
    if suspects.size == 0:
        return dmin
    out = dmin.copy()
    for rows, block in float64_blocks(X, suspects):
        on_centroid = np.all(block == centers[labels[rows]], axis=1)
        out[rows[on_centroid]] = 0.0
    return out


def lambda_max(X, sample_weight=None):
    """Largest eigenvalue of the (weighted) covariance of X.

    ``C = sum_i w_i (x_i - xbar)(x_i - xbar)^T / sum_i w_i``. ``sigma^2 >
    lambda_max`` is the critical temperature of Prop. 9 of the paper: above
    it, all centroids at the mean is a strict local minimizer of ``F_sigma``.

    Dense X is read once, in its own precision: blocks of rows less a pivot
    (one of the rows), so that data far from the origin keep the digits of
    their spread, give ``sum_i w_i y_i y_i^T`` by one GEMM each (float32
    stays float32, as scikit-learn's distances) and ``sum_i w_i y_i``; the
    blocks' results are summed in float64 and the mean's outer product taken
    out. Each entry of a float32 covariance then errs by about
    ``sqrt(b) u`` of the trace (``b`` rows per block, ``u = 2^-24``; at most
    ``b u``), and so does ``lambda_max``: a relative ``1e-5`` typically, far
    below what the critical temperature is used for (a warning threshold and
    the start of an annealing schedule). Float64 X is exact to float64
    rounding, and so is sparse X with few features; sparse X with many
    features is multiplied as it is, ``X^T (w * X v) - xbar (xbar . v)``, which
    errs by about ``u ||xbar||^2`` (sparse data are seldom far from the origin).

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n_samples, n_features)
    sample_weight : ndarray of shape (n_samples,), default=None

    Returns
    -------
    float
    """
    n, d = X.shape
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    w = w / w.max()
    if not sp.issparse(X) and d <= _DENSE_EIG_MAX_FEATURES:
        cov = _dense_covariance(np.asarray(X), w)
        return float(max(np.linalg.eigvalsh(cov)[-1], 0.0))
    w = w / w.sum()
    mean = weighted_mean(X, w)
    if d <= _DENSE_EIG_MAX_FEATURES:
        cov = np.zeros((d, d))
        for rows, block in float64_blocks(X):
            centered = block - mean
            cov += centered.T @ (centered * w[rows, None])
        return float(max(np.linalg.eigvalsh(cov)[-1], 0.0))

    if sp.issparse(X):  # products with X itself: no dense block of many features
        X = sp.csr_matrix(X, dtype=np.float64)

        def cov_matvec(v):
            v = np.asarray(v, dtype=np.float64).ravel()
            return X.T @ (w * (X @ v)) - mean * (mean @ v)

        trace = float(w @ np.asarray(X.multiply(X).sum(axis=1)).ravel() - mean @ mean)
    else:
        def cov_matvec(v):
            out = np.zeros(d)
            v = np.asarray(v, dtype=np.float64).ravel()
            for rows, block in float64_blocks(X):
                out += (block - mean).T @ (w[rows] * ((block - mean) @ v))
            return out

        trace = sum(float(w[rows] @ np.square(block - mean).sum(axis=1))
                    for rows, block in float64_blocks(X))
    if not trace > 0:  # a zero covariance: ARPACK would find its starting vector mapped to 0
        return 0.0
    op = LinearOperator((d, d), matvec=cov_matvec, dtype=np.float64)
    return float(max(eigsh(op, k=1, which="LA", return_eigenvectors=False)[0], 0.0))


def lambda_max_floor(sums, masses):
    """A lower bound of ``lambda_max`` from one pass's statistics, without reading X.

    The responsibility-weighted means ``c_j = sums_j / M_j`` of any soft
    partition have a between-cluster scatter
    ``B = sum_j M_j (c_j - m)(c_j - m)^T / M`` (``m`` the data mean, ``M`` the
    total mass) that the covariance dominates: ``C - B`` is the within-cluster
    scatter, positive semi-definite. ``B`` has rank at most ``min(k - 1, d)``
    for ``k`` clusters with mass, so ``lambda_max >= trace(B) / rank``. Each
    distance ``||c_j - m||`` is first lowered by :data:`_SUMS_ROUNDING` of the
    means' norms, what the sums may err by (data far from the origin against
    their spread get a floor of 0). Computed in one compiled call
    (:func:`~softkmeans._core.update_loops.scatter_floor`).

    Parameters
    ----------
    sums : ndarray of shape (n_clusters, n_features)
        ``sum_i w_i r_ij x_i`` (:class:`~softkmeans._engines._stats.PassStats`).
    masses : ndarray of shape (n_clusters,)
        ``sum_i w_i r_ij``; responsibilities summing to 1 in each row.

    Returns
    -------
    float
    """
    return scatter_floor(np.ascontiguousarray(sums, dtype=np.float64),
                         np.ascontiguousarray(masses, dtype=np.float64), _SUMS_ROUNDING)


def _dense_covariance(X, w):
    """The weighted covariance of dense X in float64, from products in the dtype of X.

    ``w`` (float64, largest 1) are the weights. See :func:`lambda_max`.
    """
    n, d = X.shape
    dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.float64
    pivot = np.asarray(X[int(np.argmax(w > 0))], dtype=dtype)
    uniform = bool(np.all(w == 1.0))
    gram, total, mass = np.zeros((d, d)), np.zeros(d), 0.0
    for rows in row_slices(n, d):
        Y = np.subtract(X[rows], pivot, dtype=dtype)
        Yw = Y if uniform else Y * w[rows, None].astype(dtype)
        gram += Yw.T @ Y
        total += Yw.sum(axis=0, dtype=np.float64)
        mass += float(w[rows].sum())
    mean = total / mass
    return gram / mass - np.outer(mean, mean)


def weighted_mean(X, weights):
    """``sum_i w_i x_i / sum_i w_i`` in float64, without a float64 copy of X.

    The sum is of the rows less the first one with a positive weight, added
    back at the end: data far from the origin keep the digits of their spread,
    and equal rows have exactly their value as mean (a zero covariance).

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n_samples, n_features)
    weights : ndarray of shape (n_samples,)
        Non-negative, with a positive sum.

    Returns
    -------
    ndarray of shape (n_features,)
    """
    w = np.asarray(weights, dtype=np.float64)
    pivot = next(float64_blocks(X[[int(np.argmax(w > 0))]]))[1][0]
    if sp.issparse(X):
        # The pivot is zero off its own columns: there the rows less the pivot are the
        # rows themselves, and only the pivot's columns are made dense.
        X = sp.csr_matrix(X, dtype=np.float64)
        total = np.asarray(X.T @ w).ravel()
        held = np.flatnonzero(pivot)
        total[held] = w @ (X[:, held].toarray() - pivot[held])
        return pivot + total / w.sum()
    total = np.zeros(X.shape[1])
    for rows, block in float64_blocks(X):
        total += w[rows] @ (block - pivot)
    return pivot + total / w.sum()


def paper_schedule(lam_max, margin_min, n_temperatures=40):
    """The annealing schedule of Sec. 7.8 of the paper, as sigma values.

    ``n_temperatures`` values of ``sigma^2``, geometric from ``1.2 lambda_max``
    down to ``min(margin_min / 64, 0.12 lambda_max)``. The end is floored at
    ``1e-12 lambda_max`` so that a zero margin (tied observations) still gives
    a finite schedule; the temperatures are clipped to ``[SIGMA_MIN, SIGMA_MAX]``.

    Parameters
    ----------
    lam_max : float
        Largest eigenvalue of the data covariance (positive).
    margin_min : float
        Smallest assignment margin of a reference configuration.
    n_temperatures : int, default=40

    Returns
    -------
    ndarray of shape (n_temperatures,)
        Decreasing temperatures ``sigma``.
    """
    start = 1.2 * lam_max
    end = max(min(margin_min / 64.0, 0.12 * lam_max), 1e-12 * lam_max)
    return np.clip(np.sqrt(np.geomspace(start, end, n_temperatures)), SIGMA_MIN, SIGMA_MAX)
