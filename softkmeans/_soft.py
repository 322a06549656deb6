"""SoftKMeans: K-Means with softmax (normalized Gaussian RBF) responsibilities."""

from sklearn.utils._param_validation import StrOptions

from ._base import FixedTemperatureKMeans
from ._core.optimize import alternating, gradient_descent
from ._core.responsibilities import RelaxationSpec

__all__ = ["SoftKMeans"]


class SoftKMeans(FixedTemperatureKMeans):
    """Soft K-Means: minimize the reduced objective ``F_sigma`` at a fixed temperature.

    Each observation is assigned to every centroid with the softmax
    responsibility ``r_ij = softmax_j(-||x_i - mu_j||^2 / (2 sigma^2))``, the
    output of a normalized Gaussian RBF layer. As ``sigma -> 0`` the
    responsibilities become the hard K-Means assignments and
    ``F_sigma(mu) = -2 sigma^2 sum_i log sum_j exp(-||x_i - mu_j||^2 / (2 sigma^2))``
    tends to the K-Means distortion ``J`` (``0 <= J - F_sigma <= 2 n sigma^2 log k``).

    Parameters
    ----------
    n_clusters : int, default=8
        Number of centroids.
    sigma : float or "auto", default="auto"
        Temperature (a length, in the units of X), from 1e-150 to 1e150 (the
        range in which ``2 sigma^2`` and its inverse are normal float64
        numbers). ``"auto"`` fits it with the centroids, from the likelihood
        of the mixture that :meth:`score` measures (equal weights, isotropic
        variance ``sigma^2``): at every update ``sigma`` is re-estimated as 0.85
        times the deviation of the responsibility-weighted variance per
        feature around the new centroids (EM with a shared spherical
        variance, shrunk so that overlapping clusters keep the centroids of
        K-Means; see the docs' quality page). It starts from the same rule on
        the hard partition of the starting centroids. With
        ``algorithm="gradient"`` that EM runs first, from the same start, and
        the descent runs at its temperature. ``sigma_`` holds
        the result; with ``n_init > 1`` the run of highest likelihood is kept.
    algorithm : {"alternating", "gradient"}, default="alternating"
        ``"alternating"``: the closed-form weighted-mean update (an EM step; no
        learning rate). ``"gradient"``: gradient descent on ``F_sigma`` with one
        step size for all centroids, chosen by a backtracking line search; a
        run ends as converged when its step is within ``tol``, or when no step
        lowers ``F_sigma`` beyond rounding (its gradient is at the rounding
        level). The two follow different trajectories.
    init : {"k-means++", "random"}, callable or array-like of shape \
            (n_clusters, n_features), default="k-means++"
        Starting centroids: scikit-learn's :func:`~sklearn.cluster.kmeans_plusplus`,
        observations drawn with probability proportional to their weight, a
        callable ``init(X, n_clusters, random_state)``, or an array. Starting
        centroids that coincide (equal rows of an array, or draws on duplicate
        observations), which no update would ever separate, are moved apart as
        K-Means relocates empty clusters: each copy after the first goes onto the
        observation farthest from the centroids placed before it, while X has
        distinct observations left. Centroids whose squared norms would overflow
        squared distances in the dtype of X are refused (``ValueError``).
    n_init : "auto" or int, default="auto"
        Number of starts; the run with the lowest ``F_sigma`` is kept. ``"auto"``
        is 1 for "k-means++" and an array, 10 for "random" and a callable (as in
        scikit-learn's ``KMeans``).
    max_iter : int, default=300
        Cap on the number of updates of one run.
    tol : float, default=1e-4
        Relative tolerance of the stopping rule, as in scikit-learn's
        :class:`~sklearn.cluster.KMeans`: a run has converged when an update
        moves the centroids by a squared distance (summed over centroids) of
        at most ``tol`` times the data's mean variance per feature (and, with
        ``sigma="auto"``, changes ``sigma**2`` by at most as much); or when
        the assignments repeat, so that the update moves nothing; or, after a
        pass with soft responsibilities, when the mean log-likelihood per
        sample that :meth:`score` measures changes by less than the rounding
        of the pass's objective (the objective no longer resolves the
        progress; ``tol=0`` leaves this test out). A fit whose
        responsibilities are all one-hot (an entmax fit below its
        identification temperature) stops where ``KMeans`` stops from the same
        start. 1e-4 stops within a fraction of a percent of the converged
        distortion; 0 runs to a fixed point or ``max_iter``.
    random_state : int, RandomState instance or None, default=None
        Seeds the initialization.
    backend : {"auto", "numba", "numpy", "cupy"}, default="auto"
        Engine that runs the passes over the data: ``"numba"`` (compiled CPU
        kernels), ``"numpy"`` (the reference implementation the others are
        tested against), ``"cupy"`` (a GPU, for CuPy arrays; needs
        ``softkmeans[gpu]``). ``"auto"`` is ``"cupy"`` for a CuPy array, else
        ``"numba"`` (``"numpy"`` where numba cannot compile). numba compiles
        its kernels on their first use (seconds, once per input kind and
        machine: ``pip install`` does it, and numba caches them on disk).
    n_threads : int, default=None
        Threads of the numba engine's passes over the data. None follows the
        OpenMP limit in effect (``OMP_NUM_THREADS`` or a ``threadpoolctl``
        limit), as scikit-learn's :class:`~sklearn.cluster.KMeans` does; the
        numpy and CuPy engines do not use it. Results do not depend on it:
        the numba engine's passes sum fixed slots of rows in a fixed order.
    verbose : int, default=0
        When positive, print as ``KMeans`` does: each start (``n_init``) and the
        end of its initialization, then per iteration the inertia, the
        objective, ``sigma`` and the step, and why the run stopped (converged,
        and how, or ``max_iter``); every line ends with the seconds since the
        fit began. :class:`AnnealedKMeans` prints each temperature, and the
        iterations at each from ``verbose=2``.
    record_path : bool or "centers", default=False
        Keep the per-iteration objective, distortion, step, number of label
        changes and sufficient-decrease bound in ``path_`` (and the iterates
        when ``"centers"``).
    certify : bool, default=False
        Also compute ``critical_sigma_`` and ``bounds_`` at the end of
        :meth:`fit`: a read of the training data for ``lambda_max`` and three
        or four passes over it for the certificate. Without it the fitted model
        has them only where the fit computed them anyway, and
        :mod:`softkmeans.diagnostics` gives them from X. The fitted model keeps
        no reference to the training data either way.
    decay : float, default=1.0
        Forgetting factor of :meth:`partial_fit`, in ``[0, 1]``: before a batch
        is added, the running statistics of the earlier ones are multiplied by
        it. 1 weighs every batch alike; smaller values follow a drifting stream,
        with a memory of about ``1 / (1 - decay)`` batches. :meth:`fit` does not
        use it.
    reassignment_ratio : float, default=0.01
        Centroids that the data abandoned are moved, as ``KMeans`` relocates an
        empty cluster and ``MiniBatchKMeans`` reassigns a centre with few
        points: a centroid whose mass is below this fraction of the largest, or
        that another centroid duplicates (their squared distance at most 0.05
        times ``2 sigma^2``: both take every observation's responsibilities
        in nearly the same ratio). In :meth:`fit` (``algorithm="alternating"``),
        a run that has converged with such centroids moves them onto
        observations drawn as greedy k-means++ draws (probability proportional
        to the squared distance to the nearest kept centroid, ``random_state``
        seeding it) and goes on from there; the continued run is kept if it
        converges to a lower negative log-likelihood per sample (:meth:`score`'s
        measure, comparable across temperatures), otherwise the run before it
        is, and no relocation is tried again (at most 10). In :meth:`partial_fit`
        the rule is checked each time ``10 * n_clusters`` samples have arrived
        since the last move, the draws come from the batch, and a move is kept if
        the batch's distortion ``J`` is no larger. 0 turns it off.

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
        Centroids, in the dtype of X.
    labels_ : ndarray of shape (n_samples,)
        Nearest centroid of each training sample.
    inertia_ : float
        Hard distortion ``J`` (weighted sum of squared distances to the
        nearest centroid) at ``cluster_centers_``.
    objective_ : float
        ``F_sigma`` at ``cluster_centers_``.
    sigma_ : float
        The temperature used (fitted, with ``sigma="auto"``).
    n_iter_ : int
        Number of updates of the kept run.
    converged_ : bool
        Whether the kept run met the stopping rule before ``max_iter``.
    margins_ : ndarray of shape (n_samples,)
        Second smallest minus smallest squared distance of each sample.
    margin_min_ : float
        Smallest margin (over samples with a positive weight).
    identification_sigma_ : float
        ``sqrt(margin_min_) / 2``: the temperature below which entmax-1.5
        assignments at ``cluster_centers_`` are exactly hard.
    critical_sigma_ : float
        ``sqrt(lambda_max)`` of the data covariance; above it the softmax
        centroids collapse to the data mean (a warning says so). Set with
        ``certify=True``, and by fits that read it anyway: ``sigma_`` close
        enough to it for the warning's check, or a ``sigma="auto"`` start with
        every observation on a starting centroid.
    beta_ : float
        ``margin_min_ / (2 sigma_^2)``, the exponent of the paper's rates.
    gap_ : float
        ``inertia_ - objective_``, computed without cancellation.
    bounds_ : Certificate
        Every bound of the paper evaluated at ``cluster_centers_``, with its
        tolerance and whether it holds (see :func:`softkmeans.diagnostics.certify`).
        Set with ``certify=True``.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Feature names, when X has string column names.
    path_ : list of dict
        The recorded trajectory (only with ``record_path``).
    n_steps_ : int
        Number of batches seen by :meth:`partial_fit` (set by it only).
    n_reassigned_ : int
        Centroids moved by ``reassignment_ratio``'s rule (and, in
        :class:`EntmaxKMeans`, empty ones reseeded) in the kept run, or in the
        stream so far.

    See Also
    --------
    EntmaxKMeans : Sparse responsibilities that are exactly hard below a
        finite temperature.
    AnnealedKMeans : Deterministic annealing over a schedule of temperatures.
    sklearn.cluster.KMeans : The zero-temperature limit.

    Examples
    --------
    >>> import numpy as np
    >>> from softkmeans import SoftKMeans
    >>> X = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [5.1, 5.0]])
    >>> model = SoftKMeans(n_clusters=2, sigma=0.5, random_state=0).fit(X)
    >>> model.predict([[0.0, 0.1], [5.0, 4.9]]).tolist() == model.labels_[[0, 2]].tolist()
    True
    >>> model.predict_proba([[2.55, 2.5]]).round(2)
    array([[0.5, 0.5]])
    """

    _parameter_constraints: dict = {
        **FixedTemperatureKMeans._parameter_constraints,
        "algorithm": [StrOptions({"alternating", "gradient"})],
    }

    def __init__(self, n_clusters=8, *, sigma="auto", algorithm="alternating",
                 init="k-means++", n_init="auto", max_iter=300, tol=1e-4, random_state=None,
                 backend="auto", n_threads=None, verbose=0, record_path=False,
                 certify=False, decay=1.0, reassignment_ratio=0.01):
        super().__init__(n_clusters, sigma=sigma, init=init, n_init=n_init,
                         max_iter=max_iter, tol=tol, random_state=random_state,
                         backend=backend, n_threads=n_threads, verbose=verbose,
                         record_path=record_path, certify=certify, decay=decay,
                         reassignment_ratio=reassignment_ratio)
        self.algorithm = algorithm

    def _spec(self, sigma):
        return RelaxationSpec("softmax", sigma)

    def _run(self, engine, centers, rng):
        options = dict(max_iter=self.max_iter, tol=self._stopping_rule(),
                       record_path=self.record_path, verbose=self._progress)
        if self.algorithm == "alternating":
            return alternating(engine, centers, self._resolved_spec, fit_sigma=self._sigma_shrink,
                               dtype=self._stored_dtype, reassign=self._reassign(rng), **options)
        spec = self._resolved_spec
        if self._sigma_shrink:  # the temperature EM finds from this start, then the descent
            spec = alternating(engine, centers, spec, fit_sigma=self._sigma_shrink,
                               max_iter=self.max_iter, tol=self._stopping_rule()).spec
        return gradient_descent(engine, centers, spec, **options)
