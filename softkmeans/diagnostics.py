"""Diagnostics: the paper's quantities at a configuration of centroids.

Every function here is a pure function of the data ``X``, the centroids, the
temperature ``sigma``, the entmax order ``alpha`` and the sample weights. The
quantities are computed by the same chunked engine passes as the estimators
use, so nothing of size ``n_samples x n_clusters`` is allocated, except by
:func:`responsibilities`, which returns such an array.

Quantities (Sec. 3, 4, 6 of arXiv 2603.04625; see ``doc/diagnostics.rst``):

- margins ``Delta_i`` (second smallest minus smallest squared distance; 0 on
  ties) and ``Delta_min``; balance ``rho = min_j |S_j| / n``; radii
  ``B_j = max_i ||x_i - T_Lloyd,j(mu)||`` and ``R = max_ij ||x_i - mu_j||``;
- the entmax identification temperature ``sqrt((alpha - 1) Delta / 2)`` and the
  number ``N_sigma`` of observations that are not identified at ``sigma``;
- the critical temperature ``sqrt(lambda_max)`` above which softmax centroids
  collapse to the mean;
- the value gaps ``J - F_sigma`` and ``J - F^alpha_sigma`` with their bounds,
  the centroid-map bound of Thm 18, the constants of Thms 24-25, and
  :func:`certify`, which checks every bound.

With sample weights every count is a weight sum, and maxima and minima run over
the observations with a positive weight. Temperatures ``sigma`` go from 1e-150
to 1e150 (outside, ``2 sigma^2`` would leave float64's normal numbers): others
get a ``ValueError``.
"""

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_array
from sklearn.utils._param_validation import validate_parameter_constraints
from sklearn.utils.validation import _check_sample_weight

from ._core import bounds
from ._core.bounds import BoundCheck, Certificate
from ._core.optimize import weighted_means
from ._core.responsibilities import HARD, RelaxationSpec, check_sigma
from ._core.temperature import lambda_max
from ._engines import check_magnitude, get_engine
from ._engines._array import row_sq_norms
from ._validation import N_THREADS_CONSTRAINT, validate_X

__all__ = [
    "BoundCheck",
    "Certificate",
    "balance",
    "centroid_map_bound",
    "certify",
    "critical_sigma",
    "fixed_point_constants",
    "identification_sigma",
    "margins",
    "objective_gaps",
    "radii",
    "responsibilities",
    "unidentified_count",
]



# ------------------------------------------------------------ validation
def _engine(X, sample_weight, backend, n_threads, centers, path=False):
    """The engine on X and the validated ``centers`` (a path of configurations if ``path``).

    X's squared distances are checked against its dtype with the centroids'
    norms counted (:func:`~._engines.check_magnitude`), as in ``predict``.
    """
    X = validate_X(X)
    centers = check_array(centers, dtype=np.float64, input_name="centers", allow_nd=path)
    if centers.shape[-1] != X.shape[1]:
        raise ValueError(f"centers has {centers.shape[-1]} features; X has {X.shape[1]}.")
    weights = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
    if not np.any(weights > 0):
        raise ValueError("sample_weight is zero for every sample; at least one must be > 0.")
    validate_parameter_constraints({"n_threads": N_THREADS_CONSTRAINT}, {"n_threads": n_threads},
                                   caller_name="softkmeans.diagnostics")
    engine = get_engine(backend, X, weights, n_threads,
                        centers=centers.reshape(-1, centers.shape[-1]))
    return engine, centers


def _alpha(alpha):
    alpha = float(alpha)
    if not (np.isfinite(alpha) and alpha > 1):
        raise ValueError(f"alpha must be a finite number > 1; got {alpha!r}.")
    return alpha


# ---------------------------------------------------------- configuration
@dataclass
class _Configuration:
    """The hard constants of one configuration, from one hard pass and the radii passes."""

    hard: object  # PassStats of the hard relaxation (with sums)
    margin_min: float
    weight_at_min: float
    total_weight: float
    lloyd: np.ndarray
    rho: float
    radii: np.ndarray
    R: float
    max_norm: float

    @property
    def n_clusters(self):
        return self.lloyd.shape[0]


def _hard_margins(stats, weights):
    """``Delta_min`` over the observations with positive weight, and one such row's weight."""
    positive = weights > 0
    candidates = np.where(positive, stats.margins, np.inf)
    i = int(np.argmin(candidates))
    return positive, float(candidates[i]), float(weights[i])


def _configuration(engine, centers, hard=None):
    """Everything hard about ``centers``; ``hard`` reuses a hard pass with sums."""
    hard = engine.estep(centers, HARD) if hard is None else hard
    weights = engine.sample_weight
    positive, margin_min, weight_at_min = _hard_margins(hard, weights)
    total = float(weights.sum())
    lloyd = weighted_means(hard, centers)
    k = centers.shape[0]
    farthest = np.sqrt(engine.max_sq_distances(np.vstack([lloyd, centers])))
    radii, R = farthest[:k], float(farthest[k:].max())
    return _Configuration(
        hard, margin_min, weight_at_min, total, lloyd,
        float(hard.masses.min() / total), radii, R,
        float(np.sqrt(engine.x_sq[positive].max())),
    )


# ---------------------------------------------------------------- public
def margins(X, centers, *, sample_weight=None, backend="auto", n_threads=None):
    """Assignment margins ``Delta_i`` and their minimum ``Delta_min``.

    ``Delta_i`` is the second smallest minus the smallest squared distance of
    observation i to the centroids; it is 0 for an observation tied between two
    centroids (and for every observation when there is one centroid).

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
    centers : array-like of shape (n_clusters, n_features)
    sample_weight : array-like of shape (n_samples,), default=None
        Observations with zero weight are left out of the minimum.
    backend : str, default="auto"
        Engine that runs the pass.
    n_threads : int, default=None
        Threads of the numba engine's pass (see :class:`~softkmeans.SoftKMeans`);
        None follows the OpenMP limit in effect.

    Returns
    -------
    margins : ndarray of shape (n_samples,)
    margin_min : float

    Examples
    --------
    >>> from softkmeans.diagnostics import margins
    >>> delta, delta_min = margins([[0.0], [1.0], [4.0]], [[0.0], [3.0]])
    >>> delta.tolist(), delta_min
    ([9.0, 3.0, 15.0], 3.0)
    """
    engine, centers = _engine(X, sample_weight, backend, n_threads, centers)
    stats = engine.estep(centers, HARD, with_sums=False)
    return stats.margins, _hard_margins(stats, engine.sample_weight)[1]


def balance(X, centers, *, sample_weight=None, backend="auto", n_threads=None):
    """Balance ``rho = min_j |S_j| / n`` of the nearest-centroid clusters.

    0 when a centroid is nobody's nearest. With weights, ``|S_j|`` and ``n``
    are weight sums.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
    centers : array-like of shape (n_clusters, n_features)
    sample_weight : array-like of shape (n_samples,), default=None
    backend : str, default="auto"
    n_threads : int, default=None
        Threads of the numba engine's pass (see :class:`~softkmeans.SoftKMeans`);
        None follows the OpenMP limit in effect.

    Returns
    -------
    rho : float

    Examples
    --------
    >>> from softkmeans.diagnostics import balance
    >>> balance([[0.0], [1.0], [4.0], [5.0]], [[0.0], [5.0]])
    0.5
    """
    engine, centers = _engine(X, sample_weight, backend, n_threads, centers)
    stats = engine.estep(centers, HARD, with_sums=False)
    return float(stats.masses.min() / engine.sample_weight.sum())


def radii(X, centers, *, sample_weight=None, backend="auto", n_threads=None):
    """Cluster radii ``B_j`` of Thm 18 and the spread ``R`` of Lemma 23.

    ``B_j = max_i ||x_i - T_Lloyd,j(mu)||`` is the largest distance from any
    observation (not only those of cluster j: the soft map also moves mass from
    the others) to the Lloyd update of centroid j, as in the paper's Thm 18.
    ``R = max_ij ||x_i - mu_j||``.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
    centers : array-like of shape (n_clusters, n_features)
    sample_weight : array-like of shape (n_samples,), default=None
    backend : str, default="auto"
    n_threads : int, default=None
        Threads of the numba engine's pass (see :class:`~softkmeans.SoftKMeans`);
        None follows the OpenMP limit in effect.

    Returns
    -------
    B : ndarray of shape (n_clusters,)
    R : float

    Examples
    --------
    >>> from softkmeans.diagnostics import radii
    >>> B, R = radii([[0.0], [2.0], [10.0]], [[0.0], [10.0]])
    >>> B.tolist(), R
    ([9.0, 10.0], 10.0)
    """
    engine, centers = _engine(X, sample_weight, backend, n_threads, centers)
    config = _configuration(engine, centers)
    return config.radii, config.R


def responsibilities(X, centers, sigma, alpha=None, *, backend="auto", n_threads=None):
    """Soft assignments of every observation to every centroid.

    Softmax ``r_ij = softmax_j(-||x_i - mu_j||^2 / (2 sigma^2))`` when ``alpha``
    is None, entmax-alpha (exact zeros) otherwise; the same map as the
    estimators' ``predict_proba``.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
    centers : array-like of shape (n_clusters, n_features)
    sigma : float
        Temperature, from 1e-150 to 1e150.
    alpha : float or None, default=None
        Entmax order (> 1), or None for softmax.
    backend : str, default="auto"
    n_threads : int, default=None
        Threads of the numba engine's pass (see :class:`~softkmeans.SoftKMeans`);
        None follows the OpenMP limit in effect.

    Returns
    -------
    resp : ndarray of shape (n_samples, n_clusters)
        Rows sum to 1.

    Examples
    --------
    >>> from softkmeans.diagnostics import responsibilities
    >>> responsibilities([[0.0], [1.0]], [[0.0], [2.0]], sigma=0.5, alpha=1.5).tolist()
    [[1.0, 0.0], [0.5, 0.5]]
    """
    engine, centers = _engine(X, None, backend, n_threads, centers)
    sigma = check_sigma(sigma)
    spec = (RelaxationSpec("softmax", sigma) if alpha is None
            else RelaxationSpec("entmax", sigma, _alpha(alpha)))
    return engine.responsibilities(centers, spec)


def identification_sigma(X, centers, alpha=1.5, *, per_sample=False, sample_weight=None,
                         backend="auto", n_threads=None):
    """Largest temperature at which entmax-alpha assignments are exactly hard.

    ``sigma_id = sqrt((alpha - 1) Delta_min / 2)`` (``sqrt(Delta_min) / 2`` at
    alpha = 1.5): at every ``sigma <= sigma_id`` each observation's entmax
    responsibilities are one-hot, and the entmax objective and update equal
    the hard ones (Cor. 21, Thm 27). The threshold is sharp. With a single
    centroid it is infinite (every responsibility is 1), although the margins
    are 0 by convention.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
    centers : array-like of shape (n_clusters, n_features)
    alpha : float, default=1.5
        Entmax order, > 1.
    per_sample : bool, default=False
        Return the threshold ``sqrt((alpha - 1) Delta_i / 2)`` of every
        observation instead of the global one.
    sample_weight : array-like of shape (n_samples,), default=None
    backend : str, default="auto"
    n_threads : int, default=None
        Threads of the numba engine's pass (see :class:`~softkmeans.SoftKMeans`);
        None follows the OpenMP limit in effect.

    Returns
    -------
    sigma_id : float or ndarray of shape (n_samples,)

    Examples
    --------
    >>> from softkmeans.diagnostics import identification_sigma
    >>> identification_sigma([[0.0], [1.0], [4.0]], [[0.0], [3.0]])
    0.8660254037844386
    """
    alpha = _alpha(alpha)
    delta, delta_min = margins(X, centers, sample_weight=sample_weight, backend=backend,
                               n_threads=n_threads)
    if np.shape(centers)[0] == 1:  # every responsibility is 1 at any temperature
        delta, delta_min = np.full_like(delta, np.inf), math.inf
    if per_sample:
        return bounds.identification_sigma(delta, alpha)
    return float(bounds.identification_sigma(delta_min, alpha))


def unidentified_count(X, centers, sigma, alpha=1.5, *, sample_weight=None, backend="auto",
                       n_threads=None):
    """Number ``N_sigma`` of observations whose entmax-alpha assignment is not one-hot.

    An observation is identified exactly when its margin reaches
    ``2 sigma^2 / (alpha - 1)`` (``4 sigma^2`` at alpha = 1.5; Lemma 19,
    Prop. 22): the others lie within ``2 sigma^2 / ||mu_j - mu_l||`` of a
    bisector. With sample weights it is the weight of those observations (the
    ``N_sigma`` of the weighted bounds, as in :func:`certify`).

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
    centers : array-like of shape (n_clusters, n_features)
    sigma : float
    alpha : float, default=1.5
    sample_weight : array-like of shape (n_samples,), default=None
    backend : str, default="auto"
    n_threads : int, default=None
        Threads of the numba engine's pass (see :class:`~softkmeans.SoftKMeans`);
        None follows the OpenMP limit in effect.

    Returns
    -------
    n_unidentified : float
        A whole number without ``sample_weight``.

    Examples
    --------
    >>> from softkmeans.diagnostics import unidentified_count
    >>> unidentified_count([[0.0], [1.0], [4.0]], [[0.0], [3.0]], sigma=1.0)
    1.0
    """
    sigma, alpha = check_sigma(sigma), _alpha(alpha)
    engine, centers = _engine(X, sample_weight, backend, n_threads, centers)
    stats = engine.estep(centers, HARD, with_sums=False)
    return _unidentified_weight(stats.margins, engine.sample_weight, sigma, alpha, len(centers))


def critical_sigma(X, sample_weight=None):
    """Critical temperature ``sqrt(lambda_max)`` of Prop. 9.

    ``lambda_max`` is the largest eigenvalue of the (weighted) covariance of X.
    Above this temperature the configuration with every softmax centroid at the
    data mean is a strict local minimizer of ``F_sigma``, and alternating
    softmax typically collapses onto it; below it the centroids split.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
    sample_weight : array-like of shape (n_samples,), default=None

    Returns
    -------
    sigma_c : float

    Examples
    --------
    >>> from softkmeans.diagnostics import critical_sigma
    >>> critical_sigma([[-1.0, 0.0], [1.0, 0.0]])
    1.0
    """
    X = validate_X(X)
    check_magnitude(X, row_sq_norms(X))  # the covariance would overflow or underflow
    weights = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
    return float(np.sqrt(lambda_max(X, weights)))


# ------------------------------------------------------------ bound rows
def _passes(engine, centers, sigma, alpha, known=None):
    """Pass statistics of the hard, softmax and entmax relaxations at ``centers``."""
    known = dict(known or {})
    specs = {"hard": HARD, "softmax": RelaxationSpec("softmax", sigma),
             "entmax": RelaxationSpec("entmax", sigma, alpha)}
    return {kind: known[kind] if kind in known else engine.estep(centers, spec)
            for kind, spec in specs.items()}


def _unidentified_weight(margins, weights, sigma, alpha, n_clusters):
    """``N_sigma``: the weight of the observations whose margin is below the entmax width.

    0 with a single centroid: every responsibility is 1 there, although the
    margins are 0 by convention.
    """
    if n_clusters == 1:
        return 0.0
    return float(weights[margins < bounds.unidentified_width(sigma, alpha)].sum())


def _value_checks(engine, config, passes, sigma, alpha, constants):
    """Rows for the value gaps: Thm 4, Props 6-8, Prop 22(b) and the ordering."""
    k, n, W = config.n_clusters, engine.n_samples, config.total_weight
    soft, ent = passes["softmax"].gap, passes["entmax"].gap
    unit = engine.unit_roundoff

    def relative(value):
        return bounds.tol_relative(n, k, value, unit=unit)

    # the entmax gap: its rows' rounding (App. C) and that of their sum
    tol = bounds.tol_value(n, k, float(engine.sample_weight.max()), config.R**2, sigma, alpha,
                           unit=unit) + relative(ent)
    lower, upper = bounds.margin_gap_bounds(config.margin_min, sigma, k, W, config.weight_at_min)
    unidentified = constants["n_unidentified"]
    return [
        BoundCheck("softmax_gap_nonnegative", "Thm 4", soft, 0.0, 0.0, ">="),
        BoundCheck("softmax_gap_uniform", "Thm 4", soft,
                   bounds.softmax_uniform_bound(W, sigma, k), relative(soft)),
        BoundCheck("softmax_gap_margin_lower", "Prop 8", soft, lower, relative(lower), ">="),
        BoundCheck("softmax_gap_margin_upper", "Prop 8", soft, upper, relative(soft)),
        BoundCheck("tsallis_gap_nonnegative", "Prop 6", ent, 0.0, tol, ">="),
        BoundCheck("tsallis_gap_uniform", "Prop 6", ent,
                   bounds.tsallis_uniform_bound(W, sigma, k, alpha), tol),
        BoundCheck("tsallis_gap_unidentified", "Prop 22(b)", ent,
                   bounds.unidentified_gap_bound(sigma, k, alpha, unidentified), tol),
        BoundCheck("ordering_F_sigma_le_F_alpha", "Prop 7", ent, soft, tol + relative(soft)),
    ]


def _worst_cluster(name, source, errors, limits, tol):
    """The row of the cluster that comes closest to (or furthest past) its bound."""
    with np.errstate(invalid="ignore"):
        slack = np.where(np.isinf(limits), -np.inf, errors - limits)
    j = int(np.argmax(slack))
    return BoundCheck(name, source, float(errors[j]), float(limits[j]), tol)


def _map_checks(engine, config, passes, centers, sigma, alpha, constants):
    """Rows for the centroid maps: Thm 18, Prop 22(c), Thm 24."""
    k, n = config.n_clusters, engine.n_samples
    tol = bounds.tol_centroid(n, k, config.max_norm, unit=engine.unit_roundoff)
    soft_err = np.linalg.norm(weighted_means(passes["softmax"], centers) - config.lloyd, axis=1)
    ent_err = np.linalg.norm(weighted_means(passes["entmax"], centers) - config.lloyd, axis=1)
    q = bounds.q_factor(config.margin_min, sigma, k)
    unidentified = constants["n_unidentified"]
    lloyd_fixed = float(np.max(np.linalg.norm(config.lloyd - centers, axis=1))) <= tol
    eps = constants["eps"] if lloyd_fixed and constants["hypothesis"] else np.inf
    return [
        _worst_cluster("centroid_map_softmax", "Thm 18", soft_err,
                       bounds.centroid_map_bound(config.radii, config.rho, q), tol),
        _worst_cluster("centroid_map_entmax", "Prop 22(c)", ent_err,
                       bounds.unidentified_map_bound(config.radii, config.hard.masses,
                                                     unidentified), tol),
        BoundCheck("fixed_point_softmax_step", "Thm 24", float(soft_err.max()), eps, tol),
    ]


def _constants(engine, config, sigma, alpha):
    k = config.n_clusters
    out = {"sigma": sigma, "alpha": alpha, "n_clusters": k, "total_weight": config.total_weight,
           "margin_min": config.margin_min, "beta": bounds.beta(config.margin_min, sigma),
           "rho": config.rho, "B": float(config.radii.max()), "R": config.R,
           "q": bounds.q_factor(config.margin_min, sigma, k),
           "n_unidentified": _unidentified_weight(config.hard.margins, engine.sample_weight,
                                                  sigma, alpha, k),
           "identification_sigma": math.inf if k == 1 else
           float(bounds.identification_sigma(config.margin_min, alpha))}
    out.update(bounds.fixed_point_constants(config.margin_min, config.R, config.rho, k, sigma))
    return out


def _certificate(engine, centers, sigma, alpha, known=None, maps=True):
    """The certificate at ``centers`` (value rows, and map rows when ``maps``)."""
    passes = _passes(engine, centers, sigma, alpha, known)
    config = _configuration(engine, centers, passes["hard"])
    constants = _constants(engine, config, sigma, alpha)
    constants.update(inertia=passes["hard"].inertia, softmax_gap=passes["softmax"].gap,
                     tsallis_gap=passes["entmax"].gap)
    checks = _value_checks(engine, config, passes, sigma, alpha, constants)
    if maps:
        checks += _map_checks(engine, config, passes, centers, sigma, alpha, constants)
    return Certificate(checks, constants), passes


def _setup(X, centers, sigma, alpha, sample_weight, backend, n_threads):
    engine, centers = _engine(X, sample_weight, backend, n_threads, centers)
    return engine, centers, check_sigma(sigma), _alpha(alpha)


def objective_gaps(X, centers, sigma, alpha=1.5, *, sample_weight=None, backend="auto",
                   n_threads=None):
    """The value gaps ``J - F_sigma`` and ``J - F^alpha_sigma`` with their bounds.

    ``J - F_sigma = 2 sigma^2 sum_i log1p(S_i)`` is accumulated row by row, so it
    keeps full relative precision however small it is. The rows check:
    ``0 <= J - F_sigma <= 2 n sigma^2 log k`` (Thm 4), the margin bounds
    ``sigma^2 e^-beta <= J - F_sigma <= 2 n (k-1) sigma^2 e^-beta`` (Prop 8),
    ``0 <= J - F^alpha <= 2 n sigma^2 H_alpha^max`` (Prop 6), the bound
    ``2 sigma^2 H_alpha^max N_sigma`` of Prop 22(b), and the ordering
    ``F_sigma <= F^alpha <= J`` (Prop 7).

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
    centers : array-like of shape (n_clusters, n_features)
    sigma : float
    alpha : float, default=1.5
    sample_weight : array-like of shape (n_samples,), default=None
    backend : str, default="auto"
    n_threads : int, default=None
        Threads of the numba engine's pass (see :class:`~softkmeans.SoftKMeans`);
        None follows the OpenMP limit in effect.

    Returns
    -------
    Certificate
        Its rows are the checks above; ``constants`` holds ``inertia`` (J),
        ``softmax_gap`` and ``tsallis_gap``.

    Examples
    --------
    >>> from softkmeans.diagnostics import objective_gaps
    >>> gaps = objective_gaps([[0.0], [1.0], [4.0]], [[0.0], [3.0]], sigma=0.5)
    >>> gaps.all_hold, round(gaps.constants["tsallis_gap"], 6)
    (True, 0.0)
    """
    engine, centers, sigma, alpha = _setup(X, centers, sigma, alpha, sample_weight, backend,
                                           n_threads)
    return _certificate(engine, centers, sigma, alpha, maps=False)[0]


def centroid_map_bound(X, centers, sigma, *, sample_weight=None, backend="auto", n_threads=None):
    """Thm 18: how far one softmax update can be from one Lloyd update.

    ``||T_sigma,j(mu) - T_Lloyd,j(mu)|| <= (B_j / rho) q / (1 - q)`` with
    ``q = (k - 1) exp(-Delta_min / (2 sigma^2))``; infinite (vacuous) when
    ``q >= 1`` or a cluster is empty.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
    centers : array-like of shape (n_clusters, n_features)
    sigma : float
    sample_weight : array-like of shape (n_samples,), default=None
    backend : str, default="auto"
    n_threads : int, default=None
        Threads of the numba engine's pass (see :class:`~softkmeans.SoftKMeans`);
        None follows the OpenMP limit in effect.

    Returns
    -------
    bound : ndarray of shape (n_clusters,)
    q : float

    Examples
    --------
    >>> from softkmeans.diagnostics import centroid_map_bound
    >>> X = [[0.0], [0.5], [5.0], [5.5]]
    >>> bound, q = centroid_map_bound(X, [[0.25], [5.25]], sigma=0.5)
    >>> bool(q < 1e-10), bool(bound.max() < 1e-9)
    (True, True)
    """
    engine, centers, sigma, _ = _setup(X, centers, sigma, 1.5, sample_weight, backend,
                                       n_threads)
    config = _configuration(engine, centers)
    q = bounds.q_factor(config.margin_min, sigma, config.n_clusters)
    return bounds.centroid_map_bound(config.radii, config.rho, q), q


def fixed_point_constants(X, centers, sigma, *, sample_weight=None, backend="auto", n_threads=None):
    """Constants of Lemma 23 and Thms 24-25 at a configuration or along a Lloyd path.

    For a Lloyd fixed point ``centers`` (Thm 24) or a Lloyd path (Thm 25, an
    array of iterates), with ``delta`` the smallest margin and ``rho`` the
    smallest balance of the iterates before the last and ``R`` the largest
    ``max_ij ||x_i - mu_j||`` along the path:
    ``r* = sqrt(R^2 + delta / 4) - R``, ``q' = (k-1) exp(-delta / (4 sigma^2))``,
    ``eps = (R / rho) q' / (1 - q')``, ``L = k (R + r*)^2 / (rho sigma^2) q' / (1 - q')``
    and ``sigma*``, the largest temperature with ``eps <= r*``. Below
    ``sigma*`` alternating softmax follows Lloyd's partitions and stays within
    ``eps`` of Lloyd's iterates.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
    centers : array-like of shape (n_clusters, n_features) or (n_iterates, n_clusters, n_features)
    sigma : float
    sample_weight : array-like of shape (n_samples,), default=None
    backend : str, default="auto"
    n_threads : int, default=None
        Threads of the numba engine's pass (see :class:`~softkmeans.SoftKMeans`);
        None follows the OpenMP limit in effect.

    Returns
    -------
    dict
        ``delta``, ``rho``, ``R``, ``r_star``, ``q_prime``, ``eps``, ``L``,
        ``sigma_star`` and ``hypothesis`` (whether ``eps <= r*``).

    Examples
    --------
    >>> from softkmeans.diagnostics import fixed_point_constants
    >>> c = fixed_point_constants([[0.0], [1.0], [9.0], [10.0]], [[0.5], [9.5]], sigma=1.0)
    >>> round(c["sigma_star"], 3), c["hypothesis"]
    (2.413, True)
    """
    if sp.issparse(centers):  # the TypeError of the other functions (check_array's)
        check_array(centers, input_name="centers")
    path = np.asarray(centers, dtype=np.float64)
    path = path[None] if path.ndim == 2 else path
    if path.ndim != 3 or len(path) == 0:
        raise ValueError("centers must be one configuration (n_clusters, n_features) or a "
                         f"non-empty path of them (n_steps, n_clusters, n_features); got shape "
                         f"{np.shape(centers)}.")
    if path.shape[1] == 0:  # check_array in _engine counts the steps of a path only
        raise ValueError(f"centers has no centroid (shape {path.shape}); every "
                         "configuration of the path needs at least one.")
    engine, path = _engine(X, sample_weight, backend, n_threads, path, path=True)
    sigma = check_sigma(sigma)
    configs = [_configuration(engine, mu) for mu in path]
    head = configs[:-1] or configs
    delta = min(c.margin_min for c in head)
    rho = min(c.rho for c in head)
    R = max(c.R for c in configs)
    out = {"delta": delta, "rho": rho, "R": R}
    out.update(bounds.fixed_point_constants(delta, R, rho, path.shape[1], sigma))
    return out


def certify(X, centers, sigma, alpha=1.5, *, sample_weight=None, backend="auto", n_threads=None):
    """Evaluate every bound of the paper at one configuration.

    The rows are those of :func:`objective_gaps` plus the centroid maps:
    Thm 18 for softmax, Prop 22(c) for entmax-alpha (each at the cluster closest
    to its bound) and, at a Lloyd fixed point satisfying its hypothesis, the
    ``eps(sigma)`` of Thm 24. A bound that does not apply is infinite and holds
    trivially. Each row carries the tolerance of App. C of the paper.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
    centers : array-like of shape (n_clusters, n_features)
    sigma : float
    alpha : float, default=1.5
    sample_weight : array-like of shape (n_samples,), default=None
    backend : str, default="auto"
    n_threads : int, default=None
        Threads of the numba engine's pass (see :class:`~softkmeans.SoftKMeans`);
        None follows the OpenMP limit in effect.

    Returns
    -------
    Certificate
        ``all_hold`` is True when every bound holds; ``to_frame()`` gives a
        pandas DataFrame; ``constants`` holds the configuration's constants.

    Examples
    --------
    >>> import numpy as np
    >>> from softkmeans.diagnostics import certify
    >>> rng = np.random.RandomState(0)
    >>> X = np.vstack([rng.normal(0, 1, (20, 2)), rng.normal(6, 1, (20, 2))])
    >>> cert = certify(X, [[0.0, 0.0], [6.0, 6.0]], sigma=0.5)
    >>> cert.all_hold
    True
    >>> cert["centroid_map_softmax"].source
    'Thm 18'
    """
    engine, centers, sigma, alpha = _setup(X, centers, sigma, alpha, sample_weight, backend,
                                           n_threads)
    return _certificate(engine, centers, sigma, alpha)[0]


# ------------------------------------------------------------ estimators
def _fitted_diagnostics(engine, run):
    """The diagnostic attributes of a fitted estimator, from its final run's statistics.

    No pass over the data, except after annealing (one pass for ``gap_`` at
    the final temperature); the certificate is :func:`_fitted_certificate`, with
    ``certify=True``.

    Parameters
    ----------
    engine : engine object
        The engine of the fit.
    run : RunResult
        The kept run. Its ``stats`` are under ``run.spec``, except after
        annealing (``run.sigmas`` set), where they are the hard statistics of
        the Lloyd polish.

    Returns
    -------
    dict
        ``margins_``, ``margin_min_``, ``identification_sigma_``, ``beta_``,
        ``gap_``, and ``n_unidentified_``
        for an entmax relaxation.
    """
    spec, stats = run.spec, run.stats
    sigma = float(spec.sigma)
    alpha = float(spec.alpha) if spec.kind == "entmax" else 1.5
    k = run.centers.shape[0]
    weights = engine.sample_weight
    margin_min = _hard_margins(stats, weights)[1]  # the margins do not depend on the relaxation
    gap = stats.gap if run.sigmas is None else engine.estep(run.centers, spec, False).gap
    out = {
        "margins_": stats.margins,
        "margin_min_": margin_min,
        "identification_sigma_": math.inf if k == 1 else
        float(bounds.identification_sigma(margin_min, alpha)),
        "beta_": bounds.beta(margin_min, sigma),
        "gap_": gap,
    }
    if spec.kind == "entmax":
        out["n_unidentified_"] = _unidentified_weight(stats.margins, weights, sigma, alpha, k)
    return out


def _fitted_certificate(engine, run):
    """The :class:`Certificate` of a fitted estimator's final configuration (``bounds_``).

    The passes that the run's statistics do not give: two relaxations and
    the radii (three or four passes over the data).
    """
    spec = run.spec
    alpha = float(spec.alpha) if spec.kind == "entmax" else 1.5
    stats_kind = "hard" if run.sigmas is not None else spec.kind
    certificate = _certificate(engine, run.centers, float(spec.sigma), alpha,
                               {stats_kind: run.stats})[0]
    return certificate.for_relaxation(spec.kind) if spec.kind != "hard" else certificate
