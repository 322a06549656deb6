"""Every number of clusters from one growth of the codebook, and a choice among them.

:func:`~softkmeans._core.mass_constrained.grow_codebook` visits ``k = 1, 2,
...`` codevectors, each over a range of temperatures: ``k`` appears at the
phase transition that splits a codevector of ``k - 1`` and lasts until the
next one. :func:`cluster_path` polishes the codebook of every ``k`` into a
K-Means fixed point (Lloyd's algorithm, then Hartigan's moves; the
merge-and-split search, which would cost more than the growth at every
``k``, is left to the chosen one), then goes down the path once more: the
fit of ``k + 1`` with its two closest clusters merged, polished, replaces
that of ``k`` where its ``J`` is lower (a divisive growth cannot reach a
best partition at ``k`` that is not a union of its clusters at a larger
``k``). It fits to each the isotropic Gaussian mixture with one variance per cluster and the
clusters' shares as weights (the hard-assignment estimates: ``pi_j = m_j /
W``, ``s_j^2 = J_j / (m_j d)``); :func:`choose_k` takes the ``k`` whose
mixture has the smallest ICL, the BIC plus twice the entropy of the
mixture's posterior (Biernacki, Celeux and Govaert, "Assessing a mixture
model for clustering with the integrated completed likelihood", IEEE TPAMI
22(7), 2000): a cluster that is not Gaussian (elongated, uniform) gains
likelihood when split, but its halves overlap, and the entropy charges for
the overlap.
"""

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from .mass_constrained import (
    STAGE_MAX_ITER,
    finish_codebook,
    grow_codebook,
    polish_and_search,
    with_growth,
)
from .optimize import alternating
from .responsibilities import HARD
from .row_blocks import float64_blocks

__all__ = ["PathPoint", "anneal_choosing_k", "choose_k", "cluster_path",
           "mixture_log_likelihood"]

#: A cluster's variance is at least this fraction of the data's variance per feature (a
#: cluster on one point would otherwise have an unbounded likelihood).
_VARIANCE_FLOOR = 1e-6


@dataclass
class PathPoint:
    """One number of clusters of the growth, polished.

    Attributes
    ----------
    n_clusters : int
    sigma_appeared, sigma_split : float
        The temperature of the transition that made ``n_clusters`` codevectors
        (``inf`` for one) and of the next one (for the last, the temperature at
        which it is due).
    codebook : ndarray of shape (n_clusters, n_features)
        The codevectors at the lowest temperature with ``n_clusters`` of them.
    centers : ndarray of shape (n_clusters, n_features)
        The polished centroids.
    inertia : float
        Their distortion ``J``.
    weights, variances : ndarray of shape (n_clusters,)
        The mixture's weights and isotropic variances.
    log_likelihood : float
        The mixture's log-likelihood of the training data (weighted).
    bic : float
        ``-2 log_likelihood + (n_clusters (n_features + 2) - 1) log W``, ``W`` the
        total sample weight.
    entropy : float
        ``-sum_i w_i sum_j t_ij log t_ij`` of the mixture's posterior ``t``.
    icl : float
        ``bic + 2 entropy``.
    run : RunResult
        The polished run (not part of :meth:`as_dict`).
    """

    n_clusters: int
    sigma_appeared: float
    sigma_split: float
    codebook: np.ndarray
    centers: np.ndarray
    inertia: float
    weights: np.ndarray
    variances: np.ndarray
    log_likelihood: float
    bic: float
    entropy: float
    icl: float
    run: object

    def as_dict(self):
        """The public fields, as one row of a table."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "run"}


def _stages(growth, mean):
    """``(k, sigma_appeared, sigma_split, codebook)`` of every ``k`` the growth reached."""
    stages = [[1, np.inf, growth.sigma, mean[None, :]]]
    for sigma, codebook in zip(growth.sigmas, growth.codebooks, strict=True):
        if len(codebook) > stages[-1][0]:
            stages[-1][2] = float(sigma)
            stages.append([len(codebook), float(sigma), growth.sigma, codebook])
        else:
            stages[-1][3] = codebook
    return stages


def mixture_log_likelihood(X, sample_weight, centers, weights, variances):
    """``sum_i w_i log sum_j pi_j N(x_i; mu_j, s_j^2 I)`` and the posterior's entropy.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
    sample_weight : ndarray of shape (n_samples,)
    centers : ndarray of shape (n_clusters, n_features)
    weights, variances : ndarray of shape (n_clusters,)

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
    total, entropy = 0.0, 0.0
    for rows, block in float64_blocks(X, width=max(len(centers), d)):
        block = block - shift
        sq = np.einsum("ij,ij->i", block, block)[:, None] - 2 * block @ shifted.T + c_sq
        log_joint = log_norm - np.maximum(sq, 0.0) / (2 * variances)
        log_p = logsumexp(log_joint, axis=1)
        log_post = log_joint - log_p[:, None]
        w = sample_weight[rows]
        total += float(w @ log_p)
        with np.errstate(invalid="ignore"):  # 0 log 0 of an empty component
            terms = np.where(log_post > -np.inf, np.exp(log_post) * log_post, 0.0)
        entropy -= float(w @ terms.sum(axis=1))
    return total, entropy


def _mixture(engine, stats, k, floor):
    """The weights and variances of the mixture at a hard partition's statistics."""
    w = engine.sample_weight
    spread = np.bincount(stats.labels, weights=w * stats.dmin, minlength=k)
    masses = np.bincount(stats.labels, weights=w, minlength=k)
    total = masses.sum()
    d = engine.X.shape[1]
    variances = np.full(k, floor)
    full = masses > 0
    variances[full] = np.maximum(spread[full] / (masses[full] * d), floor)
    return masses / total, variances, total


def _merge_closest(run):
    """The centroids of ``run`` with the two whose merge raises ``J`` least (Ward's cost
    ``m_a m_b / (m_a + m_b) ||mu_a - mu_b||^2``) replaced by their weighted mean."""
    centers, masses = run.centers, run.stats.masses
    first, second = np.triu_indices(len(centers), 1)
    both = np.maximum(masses[first] + masses[second], np.finfo(float).tiny)
    cost = (masses[first] * masses[second] / both
            * np.sum((centers[first] - centers[second]) ** 2, axis=1))
    pair = np.argmin(cost)
    a, b = first[pair], second[pair]
    mean = (masses[a] * centers[a] + masses[b] * centers[b]) / both[pair]
    return np.vstack([np.delete(centers, [a, b], axis=0), mean])


def cluster_path(engine, growth, *, max_iter, tol):
    """The polished fit and its mixture at every number of clusters the growth reached.

    Parameters
    ----------
    engine : engine object
    growth : GrowthResult
        Grown with ``every_k=True``.
    max_iter, tol
        Of Lloyd's algorithm (as :func:`softkmeans._core.optimize.alternating`).

    Returns
    -------
    list of PathPoint
        By increasing ``n_clusters``.
    """
    def lloyd(start):
        return alternating(engine, start, HARD, max_iter=max_iter, tol=tol, empty="reseed")

    X, w = engine.X, engine.sample_weight
    mean_run = lloyd(np.zeros((1, X.shape[1])))
    floor = _VARIANCE_FLOOR * mean_run.stats.inertia / (w.sum() * X.shape[1])
    stages = _stages(growth, mean_run.centers[0])
    runs = [mean_run] + [polish_and_search(engine, codebook, max_iter=max_iter, tol=tol,
                                           search=False)[0] for _, _, _, codebook in stages[1:]]
    for i in range(len(runs) - 2, 0, -1):  # downwards: each k from the k + 1 kept
        merged = polish_and_search(engine, _merge_closest(runs[i + 1]), max_iter=max_iter,
                                   tol=tol, search=False)[0]
        if len(merged.centers) == len(runs[i].centers) and (
                merged.stats.inertia < runs[i].stats.inertia):
            runs[i] = merged
    path = []
    for (k, appeared, split, codebook), run in zip(stages, runs, strict=True):
        weights, variances, total = _mixture(engine, run.stats, k, floor)
        log_likelihood, entropy = mixture_log_likelihood(X, w, run.centers, weights, variances)
        bic = -2 * log_likelihood + (k * (X.shape[1] + 2) - 1) * np.log(total)
        path.append(PathPoint(k, appeared, split, codebook, run.centers, run.stats.inertia,
                              weights, variances, log_likelihood, bic, entropy,
                              bic + 2 * entropy, run))
    return path


def choose_k(path):
    """The index in ``path`` of the point with the smallest ICL."""
    return int(np.argmin([point.icl for point in path]))


def anneal_choosing_k(engine, spec, max_clusters, *, max_iter, tol, record_path=False,
                      verbose=0):
    """The growth to ``max_clusters``, its path, and the annealing finished at the chosen k.

    The codebook grows one split at a time (:func:`grow_codebook` with
    ``every_k``); :func:`cluster_path` polishes every ``k`` and :func:`choose_k`
    picks one, whose codebook :func:`finish_codebook` takes to the fitted
    centroids as an integer ``n_clusters`` would.

    Parameters
    ----------
    engine : engine object
    spec : RelaxationSpec
        The relaxation of the tail.
    max_clusters : int
    max_iter, tol, record_path, verbose
        As in :func:`~softkmeans._core.mass_constrained.anneal_mass_constrained`.

    Returns
    -------
    run : RunResult
        As :func:`~softkmeans._core.mass_constrained.anneal_mass_constrained`'s,
        with the growth's temperatures up to the chosen k.
    path : list of PathPoint
    chosen : int
        The index of the chosen point in ``path``.
    """
    growth = grow_codebook(engine.X, engine.sample_weight, max_clusters,
                           max_iter=min(max_iter, STAGE_MAX_ITER), every_k=True,
                           verbose=verbose)
    path = cluster_path(engine, growth, max_iter=max_iter, tol=tol)
    chosen = choose_k(path)
    point = path[chosen]
    run = finish_codebook(engine, spec, point.codebook, point.sigma_split, point.n_clusters,
                          max_iter=max_iter, tol=tol, record_path=record_path, verbose=verbose)
    n_stages = sum(len(codebook) <= point.n_clusters for codebook in growth.codebooks)
    return with_growth(run, growth, n_stages), path, chosen
