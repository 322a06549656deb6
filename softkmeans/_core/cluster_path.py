"""Every number of clusters from one growth of the codebook, and a choice among them.

:func:`~softkmeans._core.mass_constrained.grow_codebook` visits ``k = 1, 2,
...`` codevectors, each over a range of temperatures: ``k`` appears at the
phase transition that splits a codevector of ``k - 1`` and lasts until the
next one. :func:`cluster_path` polishes the codebook of every ``k`` into a
K-Means fixed point (Lloyd's algorithm, then Hartigan's moves; the
merge-and-split search, which would cost more than the growth at every
``k``, is left to the largest and the chosen one), then goes up the path
and down again: the fit of ``k - 1`` with its widest cluster cut in two or
with a centroid more (:mod:`~softkmeans._core.insertion`), and then that of
``k + 1`` with its two closest clusters merged, polished,
replace that of ``k`` where their ``J`` is lower (a divisive growth cannot
reach a best partition at ``k`` that is not a union of its clusters at a
larger ``k``); before going down, k-means++ restarts and the
merge-and-split search refine the largest ``k`` kept, which no finer fit
but one reaches. Last, the best unions of the clusters of the
largest ``k`` into fewer groups (:mod:`~softkmeans._core.unions`), taken
through Lloyd's algorithm where they beat the fit's own unions or come within
a margin of its ``J``, polished, replace a fit where their ``J`` is lower
(greedy merges miss the best grouping of well-separated clusters).
The growth goes one ``k`` past the last one kept, for the last to be merged
down to as well. It fits two Gaussian mixtures to each partition, a spherical one
and one with a principal axis per cluster
(:mod:`~softkmeans._core.path_mixtures`); :func:`choose_k` takes the ``k``
of smallest ICL over both, the mixture's BIC plus twice the entropy of its
posterior (Biernacki, Celeux and Govaert, "Assessing a mixture model for
clustering with the integrated completed likelihood", IEEE TPAMI 22(7),
2000). A cluster that is not a spherical Gaussian gains likelihood when
split, but the halves of an elongated cluster are what the principal-axis
mixture fits as one component, and the halves of a uniform one overlap,
which the entropy charges for."""

from dataclasses import dataclass

import numpy as np

from .insertion import best_insertion
from .mass_constrained import (
    STAGE_MAX_ITER,
    finish_codebook,
    grow_codebook,
    polish_and_search,
    search_sample,
    with_growth,
)
from .optimize import alternating
from .path_mixtures import partition_mixtures
from .responsibilities import HARD
from .split_merge import widest_cut
from .unions import Unions, merge_cheapest

__all__ = ["PathPoint", "anneal_choosing_k", "choose_k", "cluster_path"]

#: k-means++ restarts at the largest number of clusters kept (:func:`_restart_last`).
_RESTARTS = 3
#: Lloyd's algorithm runs from the best unions of the finest fit into ``k`` groups where
#: their ``J`` is at most this fraction above the fit's at ``k`` (:func:`_unite`).
_UNIONS_MARGIN = 0.05

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
        The spherical mixture's weights and variances.
    log_likelihood : float
        The spherical mixture's log-likelihood of the training data (weighted).
    bic : float
        ``-2 log_likelihood + (n_clusters (n_features + 2) - 1) log W``, ``W`` the
        total sample weight.
    entropy : float
        ``-sum_i w_i sum_j t_ij log t_ij`` of the spherical mixture's posterior ``t``.
    icl : float
        ``bic + 2 entropy``.
    axes : ndarray of shape (n_clusters, n_features)
        The principal-axis mixture's unit axes.
    axis_variances, across_variances : ndarray of shape (n_clusters,)
        Its variance along each axis and per feature across it.
    axis_bic, axis_icl : float
        Its BIC (with ``n_clusters (2 n_features + 2) - 1`` parameters) and ICL
        (``inf`` with one feature, where it is the spherical mixture).
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
    axes: np.ndarray
    axis_variances: np.ndarray
    across_variances: np.ndarray
    axis_bic: float
    axis_icl: float
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


def _lower(lloyd, polish, start, current):
    """The fit polished from ``start`` where it has as many centroids as ``current`` and a
    lower ``J``, else ``current``. Hartigan's moves, which only lower ``J``, run only where
    Lloyd's algorithm from ``start`` already went below ``current``."""
    candidate = lloyd(start)
    if (len(candidate.centers) == len(current.centers)
            and candidate.stats.inertia < current.stats.inertia):
        return polish(candidate.centers)
    return current


def _cut_upwards(engine, runs, lloyd, polish):
    """Going up ``runs`` (one per ``k``), each fit of ``k - 1`` with its widest cluster cut
    in two (:func:`widest_cut`), then with one centroid more at the best of a few rows
    drawn by their distance to it (:func:`best_insertion`, ``RandomState(0)``), both on the
    merge-and-split search's sample, polished, replaces that of ``k`` where its ``J`` is
    lower. A cut leaves the other clusters where they were; an inserted centroid lets
    Lloyd's algorithm move every border, which data without separated clusters need."""
    sample = search_sample(engine, len(runs))
    if sample is None:
        return
    cache = {}
    for i in range(2, len(runs)):
        runs[i] = _lower(lloyd, polish, widest_cut(*sample, runs[i - 1].centers, cache),
                         runs[i])
        inserted = best_insertion(*sample, runs[i - 1].centers, np.random.RandomState(0))
        if inserted is not None:
            runs[i] = _lower(lloyd, polish, inserted, runs[i])


def _restart_last(engine, runs, index, lloyd, polish, search):
    """``runs[index]``, the largest number of clusters kept, replaced by the fit polished
    from each of :data:`_RESTARTS` k-means++ draws (``RandomState(0)``) where its ``J`` is
    lower, then by the merge-and-split search (``search``) from the best where its ``J`` is
    lower still. The other fits are also reached from finer ones, merged or united; this
    one only from the fit one ``k`` above, which nothing refines, and in data without
    separated clusters a greedy merge of that fit lands in a poor local minimum. A restart
    redraws every codevector and rarely places them all well where one elongated cluster
    is cut into several segments; the search moves the segments' cuts one at a time."""
    rng = np.random.RandomState(0)
    for _ in range(_RESTARTS):
        seeds = engine.draw_seeds("k-means++", len(runs[index].centers), rng)
        runs[index] = _lower(lloyd, polish, seeds, runs[index])
    searched = search(runs[index].centers)
    if searched.stats.inertia < runs[index].stats.inertia:
        runs[index] = searched


def _unite(runs, lloyd, polish):
    """Each fit of ``runs`` below the last replaced by the best unions of the last fit's
    clusters into as many groups (:class:`Unions`), polished, where that ``J`` is lower.
    Lloyd's algorithm runs from the unions only where they beat those that the fit's own
    centroids lead to, or where their ``J`` on the data (the last fit's plus their cost)
    is within :data:`_UNIONS_MARGIN` of the fit's: from unions far above the fit, Lloyd's
    descent rarely ends below it."""
    finest = runs[-1]
    unions = Unions(finest.centers, finest.stats.masses)
    for i in range(1, len(runs) - 1):
        cost, means, from_start = unions.best(runs[i].centers)
        if (not from_start
                or finest.stats.inertia + cost < (1 + _UNIONS_MARGIN) * runs[i].stats.inertia):
            runs[i] = _lower(lloyd, polish, means, runs[i])


def cluster_path(engine, growth, n_clusters, *, max_iter, tol):
    """The polished fit and its mixtures at every number of clusters the growth reached, up
    to ``n_clusters``.

    Parameters
    ----------
    engine : engine object
    growth : GrowthResult
        Grown with ``every_k=True``, to ``n_clusters + 1`` (that fit, merged down,
        polishes the one of ``n_clusters``).
    n_clusters : int
    max_iter, tol
        Of Lloyd's algorithm (as :func:`softkmeans._core.optimize.alternating`).

    Returns
    -------
    list of PathPoint
        By increasing ``n_clusters``.
    """
    def lloyd(start):
        return alternating(engine, start, HARD, max_iter=max_iter, tol=tol, empty="reseed")

    def polish(start):
        return polish_and_search(engine, start, max_iter=max_iter, tol=tol, search=False)[0]

    def search(start):
        return polish_and_search(engine, start, max_iter=max_iter, tol=tol)[0]

    X, w = engine.X, engine.sample_weight
    mean_run = lloyd(np.zeros((1, X.shape[1])))
    floor = _VARIANCE_FLOOR * mean_run.stats.inertia / (w.sum() * X.shape[1])
    stages = _stages(growth, mean_run.centers[0])
    runs = [mean_run] + [polish(codebook) for _, _, _, codebook in stages[1:]]
    _cut_upwards(engine, runs, lloyd, polish)
    last = min(n_clusters, len(runs)) - 1
    if last > 0:
        _restart_last(engine, runs, last, lloyd, polish, search)
    for i in range(len(runs) - 2, 0, -1):  # downwards: each k from the k + 1 kept
        merged, _ = merge_cheapest(runs[i + 1].centers, runs[i + 1].stats.masses)
        runs[i] = _lower(lloyd, polish, merged, runs[i])
    _unite(runs, lloyd, polish)
    path, axes = [], {}
    for (k, appeared, split, codebook), run in zip(stages[:n_clusters], runs, strict=False):
        partition = (X, w, run.centers, run.stats.labels, run.stats.dmin, floor)
        spherical, axis = partition_mixtures(*partition, axes)
        path.append(PathPoint(k, appeared, split, codebook, run.centers, run.stats.inertia,
                              spherical.weights, spherical.variances,
                              spherical.log_likelihood, spherical.bic, spherical.entropy,
                              spherical.icl, axis.axes, axis.axis_variances, axis.variances,
                              axis.bic, axis.icl, run))
    return path


def choose_k(path):
    """The index in ``path`` of the point with the smallest ICL of its two mixtures."""
    return int(np.argmin([min(point.icl, point.axis_icl) for point in path]))


def anneal_choosing_k(engine, spec, max_clusters, *, max_iter, tol, record_path=False,
                      verbose=0):
    """The growth to ``max_clusters`` (and one more, for the path's polish), its path, and
    the annealing finished at the chosen k.

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
    growth = grow_codebook(engine.X, engine.sample_weight, max_clusters + 1,
                           max_iter=min(max_iter, STAGE_MAX_ITER), every_k=True,
                           verbose=verbose)
    path = cluster_path(engine, growth, max_clusters, max_iter=max_iter, tol=tol)
    chosen = choose_k(path)
    point = path[chosen]
    run = finish_codebook(engine, spec, point.codebook, point.sigma_split, point.n_clusters,
                          max_iter=max_iter, tol=tol, record_path=record_path, verbose=verbose)
    n_stages = sum(len(codebook) <= point.n_clusters for codebook in growth.codebooks)
    return with_growth(run, growth, n_stages), path, chosen
