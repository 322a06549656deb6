"""The estimator that SoftKMeans, EntmaxKMeans and AnnealedKMeans share.

It validates, initializes, loops over ``n_init`` starts, and serves
``predict``, ``predict_proba``, ``transform`` and ``score``. Subclasses declare
their parameters and implement two hooks: ``_prepare`` (resolve the
temperature once the data and the first starting centroids are known) and
``_run`` (one run from one start). The numerics live in :mod:`softkmeans._core`
and :mod:`softkmeans._engines`.
"""

import dataclasses
import functools
import sys
import warnings
from abc import abstractmethod
from contextlib import nullcontext
from numbers import Integral, Real

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_array, check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _check_sample_weight, check_is_fitted

from ._core.optimize import StoppingRule
from ._core.progress import Progress
from ._core.reassignment import Reassign
from ._core.responsibilities import HARD, SIGMA_MAX, SIGMA_MIN
from ._core.seeding import separate_coincident
from ._core.streaming import start_stream, stream_step
from ._core.temperature import (
    AUTO_SIGMA_SHRINK,
    auto_sigma_at,
    lambda_max_floor,
    relative_weighted_average,
)
from ._dask import is_dask_collection, over_dask_blocks
from ._engines import BACKENDS, get_engine
from ._engines._blas import one_blas_thread
from ._engines._namespace import (
    host_dtype,
    like_input,
    to_numpy,
)
from ._validation import (
    N_THREADS_CONSTRAINT,
    check_fitted_namespace,
    check_init_magnitude,
    validate_X,
)
from .diagnostics import _fitted_certificate, _fitted_diagnostics
from .exceptions import CriticalTemperatureWarning

__all__ = ["BaseSoftKMeans", "FixedTemperatureKMeans"]


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

    :func:`~softkmeans._core.optimize.alternating` rounds its last update
    itself; after gradient descent or an annealing a float32 fit ends at
    float64 centroids, and its statistics (labels, inertia, objective,
    margins) and diagnostics are taken again at the rounded ones, one more
    pass, so that they describe the stored model: what ``predict``, ``score``
    and :mod:`softkmeans.diagnostics` compute from it.
    """
    rounded = run.centers.astype(dtype).astype(np.float64)
    if bool((rounded == run.centers).all()):
        return run
    spec = HARD if run.sigmas is not None else run.spec  # annealing's polish
    return dataclasses.replace(run, centers=rounded, stats=engine.estep(rounded, spec))


def _unchanged_on_failure(method):
    """Run ``method`` so that an exception (or an interrupt) leaves the estimator as it was.

    A fit sets attributes as it goes (``n_features_in_`` at validation, the
    temperature at preparation); one that fails restores the state it found:
    unfitted, or fitted by the last successful call.
    """
    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        state = dict(self.__dict__)
        try:
            return method(self, *args, **kwargs)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(state)
            raise
    return guarded


class BaseSoftKMeans(ClassNamePrefixFeaturesOutMixin, TransformerMixin, ClusterMixin,
                     BaseEstimator):
    """Shared machinery of the soft K-Means estimators (not for direct use)."""

    #: Whether ``fit`` takes a dask collection (:func:`softkmeans._dask.fitting.fit_blocks`).
    _fits_blocks = False

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
        "certify": ["boolean"],
    }

    def __init__(self, n_clusters=8, *, init="k-means++", n_init="auto", max_iter=300,
                 tol=1e-6, random_state=None, backend="auto", n_threads=None, verbose=0,
                 record_path=False, certify=False):
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
        self.certify = certify

    # ------------------------------------------------------------------ hooks
    @abstractmethod
    def _prepare(self, engine, first_centers):
        """Resolve data-dependent settings before the runs.

        Sets the temperature and ``self._prepared_critical``: ``sqrt(lambda_max)``
        of the data where the preparation needed it, else None.
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
        tags.array_api_support = True
        return tags

    def _check_params_vs_input(self, X, sample_weight):
        """Data-dependent checks that ``_parameter_constraints`` cannot express."""
        n_samples = X.shape[0]
        chooses_k = self.n_clusters == "auto"  # a subclass that chooses it checks its bound
        if not chooses_k and n_samples < self.n_clusters:
            raise ValueError(
                f"n_samples={n_samples} should be >= n_clusters={self.n_clusters}."
            )
        n_positive = int(np.count_nonzero(sample_weight > 0))
        if not chooses_k and n_positive < self.n_clusters:
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
        if _is_array_init(self.init) and self.n_clusters != "auto":
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
            check_init_magnitude(self._init_array, _dtype(X))

    # ----------------------------------------------------------------- fitting
    def _init_centers(self, X, engine, rng):
        """Starting centroids from ``init``, coinciding ones separated (see
        :func:`softkmeans._core.seeding.separate_coincident`)."""
        return separate_coincident(engine, self._draw_init(X, engine, rng))

    def _draw_init(self, X, engine, rng):
        """Starting centroids (float64) from the ``init`` parameter: the array, the
        callable's result, or the engine's draw (``engine.draw_seeds``: k-means++ or
        weighted rows in memory, k-means|| or weighted rows over dask blocks)."""
        k = self.n_clusters
        if _is_array_init(self.init):
            return self._init_array.copy()
        if callable(self.init):
            centers = check_array(self.init(X, k, random_state=rng), dtype=np.float64)
            if centers.shape != (k, X.shape[1]):
                raise ValueError(
                    f"The init callable returned shape {centers.shape}; expected "
                    f"({k}, {X.shape[1]})."
                )
            check_init_magnitude(centers, _dtype(X), "The init callable's result")
            return centers
        return engine.draw_seeds(self.init, k, rng)

    def _init_name(self):
        """What ``init`` draws, for ``verbose`` (None: the fit draws no start)."""
        if _is_array_init(self.init):
            return "the init array"
        return "the init callable" if callable(self.init) else str(self.init)

    @_unchanged_on_failure
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, sample_weight=None):
        """Compute the clustering.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array} of shape (n_samples, n_features)
            Training data; CSR sparse matrices, pandas frames and (SoftKMeans,
            EntmaxKMeans) dask arrays and DataFrames are accepted, float32 and
            float64 are kept. A dask collection is fitted block by block (see the
            user guide's page on scaling): ``init="k-means++"`` is then k-means||,
            and ``labels_`` and ``margins_`` are dask arrays. Under
            ``sklearn.set_config(array_api_dispatch=True)`` an array of another
            array API namespace (PyTorch, CuPy, array-api-strict) is fitted in
            that namespace and on its device, and the fitted arrays and the
            inference methods' results are arrays of that namespace and device;
            inference then takes only inputs of that namespace and device.
        y : Ignored
            Not used, present for API consistency.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weight of each observation; None gives equal weights. A
            dask array for a dask X.

        Returns
        -------
        self : object
            The fitted estimator. A fit that raises leaves the estimator as it
            was before the call.
        """
        if is_dask_collection(X):
            from ._dask.fitting import fit_blocks

            return fit_blocks(self, X, sample_weight)
        X = validate_X(X, self, reset=True)
        sample_weight = _host_sample_weight(sample_weight, X)
        self._check_params_vs_input(X, sample_weight)
        self._fit_engine(X, get_engine(self.backend, X, sample_weight, self.n_threads))
        self._move_results_to(X)
        return self

    def _move_results_to(self, X):
        """The fitted arrays (host numpy) in the namespace and on the device of X."""
        for name, value in list(vars(self).items()):
            if name.endswith("_") and not name.startswith("_") and isinstance(value, np.ndarray):
                setattr(self, name, like_input(value, X))

    def _fit_engine(self, X, engine):
        """The ``n_init`` runs on ``engine`` (bound to the validated X); stores the best."""
        rng = check_random_state(self.random_state)
        dtype = self._stored_dtype = _dtype(X)  # of cluster_centers_: the runs end rounded to it
        progress = self._progress = Progress(self.verbose)
        best = None
        for i in range(self._n_init):
            starts = f" {i + 1}/{self._n_init}" if self._n_init > 1 else ""
            if self._init_name() is not None:
                progress.say(f"Initialization{starts}: {self._init_name()} on {X.shape[0]} rows")
            centers = self._init_centers(X, engine, rng)
            if centers is not None:
                progress.say("Initialization complete")
            if i == 0:
                self._prepare(engine, centers)
            run = self._run(engine, centers, rng)
            if best is None or self._run_key(run) < self._run_key(best):
                best = run
        run = _at_stored_precision(best, dtype, engine)
        run = dataclasses.replace(run, stats=engine.persist(run.stats))
        self._store_run(run, dtype, engine)
        del self._progress
        if not self.converged_:
            _warn(
                f"{type(self).__name__} did not converge: the kept run stopped at "
                f"max_iter={self.max_iter} before its stopping rule held at tol={self.tol}. "
                "Increase max_iter or tol, or check the temperature.",
                ConvergenceWarning,
            )
        _warn_if_clusters_merged(self.labels_, len(self.cluster_centers_))

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
        self._n_features_out = len(run.centers)
        for name, value in _fitted_diagnostics(engine, run).items():
            setattr(self, name, value)
        self.__dict__.pop("critical_sigma_", None)
        self.__dict__.pop("bounds_", None)
        if self._prepared_critical is not None:
            self.critical_sigma_ = self._prepared_critical
        if self.certify:
            self._compute_critical_sigma(engine)
            self.bounds_ = _fitted_certificate(engine, run)
        self._stream = None
        self.__dict__.pop("n_steps_", None)  # of a stream that this fit replaces
        if self.record_path:
            self.path_ = [stage.as_dict() for stage in run.stages]

    def __getattr__(self, name):
        """Say how to get the diagnostics that a fit computes only on request."""
        if name in _ON_REQUEST and "cluster_centers_" in self.__dict__:
            raise AttributeError(
                f"This {type(self).__name__} has no {name}: a fit computes it with "
                f"certify=True (a partial_fit never does); from the training data X, "
                f"{_ON_REQUEST[name]} gives it.")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _compute_critical_sigma(self, engine):
        """``critical_sigma_``, read from the training data unless the fit already did."""
        if "critical_sigma_" not in self.__dict__:
            self.critical_sigma_ = float(np.sqrt(engine.lambda_max()))
        return self.critical_sigma_

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
    def _engine_for(self, X, method):
        """Validated X and an engine on it, for the inference method ``method``."""
        check_is_fitted(self)
        check_fitted_namespace(self, X, method)
        X = validate_X(X, self, reset=False)
        return X, get_engine(self.backend, X, n_threads=self.n_threads,
                             centers=self._centers64())

    def _centers64(self):
        return np.asarray(to_numpy(self.cluster_centers_), dtype=np.float64)

    @over_dask_blocks
    def predict(self, X):
        """Index of the nearest centroid of each sample.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array} of shape (n_samples, n_features)
            A dask array (or DataFrame) gives a lazy dask array chunked like
            its rows.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        X, engine = self._engine_for(X, "predict")
        return like_input(engine.estep(self._centers64(), HARD, with_sums=False).labels, X)

    @over_dask_blocks
    def predict_proba(self, X):
        """Responsibilities of every centroid for each sample.

        They are the estimator's own assignments at its final temperature
        ``sigma_``: softmax weights for :class:`SoftKMeans`, entmax weights
        (with exact zeros) for :class:`EntmaxKMeans`.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array} of shape (n_samples, n_features)
            A dask array (or DataFrame) gives a lazy dask array chunked like
            its rows.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_clusters)
            Rows sum to 1.
        """
        X, engine = self._engine_for(X, "predict_proba")
        return like_input(
            engine.responsibilities(self._centers64(), self._final_spec, dtype=_dtype(X)), X)

    @over_dask_blocks
    def transform(self, X):
        """Euclidean distance of each sample to every centroid (as ``KMeans.transform``).

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array} of shape (n_samples, n_features)
            A dask array (or DataFrame) gives a lazy dask array chunked like
            its rows.

        Returns
        -------
        distances : ndarray of shape (n_samples, n_clusters)
        """
        X, engine = self._engine_for(X, "transform")
        return like_input(engine.sq_distances(self._centers64(), dtype=_dtype(X), sqrt=True), X)

    @over_dask_blocks
    def score_samples(self, X):
        """Log-density of each sample under the model's Gaussian mixture.

        The mixture has the fitted centroids as means, equal weights and the
        isotropic variance ``sigma_**2``, the density whose normalized posterior
        is the softmax assignment layer:

        ``log p(x) = log sum_j exp(-||x - mu_j||^2 / (2 sigma^2)) - log k
        - (d / 2) log(2 pi sigma^2)``.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array} of shape (n_samples, n_features)
            A dask array (or DataFrame) gives a lazy dask array chunked like
            its rows.

        Returns
        -------
        log_density : ndarray of shape (n_samples,)
        """
        X, engine = self._engine_for(X, "score_samples")
        sigma = self.sigma_
        lse = engine.log_sum_exp(self._centers64(), sigma)
        n_centroids = self.cluster_centers_.shape[0]  # fitted, whatever set_params changed
        log_norm = float(np.log(n_centroids) + 0.5 * X.shape[1] * np.log(2 * np.pi * sigma**2))
        return like_input(lse - log_norm, X)

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
        values = self.score_samples(X)
        if is_dask_collection(values):
            from ._dask.fitting import weighted_mean

            return weighted_mean(values, sample_weight)
        values = np.asarray(to_numpy(values))
        weights = _host_sample_weight(sample_weight, values[:, None])
        return relative_weighted_average(values, weights)  # validation refused all zeros


def _dtype(a):
    """The numpy dtype (float32 or float64) of validated data or centroids of any namespace."""
    return host_dtype(a.dtype)


def _host_sample_weight(sample_weight, X):
    """``sample_weight`` (of any namespace, or None) validated for X as host float64.

    The engines keep the weights on the host in float64 whatever the namespace
    of X, which gives only their number: scikit-learn sees a zero-width host
    stand-in (it asks a CuPy sparse matrix for a device that it does not have).
    """
    return _check_sample_weight(to_numpy(sample_weight), np.empty((X.shape[0], 0)),
                                dtype=np.float64, ensure_non_negative=True)


def _warn_if_clusters_merged(labels, n_clusters):
    """Warn, as scikit-learn's ``KMeans`` does, when fewer clusters than asked hold a label.

    A centroid is the nearest to no observation when it coincides with another
    (on duplicate points, or merged at a high temperature: ties go to the
    first) or when it kept no mass (``empty_cluster="keep"``).
    """
    found = int(np.count_nonzero(np.bincount(labels, minlength=n_clusters)))
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
    ``partial_fit`` runs the same update online (:mod:`softkmeans._core.streaming`).
    """

    _fits_blocks = True
    _parameter_constraints: dict = {
        **BaseSoftKMeans._parameter_constraints,
        "sigma": [StrOptions({"auto"}), Interval(Real, SIGMA_MIN, SIGMA_MAX, closed="both")],
        "decay": [Interval(Real, 0, 1, closed="both")],
        "reassignment_ratio": [Interval(Real, 0, 1, closed="both")],
    }

    def __init__(self, n_clusters=8, *, sigma="auto", init="k-means++", n_init="auto",
                 max_iter=300, tol=1e-4, random_state=None, backend="auto", n_threads=None,
                 verbose=0, record_path=False, certify=False, decay=1.0,
                 reassignment_ratio=0.01):
        super().__init__(n_clusters, init=init, n_init=n_init, max_iter=max_iter, tol=tol,
                         random_state=random_state, backend=backend, n_threads=n_threads,
                         verbose=verbose, record_path=record_path, certify=certify)
        self.sigma = sigma
        self.decay = decay
        self.reassignment_ratio = reassignment_ratio

    def _fit_engine(self, X, engine):
        # BLAS held at one thread over a numba fit, as KMeans holds it over Lloyd's loop:
        # numpy's products outside the passes (the rows' weighted norms, k-means++'s
        # distances) would split their sums by its thread count, and the fit's last bits
        # would follow. The numpy engine's passes are BLAS products that its threads speed.
        with one_blas_thread() if engine.name == "numba" else nullcontext():
            super()._fit_engine(X, engine)

    def _empty_rule(self):
        """What an update does with a centroid without mass: "keep" or "reseed"."""
        return "keep"

    def _reassign(self, rng):
        """The relocation of abandoned centroids of one run (None when turned off)."""
        ratio = float(self.reassignment_ratio)
        return Reassign(ratio, rng) if ratio > 0 else None

    def _stopping_rule(self):
        """The :class:`~softkmeans._core.optimize.StoppingRule` of the runs (``tol``)."""
        return StoppingRule(float(self.tol))

    @abstractmethod
    def _spec(self, sigma):
        """The :class:`RelaxationSpec` of this estimator at temperature ``sigma``."""

    def _prepare(self, engine, first_centers):
        self._prepared_critical = None
        self._sigma_shrink = AUTO_SIGMA_SHRINK if self.sigma == "auto" else None
        if self._sigma_shrink:
            mean_sq, apart = engine.start_distances(first_centers)
            # the rule of auto_sigma on the weighted mean of the squared distances; the data's
            # scale only where every observation sits on a starting centroid
            lam = 1.0
            if mean_sq == 0:
                lam = engine.lambda_max()
                self._prepared_critical = float(np.sqrt(lam))
            sigma = auto_sigma_at(mean_sq, engine.X.shape[1], fallback_scale=lam)
            if not apart:
                # every observation on a starting centroid: the likelihood grows without
                # bound as sigma -> 0, so the fallback temperature stays
                self._sigma_shrink = None
        else:
            sigma = float(self.sigma)
        self._resolved_spec = self._spec(sigma)
        if self._sigma_shrink:
            getattr(self, "_progress", Progress()).say(
                f"sigma='auto' starts at {sigma:.4g} and follows the centroids")

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
        self._fitted_parameters = self._model_parameters()
        self.n_reassigned_ = run.n_reassigned
        # One centroid, or data on one point: the mean is the answer at every temperature.
        collapse_matters = self._resolved_spec.kind == "softmax" and self.n_clusters > 1
        # lambda_max is read only where its lower bound from the last pass leaves a doubt
        floor = np.sqrt(lambda_max_floor(run.stats.sums, run.stats.masses))
        if (collapse_matters and self.sigma_ >= _NEAR_CRITICAL * floor
                and self._compute_critical_sigma(engine) > 0
                and self.sigma_ >= _NEAR_CRITICAL * self.critical_sigma_):
            where = "above" if self.sigma_ > self.critical_sigma_ else "within 10% of"
            # no numbers in the text: a search over sigma shows it once, not once per fit
            _warn(
                f"sigma_ is {where} critical_sigma_, the data's critical temperature "
                "sqrt(lambda_max): the centroids may collapse to the data mean (Prop. 9). Use a "
                "smaller sigma; the fitted model holds both values.",
                CriticalTemperatureWarning,
            )

    @_unchanged_on_failure
    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y=None, sample_weight=None):
        """Update the centroids with one batch of a stream (online alternating minimization).

        Each call takes the batch's responsibilities at the current centroids
        and adds their sufficient statistics, per centroid the sum of the
        responsibilities ``m_j`` and of the responsibility-weighted observations
        ``s_j``, to running sums after multiplying those by ``decay``:
        ``S_j <- decay S_j + s_j``, ``M_j <- decay M_j + m_j``; the centroids become
        ``S_j / M_j``. With ``decay=1`` (the default) every batch counts alike and a
        stationary stream converges to a fixed point of the batch update (the
        solution of :meth:`fit` from the same start); ``decay < 1`` forgets, with a
        memory of about ``1 / (1 - decay)`` batches (Spark's ``decayFactor``).
        ``sigma="auto"`` starts from the first batch as :meth:`fit` does, then is
        re-estimated after every batch from the running statistics: 0.85 times the
        deviation of the shared variance per feature of all the (decayed)
        observations around the running means. A centroid that no batch has
        given any mass stays in place; :class:`EntmaxKMeans` with
        ``empty_cluster="reseed"`` moves it onto the batch's observation farthest
        from its nearest centroid instead (its statistics stay zero until a batch
        reaches it). The first call initializes from its batch (``init``, one
        start) and needs at least ``n_clusters`` samples of positive weight, an
        array ``init`` too: its update moves every centroid to its
        responsibility-weighted mean of that batch alone, and fewer rows would
        put several centroids on one. A model fitted by :meth:`fit` continues
        from its centroids. The update is the alternating one whatever ``algorithm``
        says; ``max_iter``, ``tol`` and ``n_init`` do not apply, and the attributes
        :meth:`fit` derives from the whole training set (``labels_``,
        ``margins_``, ``bounds_``, ...) are removed. The parameters that define
        the model (``n_clusters``, ``sigma`` and entmax's ``alpha``) are those the
        stream started with: changing one with ``set_params`` before the next
        call raises ``ValueError`` (call :meth:`fit`, or start a new stream on
        ``sklearn.base.clone(model)``); ``decay``, ``reassignment_ratio``,
        ``backend`` and ``n_threads`` apply from the next batch. A call that
        raises leaves the estimator as it was.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            One batch.
        y : Ignored
            Not used, present for API consistency.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weight of each observation of the batch.

        Returns
        -------
        self : object
            The updated estimator; ``n_steps_`` counts the batches.

        Examples
        --------
        >>> import numpy as np
        >>> from softkmeans import SoftKMeans
        >>> rng = np.random.RandomState(0)
        >>> X = np.vstack([rng.normal(c, 0.2, size=(500, 2)) for c in (0.0, 4.0)])
        >>> model = SoftKMeans(n_clusters=2, sigma=0.5, init=[[1.0, 1.0], [3.0, 3.0]])
        >>> for batch in np.array_split(rng.permutation(X), 10):
        ...     model = model.partial_fit(batch)
        >>> model.n_steps_, np.sort(model.cluster_centers_[:, 0]).round(1)
        (10, array([0., 4.]))
        """
        first = not hasattr(self, "cluster_centers_")
        if not first:
            # _fit_context validates a fitted model's parameters only at its first call;
            # decay, reassignment_ratio, backend and n_threads apply from each batch
            self._validate_params()
            self._check_stream_parameters()
        X = validate_X(X, self, reset=first)
        sample_weight = _host_sample_weight(sample_weight, X)
        stream = None if first else getattr(self, "_stream", None)
        rng = check_random_state(self.random_state)
        if first:
            self._check_params_vs_input(X, sample_weight)
            engine = get_engine(self.backend, X, sample_weight, self.n_threads)
            centers = self._init_centers(X, engine, rng)
            self._prepare(engine, centers)
            stream = start_stream(centers, self._resolved_spec, engine.distance_shift,
                                  seed=rng.randint(np.iinfo(np.int32).max))
        else:
            engine = get_engine(self.backend, X, sample_weight, self.n_threads,
                                centers=self._centers64())
            if stream is None:  # fitted by fit: continue from its centroids
                stream = start_stream(self._centers64(), self._final_spec, engine.distance_shift,
                                      seed=rng.randint(np.iinfo(np.int32).max))
        dtype = _dtype(X) if first else _dtype(self.cluster_centers_)
        self._stream = stream_step(stream, engine, decay=self.decay, fit_sigma=self._sigma_shrink,
                                   reseed=self._empty_rule() == "reseed",
                                   reassign=float(self.reassignment_ratio))
        self._store_stream(dtype, X)
        return self

    #: The parameters that a stream keeps from its start (see :meth:`partial_fit`).
    _stream_defining = ("n_clusters", "sigma")

    def _model_parameters(self):
        return {name: getattr(self, name) for name in self._stream_defining}

    def _check_stream_parameters(self):
        """``ValueError`` if ``set_params`` changed a parameter that the fitted model keeps."""
        started = getattr(self, "_fitted_parameters", None)
        if started is None:
            return
        for name, value in self._model_parameters().items():
            if value != started[name]:
                raise ValueError(
                    f"{name}={value!r} was set after the model was fitted with "
                    f"{name}={started[name]!r}: partial_fit continues the fitted model and "
                    "keeps its parameters. Call fit to start again with the new ones, or "
                    "partial_fit on sklearn.base.clone(model) for a new stream."
                )

    def _store_stream(self, dtype, X):
        """The fitted attributes of the stream's state; those of a whole fit go."""
        for name in _FIT_ONLY_ATTRIBUTES:
            self.__dict__.pop(name, None)
        stream = self._stream
        self.cluster_centers_ = like_input(stream.centers.astype(dtype), X)
        self.sigma_ = float(stream.spec.sigma)
        self._final_spec = stream.spec
        self.n_steps_ = stream.n_steps
        self.n_reassigned_ = stream.n_reseeded
        self._n_features_out = self.n_clusters
        self._fitted_parameters = self._model_parameters()


#: Fitted attributes that read the training data again, set by ``certify=True``, and how a
#: user computes them from X otherwise.
_ON_REQUEST = {
    "critical_sigma_": "softkmeans.diagnostics.critical_sigma(X)",
    "bounds_": "softkmeans.diagnostics.certify(X, model.cluster_centers_, model.sigma_)",
}
#: What :meth:`BaseSoftKMeans.fit` derives from the whole training set, which
#: :meth:`FixedTemperatureKMeans.partial_fit` does not keep.
_FIT_ONLY_ATTRIBUTES = ("labels_", "inertia_", "n_iter_", "converged_", "objective_", "margins_",
                        "margin_min_", "identification_sigma_", "critical_sigma_", "beta_",
                        "gap_", "bounds_", "n_unidentified_", "path_")
