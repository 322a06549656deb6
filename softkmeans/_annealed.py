"""AnnealedKMeans: deterministic annealing with softmax or entmax responsibilities."""

from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_array
from sklearn.utils._param_validation import Interval, StrOptions

from ._base import BaseSoftKMeans, _warn
from ._core.cluster_path import anneal_choosing_k
from ._core.mass_constrained import anneal_mass_constrained
from ._core.optimize import anneal
from ._core.responsibilities import HARD, RelaxationSpec, check_sigma
from ._core.temperature import paper_schedule
from ._engines._conditioning import squared_norm_limit

__all__ = ["AnnealedKMeans"]


#: Standard deviations of a perturbation draw that :meth:`AnnealedKMeans._check_perturbation`
#: allows for.
_PERTURBATION_DRAWS = 40.0


class AnnealedKMeans(BaseSoftKMeans):
    """K-Means by deterministic annealing, finished by a Lloyd polish.

    Above the critical temperature ``sigma^2 = lambda_max`` (largest eigenvalue
    of the data covariance) the softmax centroids merge at the data mean; as
    the temperature decreases they split along the data's main directions, one
    phase transition after another.

    ``strategy="mass-constrained"`` (the default) follows those transitions
    (Rose, "Deterministic annealing for clustering, compression,
    classification, regression and related optimization problems", Proc. IEEE
    1998): it starts from one codevector at the mean, each with a prior
    (weight) of its own, and duplicates a codevector along its principal axis
    when the temperature falls below its cluster's critical temperature
    (``lambda_max`` of the cluster's responsibility-weighted covariance),
    jumping the temperature from one transition to the next, until there are
    ``n_clusters``. A short cooling tail with ``method``'s responsibilities
    and Lloyd's algorithm follow, then two local searches: Hartigan's
    single-observation moves (each an exact decrease of ``J``), and merges of
    two clusters paired with cuts of a third across its principal axis,
    kept where ``J`` goes down (the user guide's annealing page has the
    details). Nothing in it is random: ``init``, ``n_init``, ``perturbation``,
    ``schedule``, ``n_temperatures`` and ``random_state`` do not apply (a
    ``UserWarning`` names those set away from their defaults, except
    ``random_state``, which pipelines and searches set everywhere).

    ``strategy="paper"`` is the fixed-k annealing of Sec. 7.8 of the paper:
    ``n_clusters`` centroids from ``init`` go down ``schedule``; at each
    temperature the previous centroids are perturbed slightly and the
    alternating update runs to convergence; Lloyd's algorithm then runs from
    the last centroids. The run with the lowest distortion ``J`` of the
    ``n_init`` is kept.

    ``n_clusters="auto"`` (mass-constrained only) chooses the number of
    clusters from one growth: the codebook splits one codevector at a time up
    to ``max_clusters``, the codebook of every ``k`` is polished (Lloyd's
    algorithm and Hartigan's moves, then cuts going up the path and merges
    going down) and scored by the ICL (the BIC plus twice the posterior's
    entropy) of two Gaussian mixtures fitted to its clusters (their shares as
    weights): a spherical one, and one with a principal axis per cluster; the
    ``k`` of smallest ICL is finished as an integer ``n_clusters`` would be.
    ``cluster_path_`` keeps every ``k`` (the user guide's page "Choosing the
    number of clusters").

    Parameters
    ----------
    n_clusters : int or "auto", default=8
        Number of centroids, or ``"auto"`` to choose it (see above).
    strategy : {"mass-constrained", "paper"}, default="mass-constrained"
        The annealing (see above).
    max_clusters : int, default=None
        The largest number of clusters ``n_clusters="auto"`` considers (required
        by it; capped at the number of samples of positive weight). Ignored
        for an integer ``n_clusters``.
    method : {"softmax", "entmax"}, default="softmax"
        Responsibilities used along the schedule (``"paper"``) or the cooling
        tail (``"mass-constrained"``; the growth is softmax with priors).
    alpha : float, default=1.5
        Entmax order (``method="entmax"`` only).
    schedule : "paper" or array-like of shape (n_temperatures,), default="paper"
        ``"paper"``: ``n_temperatures`` values of ``sigma^2`` geometric from
        ``1.2 lambda_max`` down to ``min(margin_min / 64, 0.12 lambda_max)``,
        ``margin_min`` being the smallest assignment margin at the starting
        centroids. Sec. 7.8 of the paper ends at the median, over its
        admissible Lloyd reference runs, of their smallest margin (the reproduction,
        :mod:`softkmeans.experiments`, does so); one fit has no reference runs.
        An array gives the temperatures ``sigma`` directly (each from 1e-150 to
        1e150, visited in the order given).
    n_temperatures : int, default=40
        Length of the ``"paper"`` schedule.
    perturbation : float, default=1e-3
        Standard deviation of the warm-start perturbation, relative to
        ``sqrt(lambda_max)``.
    max_iter : int, default=150
        Cap on the updates at each temperature and in the polish.
    init, n_init, tol, random_state, backend, n_threads, verbose, certify
        As in :class:`SoftKMeans` (``critical_sigma_`` is always set: the
        schedule starts from it).
    record_path : bool or "centers", default=False
        Keep one trajectory per temperature (and one for the polish) in ``path_``.

    Attributes
    ----------
    n_clusters_ : int
        The number of centroids fitted: ``n_clusters``, or the one chosen.
    cluster_path_ : list of dict
        With ``n_clusters="auto"``, one entry per number of clusters reached,
        increasing (``pandas.DataFrame(model.cluster_path_)`` makes a table of
        it; :func:`softkmeans.plotting.plot_cluster_path` draws it). Keys:
        ``n_clusters``; ``sigma_appeared`` and ``sigma_split``, the
        temperatures of the transition that made that many codevectors (``inf``
        for one) and of the next one; ``codebook``, the codevectors just before
        the next transition; ``centers`` and ``inertia``, the polished fit
        (Lloyd's algorithm and Hartigan's moves) from them or, where its ``J``
        is lower, from the fit at ``k - 1`` with its widest cluster cut in two
        or the fit at ``k + 1`` with its two closest clusters merged;
        ``weights`` and ``variances``, the spherical mixture's (each cluster's
        share of the weight and its variance per feature, ``J_j / (m_j d)``);
        ``log_likelihood``, the mixture's on the training data; ``bic``,
        ``-2 log_likelihood + (k (d + 2) - 1) log W``, ``W`` the total sample
        weight; ``entropy``, ``-sum_i w_i sum_j t_ij log t_ij`` of the
        mixture's posterior ``t``; ``icl``, ``bic + 2 entropy``; ``axes``,
        ``axis_variances`` and ``across_variances``, the principal-axis
        mixture's unit axes and its variances along them and per feature
        across them; ``axis_bic`` and ``axis_icl``, its criteria (with
        ``k (2 d + 2) - 1`` parameters; ``inf`` with one feature).
    cluster_centers_ : ndarray of shape ``(n_clusters_, n_features)``
        The polished centroids (a K-Means fixed point): each is the mean of its
        observations; one that the polish leaves without observations moves onto
        the observation farthest from its centroid, as in scikit-learn's ``KMeans``.
    labels_, inertia_, margins_, margin_min_, identification_sigma_, critical_sigma_, \
beta_, gap_, bounds_, n_features_in_, feature_names_in_
        As in :class:`SoftKMeans`, at the last temperature; with ``method="entmax"``,
        ``identification_sigma_`` and ``n_unidentified_`` as in :class:`EntmaxKMeans`
        (for its ``alpha``).
    path_ : list of dict
        The recorded trajectories, one per temperature (of the tail only, with
        ``"mass-constrained"``) and one for the polish (only with ``record_path``).
    objective_ : float
        The relaxed objective at ``cluster_centers_`` and the last temperature.
    sigma_ : float
        The last temperature of the schedule.
    temperatures_ : ndarray of shape (n_temperatures,)
        The temperatures visited (with ``"mass-constrained"``: those of the
        growth, then those of the tail).
    temperature_objectives_ : ndarray of shape (n_temperatures,)
        The relaxed objective reached at each temperature.
    temperature_n_iter_ : ndarray of shape (n_temperatures,)
        Updates spent at each temperature.
    lambda_max_ : float
        Largest eigenvalue of the (weighted) data covariance.
    n_iter_ : int
        Updates over the whole schedule and the polish.
    converged_ : bool
        Whether the polish met the stopping rule.

    See Also
    --------
    SoftKMeans, EntmaxKMeans : The same relaxations at one temperature.

    Examples
    --------
    >>> import numpy as np
    >>> from softkmeans import AnnealedKMeans
    >>> rng = np.random.RandomState(0)
    >>> X = np.vstack([rng.normal(c, 0.3, size=(30, 2)) for c in (0, 3, 6)])
    >>> model = AnnealedKMeans(n_clusters=3).fit(X)
    >>> bool(model.temperatures_[0] > model.temperatures_[-1])
    True
    >>> sorted(np.bincount(model.labels_).tolist())
    [30, 30, 30]
    """

    _parameter_constraints: dict = {
        **BaseSoftKMeans._parameter_constraints,
        "n_clusters": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "strategy": [StrOptions({"mass-constrained", "paper"})],
        "max_clusters": [Interval(Integral, 1, None, closed="left"), None],
        "method": [StrOptions({"softmax", "entmax"})],
        "alpha": [Interval(Real, 1, None, closed="neither")],
        "schedule": [StrOptions({"paper"}), "array-like"],
        "n_temperatures": [Interval(Integral, 1, None, closed="left")],
        "perturbation": [Interval(Real, 0, None, closed="left")],
    }

    def __init__(self, n_clusters=8, *, strategy="mass-constrained", max_clusters=None,
                 method="softmax", alpha=1.5, schedule="paper",
                 n_temperatures=40, perturbation=1e-3, init="k-means++", n_init="auto",
                 max_iter=150, tol=1e-6, random_state=None, backend="auto", n_threads=None,
                 verbose=0, record_path=False, certify=False):
        super().__init__(n_clusters, init=init, n_init=n_init, max_iter=max_iter, tol=tol,
                         random_state=random_state, backend=backend, n_threads=n_threads,
                         verbose=verbose, record_path=record_path, certify=certify)
        self.strategy = strategy
        self.max_clusters = max_clusters
        self.method = method
        self.alpha = alpha
        self.schedule = schedule
        self.n_temperatures = n_temperatures
        self.perturbation = perturbation

    def _check_params_vs_input(self, X, sample_weight):
        if self.n_clusters == "auto":
            self._check_auto(sample_weight)
        super()._check_params_vs_input(X, sample_weight)
        if self.strategy == "mass-constrained":
            self._n_init = 1  # deterministic: every start would give the same fit
            self._warn_unused_paper_params()
        if isinstance(self.schedule, str):
            return
        if np.ndim(self.schedule) != 1 or len(self.schedule) == 0:
            raise ValueError("schedule must be a non-empty 1-D array of temperatures sigma; got "
                             f"{self.schedule!r}.")
        sigmas = check_array(self.schedule, ensure_2d=False, dtype=np.float64, copy=True,
                             input_name="schedule")  # a copy: temperatures_ is fitted
        for sigma in sigmas:
            check_sigma(sigma, "every temperature of schedule")
        self._sigmas = sigmas

    def _check_auto(self, sample_weight):
        """``ValueError`` where ``n_clusters="auto"`` cannot apply; resolves its bound."""
        if self.strategy != "mass-constrained":
            raise ValueError("n_clusters='auto' needs strategy='mass-constrained' (the growth "
                             f"of the codebook); got strategy={self.strategy!r}.")
        if self.max_clusters is None:
            raise ValueError("n_clusters='auto' needs max_clusters, the largest number of "
                             "clusters to consider (an int >= 1).")
        n_positive = int(np.count_nonzero(sample_weight > 0))
        if n_positive == 0:
            raise ValueError("No sample has a positive sample_weight.")
        self._max_clusters = min(self.max_clusters, n_positive)

    def _prepare(self, engine, first_centers):
        lam = engine.lambda_max()
        self.lambda_max_ = lam
        self._prepared_critical = float(np.sqrt(lam))
        self._scale = np.sqrt(lam) if lam > 0 else 1.0
        self._relaxation = RelaxationSpec(self.method, 1.0, float(self.alpha))
        self._check_perturbation(engine)

    def _check_perturbation(self, engine):
        """``ValueError`` if perturbed centroids could lie so far out that distances overflow.

        A draw beyond :data:`_PERTURBATION_DRAWS` standard deviations has a
        probability below 1e-300.
        """
        d = engine.X.shape[1]
        reach = _PERTURBATION_DRAWS * self.perturbation * self._scale * np.sqrt(d)
        limit = np.sqrt(squared_norm_limit(engine.X.dtype))
        if not reach + np.sqrt(engine.x_sq.max(initial=0.0)) < limit:
            raise ValueError(
                f"perturbation={self.perturbation!r} (times sqrt(lambda_max) = "
                f"{self._scale:.3g}) would move centroids so far from the data that squared "
                f"distances overflow {np.dtype(engine.X.dtype).name}; it is a fraction of the "
                "data's spread, 1e-3 by default."
            )

    def _warn_unused_paper_params(self):
        """``UserWarning`` naming the parameters set away from their defaults that only
        ``strategy="paper"`` reads."""
        defaults = {"schedule": "paper", "n_temperatures": 40, "perturbation": 1e-3,
                    "init": "k-means++", "n_init": "auto"}
        changed = [name for name, default in defaults.items()
                   if not (isinstance(getattr(self, name), type(default))
                           and getattr(self, name) == default)]
        if changed:
            verb = "applies" if len(changed) == 1 else "apply"
            _warn(f"{', '.join(changed)} only {verb} to strategy='paper'; the mass-constrained "
                  "annealing grows its centroids from the data mean.", UserWarning)

    def _init_name(self):
        return None if self.strategy == "mass-constrained" else super()._init_name()

    def _init_centers(self, X, engine, rng):
        if self.strategy == "mass-constrained":
            return None  # the codebook grows from the data mean
        return super()._init_centers(X, engine, rng)

    def _schedule(self, engine, centers):
        if not isinstance(self.schedule, str):
            return self._sigmas
        margins = engine.estep(centers, HARD, with_sums=False).margins
        positive = engine.sample_weight > 0
        return paper_schedule(self._scale**2, float(margins[positive].min()),
                              self.n_temperatures)

    def _run(self, engine, centers, rng):
        self._path = None
        if self.n_clusters == "auto":
            run, self._path, _ = anneal_choosing_k(
                engine, self._relaxation, self._max_clusters, max_iter=self.max_iter,
                tol=self.tol, record_path=self.record_path, verbose=self._progress)
            return run
        if self.strategy == "mass-constrained":
            return anneal_mass_constrained(engine, self._relaxation, self.n_clusters,
                                           max_iter=self.max_iter, tol=self.tol,
                                           record_path=self.record_path, verbose=self._progress)
        return anneal(engine, centers, self._relaxation, self._schedule(engine, centers), rng,
                      perturbation=self.perturbation * self._scale, max_iter=self.max_iter,
                      tol=self.tol, record_path=self.record_path, verbose=self._progress)

    def _run_key(self, run):
        return run.stats.inertia

    def _store_run(self, run, dtype, engine):
        super()._store_run(run, dtype, engine)
        self.objective_ = engine.estep(run.centers, run.spec, with_sums=False).objective
        self.temperatures_ = run.sigmas
        self.temperature_objectives_ = run.stage_objectives
        self.temperature_n_iter_ = run.stage_iters
        self.n_clusters_ = len(run.centers)
        self.__dict__.pop("cluster_path_", None)  # of an earlier fit with n_clusters="auto"
        if self._path is not None:
            self.cluster_path_ = [point.as_dict() for point in self._path]
        self._path = None  # the polished runs hold the engine's statistics
