"""The Gaussian mixtures of a hard partition, and their integrated completed likelihood.

:func:`~softkmeans._core.cluster_path.cluster_path` scores every ``k`` of the
growth with two mixtures fitted to the partition's clusters, both with the
clusters' shares ``pi_j = m_j / W`` as weights and their centroids as means:

- the spherical one, one variance per cluster, ``s_j^2 = J_j / (m_j d)``
  (``GaussianMixture(covariance_type="spherical")`` at the partition);
- the principal-axis one (a probabilistic PCA of one axis per cluster:
  Tipping and Bishop, "Mixtures of probabilistic principal component
  analyzers", Neural Computation 11(2), 1999): along the largest eigenvector
  ``v_j`` of the cluster's scatter its eigenvalue ``a_j``, across it the rest
  of the variance, ``b_j = (J_j / m_j - a_j) / (d - 1)``. That axis is the
  one along which the growth splits the cluster (its phase transition is at
  ``sigma^2 = a_j``), so this mixture says whether the split found two
  clusters or one elongated cluster.

Each is scored by its ICL (Biernacki, Celeux and Govaert, IEEE TPAMI 22(7),
2000): ``-2 log L + p log W`` plus twice the entropy of its posterior.
"""

import hashlib
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp

from .centred_rows import CentredRows
from .hartigan import dense_rows
from .split_merge import EIGH_MAX_FEATURES, principal_axis

__all__ = ["Mixture", "axis_mixture", "mixture_log_likelihood", "spherical_mixture"]

#: Entries of one block of the likelihood's distances.
_BLOCK_ELEMENTS = 1 << 18


@dataclass
class Mixture:
    """A mixture at a partition, with its criteria.

    Attributes
    ----------
    weights : ndarray of shape (n_clusters,)
    variances : ndarray of shape (n_clusters,)
        Per feature across the axes (all features for the spherical mixture).
    axes : ndarray of shape (n_clusters, n_features) or None
        The unit principal axes (None for the spherical mixture).
    axis_variances : ndarray of shape (n_clusters,) or None
        The variance along each axis.
    log_likelihood, bic, entropy, icl : float
    """

    weights: np.ndarray
    variances: np.ndarray
    axes: object
    axis_variances: object
    log_likelihood: float = 0.0
    bic: float = 0.0
    entropy: float = 0.0
    icl: float = 0.0


def mixture_log_likelihood(X, sample_weight, centers, weights, variances, axes=None,
                           axis_variances=None):
    """``sum_i w_i log sum_j pi_j N(x_i; mu_j, Sigma_j)`` and the posterior's entropy.

    ``Sigma_j = s_j^2 I``, or with ``axes``, ``s_j^2 (I - v_j v_j^T) + a_j v_j v_j^T``.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
    sample_weight : ndarray of shape (n_samples,)
    centers : ndarray of shape (n_clusters, n_features)
    weights, variances : ndarray of shape (n_clusters,)
        ``pi_j`` and ``s_j^2``.
    axes : ndarray of shape (n_clusters, n_features), default=None
        The unit vectors ``v_j``.
    axis_variances : ndarray of shape (n_clusters,), default=None
        ``a_j``.

    Returns
    -------
    log_likelihood : float
    entropy : float
        ``-sum_i w_i sum_j t_ij log t_ij``, ``t_ij`` the posterior of component
        ``j`` at ``x_i``.
    """
    d = X.shape[1]
    shift = centers.mean(axis=0)
    shifted = centers - shift
    c_sq = np.einsum("ij,ij->i", shifted, shifted)
    with np.errstate(divide="ignore"):
        log_norm = np.log(weights) - 0.5 * d * np.log(2 * np.pi * variances)
    if axes is not None:
        log_norm -= 0.5 * np.log(axis_variances / variances)
        centre_along = np.einsum("ij,ij->i", shifted, axes)
        extra = 0.5 / variances - 0.5 / axis_variances  # of the squared projection
    step = max(1, _BLOCK_ELEMENTS // max(len(centers), d))
    total, entropy = 0.0, 0.0
    for start in range(0, X.shape[0], step):
        block = dense_rows(X, slice(start, start + step)) - shift
        sq = np.einsum("ij,ij->i", block, block)[:, None] - 2 * block @ shifted.T + c_sq
        log_joint = log_norm - np.maximum(sq, 0.0) / (2 * variances)
        if axes is not None:
            log_joint += extra * (block @ axes.T - centre_along) ** 2
        log_p = logsumexp(log_joint, axis=1)
        log_post = log_joint - log_p[:, None]
        w = sample_weight[start:start + step]
        total += float(w @ log_p)
        with np.errstate(invalid="ignore"):  # 0 log 0 of an empty component
            terms = np.where(log_post > -np.inf, np.exp(log_post) * log_post, 0.0)
        entropy -= float(w @ terms.sum(axis=1))
    return total, entropy


def _scored(mixture, X, sample_weight, centers, n_parameters):
    """``mixture`` with its log-likelihood, BIC, entropy and ICL on ``X``."""
    mixture.log_likelihood, mixture.entropy = mixture_log_likelihood(
        X, sample_weight, centers, mixture.weights, mixture.variances, mixture.axes,
        mixture.axis_variances)
    mixture.bic = -2 * mixture.log_likelihood + n_parameters * np.log(sample_weight.sum())
    mixture.icl = mixture.bic + 2 * mixture.entropy
    return mixture


def _masses_and_spreads(sample_weight, labels, dmin, k):
    """Each cluster's weight ``m_j`` and distortion ``J_j``."""
    masses = np.bincount(labels, weights=sample_weight, minlength=k)
    spreads = np.bincount(labels, weights=sample_weight * dmin, minlength=k)
    return masses, spreads


def _axis_and_spread(X, sample_weight, members, center):
    """The principal axis of the rows ``members`` about ``center`` and their weighted
    scatter along it."""
    d = X.shape[1]
    centred = (CentredRows(X[members].astype(np.float64), center)
               if sp.issparse(X) and d > EIGH_MAX_FEATURES
               else dense_rows(X, members) - center)
    w = sample_weight[members]
    axis = principal_axis(centred, w, d)
    return axis, float(w @ (centred @ axis) ** 2)


def spherical_mixture(X, sample_weight, centers, labels, dmin, floor):
    """The spherical mixture of the partition (``labels``, ``dmin`` its squared distances),
    variances floored at ``floor``, scored with ``k (d + 2) - 1`` parameters."""
    k, d = centers.shape
    masses, spreads = _masses_and_spreads(sample_weight, labels, dmin, k)
    variances = np.full(k, floor)
    full = masses > 0
    variances[full] = np.maximum(spreads[full] / (masses[full] * d), floor)
    mixture = Mixture(masses / masses.sum(), variances, None, None)
    return _scored(mixture, X, sample_weight, centers, k * (d + 2) - 1)


def axis_mixture(X, sample_weight, centers, labels, dmin, floor, cache):
    """The principal-axis mixture of the partition (as :func:`spherical_mixture`), scored
    with ``k (2 d + 2) - 1`` parameters (a mean, an axis, two variances and a weight per
    cluster); with one feature, where it is the spherical one, its criteria are ``inf``.

    ``cache`` (a dict) keeps each cluster's axis and scatter along it by a digest of its
    members, for the other partitions of the path that hold the same cluster (its centroid,
    their mean at a K-Means fixed point, is then the same too).
    """
    k, d = centers.shape
    masses, spreads = _masses_and_spreads(sample_weight, labels, dmin, k)
    if d == 1:
        return Mixture(masses / masses.sum(), np.full(k, np.nan), np.ones((k, 1)),
                       spreads / np.maximum(masses, np.finfo(float).tiny), np.nan, np.inf,
                       np.nan, np.inf)
    axes = np.zeros((k, d))
    axes[:, 0] = 1.0  # of an empty cluster
    along = np.full(k, floor)
    across = np.full(k, floor)
    for j in np.flatnonzero(masses > 0):
        members = np.flatnonzero(labels == j)
        key = hashlib.blake2b(members.tobytes(), digest_size=16).digest()
        if key not in cache:
            cache[key] = _axis_and_spread(X, sample_weight, members, centers[j])
        axes[j], spread_along = cache[key]
        spread_along = min(spread_along, spreads[j])
        across[j] = max((spreads[j] - spread_along) / (masses[j] * (d - 1)), floor)
        along[j] = max(spread_along / masses[j], across[j])
    mixture = Mixture(masses / masses.sum(), across, axes, along)
    return _scored(mixture, X, sample_weight, centers, k * (2 * d + 2) - 1)
