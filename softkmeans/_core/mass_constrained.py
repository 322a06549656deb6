"""Mass-constrained deterministic annealing: the codebook grows through its phase transitions.

Rose's mass-constrained annealing ("Deterministic annealing for clustering,
compression, classification, regression and related optimization problems",
Proc. IEEE 86(11), 1998) gives each codevector ``mu_j`` a prior ``p_j`` and
assigns with ``r_ij = p_j exp(-d_ij / (2 sigma^2)) / Z_i``. The update is
closed form: ``mu_j`` is the ``r``-weighted mean and ``p_j`` the
``r``-weighted share of the mass. Coincident codevectors then behave as one
with their summed prior, so the result does not depend on how many copies
of a centroid a phase transition starts from.

At a high temperature one codevector at the data mean is the minimizer. A
codevector becomes unstable, and its cluster splits, when ``sigma^2`` falls
below ``lambda_max(C_j)``, the largest eigenvalue of its cluster's
responsibility-weighted covariance (the same convention as ``critical_sigma_``:
for one cluster, ``sqrt(lambda_max)`` of the data). :func:`grow_codebook`
follows these transitions: between them it jumps the temperature down to the
next cluster's critical one, at a transition it duplicates the critical
codevectors along their principal direction, until there are ``n_clusters``.

The growth runs on a sample of the rows, held as dense float64 blocks, or as
CSR rows for sparse data beyond :data:`EIGH_MAX_FEATURES` features (the power
iterations of the principal axes there also keep its responsibilities,
``sample x k``); the rest of the annealing (the cooling tail and the Lloyd
polish) runs on the engines.
"""

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from .centred_rows import CentredRows, transposed_times
from .hartigan import hartigan_moves
from .optimize import alternating, anneal
from .prior_loops import add_prior_weighted
from .progress import Progress
from .responsibilities import HARD, SIGMA_MAX, SIGMA_MIN
from .row_blocks import dense_rows, row_slices
from .split_merge import (
    AXIS_ITERATIONS,
    AXIS_TOL,
    EIGH_MAX_FEATURES,
    SELECTED_EIGH_MIN,
    merge_split_search,
    top_eigenpair,
)
from .temperature import weighted_mean

__all__ = ["STAGE_MAX_ITER", "GrowthResult", "anneal_mass_constrained", "finish_codebook",
           "grow_codebook", "polish_and_search", "search_sample", "with_growth"]

#: The growth runs on at most ``max(_MIN_SAMPLE, _ROWS_PER_CLUSTER * n_clusters)`` rows, and
#: on at most ``_SAMPLE_ELEMENTS`` entries where that leaves ``_MIN_ROWS_PER_CLUSTER`` rows
#: per cluster or more.
_MIN_SAMPLE = 2000
_ROWS_PER_CLUSTER = 30
_SAMPLE_ELEMENTS = 1 << 24
_MIN_ROWS_PER_CLUSTER = 4
#: A cluster whose ``lambda_max`` is below ``(_ROUNDING_SPREAD * spread of the data)^2`` is
#: one point to rounding: it has no transition left.
_ROUNDING_SPREAD = 1e3 * np.finfo(float).eps
#: The temperature ``sigma^2`` steps to this fraction of the next critical one (or less).
_PAST_CRITICAL = 0.8
#: Half the distance between the two copies of a split codevector, in units of
#: ``sqrt(lambda_max)`` of its cluster (about the distance of a Gaussian half's mean).
_SPLIT_OFFSET = 0.5
#: Two copies closer than this (same unit) after the update have not split.
_MERGED = 0.1
#: Responsibilities below this fraction of a row's largest are left out of the covariances.
_COVARIANCE_CUTOFF = 1e-8
#: Step of the codevectors (relative to the data's spread) under which a temperature's update
#: has converged.
_STAGE_TOL = 1e-3


@dataclass
class GrowthResult:
    """The codebook at the end of the growth and the temperatures it went through.

    Attributes
    ----------
    centers : ndarray of shape (n_codevectors, n_features)
        The codevectors (``n_clusters`` of them, fewer only when the data hold
        fewer distinct clusters than asked for: every cluster is one point).
    sigma : float
        The last temperature.
    sigmas, objectives, n_iter : ndarrays of shape (n_temperatures,)
        Each temperature visited, the mass-constrained free energy
        ``-2 sigma^2 sum_i w_i log sum_j p_j exp(-d_ij / (2 sigma^2))`` reached
        there, and the updates it took.
    codebooks : list of ndarray
        With ``every_k``, the codevectors (in the coordinates of X) reached at
        each temperature; empty otherwise.
    """

    centers: np.ndarray
    sigma: float
    sigmas: list = field(default_factory=list)
    objectives: list = field(default_factory=list)
    n_iter: list = field(default_factory=list)
    codebooks: list = field(default_factory=list)


class _Sample:
    """The rows the growth runs on, centred on their weighted mean, in float64 blocks.

    At most :func:`sample_size` rows of X, drawn without replacement by a
    fixed seed (the growth does not depend on ``random_state``), with their
    weights relative to the largest, and each block's squared row norms.
    Dense blocks, except CSR rows beyond :data:`EIGH_MAX_FEATURES` features,
    which stay sparse (:class:`CentredRows`): only products reach them there.
    """

    def __init__(self, X, sample_weight, n_clusters):
        weights = np.asarray(sample_weight, dtype=np.float64)
        rows = np.flatnonzero(weights > 0)
        size = sample_size(n_clusters, X.shape[1])
        if rows.size > size:
            rows = np.sort(np.random.RandomState(0).choice(rows, size, replace=False))
        weights = weights[rows] / weights[rows].max()
        self.mean = weighted_mean(X[rows], weights)
        self.scale = 1.0  # the data's spread, set by grow_codebook
        self._blocks = []
        if sp.issparse(X) and X.shape[1] > EIGH_MAX_FEATURES:
            # sparse rows take the memory of their entries: one block
            block = CentredRows(sp.csr_matrix(X[rows], dtype=np.float64), self.mean)
            self._blocks.append((weights, block, block.sq_norms))
            return
        for part in row_slices(rows.size, X.shape[1]):
            block = dense_rows(X, rows[part]) - self.mean
            self._blocks.append((weights[part], block, np.einsum("ij,ij->i", block, block)))

    def blocks(self):
        """``(weights, centred rows, their squared norms)`` of each block."""
        return iter(self._blocks)


def sample_size(n_clusters, n_features):
    """Rows the growth runs on: enough for every cluster's covariance, in bounded memory."""
    size = max(_MIN_SAMPLE, _ROWS_PER_CLUSTER * n_clusters)
    return min(size, max(_MIN_ROWS_PER_CLUSTER * n_clusters, _SAMPLE_ELEMENTS // n_features))


def _responsibilities(block, block_sq, centers, log_prior, two_sigma_sq):
    """Prior-weighted softmax responsibilities of a block and each row's ``log Z_i``.

    The logits drop each row's ``-||x_i||^2 / (2 sigma^2)``, which the softmax
    does not see, and ``log Z_i`` adds it back.
    """
    logits = block @ (centers.T * (2.0 / two_sigma_sq))
    logits += log_prior - np.einsum("ij,ij->i", centers, centers) / two_sigma_sq
    top = logits.max(axis=1, keepdims=True)
    logits -= top
    weights = np.exp(logits, out=logits)
    norm = weights.sum(axis=1, keepdims=True)
    weights /= norm
    return weights, top[:, 0] + np.log(norm[:, 0]) - block_sq / two_sigma_sq


def _update(data, centers, log_prior, sigma_sq):
    """One pass: the weighted means, the new priors and the free energy at ``centers``."""
    k, d = centers.shape
    sums, masses, log_z = np.zeros((k, d)), np.zeros(k), 0.0
    two_sigma_sq = 2.0 * sigma_sq
    for w, block, block_sq in data.blocks():
        if isinstance(block, CentredRows):
            resp, block_log_z = _responsibilities(block, block_sq, centers, log_prior,
                                                  two_sigma_sq)
            resp *= w[:, None]
            sums += block.transposed_times(resp)
            masses += resp.sum(axis=0)
            log_z += float(w @ block_log_z)
            continue
        logits = block @ (centers.T * (2.0 / two_sigma_sq))
        logits += log_prior - np.einsum("ij,ij->i", centers, centers) / two_sigma_sq
        log_z += add_prior_weighted(block, w, logits, -block_sq / two_sigma_sq, sums, masses)
    full = masses > 0
    new = centers.copy()
    new[full] = sums[full] / masses[full, None]
    with np.errstate(divide="ignore"):
        new_log_prior = np.log(masses / masses.sum())
    return new, new_log_prior, -2.0 * sigma_sq * log_z


def _relax(data, centers, log_prior, sigma_sq, max_iter):
    """Alternate the update at ``sigma_sq`` until the codevectors stop moving."""
    objective, n_iter, step = np.nan, 0, np.inf
    while n_iter < max_iter and step > _STAGE_TOL:
        new, log_prior, objective = _update(data, centers, log_prior, sigma_sq)
        step = float(np.sqrt(np.max(np.sum((new - centers) ** 2, axis=1)) / sigma_sq))
        centers, n_iter = new, n_iter + 1
    return centers, log_prior, objective, n_iter


def _principal_axes(data, centers, log_prior, sigma_sq, start=None):
    """Largest eigenvalue and its unit eigenvector of each cluster's weighted covariance.

    Up to :data:`EIGH_MAX_FEATURES` features from the covariances themselves
    (``k d^2`` entries); beyond, by power iterations over the rows, from the
    axes ``start`` (one row per codevector) where given.
    """
    k, d = centers.shape
    if d > EIGH_MAX_FEATURES:
        return _power_axes(data, centers, log_prior, sigma_sq, start)
    cov, masses = np.zeros((k, d, d)), np.zeros(k)
    for w, block, block_sq in data.blocks():
        resp, _ = _responsibilities(block, block_sq, centers, log_prior, 2.0 * sigma_sq)
        cutoff = _COVARIANCE_CUTOFF * resp.max(axis=1)
        resp *= w[:, None]
        for j in range(k):
            rows = np.flatnonzero(resp[:, j] > cutoff * w)
            if rows.size:
                centred = block[rows] - centers[j]
                cov[j] += (centred * resp[rows, j, None]).T @ centred
                masses[j] += resp[rows, j].sum()
    full = masses > 0
    cov[full] /= masses[full, None, None]
    if d < SELECTED_EIGH_MIN:
        values, vectors = np.linalg.eigh(cov)
        return np.maximum(values[:, -1], 0.0), vectors[:, :, -1]
    pairs = [top_eigenpair(c) for c in cov]
    return np.maximum([value for value, _ in pairs], 0.0), np.array([axis for _, axis in pairs])


def _power_axes(data, centers, log_prior, sigma_sq, start):
    """:func:`_principal_axes` by simultaneous power iterations: each one multiplies every
    cluster's axis by its covariance with two products over the rows (``O(n k d)``)."""
    k, d = centers.shape
    weighted = []  # each block's responsibilities times the weights
    for w, block, block_sq in data.blocks():
        resp, _ = _responsibilities(block, block_sq, centers, log_prior, 2.0 * sigma_sq)
        weighted.append(resp * w[:, None])
    masses = sum(r.sum(axis=0) for r in weighted)
    axes = np.random.RandomState(0).standard_normal((k, d)) if start is None else start.copy()
    axes /= np.maximum(np.linalg.norm(axes, axis=1, keepdims=True), np.finfo(float).tiny)

    def times_covariance(axes):
        out = np.zeros((k, d))
        offsets = np.einsum("ij,ij->i", centers, axes)
        for r, (_, block, _) in zip(weighted, data.blocks(), strict=True):
            along = r * (block @ axes.T - offsets)  # r_ij (x_i - mu_j) . a_j
            out += transposed_times(block, along) - along.sum(axis=0)[:, None] * centers
        return out / np.maximum(masses, np.finfo(float).tiny)[:, None]

    for _ in range(AXIS_ITERATIONS):
        image = times_covariance(axes)
        norms = np.linalg.norm(image, axis=1, keepdims=True)
        new = np.where(norms > 0, image / np.maximum(norms, np.finfo(float).tiny), axes)
        converged = np.abs(np.abs(np.einsum("ij,ij->i", new, axes)) - 1.0).max() < AXIS_TOL
        axes = new
        if converged:
            break
    values = np.einsum("ij,ij->i", axes, times_covariance(axes))
    return np.maximum(values, 0.0), axes


def _choose(critical, log_prior, lam, budget):
    """The heaviest transitions first (prior times ``lambda_max``) when fewer splits are left
    than critical clusters."""
    order = critical[np.argsort(-(np.exp(log_prior) * lam)[critical], kind="stable")]
    return order[:budget]


def _split(centers, log_prior, chosen, lam, axes):
    """Duplicate the codevectors ``chosen`` along their principal axes, halving their priors."""
    n_old = len(centers)
    offsets = _SPLIT_OFFSET * np.sqrt(lam[chosen])[:, None] * axes[chosen]
    centers = np.vstack([centers, centers[chosen] + offsets])
    centers[chosen] -= offsets
    log_prior = np.concatenate([log_prior, log_prior[chosen]])
    log_prior[chosen] -= np.log(2.0)
    log_prior[n_old:] -= np.log(2.0)
    return centers, log_prior


def _merge_unsplit(centers, log_prior, chosen, n_old, lam):
    """Undo the splits whose copies came back together: not past their transition yet."""
    apart = np.linalg.norm(centers[chosen] - centers[n_old:], axis=1)
    merged = apart < _MERGED * np.sqrt(lam[chosen])
    if not merged.any():
        return centers, log_prior
    copies = n_old + np.flatnonzero(merged)
    log_prior = log_prior.copy()
    log_prior[chosen[merged]] = np.logaddexp(log_prior[chosen[merged]], log_prior[copies])
    keep = np.ones(len(centers), dtype=bool)
    keep[copies] = False
    return centers[keep], log_prior[keep]


def _start_axes(axes, chosen, n_codevectors):
    """The axes of the last temperature for the codevectors after a split (a copy starts
    from its original's), when no copy was undone; None otherwise."""
    if n_codevectors != len(axes) + len(chosen):
        return None
    return np.vstack([axes, axes[chosen]])


def grow_codebook(X, sample_weight, n_clusters, *, max_iter, every_k=False, verbose=0):
    """Mass-constrained annealing from one codevector at the mean to ``n_clusters``.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
    sample_weight : ndarray of shape (n_samples,)
    n_clusters : int
    max_iter : int
        Cap on the updates at each temperature.
    every_k : bool, default=False
        Split one codevector at a time, so that every number of codevectors is
        visited, and keep the codevectors of every temperature
        (``GrowthResult.codebooks``).
    verbose : int, default=0

    Returns
    -------
    GrowthResult
        The codevectors are in the coordinates of X.
    """
    data = _Sample(X, sample_weight, n_clusters)
    centers = np.zeros((1, X.shape[1]))
    log_prior = np.zeros(1)
    lam, axes = _principal_axes(data, centers, log_prior, 1.0)
    data.scale = max(float(np.sqrt(lam[0])), np.finfo(float).tiny)
    negligible = (_ROUNDING_SPREAD * data.scale) ** 2
    result = GrowthResult(centers, 0.0)
    sigma_sq = _PAST_CRITICAL * float(lam[0])
    while centers.shape[0] < n_clusters and lam.max() > negligible:
        n_old = len(centers)
        critical = np.flatnonzero(_PAST_CRITICAL * lam >= sigma_sq)
        chosen = _choose(critical, log_prior, lam, 1 if every_k else n_clusters - n_old)
        centers, log_prior = _split(centers, log_prior, chosen, lam, axes)
        centers, log_prior, objective, n_iter = _relax(data, centers, log_prior, sigma_sq,
                                                       max_iter)
        centers, log_prior = _merge_unsplit(centers, log_prior, chosen, n_old, lam)
        result.sigmas.append(np.sqrt(sigma_sq))
        result.objectives.append(objective)
        result.n_iter.append(n_iter)
        if every_k:
            result.codebooks.append(centers + data.mean)
        Progress.of(verbose).say(f"Growth: sigma {np.sqrt(sigma_sq):.4g}, {len(centers)} "
                                 f"codevectors, free energy {objective:.6g}")
        lam, axes = _principal_axes(data, centers, log_prior, sigma_sq,
                                    _start_axes(axes, chosen, len(centers)))
        # Large steps down to the next transition; the copies just made wait for the next one.
        sigma_sq = _PAST_CRITICAL * min(sigma_sq, float(lam.max()))
    result.centers = centers + data.mean
    # all observations equal: any temperature describes them
    result.sigma = float(np.sqrt(sigma_sq)) if sigma_sq > 0 else 1.0
    return result


#: Cap on the updates at each temperature of the growth and of the tail (the search after
#: them mends what a stage left unsettled).
STAGE_MAX_ITER = 15
#: Temperatures of the cooling tail after the growth, each half the one before.
_TAIL_STEPS = 3


#: The merge-and-split search runs on at most ``max(_SEARCH_MIN_ROWS, _SEARCH_ROWS_PER_CLUSTER
#: * n_clusters, _SEARCH_MIN_ELEMENTS / n_features)`` rows, and on none when fewer than
#: ``_SEARCH_MIN_ROWS_PER_CLUSTER * n_clusters`` dense float64 rows fit in
#: ``_SEARCH_ELEMENTS`` values. A visit costs a row's features: data in few dimensions
#: (colours) get more rows for the same cost, and need them where they have no clusters, as
#: the search's moves are decided on the sample.
_SEARCH_MIN_ROWS = 5000
_SEARCH_ROWS_PER_CLUSTER = 300
_SEARCH_MIN_ELEMENTS = 60_000
_SEARCH_MIN_ROWS_PER_CLUSTER = 10
_SEARCH_ELEMENTS = 1 << 24
#: Screening sweeps of Hartigan's moves over the whole data.
_HARTIGAN_SWEEPS = 10
#: Searches, each on its own sample, from the fixed point the one before left; the next
#: runs only while the whole data's ``J`` went down and the data holds rows enough for
#: another sample beside those the samples drew.
_SEARCH_ROUNDS = 3


def search_sample(engine, n_clusters, seed=0):
    """``(rows, weights)``: the float64 rows the search runs on (CSR for sparse data beyond
    :data:`EIGH_MAX_FEATURES` features, dense otherwise), or None.

    All rows with positive weight when there are few enough, otherwise a
    draw without replacement by ``seed``; weights relative to the largest.
    """
    rows = np.flatnonzero(engine.sample_weight > 0)
    n_features = max(1, engine.X.shape[1])
    size = min(max(_SEARCH_MIN_ROWS, _SEARCH_ROWS_PER_CLUSTER * n_clusters,
                   _SEARCH_MIN_ELEMENTS // n_features), _SEARCH_ELEMENTS // n_features)
    if size < _SEARCH_MIN_ROWS_PER_CLUSTER * n_clusters:
        return None
    if rows.size > size:
        rows = np.sort(np.random.RandomState(seed).choice(rows, size, replace=False))
    weights = engine.sample_weight[rows]
    if sp.issparse(engine.X) and engine.X.shape[1] > EIGH_MAX_FEATURES:
        sample = sp.csr_matrix(engine.X[rows], dtype=np.float64)
    else:
        sample = dense_rows(engine.X, rows)
    return sample, weights / weights.max()


def _refined(engine, run, lloyd):
    """The Lloyd fixed point ``run`` improved by Hartigan's moves over the whole data, then
    Lloyd's algorithm again (``run`` itself when no move pays). The moves see the weights
    relative to the largest, whose products stay finite whatever their scale."""
    k = len(run.centers)
    weights = engine.sample_weight / engine.sample_weight.max()
    moved, n_moves = hartigan_moves(engine.X, weights, run.stats.labels, k,
                                    max_sweeps=_HARTIGAN_SWEEPS)
    if n_moves == 0:
        return run
    empty = np.bincount(run.stats.labels, minlength=k) == 0
    moved[empty] = run.centers[empty]
    return lloyd(moved)


def _report(verbose, stage, run):
    """One line of ``verbose`` output: the inertia a final stage reached."""
    Progress.of(verbose).say(f"{stage}: inertia {run.stats.inertia:.9g}")


def anneal_mass_constrained(engine, spec, n_clusters, *, max_iter, tol, record_path=False,
                            verbose=0):
    """Mass-constrained annealing, a short cooling tail, the Lloyd polish and a search.

    The codebook grows through its phase transitions (:func:`grow_codebook`),
    then :func:`finish_codebook` takes it to a K-Means fixed point.

    Parameters
    ----------
    engine : engine object
    spec : RelaxationSpec
        The relaxation of the tail (its ``sigma`` is replaced).
    n_clusters : int
    max_iter, tol, record_path, verbose
        As in :func:`softkmeans._core.optimize.anneal`.

    Returns
    -------
    RunResult
        As :func:`softkmeans._core.optimize.anneal`'s, its temperatures those of
        the growth followed by the tail's (only the tail's have trajectories);
        ``n_iter`` counts the updates over the whole data.
    """
    growth = grow_codebook(engine.X, engine.sample_weight, n_clusters,
                           max_iter=min(max_iter, STAGE_MAX_ITER), verbose=verbose)
    run = finish_codebook(engine, spec, growth.centers, growth.sigma, n_clusters,
                          max_iter=max_iter, tol=tol, record_path=record_path, verbose=verbose)
    return with_growth(run, growth)


def with_growth(run, growth, n_stages=None):
    """``run`` with the first ``n_stages`` temperatures of ``growth`` (all by default) before
    its own, and their updates counted in ``n_iter``."""
    stop = len(growth.sigmas) if n_stages is None else n_stages
    run.n_iter += int(np.sum(growth.n_iter[:stop]))
    run.sigmas = np.concatenate([growth.sigmas[:stop], run.sigmas])
    run.stage_objectives = np.concatenate([growth.objectives[:stop], run.stage_objectives])
    run.stage_iters = np.concatenate([np.asarray(growth.n_iter[:stop], dtype=int),
                                      run.stage_iters])
    return run


def finish_codebook(engine, spec, centers, sigma, n_clusters, *, max_iter, tol,
                    record_path=False, verbose=0):
    """A grown codebook to a K-Means fixed point: the tail, the polish and the searches.

    At ``n_clusters`` codevectors (copies of the first make up for missing ones)
    the priors are dropped and ``spec``'s relaxation cools from ``sigma`` over
    :data:`_TAIL_STEPS` halvings of the temperature before Lloyd's algorithm
    (:func:`softkmeans._core.optimize.anneal`). The merge-and-split search of
    :mod:`softkmeans._core.split_merge`, on a sample of the rows
    (:func:`search_sample`), mends what the Lloyd fixed point left; Lloyd's
    algorithm and Hartigan's moves (:mod:`softkmeans._core.hartigan`) on the
    whole data finish it. The search's result is kept only if its ``J`` on the
    whole data is below the polished fixed point's. No step is random.

    Parameters
    ----------
    centers : ndarray of shape (n_codevectors, n_features)
        The grown codebook, in the coordinates of X.
    sigma : float
        The temperature of the codebook's next transition, where the tail starts.
    engine, spec, n_clusters, max_iter, tol, record_path, verbose
        As in :func:`anneal_mass_constrained`.

    Returns
    -------
    RunResult
        As :func:`softkmeans._core.optimize.anneal`'s, with the tail's
        temperatures; ``n_iter`` counts the updates over the whole data.
    """
    if len(centers) < n_clusters:  # fewer clusters than asked: the polish reseeds the copies
        centers = np.vstack([centers, np.repeat(centers[:1], n_clusters - len(centers), 0)])
    # within the temperatures a relaxation takes: data spread beyond 1e150 cool from 1e150
    tail = np.clip(sigma * 0.5 ** np.arange(1, _TAIL_STEPS + 1), SIGMA_MIN, SIGMA_MAX)
    run = anneal(engine, centers, spec, tail, None, perturbation=0.0,
                 max_iter=min(max_iter, STAGE_MAX_ITER), tol=tol, record_path=record_path,
                 verbose=verbose)

    # the tail's polish had the stages' cap on its updates
    finished, n_iter = polish_and_search(engine, run.centers, max_iter=max_iter, tol=tol,
                                         verbose=verbose)
    run.centers, run.stats, run.converged = finished.centers, finished.stats, finished.converged
    run.n_iter += n_iter
    return run


def polish_and_search(engine, centers, *, max_iter, tol, search=True, verbose=0):
    """Lloyd's algorithm from ``centers``, the merge-and-split search, and Hartigan's moves.

    The search (only with ``search``) runs on a sample of the rows
    (:func:`search_sample`) from the Lloyd fixed point, with group transfers
    where the sample is the whole data, and its result is kept when Lloyd's
    algorithm takes it on the whole data below that fixed point's ``J``. A
    move decided on a sample can pay there and not on the whole data, and a
    sample can hide one that pays: while a search's result is kept, up to
    :data:`_SEARCH_ROUNDS` in all, another starts from it on another sample
    while the data holds rows enough for one beside those the samples drew.
    Hartigan's moves over the whole data then refine the fixed point kept,
    and the polished one as well where the search held all the rows: such
    moves can take it the lower (on heavy tails, where one row moved changes
    ``J`` by a large part), and on small data they cost little.

    Returns
    -------
    run : RunResult
        The Lloyd fixed point kept (``HARD`` statistics on the whole data).
    n_iter : int
        The updates over the whole data, as :func:`finish_codebook` counts them.
    """
    def lloyd(start):
        return alternating(engine, start, HARD, max_iter=max_iter, tol=tol, empty="reseed")

    polished = kept = lloyd(centers)
    _report(verbose, "Lloyd polish", polished)
    n_iter, n_rows, whole = polished.n_iter, np.count_nonzero(engine.sample_weight > 0), True
    for seed in range(_SEARCH_ROUNDS if search else 0):
        sample = search_sample(engine, len(centers), seed)
        if sample is None:
            break
        # a transfer moves a few rows: exact for J when they are the data's, within the
        # sampling error of J when they stand for rows left out of a sample
        whole = sample[0].shape[0] == n_rows
        searched = lloyd(merge_split_search(*sample, kept.centers, max_rounds=len(centers),
                                            transfers=whole).centers)
        _report(verbose, "merge-split search", searched)
        if not searched.stats.inertia < kept.stats.inertia:
            break
        kept = searched
        n_iter += kept.n_iter
        if (seed + 2) * sample[0].shape[0] > n_rows:
            break
    finished = None
    for run in [polished, kept] if whole and kept is not polished else [kept]:
        refined = _refined(engine, run, lloyd)
        _report(verbose, "Hartigan's moves", refined)
        if finished is None or refined.stats.inertia < finished.stats.inertia:
            finished, start = refined, run
    return finished, n_iter + (finished.n_iter if finished is not start else 0)
