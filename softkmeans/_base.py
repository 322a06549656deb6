"""The estimator that SoftKMeans, EntmaxKMeans and AnnealedKMeans share.

It validates, initializes, loops over ``n_init`` starts, and serves
``predict``, ``predict_proba``, ``transform`` and ``score``. Subclasses declare
their parameters and implement two hooks: ``_prepare`` (resolve the
temperature once the data and the first starting centroids are known) and
``_run`` (one run from one start). The numerics live in :mod:`softkmeans._core`
and :mod:`softkmeans._backends`.
"""

import dataclasses
import sys
import warnings
from abc import abstractmethod
from numbers import Integral, Real

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    TransformerMixin,
)
from sklearn.cluster import kmeans_plusplus
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_array, check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from ._backends import BACKENDS, get_engine
from ._backends._namespace import is_cupy_array, like_input, to_numpy
from ._core.responsibilities import SIGMA_MAX, SIGMA_MIN, RelaxationSpec
from ._core.seeding import separate_coincident
from ._core.temperature import AUTO_SIGMA_SHRINK, auto_sigma, exact_zero_distances, lambda_max
from ._validation import (
    N_THREADS_CONSTRAINT,
    canonical_csr,
    check_init_magnitude,
    check_sparse_structure,
)
from .diagnostics import _fitted_certificate, _fitted_diagnostics
from .exceptions import CriticalTemperatureWarning

__all__ = ["BaseSoftKMeans", "FixedTemperatureKMeans"]

_HARD = RelaxationSpec("hard")

#: A fitted softmax temperature at or above this fraction of the critical one warns.
_NEAR_CRITICAL = 0.9


#: Packages whose frames a warning skips to reach the user's line (scikit-learn wraps
#: ``fit_transform`` and calls ``fit`` from meta-estimators, through joblib in searches).
_LIBRARY_PACKAGES = ("softkmeans.", "sklearn.", "joblib.")


def _warn(message, category):
    """``warnings.warn`` attributed to the first caller outside softkmeans and scikit-learn.

    A fixed ``stacklevel`` would point into a library wherever a subclass or
    a wrapper adds a frame between the user's call and the warning.
    """
    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_globals.get("__name__", "").startswith(_LIBRARY_PACKAGES):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def _at_stored_precision(run, dtype, engine):
    """``run`` at its centroids rounded to ``dtype``, as ``cluster_centers_`` keeps them.

    A float32 fit ends at float64 centroids; its statistics (labels,
    inertia, objective, margins) and diagnostics are taken again at the
    rounded ones, one more pass, so that they describe the stored model: what
    ``predict``, ``score`` and :mod:`softkmeans.diagnostics` compute from it.
    """
    rounded = run.centers.astype(dtype).astype(np.float64)
    if bool((rounded == run.centers).all()):
        return run
    spec = RelaxationSpec("hard") if run.sigmas is not None else run.spec  # annealing's polish
    return dataclasses.replace(run, centers=rounded, stats=engine.estep(rounded, spec))


class BaseSoftKMeans(ClassNamePrefixFeaturesOutMixin, TransformerMixin, ClusterMixin,
                     BaseEstimator):
    """Shared machinery of the soft K-Means estimators (not for direct use)."""

    _parameter_constraints: dict = {
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "init": [StrOptions({"k-means++", "random"}), callable, "array-like"],
        "n_init": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "random_state": ["random_state"],
        "backend": [StrOptions({"auto", *BACKENDS})],
        "n_threads": N_THREADS_CONSTRAINT,
        "verbose": ["verbose"],
        "record_path": ["boolean", StrOptions({"centers"})],
    }

    def __init__(self, n_clusters=8, *, init="k-means++", n_init="auto", max_iter=300,
                 tol=1e-6, random_state=None, backend="auto", n_threads=None, verbose=0,
                 record_path=False):
        self.n_clusters = n_clusters
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.backend = backend
        self.n_threads = n_threads
        self.verbose = verbose
        self.record_path = record_path

    # ------------------------------------------------------------------ hooks
    @abstractmethod
    def _prepare(self, engine, first_centers):
        """Resolve data-dependent settings before the runs.

        Sets the temperature and ``self._critical_sigma``, ``sqrt(lambda_max)``
        of the data, which the fitted diagnostics reuse.
        """

    @abstractmethod
    def _run(self, engine, centers, rng):
        """One run from ``centers``; returns a :class:`~softkmeans._core.optimize.RunResult`."""

    def _run_key(self, run):
        """Smaller is better when choosing among ``n_init`` runs."""
        return run.stats.objective

    # ------------------------------------------------------------- validation
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _validate_X(self, X, reset):
        if is_cupy_array(X):
            from ._backends._cupy import check_cupy_array

            X = check_cupy_array(self, X, reset)
        else:
            check_sparse_structure(X)  # before scipy or a kernel reads its indices
            X = validate_data(self, X, reset=reset, accept_sparse="csr",
                              dtype=[np.float64, np.float32], order="C")
        return canonical_csr(X)

    def _check_params_vs_input(self, X, sample_weight):
        """Data-dependent checks that ``_parameter_constraints`` cannot express."""
        n_samples = X.shape[0]
        if n_samples < self.n_clusters:
            raise ValueError(
                f"n_samples={n_samples} should be >= n_clusters={self.n_clusters}."
            )
        n_positive = int(np.count_nonzero(sample_weight > 0))
        if n_positive < self.n_clusters:
            raise ValueError(
                f"Only {n_positive} samples have a positive sample_weight, fewer than "
                f"n_clusters={self.n_clusters}."
            )
        with np.errstate(over="ignore"):
            total_weight = sample_weight.sum()
        if not np.isfinite(total_weight):
            raise ValueError(
                "sample_weight sums to more than the largest float64: divide the weights by a "
                "constant (the fitted centroids do not depend on their scale)."
            )
        self._n_init = 1
        if self.n_init != "auto":
            self._n_init = self.n_init
        elif callable(self.init) or (isinstance(self.init, str) and self.init == "random"):
            self._n_init = 10  # as scikit-learn's KMeans
        if _is_array_init(self.init):
            init = check_array(self.init, dtype=[np.float64, np.float32], copy=True)
            if init.shape != (self.n_clusters, X.shape[1]):
                raise ValueError(
                    f"init has shape {init.shape}; expected (n_clusters, n_features) = "
                    f"({self.n_clusters}, {X.shape[1]})."
                )
            if self._n_init != 1:
                _warn(
                    f"Explicit initial centroids passed: performing one initialization in "
                    f"{type(self).__name__} instead of n_init={self._n_init}.",
                    RuntimeWarning,
                )
            self._n_init = 1
            self._init_array = init.astype(np.float64)
            check_init_magnitude(self._init_array, X.dtype)

    # ----------------------------------------------------------------- fitting
    def _init_centers(self, X, engine, rng):
        """Starting centroids from ``init``, coinciding ones separated (see
        :func:`softkmeans._core.seeding.separate_coincident`)."""
        return separate_coincident(engine, self._draw_init(X, engine, rng))

    def _draw_init(self, X, engine, rng):
        """Starting centroids (float64) from the ``init`` parameter.

        The random draws use the weights relative to the largest: the same
        draws at any scale of the weights, whose sums could otherwise overflow.
        k-means++ runs on the data as the engine shifts them for their
        distances (a shifted copy of X, as scikit-learn's ``KMeans`` centres
        its data), so that data far from the origin get the same seeds as
        centred ones; the seeds are X's own rows.
        """
        k = self.n_clusters
        w = engine.sample_weight / engine.sample_weight.max()
        if _is_array_init(self.init):
            return self._init_array.copy()
        if callable(self.init):
            centers = check_array(self.init(X, k, random_state=rng), dtype=np.float64)
            if centers.shape != (k, X.shape[1]):
                raise ValueError(
                    f"The init callable returned shape {centers.shape}; expected "
                    f"({k}, {X.shape[1]})."
                )
            check_init_magnitude(centers, X.dtype, "The init callable's result")
            return centers
        if self.init == "random":
            rows = rng.choice(X.shape[0], size=k, replace=False, p=w / w.sum())
            return np.vstack([engine.row(i) for i in rows])
        shift = engine.distance_shift
        data = engine.X if shift is None else engine.X - shift.astype(X.dtype)
        _, rows = kmeans_plusplus(
            data, k, sample_weight=w, x_squared_norms=engine.distance_norms().astype(X.dtype),
            random_state=rng,
        )
        return np.vstack([engine.row(i) for i in rows])

    def fit(self, X, y=None, sample_weight=None):
        """Compute the clustering.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data; CSR sparse matrices and pandas frames are accepted,
            float32 and float64 are kept.
        y : Ignored
            Not used, present for API consistency.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weight of each observation; None gives equal weights.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        self._validate_params()
        X = self._validate_X(X, reset=True)
        sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64,
                                             ensure_non_negative=True)
        self._check_params_vs_input(X, sample_weight)
        rng = check_random_state(self.random_state)
        engine = get_engine(self.backend, X, sample_weight, self.n_threads)
        best = None
        for i in range(self._n_init):
            if self.verbose and self._n_init > 1:
                print(f"initialization {i + 1}/{self._n_init}")
            centers = self._init_centers(X, engine, rng)
            if i == 0:
                self._prepare(engine, centers)
            run = self._run(engine, centers, rng)
            if best is None or self._run_key(run) < self._run_key(best):
                best = run
        self._store_run(_at_stored_precision(best, X.dtype, engine), X.dtype, engine)
        if not self.converged_:
            _warn(
                f"{type(self).__name__} did not converge: the kept run stopped at "
                f"max_iter={self.max_iter} with a step above tol={self.tol}. Increase max_iter "
                "or tol, or check the temperature.",
                ConvergenceWarning,
            )
        _warn_if_clusters_merged(self.labels_, self.n_clusters)
        for name in ("cluster_centers_", "labels_", "margins_"):
            setattr(self, name, like_input(getattr(self, name), X))
        return self

    def _store_run(self, run, dtype, engine):
        stats = run.stats
        self.cluster_centers_ = run.centers.astype(dtype)
        self.labels_ = stats.labels
        self.inertia_ = stats.inertia
        self.n_iter_ = run.n_iter
        self.converged_ = run.converged
        self.sigma_ = float(run.spec.sigma)
        self._final_spec = run.spec
        self.objective_ = stats.objective
        self.margins_ = stats.margins
        self.margin_min_ = float(stats.margins.min())
        self._n_features_out = self.n_clusters
        for name, value in _fitted_diagnostics(engine, run, self._critical_sigma).items():
            setattr(self, name, value)
        self._bounds, self._bounds_source = None, (engine, run)
        if self.record_path:
            self.path_ = [stage.as_dict() for stage in run.stages]

    @property
    def bounds_(self):
        """The :class:`~softkmeans.diagnostics.Certificate` of the fitted centroids.

        Computed on first access (three or four passes over the training
        data, which the model references until then) and kept; a model
        unpickled before that has none:
        ``softkmeans.diagnostics.certify(X, model.cluster_centers_, model.sigma_)``
        gives it from the training data.
        """
        if getattr(self, "_bounds", None) is None:
            source = getattr(self, "_bounds_source", None)
            if source is None:
                raise AttributeError(
                    f"This {type(self).__name__} has no bounds_: it is not fitted, or was "
                    "unpickled before bounds_ was read; softkmeans.diagnostics.certify(X, "
                    "model.cluster_centers_, model.sigma_) computes it from the training data.")
            self._bounds, self._bounds_source = _fitted_certificate(*source), None
        return self._bounds

    def __getstate__(self):
        """The state to pickle, without the reference to the training data (``bounds_``)."""
        state = dict(super().__getstate__())
        state["_bounds_source"] = None
        return state

    def fit_predict(self, X, y=None, sample_weight=None):
        """Fit, then return the index of the nearest centroid of each sample.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : Ignored
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        return self.fit(X, sample_weight=sample_weight).labels_

    def fit_transform(self, X, y=None, sample_weight=None):
        """Fit, then return the distances of each sample to every centroid.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : Ignored
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        distances : ndarray of shape (n_samples, n_clusters)
        """
        return self.fit(X, sample_weight=sample_weight).transform(X)

    # -------------------------------------------------------------- inference
    def _engine_for(self, X):
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        return X, get_engine(self.backend, X, n_threads=self.n_threads,
                             centers=self._centers64())

    def _centers64(self):
        return np.asarray(to_numpy(self.cluster_centers_), dtype=np.float64)

    def predict(self, X):
        """Index of the nearest centroid of each sample.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        X, engine = self._engine_for(X)
        return like_input(engine.estep(self._centers64(), _HARD, with_sums=False).labels, X)

    def predict_proba(self, X):
        """Responsibilities of every centroid for each sample.

        They are the estimator's own assignments at its final temperature
        ``sigma_``: softmax weights for :class:`SoftKMeans`, entmax weights
        (with exact zeros) for :class:`EntmaxKMeans`.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_clusters)
            Rows sum to 1.
        """
        X, engine = self._engine_for(X)
        return engine.responsibilities(self._centers64(), self._final_spec, dtype=X.dtype)

    def transform(self, X):
        """Euclidean distance of each sample to every centroid (as ``KMeans.transform``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        distances : ndarray of shape (n_samples, n_clusters)
        """
        X, engine = self._engine_for(X)
        return engine.sq_distances(self._centers64(), dtype=X.dtype, sqrt=True)

    def score_samples(self, X):
        """Log-density of each sample under the model's Gaussian mixture.

        The mixture has the fitted centroids as means, equal weights and the
        isotropic variance ``sigma_**2``, the density whose normalized posterior
        is the softmax assignment layer:

        ``log p(x) = log sum_j exp(-||x - mu_j||^2 / (2 sigma^2)) - log k
        - (d / 2) log(2 pi sigma^2)``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        log_density : ndarray of shape (n_samples,)
        """
        X, engine = self._engine_for(X)
        sigma = self.sigma_
        lse = engine.log_sum_exp(self._centers64(), sigma)
        n_centroids = self.cluster_centers_.shape[0]  # fitted, whatever set_params changed
        return lse - np.log(n_centroids) - 0.5 * X.shape[1] * np.log(2 * np.pi * sigma**2)

    def score(self, X, y=None, sample_weight=None):
        """Mean log-density of X under the model (see :meth:`score_samples`).

        Unlike ``-F_sigma`` on the training data, which grows monotonically with
        sigma (its derivative in ``2 sigma^2`` is the total entropy of the
        responsibilities), this held-out log-likelihood peaks where ``sigma``
        matches the spread of the clusters, so ``GridSearchCV`` over ``sigma``
        selects the temperature at which the soft assignments describe the data
        best.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : Ignored
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        score : float
        """
        values = to_numpy(self.score_samples(X))
        weights = _check_sample_weight(sample_weight, values[:, None], dtype=np.float64,
                                       ensure_non_negative=True)
        # relative weights (validation refused all zeros): huge ones would overflow their sum
        return float(np.average(values, weights=weights / weights.max()))


def _warn_if_clusters_merged(labels, n_clusters):
    """Warn, as scikit-learn's ``KMeans`` does, when fewer clusters than asked hold a label.

    A centroid is the nearest to no observation when it coincides with another
    (on duplicate points, or merged at a high temperature: ties go to the
    first) or when it kept no mass (``empty_cluster="keep"``).
    """
    found = np.unique(labels).size
    if found < n_clusters:
        _warn(
            f"Number of distinct clusters ({found}) found smaller than n_clusters "
            f"({n_clusters}): some centroids are the nearest to no observation (duplicate "
            "points in X, centroids merged at a high temperature, or an empty cluster kept "
            "in place).",
            ConvergenceWarning,
        )


def _is_array_init(init):
    return not isinstance(init, str) and not callable(init)


class FixedTemperatureKMeans(BaseSoftKMeans):
    """A soft K-Means at one temperature ``sigma`` (not for direct use).

    ``sigma="auto"`` starts at :func:`softkmeans._core.temperature.auto_sigma`
    of the first starting centroids and is re-estimated at every update as the
    shared variance of the isotropic mixture (``fit_sigma`` of
    :func:`softkmeans._core.optimize.alternating`); ``sigma_`` is the last value.
    """

    _parameter_constraints: dict = {
        **BaseSoftKMeans._parameter_constraints,
        "sigma": [StrOptions({"auto"}), Interval(Real, SIGMA_MIN, SIGMA_MAX, closed="both")],
    }

    def __init__(self, n_clusters=8, *, sigma="auto", init="k-means++", n_init="auto",
                 max_iter=300, tol=1e-6, random_state=None, backend="auto", n_threads=None,
                 verbose=0, record_path=False):
        super().__init__(n_clusters, init=init, n_init=n_init, max_iter=max_iter, tol=tol,
                         random_state=random_state, backend=backend, n_threads=n_threads,
                         verbose=verbose, record_path=record_path)
        self.sigma = sigma

    @abstractmethod
    def _spec(self, sigma):
        """The :class:`RelaxationSpec` of this estimator at temperature ``sigma``."""

    def _prepare(self, engine, first_centers):
        lam = lambda_max(engine.X, engine.sample_weight)
        self._critical_sigma = float(np.sqrt(lam))
        self._sigma_shrink = AUTO_SIGMA_SHRINK if self.sigma == "auto" else None
        if self._sigma_shrink:
            start = engine.estep(first_centers, _HARD, with_sums=False)
            dmin = exact_zero_distances(engine.X, first_centers, start.labels, start.dmin,
                                        engine.x_sq, engine.unit_roundoff)
            sigma = auto_sigma(dmin, engine.sample_weight, engine.X.shape[1],
                               fallback_scale=lam)
            if not np.any(dmin[engine.sample_weight > 0] > 0):
                # every observation on a starting centroid: the likelihood grows without
                # bound as sigma -> 0, so the fallback temperature stays
                self._sigma_shrink = None
        else:
            sigma = float(self.sigma)
        self._resolved_spec = self._spec(sigma)

    def _run_key(self, run):
        """With ``sigma="auto"`` each run has its own temperature: the mixture's likelihood
        (up to constants) compares them."""
        if not self._sigma_shrink:
            return super()._run_key(run)
        two_sigma_sq = 2.0 * run.spec.sigma**2
        total = float(run.stats.masses.sum())
        return run.stats.objective / two_sigma_sq + 0.5 * run.centers.shape[1] * total * np.log(
            two_sigma_sq)

    def _store_run(self, run, dtype, engine):
        super()._store_run(run, dtype, engine)
        # One centroid, or data on one point: the mean is the answer at every temperature.
        collapse_matters = (self._resolved_spec.kind == "softmax" and self.n_clusters > 1
                            and self._critical_sigma > 0)
        if collapse_matters and self.sigma_ >= _NEAR_CRITICAL * self._critical_sigma:
            where = "above" if self.sigma_ > self._critical_sigma else "within 10% of"
            _warn(
                f"sigma={self.sigma_:.4g} is {where} the critical temperature sqrt(lambda_max)="
                f"{self._critical_sigma:.4g} of the data: the centroids may collapse to the "
                "data mean (Prop. 9). Use a smaller sigma.",
                CriticalTemperatureWarning,
            )
