"""The iterative algorithms, written once against an engine's ``estep``.

- :func:`alternating`: the closed-form weighted-mean update (EM step); with a
  hard :class:`RelaxationSpec` it is Lloyd's algorithm.
- :func:`gradient_descent`: gradient descent on the reduced objective with one
  step size for all centroids and a backtracking (Armijo) line search.
- :func:`anneal`: deterministic annealing over a decreasing list of
  temperatures, warm-started, followed by a Lloyd polish.

Two stopping rules (:class:`StoppingRule`): the estimators' ``"kmeans"`` rule, that of
scikit-learn's ``KMeans`` with a soft objective's test added, and the paper's ``"relative"``
rule of Sec. 7.1, ``||mu_{t+1} - mu_t||_F / max(1, ||mu_t||_F) <= tol``, which the
reproduction keeps.
"""

import math
from dataclasses import dataclass, field, replace

import numpy as np

from .progress import Progress
from .reassignment import abandoned, relocate
from .responsibilities import HARD, SIGMA_MAX, SIGMA_MIN, RelaxationSpec
from .update_loops import NO_ORIGIN, extrapolate, update_terms

__all__ = ["RunResult", "StoppingRule", "Trajectory", "alternating", "gradient_descent", "anneal",
           "relative_step", "shared_variance", "mixture_variance", "weighted_means", "gradient"]


#: A line search gives up (the run has converged) after this many halvings of the step.
_MAX_HALVINGS = 50
#: Unit roundoffs per unit of magnitude of the summed terms that a pass's objective is taken
#: to carry as rounding (:func:`_objective_noise`).
_NOISE_ROUNDOFFS = 32.0


@dataclass
class Trajectory:
    """Per-iteration record of one run (index 0 is the starting point).

    Attributes
    ----------
    objective, inertia : list of float
        The run's own objective and the hard distortion J at each iterate.
    step : list of float
        Relative centroid step that led to each iterate (nan at index 0).
    n_changes : list of int
        Number of observations whose nearest centroid changed.
    decrease_bound : list of float
        ``sum_j m_j(mu_t) ||mu_{t+1,j} - mu_{t,j}||^2``, the sufficient decrease
        an alternating step guarantees (nan where it does not apply).
    centers : list of ndarray or None
        The iterates themselves, when asked for.
    """

    objective: list = field(default_factory=list)
    inertia: list = field(default_factory=list)
    step: list = field(default_factory=list)
    n_changes: list = field(default_factory=list)
    decrease_bound: list = field(default_factory=list)
    centers: list | None = None

    def add(self, stats, centers, step, n_changes, decrease_bound):
        self.objective.append(stats.objective)
        self.inertia.append(stats.inertia)
        self.step.append(step)
        self.n_changes.append(n_changes)
        self.decrease_bound.append(decrease_bound)
        if self.centers is not None:
            self.centers.append(centers.copy())

    def as_dict(self):
        """The record as a dict of numpy arrays."""
        out = {
            name: np.asarray(getattr(self, name))
            for name in ("objective", "inertia", "step", "n_changes", "decrease_bound")
        }
        if self.centers is not None:
            out["centers"] = np.asarray(self.centers)
        return out


@dataclass
class RunResult:
    """Outcome of one run from one initialization.

    ``stats`` are the pass statistics at the final ``centers``; ``stages``
    holds one :class:`Trajectory` per stage when a path was recorded.
    """

    centers: np.ndarray
    stats: object
    n_iter: int
    converged: bool
    spec: RelaxationSpec
    stages: list = field(default_factory=list)
    sigmas: np.ndarray | None = None
    stage_objectives: np.ndarray | None = None
    stage_iters: np.ndarray | None = None
    n_reassigned: int = 0


def relative_step(new, old):
    """``||new - old||_F / max(1, ||old||_F)``."""
    return float(np.linalg.norm(new - old) / max(1.0, np.linalg.norm(old)))


def _new_trajectory(record_path, stats, centers):
    if not record_path:
        return None
    path = Trajectory(centers=[] if record_path == "centers" else None)
    path.add(stats, centers, np.nan, 0, np.nan)
    return path


def _reseed_empty(new_centers, stats, engine, used, parked=None):
    """Move centroids without mass onto the observations farthest from their centroid.

    ``used`` (updated) holds the observations taken before in the run. One that
    lies on a centroid (``dmin = 0``, every observation does) is taken only by a
    centroid not moved onto such an observation before, ``parked`` (updated): a
    duplicate of a row already taken leaves the centroid empty, and it would
    move at every iteration.
    """
    empty = np.flatnonzero(stats.masses <= 0)
    if empty.size == 0:
        return new_centers
    scores = stats.dmin * engine.sample_weight
    order = engine.top_rows(scores, empty.size + len(used))
    candidates = order[~np.isin(order, list(used))][: empty.size]
    parked = set() if parked is None else parked
    for j, i in zip(empty, candidates, strict=False):
        if not float(scores[i]) > 0:
            if int(j) in parked:
                continue
            parked.add(int(j))
        used.add(int(i))
        new_centers[j] = engine.row(i)
    return new_centers


def weighted_means(stats, centers):
    """Closed-form centroid update ``sums / masses``; a centroid without mass stays in place.

    Of a hard pass it is the Lloyd map ``T_Lloyd(mu)``.
    """
    if stats.masses.min() > 0:
        return stats.sums / stats.masses[:, None]
    full = stats.masses > 0
    new = centers.copy()
    new[full] = stats.sums[full] / stats.masses[full, None]
    return new


def gradient(stats, centers):
    """Gradient ``2 (m_j mu_j - sum_i w_i r_ij x_i)`` of the reduced objective at ``centers``."""
    return 2.0 * (stats.masses[:, None] * centers - stats.sums)


def _weighted_row_norms(engine):
    """``(largest weight, sum of weights, sum of weights times ||x_i - shift||^2)``, the last
    two over the largest weight (huge weights would overflow them)."""
    weights = engine.sample_weight  # non-empty (a fit has at least one row)
    largest = float(weights.max())
    if largest == 0.0:
        return 0.0, 0.0, 0.0
    relative = weights / largest
    return largest, float(relative.sum()), float(relative @ engine.distance_norms())


def _largest_sq_norm(engine, centers):
    """``max_j ||mu_j - shift||^2``, about the engine's distance shift (see
    :func:`_objective_noise`)."""
    shift = engine.distance_shift
    shifted = centers if shift is None else centers - shift
    return float(np.einsum("ij,ij->i", shifted, shifted).max(initial=0.0))


def _objective_noise(unit_roundoff, stats, centers_sq, row_norms):
    """Rounding a pass's objective can carry: about that of its terms' sizes.

    Each row's squared distances come from ``||x||^2 - 2 x.mu + ||mu||^2``, off
    by a few unit roundoffs of ``||x||^2 + ||mu||^2`` (of the points the engine
    forms them from: shifted, for data far from the origin), and its
    relaxation term (``F - J`` over the rows) by a few of its own size.
    ``unit_roundoff`` is the engine's, ``centers_sq`` :func:`_largest_sq_norm`
    of the pass's centroids, ``row_norms`` :func:`_weighted_row_norms` of the
    engine.
    """
    largest, total, norms = row_norms
    if largest == 0.0:
        return 0.0
    sizes = largest * (norms + total * centers_sq) + abs(stats.objective) + abs(stats.inertia)
    return _NOISE_ROUNDOFFS * unit_roundoff * sizes


def _report_end(progress, n_iter, converged, strict, max_iter):
    """The line that ends a run: why it stopped."""
    if converged:
        why = "the assignments repeat" if strict else "within the stopping rule's tolerance"
        progress.say(f"Converged at iteration {n_iter}: {why}")
    else:
        progress.say(f"Stopped at max_iter={max_iter} before converging")


def shared_variance(engine, stats, row_norms=None):
    """``sigma^2`` of the isotropic mixture's M-step: ``D / (d W)`` at the weighted means.

    ``D = sum_i w_i sum_j r_ij ||x_i - s_j / m_j||^2``, from the pass's
    ``sums`` and ``masses`` and the rows' squared norms (about the engine's
    distance shift, so that data far from the origin keep their digits):
    ``D = sum_i w_i ||x_i - c||^2 - sum_j m_j ||s_j / m_j - c||^2``
    (:func:`mixture_variance`). ``row_norms`` is :func:`_weighted_row_norms` of
    the engine, which a run computes once.
    """
    _, total, spread = _weighted_row_norms(engine) if row_norms is None else row_norms
    return mixture_variance(stats.sums, stats.masses, total, spread, engine.distance_shift,
                            engine.X.shape[1], engine.unit_roundoff)


def mixture_variance(sums, masses, total, spread, origin, n_features, unit_roundoff):
    """The shared variance per feature of observations around their weighted means.

    ``(spread - sum_j m_j ||s_j / m_j - c||^2) / (d W)``, where ``spread`` is
    ``sum_i w_i ||x_i - c||^2`` and ``total`` is ``W = sum_i w_i`` (in any unit
    of the weights: the masses are brought to it), ``c`` the point ``origin``
    (None: the origin), the sum over the centroids with mass. Returns 0 where the
    rows sit on the means: below the rounding of that difference, ``(d + 2)``
    unit roundoffs of the arithmetic times the spread (computed by
    :func:`~softkmeans._core.update_loops.update_terms` and
    :func:`_residual_variance`).

    Parameters
    ----------
    sums : ndarray of shape (n_clusters, n_features)
        ``sum_i w_i r_ij x_i``.
    masses : ndarray of shape (n_clusters,)
        ``sum_i w_i r_ij``.
    total, spread : float
    origin : ndarray of shape (n_features,) or None
    n_features : int
    unit_roundoff : float

    Returns
    -------
    float
    """
    sums = np.ascontiguousarray(sums, dtype=np.float64)
    means = np.empty_like(sums)
    explained = update_terms(sums, np.ascontiguousarray(masses, dtype=np.float64), sums, sums,
                             _origin(origin), float(total), False, means)[1]
    return _residual_variance(explained, total, spread, n_features, unit_roundoff)


def _origin(point):
    """A point as :mod:`.update_loops` takes it (float64; empty for the origin)."""
    return NO_ORIGIN if point is None else np.ascontiguousarray(point, dtype=np.float64)


def _residual_variance(explained, total, spread, n_features, unit_roundoff):
    """``(spread - explained) / (d W)`` (:func:`mixture_variance`), or 0 where the rows sit
    on the means: below the rounding of that difference, ``(d + 2)`` unit roundoffs of the
    arithmetic times the spread."""
    residual = spread - explained
    if not residual > (n_features + 2) * unit_roundoff * spread:
        return 0.0
    return residual / (n_features * total)


def _at_variance(spec, shrink, variance):
    """``spec`` at ``shrink`` times the deviation ``sqrt(variance)`` (unchanged where the
    variance is 0)."""
    if not variance > 0:
        return spec
    sigma = shrink * math.sqrt(variance)
    return RelaxationSpec(spec.kind, min(max(sigma, SIGMA_MIN), SIGMA_MAX), spec.alpha)


@dataclass(frozen=True)
class StoppingRule:
    """When a run of updates has converged.

    ``kind="kmeans"`` (the estimators' rule) stops a run at the first of

    - an update that leaves the centroids and the temperature exactly where they
      were: the assignments repeat (Lloyd's strict convergence); the update is
      counted, as scikit-learn's ``KMeans`` counts it, without a pass;
    - a squared centroid shift ``sum_j ||mu_{t+1,j} - mu_{t,j}||^2`` (and, where the
      temperature is fitted, a change of ``sigma^2``) of at most ``tol`` times the
      data's weighted mean variance per feature (the rule of ``KMeans``);
    - where ``tol > 0``, after a soft pass (some responsibilities neither 0 nor 1), a
      change of the per-sample score ``F / (2 sigma^2 W) + (d / 2) log(2 sigma^2)``
      (minus the mixture's mean log-likelihood up to a constant, for softmax: what
      ``score`` measures) within the rounding of the pass's objective: the
      objective no longer resolves the progress.

    A pass whose responsibilities are all one-hot (a hard pass; an identified
    entmax fit) stops by Lloyd's rules alone, so that such a fit stops where
    ``KMeans`` does. With ``accelerate``, while the passes are soft
    (:data:`_SMOOTH_GAP`), every other update is a SQUAREM extrapolation of the
    last three iterates (:func:`~softkmeans._core.update_loops.extrapolate`), kept
    only where its per-sample score is no worse than that of the point it leaves:
    the objective at a fixed temperature never increases. ``kind="relative"`` is
    the paper's rule (Sec. 7.1): ``||mu_{t+1} - mu_t||_F / max(1, ||mu_t||_F) <=
    tol`` (with the relative change of ``sigma`` where it is fitted), without
    extrapolation.
    """

    tol: float
    kind: str = "kmeans"
    accelerate: bool = True

    @classmethod
    def of(cls, tol):
        """``tol`` itself, or the paper's relative rule at ``tol`` (a float)."""
        return tol if isinstance(tol, cls) else cls(float(tol), "relative", accelerate=False)

    def bind(self, engine, stats, row_norms):
        """The rule's thresholds on the data of ``engine``, from the run's first pass
        ``stats`` and :func:`_weighted_row_norms` (unused by the relative rule)."""
        if self.kind == "relative":
            return _RelativeTest(self.tol)
        _, total, spread = row_norms
        variance = mixture_variance(stats.sums.sum(axis=0, keepdims=True),
                                    np.array([stats.masses.sum()]), total, spread,
                                    engine.distance_shift, engine.X.shape[1],
                                    engine.unit_roundoff)
        return _KMeansTest(self.tol * variance, row_norms, engine.unit_roundoff)


@dataclass(frozen=True)
class _RelativeTest:
    tol: float
    strict: bool = False

    def step(self, new, centers, old_sigma, new_sigma, shift=None):
        """``(step, small)``: the update's relative step and whether it is within tol."""
        step = relative_step(new, centers)
        if new_sigma != old_sigma:
            step = max(step, abs(new_sigma - old_sigma) / old_sigma)
        return step, step <= self.tol

    def settled(self, old_score, new_score, new_stats, new_spec, centers_sq):
        """Whether the objective says the run has converged (never, for this rule)."""
        return False


@dataclass(frozen=True)
class _KMeansTest:
    """The thresholds of the ``"kmeans"`` rule on one run."""

    shift_tol: float
    row_norms: tuple
    unit_roundoff: float
    strict: bool = True

    def step(self, new, centers, old_sigma, new_sigma, shift=None):
        """``(squared shift, small)``, the shift including the change of ``sigma^2``;
        ``shift`` is ``||new - centers||_F^2`` where the caller has it."""
        if shift is None:
            shift = float(((new - centers) ** 2).sum())
        small = shift <= self.shift_tol
        if new_sigma != old_sigma:
            small = small and abs(new_sigma**2 - old_sigma**2) <= self.shift_tol
        return shift, small

    def settled(self, old_score, new_score, new_stats, new_spec, centers_sq):
        """Whether a soft pass changed the per-sample score (:class:`_Scores`) by no more
        than its rounding (never at ``tol=0``, which runs to a fixed point); ``centers_sq``
        is :func:`_largest_sq_norm` of the pass's centroids."""
        if self.shift_tol == 0 or new_spec.kind == "hard" or not new_stats.gap > 0:
            return False
        change = new_score() - old_score()
        noise = _objective_noise(self.unit_roundoff, new_stats, centers_sq, self.row_norms)
        resolution = noise / (_NOISE_ROUNDOFFS * new_spec.tau * _total_mass(new_stats))
        return abs(change) <= resolution


class _Scores:
    """The per-sample score of one pass's statistics (:func:`_per_sample_score`), computed
    on the first call and kept: a run compares each pass with the next."""

    __slots__ = ("stats", "spec", "n_features", "value")

    def __init__(self, stats, spec, n_features):
        self.stats, self.spec, self.n_features, self.value = stats, spec, n_features, None

    def __call__(self):
        if self.value is None:
            self.value = _per_sample_score(self.stats, self.spec, self.n_features)
        return self.value


def _per_sample_score(stats, spec, n_features):
    """``F / (2 sigma^2 W) + (d / 2) log(2 sigma^2)``, ``W`` the total weight."""
    tau = spec.tau
    return stats.objective / (tau * _total_mass(stats)) + 0.5 * n_features * math.log(tau)


def _total_mass(stats):
    """The sum of a pass's masses, from Python floats (numpy's sum of a few values costs
    more, once a pass has pushed its code out of the caches)."""
    return math.fsum(stats.masses.tolist())


def _stored(centers, dtype):
    """``centers`` rounded to the precision the caller stores them in (float64 values)."""
    if np.dtype(dtype) == np.float64:
        return centers
    return centers.astype(dtype).astype(np.float64)


def alternating(engine, centers, spec, *, max_iter, tol, empty="keep", record_path=False,
                verbose=0, fit_sigma=None, dtype=np.float64, reassign=None):
    """Alternating minimization: responsibilities, then weighted means.

    Parameters
    ----------
    engine : engine object
        Bound to the data (see :mod:`softkmeans._engines`).
    centers : ndarray of shape (n_clusters, n_features), float64
        Starting centroids.
    spec : RelaxationSpec
        The relaxation (``"hard"`` gives Lloyd's algorithm).
    max_iter : int
        Cap on the number of updates.
    tol : float or StoppingRule
        When the run has converged; a float is the paper's relative rule.
    empty : {"keep", "reseed"}, default="keep"
        What to do with a centroid whose mass is zero.
    record_path : bool or "centers", default=False
        Keep a :class:`Trajectory` (with the iterates when ``"centers"``).
    verbose : int or Progress, default=0
        Print one line per iteration, and why the run stopped, when positive
        (:class:`~softkmeans._core.progress.Progress`).
    fit_sigma : float, default=None
        When given, re-estimate the temperature at every update as
        ``fit_sigma`` times the deviation of the isotropic Gaussian mixture's
        shared variance (:func:`shared_variance`; 1 gives EM for the
        centroids and ``sigma`` together); the stopping rule weighs its change.
    dtype : dtype, default=float64
        The precision the caller stores the centroids in: every update is
        rounded to it before its pass, so that the run's statistics describe
        the stored centroids without one more pass.
    reassign : Reassign, default=None
        When given, a run that has converged with abandoned centroids
        (:func:`~softkmeans._core.reassignment.abandoned`) relocates them
        (:func:`~softkmeans._core.reassignment.relocate`) and goes on from there;
        the continued run is kept if it converges to a lower per-sample score
        (its relocation's pass and updates count in ``n_iter``), otherwise the
        run before it is, and no relocation is tried again.

    Returns
    -------
    RunResult
        ``spec`` is the relaxation at the run's last temperature.
    """
    run = _alternate(engine, centers, spec, max_iter=max_iter, tol=tol, empty=empty,
                     record_path=record_path, verbose=verbose, fit_sigma=fit_sigma, dtype=dtype)
    while reassign is not None and run.converged and run.n_iter < max_iter:
        trial = _relocated(engine, run, reassign, max_iter - run.n_iter, empty=empty,
                           tol=tol, record_path=record_path, verbose=verbose,
                           fit_sigma=fit_sigma, dtype=dtype)
        if trial is None:
            break
        run = trial
    return run


def _alternate(engine, centers, spec, *, max_iter, tol, empty, record_path, verbose, fit_sigma,
               dtype):
    """:func:`alternating` without relocations: one run to its stopping rule or ``max_iter``."""
    rule, progress = StoppingRule.of(tol), Progress.of(verbose)
    centers = np.array(centers, dtype=np.float64)
    stats = engine.estep(centers, spec)
    path = _new_trajectory(record_path, stats, centers)
    converged, n_iter, reseeded, parked = False, 0, set(), set()
    needs_norms = fit_sigma is not None or rule.kind != "relative"
    row_norms = _weighted_row_norms(engine) if needs_norms else None
    test = rule.bind(engine, stats, row_norms)
    d, unit_roundoff = engine.X.shape[1], engine.unit_roundoff
    _, total, spread = row_norms or (None, 0.0, 0.0)
    origin, to_float32 = _origin(engine.distance_shift), np.dtype(dtype) == np.float32
    before = None  # the centroids whose plain update gave ``centers``, while there are some
    strict = False  # whether the run ends at an exact fixed point
    score = _Scores(stats, spec, d)
    while n_iter < max_iter:
        n_iter += 1  # one per pass: a rejected extrapolation's pass counts as an update
        # a centroid without mass stays, or moves onto a far observation
        fallback = (_reseed_empty(centers.copy(), stats, engine, reseeded, parked)
                    if empty == "reseed" else centers)
        new = np.empty_like(centers)
        smallest, explained, shift, centers_sq = update_terms(
            stats.sums, stats.masses, fallback, centers, origin, total, to_float32, new)
        old_spec = spec
        if fit_sigma is not None:
            spec = _at_variance(spec, fit_sigma, _residual_variance(explained, total, spread, d,
                                                                    unit_roundoff))
        if test.strict and spec == old_spec and np.array_equal(new, centers):
            # a fixed point: the assignments repeat, the pass would too
            if path is not None:
                path.add(stats, new, 0.0, 0, 0.0)
            progress.iteration(n_iter, stats, spec, 0.0)
            done = strict = True
        else:
            step, small = test.step(new, centers, old_spec.sigma, spec.sigma, shift)
            plain, new_stats = new, None  # the plain update, which the path's bound measures
            if (rule.accelerate and before is not None and not small and n_iter < max_iter
                    and stats.gap > _SMOOTH_GAP * stats.inertia and smallest > 0):
                # three successive plain iterates (no centroid reseeded or kept without
                # mass): extrapolate, keep the point if it scores no worse than ``centers``
                jump = np.empty_like(centers)
                jump_sq = extrapolate(before, centers, new, _SQUAREM_MAX_STEP, origin,
                                      to_float32, jump)
                jump_stats = engine.estep(jump, spec)
                jump_score = _Scores(jump_stats, spec, d)
                if jump_score() <= score():
                    new, new_stats, new_score, centers_sq = jump, jump_stats, jump_score, jump_sq
                else:
                    n_iter += 1
            before = centers if new_stats is None else None
            if new_stats is None:
                new_stats = engine.estep(new, spec)
                new_score = _Scores(new_stats, spec, d)
            done = small or test.settled(score, new_score, new_stats, spec, centers_sq)
            if path is not None:
                changes = int(np.count_nonzero(new_stats.labels != stats.labels))
                bound = float(stats.masses @ np.sum((plain - centers) ** 2, axis=1))
                path.add(new_stats, new, step, changes, bound)
            centers, stats, score = new, new_stats, new_score
            progress.iteration(n_iter, stats, spec, step)
            strict = False
        if done:
            converged = True
            break
    _report_end(progress, n_iter, converged, converged and strict, max_iter)
    return RunResult(centers, stats, n_iter, converged, spec, [path] if path else [],
                     n_reassigned=len(reseeded))


def _relocated(engine, run, reassign, max_iter, **options):
    """The converged ``run`` continued after relocating its abandoned centroids, or None.

    The centroids that :func:`~softkmeans._core.reassignment.abandoned` finds are
    placed by :func:`~softkmeans._core.reassignment.relocate`, and the run goes
    on from there for at most ``max_iter - 1`` updates (the relocation's pass
    is one). The result is kept if that run converges to a per-sample score
    (the isotropic mixture's negative log-likelihood, comparable across
    temperatures) below ``run``'s; otherwise None, and no later relocation is
    tried. None also when nothing was placed or no round is left.
    """
    if reassign.rounds <= 0 or max_iter < 2:
        return None
    spec, stats = run.spec, run.stats
    moving = abandoned(stats.masses, run.centers, spec, reassign.ratio)
    if moving.size == 0:
        return None
    moved, placed = relocate(engine, run.centers, moving, reassign.rng)
    if placed == 0:
        return None
    reassign.rounds -= 1
    progress = Progress.of(options["verbose"])
    progress.say(f"Moving {placed} abandoned centroids (inertia {stats.inertia:.6g})")
    trial = _alternate(engine, _stored(moved, options["dtype"]), spec, max_iter=max_iter - 1,
                       **options)
    d = engine.X.shape[1]
    if not (trial.converged and _per_sample_score(trial.stats, trial.spec, d)
            < _per_sample_score(stats, spec, d)):
        reassign.rounds = 0
        progress.say("The relocation did not pay: back to the run before it")
        return None
    return replace(trial, n_iter=run.n_iter + 1 + trial.n_iter, stages=run.stages + trial.stages,
                   n_reassigned=run.n_reassigned + placed + trial.n_reassigned)


#: Relative gap ``(J - F) / J`` above which a pass is soft enough for the update to be
#: smooth and worth extrapolating; below it the update is Lloyd's up to rounding, and
#: extrapolating its jumps would leave the path that the small-temperature theory follows.
_SMOOTH_GAP = 1e-6
#: The longest extrapolation (:func:`~softkmeans._core.update_loops.extrapolate`), in steps
#: of the plain update.
_SQUAREM_MAX_STEP = 16.0


def gradient_descent(engine, centers, spec, *, max_iter, tol, record_path=False, verbose=0,
                     armijo=0.5):
    """Gradient descent on the reduced objective with one step size for all centroids.

    The gradient is ``grad_j = 2 (m_j mu_j - sum_i w_i r_ij x_i)``. Each
    iteration tries twice the last accepted step (the first try is
    ``1 / (2 max_j m_j)``, the largest step the heaviest cluster allows) and
    halves it until the Armijo condition
    ``F(mu - eta g) <= F(mu) - armijo * eta * ||g||^2`` holds. Where the two
    objectives differ by less than their rounding (:func:`_objective_noise`:
    near a stationary point, and at high temperatures, where ``F`` is about
    ``-2 sigma^2 W log k``), that comparison says nothing, and the step is
    accepted by the approximate Wolfe condition of Hager and Zhang instead:
    ``g(mu - eta g) . g >= (2 armijo - 1) ||g||^2``, from gradients, which carry
    no such cancellation (with ``armijo = 1/2``: the step does not pass the
    minimum along ``-g``). When no step of the ``_MAX_HALVINGS`` tried passes
    either, the centroids stay and the run ends as converged: the gradient
    is at the rounding level.

    Parameters and return value are those of :func:`alternating`, plus
    ``armijo``, the sufficient-decrease constant of the line search. With the
    default 1/2, on a quadratic the accepted steps never pass the minimizer
    along ``-g``; a small constant such as 1e-4 accepts steps that reflect the
    stiff directions (the heavy clusters) back and forth, and the run then
    crawls (150 iterations instead of 5 on well separated blobs).
    """
    centers = np.array(centers, dtype=np.float64)
    stats = engine.estep(centers, spec)
    path = _new_trajectory(record_path, stats, centers)
    # The gradient is taken over the first heaviest mass and the step eta times it (``rate``):
    # ``eta ||g||^2 = rate * scale * ||g / scale||^2`` stays finite for weights summing to
    # 1e300, whose gradient squared would overflow.
    scale = max(float(stats.masses.max()), np.finfo(float).tiny)
    rate = 0.25  # halved here because every iteration starts by doubling the last accepted step
    row_norms = _weighted_row_norms(engine)
    rule, progress = StoppingRule.of(tol), Progress.of(verbose)
    test = rule.bind(engine, stats, row_norms)
    converged, n_iter = False, 0
    for n_iter in range(1, max_iter + 1):
        direction = gradient(stats, centers) / scale
        direction_sq = float(np.sum(direction * direction))
        noise = _objective_noise(engine.unit_roundoff, stats, _largest_sq_norm(engine, centers),
                                 row_norms)
        rate *= 2.0
        for _ in range(_MAX_HALVINGS):
            new = centers - rate * direction
            new_stats = engine.estep(new, spec)
            decrease = armijo * rate * scale * direction_sq
            accepted = new_stats.objective <= stats.objective - decrease or (
                abs(new_stats.objective - stats.objective) <= noise
                and float(np.sum(gradient(new_stats, new) / scale * direction))
                >= (2.0 * armijo - 1.0) * direction_sq)
            if accepted:
                break
            rate *= 0.5
        if not accepted:
            new, new_stats = centers, stats
        step, small = test.step(new, centers, spec.sigma, spec.sigma)
        if path is not None:
            changes = int(np.count_nonzero(new_stats.labels != stats.labels))
            path.add(new_stats, new, step, changes, np.nan)
        centers, stats = new, new_stats
        progress.iteration(n_iter, stats, spec, step)
        if small:
            converged = True
            break
    _report_end(progress, n_iter, converged, False, max_iter)
    return RunResult(centers, stats, n_iter, converged, spec, [path] if path else [])


def anneal(engine, centers, spec, sigmas, rng, *, perturbation, max_iter, tol,
           record_path=False, verbose=0):
    """Deterministic annealing followed by a Lloyd polish.

    At each temperature of ``sigmas`` (decreasing), the centroids of the previous
    temperature are perturbed by ``perturbation`` times a standard normal draw and
    the alternating update runs to the stopping rule. Lloyd's algorithm then
    runs from the last centroids, so the result is a K-Means fixed point; in it
    a centroid without mass moves onto the observation farthest from its
    centroid (``empty="reseed"``), so that every centroid ends on the data
    rather than where the perturbations left it.

    Parameters
    ----------
    engine, centers : see :func:`alternating`
    spec : RelaxationSpec
        The relaxation; its ``sigma`` is replaced by each temperature in turn.
    sigmas : array of shape (n_temperatures,)
        The schedule.
    rng : numpy.random.RandomState or None
        Source of the perturbations (None when ``perturbation`` is 0).
    perturbation : float
        Standard deviation of the warm-start perturbation.
    max_iter, tol, record_path, verbose : see :func:`alternating`
        ``max_iter`` caps each temperature and the polish separately; the
        iterations at each temperature are printed from ``verbose=2``.

    Returns
    -------
    RunResult
        ``spec`` is the relaxation at the last temperature, ``stats`` those of
        the polished centroids under the hard relaxation, ``sigmas``,
        ``stage_objectives`` and ``stage_iters`` describe the schedule, and
        ``stages`` has one trajectory per temperature plus one for the polish.
    """
    centers, progress = np.array(centers, dtype=np.float64), Progress.of(verbose)
    objectives, iters, stages, total = [], [], [], 0
    for number, sigma in enumerate(sigmas, 1):
        progress.say(f"Temperature {number}/{len(sigmas)}: sigma {sigma:.4g}")
        if perturbation:
            centers = centers + perturbation * rng.standard_normal(centers.shape)
        stage = alternating(engine, centers, replace(spec, sigma=float(sigma)),
                            max_iter=max_iter, tol=tol, record_path=record_path,
                            verbose=progress.quieter())
        centers = stage.centers
        objectives.append(stage.stats.objective)
        iters.append(stage.n_iter)
        stages += stage.stages
        total += stage.n_iter
    progress.say("Lloyd's algorithm from the last temperature's centroids")
    polish = alternating(engine, centers, HARD, max_iter=max_iter, tol=tol, empty="reseed",
                         record_path=record_path, verbose=progress)
    return RunResult(
        polish.centers, polish.stats, total + polish.n_iter, polish.converged,
        replace(spec, sigma=float(sigmas[-1])), stages + polish.stages,
        np.asarray(sigmas, dtype=float), np.asarray(objectives), np.asarray(iters),
    )
