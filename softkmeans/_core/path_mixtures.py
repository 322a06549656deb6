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

from .centred_rows import CentredRows
from .row_blocks import dense_rows, float64_blocks
from .split_merge import EIGH_MAX_FEATURES, principal_axis

__all__ = ["Mixture", "mixture_log_likelihood", "partition_mixtures"]

#: A log-density this far below a row's largest has an exp of 0 in float64 (its least
#: positive value is about ``exp(-745)``).
_NEGLIGIBLE_LOG = -800.0


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
    n_parameters : int
    log_likelihood, bic, entropy, icl : float
    """

    weights: np.ndarray
    variances: np.ndarray
    axes: object
    axis_variances: object
    n_parameters: int = 0
    log_likelihood: float = 0.0
    bic: float = 0.0
    entropy: float = 0.0
    icl: float = 0.0


def mixture_log_likelihood(X, sample_weight, centers, mixtures):
    """``sum_i w_i log sum_j pi_j N(x_i; mu_j, Sigma_j)`` and the posterior's entropy of each
    of ``mixtures``, from one pass over X.

    ``Sigma_j = s_j^2 I``, or with axes, ``s_j^2 (I - v_j v_j^T) + a_j v_j v_j^T``.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
    sample_weight : ndarray of shape (n_samples,)
    centers : ndarray of shape (n_clusters, n_features)
        The means ``mu_j``, shared by the mixtures.
    mixtures : list of Mixture
        Their ``weights`` (``pi_j``), ``variances`` (``s_j^2``), and ``axes``
        (``v_j``) and ``axis_variances`` (``a_j``) or None.

    Returns
    -------
    list of (log_likelihood, entropy)
        The entropy is ``-sum_i w_i sum_j t_ij log t_ij``, ``t_ij`` the posterior
        of component ``j`` at ``x_i``.
    """
    d = X.shape[1]
    shift = centers.mean(axis=0)
    shifted = centers - shift
    c_sq = np.einsum("ij,ij->i", shifted, shifted)
    terms = [_gaussian_terms(mixture, shifted, d) for mixture in mixtures]
    totals = np.zeros((len(mixtures), 2))
    for rows, block in float64_blocks(X, width=max(len(centers), d)):
        block = block - shift  # a new array: the block may be a view of X
        sq = np.maximum(np.einsum("ij,ij->i", block, block)[:, None] - 2 * block @ shifted.T
                        + c_sq, 0.0)
        w = sample_weight[rows]
        for total, (mixture, (log_norm, centre_along, extra)) in zip(
                totals, zip(mixtures, terms, strict=True), strict=True):
            log_joint = log_norm - sq / (2 * mixture.variances)
            if mixture.axes is not None:
                log_joint += extra * (block @ mixture.axes.T - centre_along) ** 2
            total += _log_likelihood_and_entropy(log_joint, w)
    return [tuple(map(float, total)) for total in totals]


def _gaussian_terms(mixture, shifted, d):
    """``(log normaliser, projections of the shifted means on the axes, coefficient of the
    squared projection)`` of each component (the last two None without axes)."""
    with np.errstate(divide="ignore"):
        log_norm = np.log(mixture.weights) - 0.5 * d * np.log(2 * np.pi * mixture.variances)
    if mixture.axes is None:
        return log_norm, None, None
    log_norm = log_norm - 0.5 * np.log(mixture.axis_variances / mixture.variances)
    return (log_norm, np.einsum("ij,ij->i", shifted, mixture.axes),
            0.5 / mixture.variances - 0.5 / mixture.axis_variances)


def _log_likelihood_and_entropy(log_joint, w):
    """``(sum_i w_i log p_i, -sum_i w_i sum_j t_ij log t_ij)`` of a block's joint
    log-densities (overwritten).

    With ``e_ij = exp(l_ij - max_j l_ij)`` and ``s_i = sum_j e_ij``, ``log p_i`` is
    ``max_j l_ij + log s_i`` and ``sum_j t_ij log t_ij`` is ``sum_j e_ij (l_ij - max_j
    l_ij) / s_i - log s_i``; a shifted log-density below :data:`_NEGLIGIBLE_LOG` (an empty
    component's ``-inf`` among them) is raised to it, where its exp is 0 as well. A row
    without a finite largest log-density keeps it as ``log p_i`` (``-inf`` or ``inf``, as
    :func:`scipy.special.logsumexp` gives) and adds nothing to the entropy.
    """
    top = log_joint.max(axis=1)
    finite = np.isfinite(top)
    top[~finite] = 0.0
    shifted = np.maximum(log_joint - top[:, None], _NEGLIGIBLE_LOG, out=log_joint)
    exps = np.exp(shifted)
    norm = exps.sum(axis=1)  # at least 1 in the rows of a finite largest log-density
    with np.errstate(divide="ignore"):
        log_norm = np.log(norm)
    plogp = np.zeros(len(norm))
    plogp[finite] = (np.einsum("ij,ij->i", exps[finite], shifted[finite]) / norm[finite]
                     - log_norm[finite])
    return np.array([w @ (top + log_norm), -(w @ plogp)])


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


def partition_mixtures(X, sample_weight, centers, labels, dmin, floor, cache):
    """The spherical and the principal-axis mixture of a partition, with their criteria.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
    sample_weight : ndarray of shape (n_samples,)
    centers : ndarray of shape (n_clusters, n_features)
        The partition's centroids.
    labels, dmin : ndarray of shape (n_samples,)
        Each row's cluster and squared distance to its centroid.
    floor : float
        The least variance.
    cache : dict
        Each cluster's axis and scatter along it by a digest of its members, for
        the other partitions of the path that hold the same cluster (its
        centroid, their mean at a K-Means fixed point, is then the same too).

    Returns
    -------
    spherical, axis : Mixture
        With ``k (d + 2) - 1`` and ``k (2 d + 2) - 1`` parameters; with one
        feature, where the second is the first, its criteria are ``inf``.
    """
    k, d = centers.shape
    masses, spreads = _masses_and_spreads(sample_weight, labels, dmin, k)
    weights = masses / masses.sum()
    variances = np.full(k, floor)
    full = masses > 0
    variances[full] = np.maximum(spreads[full] / (masses[full] * d), floor)
    spherical = Mixture(weights, variances, None, None, k * (d + 2) - 1)
    if d == 1:
        axis = Mixture(weights, np.full(k, np.nan), np.ones((k, 1)), variances, 0, np.nan,
                       np.inf, np.nan, np.inf)
        return _scored(X, sample_weight, centers, [spherical])[0], axis
    axis = _axis_mixture(X, sample_weight, centers, labels, masses, spreads, floor, cache)
    return tuple(_scored(X, sample_weight, centers, [spherical, axis]))


def _scored(X, sample_weight, centers, mixtures):
    """``mixtures`` with their log-likelihood, BIC, entropy and ICL on ``X``."""
    log_total = np.log(sample_weight.sum())
    for mixture, (log_likelihood, entropy) in zip(
            mixtures, mixture_log_likelihood(X, sample_weight, centers, mixtures), strict=True):
        mixture.log_likelihood, mixture.entropy = log_likelihood, entropy
        mixture.bic = -2 * log_likelihood + mixture.n_parameters * log_total
        mixture.icl = mixture.bic + 2 * entropy
    return mixtures


def _axis_mixture(X, sample_weight, centers, labels, masses, spreads, floor, cache):
    """The principal-axis mixture of a partition of two features or more (unscored)."""
    k, d = centers.shape
    axes = np.zeros((k, d))
    axes[:, 0] = 1.0  # of an empty cluster
    along = np.full(k, floor)
    across = np.full(k, floor)
    # the rows of each cluster in index order, from one sort rather than a scan per cluster
    order = np.argsort(labels, kind="stable")
    groups = np.split(order, np.cumsum(np.bincount(labels, minlength=k))[:-1])
    for j in np.flatnonzero(masses > 0):
        members = groups[j]
        key = hashlib.blake2b(members.tobytes(), digest_size=16).digest()
        if key not in cache:
            cache[key] = _axis_and_spread(X, sample_weight, members, centers[j])
        axes[j], spread_along = cache[key]
        spread_along = min(spread_along, spreads[j])
        across[j] = max((spreads[j] - spread_along) / (masses[j] * (d - 1)), floor)
        along[j] = max(spread_along / masses[j], across[j])
    return Mixture(masses / masses.sum(), across, axes, along, k * (2 * d + 2) - 1)
