"""The paper's bounds as formulas of a few scalars, and the certificate that checks them.

Nothing here touches the data: every function takes the constants of one
configuration (margins, balance, radii, masses, ...) that
:mod:`softkmeans.diagnostics` computes with an engine, and returns a bound.
Theorem numbers are those of arXiv 2603.04625; the formulas are on the maths page of
the documentation (``doc/maths.rst``).
With sample weights, counts become weight sums (``n`` is the total weight).

Tolerances follow App. C of the paper: an observed quantity satisfies an upper
bound ``U`` when it does not exceed ``U + tol``, where ``tol`` is ``c = 4`` times
a worst-case rounding error of the computation: ``c n k u max_i w_i max_ij d_ij``
for value gaps (plus the scale ``2 sigma^2 / (alpha (alpha - 1))`` of the
entropy term for entmax gaps), ``c n k u`` relative for the gaps, which are sums
of ``n`` row terms (the softmax gap's only term: its rows are evaluated through
``log1p``), ``c n k u max_i ||x_i||`` for centroid maps. ``u`` is the unit
roundoff of the engine's arithmetic: ``2^-53``, or ``2^-24`` where it computes
in float32 (the numba engine and the CuPy engine on dense float32 data).
"""

import functools
import math
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "MEANINGS",
    "SAFETY_FACTOR",
    "UNDERFLOW_SPACING",
    "UNIT_ROUNDOFF",
    "BoundCheck",
    "Certificate",
    "beta",
    "centroid_map_bound",
    "fixed_point_constants",
    "identification_sigma",
    "margin_gap_bounds",
    "q_factor",
    "sigma_for_beta",
    "softmax_uniform_bound",
    "tol_centroid",
    "tol_relative",
    "tol_value",
    "trajectory_sigma_star",
    "tsallis_entropy_max",
    "tsallis_uniform_bound",
    "unidentified_gap_bound",
    "unidentified_map_bound",
    "unidentified_width",
    "unit_roundoff",
]

#: Unit roundoff of IEEE double precision.
UNIT_ROUNDOFF = 2.0**-53
#: Spacing of float64's subnormal numbers: the absolute error of an operation that underflows.
UNDERFLOW_SPACING = 2.0**-1074
#: Most ulps :func:`identification_sigma` steps down (one or two are needed).
_ROUNDING_STEPS = 8
#: Most steps of :func:`_sigma_star` down from the formula; the steps double from an ulp.
_DOUBLING_STEPS = 64
#: Safety factor ``c`` of the declared tolerances (App. C).
SAFETY_FACTOR = 4.0


# ------------------------------------------------------------------ values
def softmax_uniform_bound(total_weight, sigma, n_clusters):
    """Thm 4: ``J - F_sigma <= 2 n sigma^2 log k``."""
    return 2.0 * total_weight * sigma**2 * math.log(n_clusters)


def tsallis_entropy_max(n_clusters, alpha):
    """Largest Tsallis entropy on the simplex: ``(1 - k^(1-alpha)) / (alpha (alpha - 1))``."""
    return (1.0 - n_clusters ** (1.0 - alpha)) / (alpha * (alpha - 1.0))


def tsallis_uniform_bound(total_weight, sigma, n_clusters, alpha):
    """Prop 6: ``J - F^alpha_sigma <= 2 n sigma^2 H_alpha^max`` (``(8/3)(1 - 1/sqrt k)`` at 3/2)."""
    return 2.0 * total_weight * sigma**2 * tsallis_entropy_max(n_clusters, alpha)


def beta(margin_min, sigma):
    """``beta = Delta_min / (2 sigma^2)``, the margin in units of the entropic weight."""
    return margin_min / (2.0 * sigma**2)


def sigma_for_beta(margin_min, beta_value):
    """The temperature at which :func:`beta` is ``beta_value``: ``sqrt(Delta_min / (2 beta))``.

    Rounded down by an ulp where the square of the rounded root exceeds
    ``Delta_min / (2 beta)``: at ``beta = 2``, entmax-1.5's identification
    boundary, a ``sigma`` rounded up would leave the row at the smallest
    margin on the wrong side of an inequality that holds with equality.
    """
    target = np.asarray(margin_min / (2.0 * np.asarray(beta_value, dtype=np.float64)))
    sigma = np.sqrt(target)
    for _ in range(2):  # a correctly rounded root is at most an ulp or two too large
        sigma = np.where(sigma * sigma > target, np.nextafter(sigma, 0.0), sigma)
    return sigma[()]


def margin_gap_bounds(margin_min, sigma, n_clusters, total_weight, weight_at_min):
    """Prop 8: ``w* sigma^2 e^-beta <= J - F_sigma <= 2 n (k-1) sigma^2 e^-beta``.

    ``weight_at_min`` is the weight of an observation attaining ``Delta_min``
    (1 without sample weights): the lower bound comes from that one term. With
    a single centroid both gaps are 0 and so are both bounds.

    Returns
    -------
    lower, upper : float
    """
    decay = sigma**2 * math.exp(-beta(margin_min, sigma)) if n_clusters > 1 else 0.0
    return weight_at_min * decay, 2.0 * total_weight * (n_clusters - 1) * decay


def unidentified_width(sigma, alpha):
    """Margin ``2 sigma^2 / (alpha - 1)`` below which an entmax row is not one-hot (Lemma 19)."""
    return 2.0 * sigma**2 / (alpha - 1.0)


def identification_sigma(margin, alpha):
    """``sqrt((alpha - 1) Delta / 2)``: the largest sigma at which a margin is identified.

    Rounded down where the square root, squared again, would put the width an
    ulp above the margin: at the returned sigma, both ways the engines compare a
    margin with the width, ``Delta >= 2 sigma^2 / (alpha - 1)`` and
    ``(alpha - 1) Delta / (2 sigma^2) >= 1``, find it identified.
    """
    margin = np.asarray(margin, dtype=np.float64)
    sigma = np.sqrt((alpha - 1.0) * margin / 2.0)
    for _ in range(_ROUNDING_STEPS):
        tau = 2.0 * sigma**2
        with np.errstate(divide="ignore", invalid="ignore"):  # 0 / 0 and inf / inf: no step
            wide = (tau / (alpha - 1.0) > margin) | ((alpha - 1.0) * margin / tau < 1.0)
        if not wide.any():
            break
        sigma = np.where(wide, np.nextafter(sigma, 0.0), sigma)
    return sigma[()]


def unidentified_gap_bound(sigma, n_clusters, alpha, unidentified_weight):
    """Prop 22(b): ``J - F^alpha <= 2 sigma^2 H_alpha^max N_sigma``.

    Stated in the paper at alpha = 3/2; the proof (identified rows contribute 0,
    the others at most ``2 sigma^2 H_alpha^max``) holds for every alpha > 1 with
    ``N_sigma`` counted at the width of :func:`unidentified_width`.
    """
    return 2.0 * sigma**2 * tsallis_entropy_max(n_clusters, alpha) * unidentified_weight


# ---------------------------------------------------------- centroid maps
def q_factor(margin, sigma, n_clusters):
    """``q(sigma) = (k - 1) exp(-Delta / (2 sigma^2))`` (Thm 18)."""
    return (n_clusters - 1) * math.exp(-beta(margin, sigma))


def _geometric(q):
    """``q / (1 - q)``, infinite (a vacuous bound) when ``q >= 1``."""
    return q / (1.0 - q) if q < 1.0 else math.inf


def centroid_map_bound(radii, rho, q):
    """Thm 18: ``||T_sigma,j - T_Lloyd,j|| <= (B_j / rho) q / (1 - q)``, per cluster.

    Infinite when ``q >= 1`` or a cluster is empty (``rho = 0``).
    """
    radii = np.asarray(radii, dtype=np.float64)
    if rho <= 0.0:
        return np.full_like(radii, math.inf)
    factor = _geometric(q)
    if math.isinf(factor):
        return np.full_like(radii, math.inf)
    return radii / rho * factor


def unidentified_map_bound(radii, cluster_weights, unidentified_weight):
    """Prop 22(c): ``||T^alpha_j - T_Lloyd,j|| <= B_j N_sigma / (|S_j| - N_sigma)``.

    Infinite for the clusters with ``|S_j| <= N_sigma``; 0 when every row is
    identified.
    """
    radii = np.asarray(radii, dtype=np.float64)
    room = np.asarray(cluster_weights, dtype=np.float64) - unidentified_weight
    out = np.full_like(radii, math.inf)
    ok = room > 0
    out[ok] = radii[ok] * unidentified_weight / room[ok]
    return out


def fixed_point_constants(margin_min, R, rho, n_clusters, sigma):
    """Lemma 23 and Thms 24-25: ``r*``, ``q'``, ``eps(sigma)``, ``L(sigma)``, ``sigma*``.

    Parameters
    ----------
    margin_min : float
        ``Delta_min`` of the configuration (``delta`` along a Lloyd path).
    R : float
        ``max_ij ||x_i - mu_j||``.
    rho : float
        Balance ``min_j |S_j| / n``.
    n_clusters : int
    sigma : float

    Returns
    -------
    dict
        ``r_star = sqrt(R^2 + Delta/4) - R`` (computed without cancellation),
        ``q_prime = (k-1) exp(-Delta / (4 sigma^2))``,
        ``eps = (R / rho) q' / (1 - q')``,
        ``L = k (R + r*)^2 / (rho sigma^2) q' / (1 - q')``, ``sigma_star`` (the
        largest sigma with ``eps <= r*``) and ``hypothesis`` (``eps <= r*``).
    """
    r_star = _r_star(margin_min, R)
    q_prime = _q_prime(margin_min, n_clusters, sigma)
    factor = _geometric(q_prime)
    eps = _eps(margin_min, R, rho, n_clusters, sigma)
    if rho <= 0:
        big_l = math.inf
    else:  # a factor of 0 (q' underflows) makes it 0, also where rho sigma^2 underflows
        big_l = _product_over(n_clusters * (R + r_star) ** 2 * factor, rho * sigma**2)
    return {
        "r_star": r_star,
        "q_prime": q_prime,
        "eps": eps,
        "L": big_l,
        "sigma_star": _sigma_star(margin_min, R, rho, n_clusters, r_star),
        "hypothesis": bool(eps <= r_star),
    }


def _q_prime(margin_min, n_clusters, sigma):
    """``q' = (k - 1) exp(-Delta / (4 sigma^2))``."""
    return (n_clusters - 1) * math.exp(-margin_min / (4.0 * sigma**2))


def _eps(margin_min, R, rho, n_clusters, sigma):
    """``eps = (R / rho) q' / (1 - q')`` (0 when ``q'`` underflows, inf when ``rho = 0``)."""
    if rho <= 0:
        return math.inf
    return _product_over(R * _geometric(_q_prime(margin_min, n_clusters, sigma)), rho)


def _product_over(numerator, denominator):
    """``numerator / denominator`` for non-negative terms: 0 when the numerator is, else
    infinite when the denominator underflowed to 0."""
    if numerator == 0:
        return 0.0
    return numerator / denominator if denominator > 0 else math.inf


def _r_star(delta, R):
    """``sqrt(R^2 + delta / 4) - R``, written without cancellation (0 when ``delta <= 0``)."""
    quarter = delta / 4.0
    return quarter / (math.sqrt(R * R + quarter) + R) if quarter > 0 else 0.0


def trajectory_sigma_star(delta, R, rho, n_clusters):
    """Thm 25: ``sigma*``, the largest sigma at which ``eps(sigma) <= r*`` (see
    :func:`fixed_point_constants`, whose ``sigma_star`` it is, without a temperature)."""
    return _sigma_star(delta, R, rho, n_clusters, _r_star(delta, R))


def _sigma_star(delta, R, rho, n_clusters, r_star):
    """``sigma*^2 = delta / (4 log((1 + a)(k - 1) / a))``, ``a = r* rho / R``.

    ``eps(sigma) <= r*`` is ``q' <= a / (1 + a)``; it holds at every sigma when
    the logarithm is not positive (one cluster, or ``R = 0`` with k = 2) and at
    none when ``delta = 0`` or a cluster is empty. Rounded down where
    ``eps``, computed as :func:`fixed_point_constants` computes it, would
    exceed ``r*`` an ulp above the threshold, so that the hypothesis holds at
    the returned sigma.
    """
    if n_clusters == 1:
        return math.inf
    if delta <= 0 or rho <= 0 or r_star <= 0:
        return 0.0
    log_arg = math.log(n_clusters - 1)
    if R > 0:  # log((1 + a) / a) from log(a): no underflow of a for extreme weights
        log_a = math.log(r_star) + math.log(rho) - math.log(R)
        log_arg += float(np.logaddexp(0.0, -log_a))
    if log_arg <= 0:
        return math.inf
    sigma = math.sqrt(delta / (4.0 * log_arg))
    # Usually an ulp or two; many more where q' is close to 1 (k = 2 and R^2 << delta), as
    # eps then divides by 1 - q': steps that double reach the threshold in a few dozen.
    step = math.ulp(sigma)
    for _ in range(_DOUBLING_STEPS):
        if _eps(delta, R, rho, n_clusters, sigma) <= r_star:
            break
        sigma = max(sigma - step, 0.0)
        step *= 2.0
    return sigma


# ------------------------------------------------------------- tolerances
@functools.cache
def unit_roundoff(dtype):
    """Unit roundoff ``eps / 2`` of a float dtype: ``2^-53`` in float64, ``2^-24`` in float32."""
    return float(np.finfo(dtype).eps) / 2.0


def tol_value(n_rows, n_clusters, max_weight, max_sq_distance, sigma=0.0, alpha=None, *,
              unit=UNIT_ROUNDOFF):
    """``c n k u max_i w_i (max_ij d_ij + 2 sigma^2 / (alpha (alpha - 1)))``.

    Absolute tolerance of a value gap. The first term is App. C's; the second
    is the scale of the entropy term of an entmax-alpha gap, computed as
    ``2 sigma^2 (1 - sum_j p_j^alpha) / (alpha (alpha - 1))``, whose rounding
    the paper's term does not cover when ``sigma^2`` is large against the
    distances or alpha is close to 1. ``unit`` is the unit roundoff ``u`` of
    the arithmetic (:func:`unit_roundoff`; float64 by default), as in the
    other tolerances.
    """
    scale = max_sq_distance
    if alpha is not None:
        scale += 2.0 * sigma**2 / (alpha * (alpha - 1.0))
    return SAFETY_FACTOR * n_rows * n_clusters * unit * max_weight * scale


def tol_relative(n_rows, n_clusters, value, *, unit=UNIT_ROUNDOFF):
    """``c n k (u |value| + eta)``: tolerance of a sum of ``n_rows`` row terms.

    Relative to the sum, plus the absolute error ``eta`` (:data:`UNDERFLOW_SPACING`)
    of each operation whose result is subnormal, where relative precision ends
    (gaps of 1e-315 arise at cold temperatures).
    """
    return SAFETY_FACTOR * n_rows * n_clusters * (unit * abs(value) + UNDERFLOW_SPACING)


def tol_centroid(n_rows, n_clusters, max_norm, *, unit=UNIT_ROUNDOFF):
    """``c n k u max_i ||x_i||``: absolute tolerance of a centroid-map error."""
    return SAFETY_FACTOR * n_rows * n_clusters * unit * max_norm


# ------------------------------------------------------------ certificate
@dataclass(frozen=True)
class BoundCheck:
    """One bound evaluated at one configuration.

    Attributes
    ----------
    name : str
        Short identifier.
    source : str
        Where the bound comes from in the paper.
    observed : float
        The computed quantity.
    bound : float
        The analytic bound (``inf`` when vacuous).
    tolerance : float
        Declared rounding tolerance.
    relation : {"<=", ">="}
        ``observed <= bound + tolerance`` or ``observed >= bound - tolerance``.
    """

    name: str
    source: str
    observed: float
    bound: float
    tolerance: float
    relation: str = "<="

    def __post_init__(self):
        if self.relation not in ("<=", ">="):
            raise ValueError(f"relation must be '<=' or '>='; got {self.relation!r}.")

    @property
    def holds(self):
        """Whether the observed quantity satisfies the bound within the tolerance."""
        if self.relation == "<=":
            return bool(self.observed <= self.bound + self.tolerance)
        return bool(self.observed >= self.bound - self.tolerance)


#: What each check of a :class:`Certificate` says, in words, and which relaxation it is
#: about (``"both"``: it compares the two).
MEANINGS = {
    "softmax_gap_nonnegative": ("softmax", "F_sigma is at most the distortion J"),
    "softmax_gap_uniform": ("softmax", "J - F_sigma is at most 2 n sigma^2 log k"),
    "softmax_gap_margin_lower": ("softmax",
                                 "J - F_sigma is at least the smallest margin's exp(-beta) term"),
    "softmax_gap_margin_upper": ("softmax", "J - F_sigma shrinks as exp(-beta) with the margins"),
    "tsallis_gap_nonnegative": ("entmax", "F_alpha is at most the distortion J"),
    "tsallis_gap_uniform": ("entmax", "J - F_alpha is at most 2 n sigma^2 H_alpha^max"),
    "tsallis_gap_unidentified": ("entmax",
                                 "J - F_alpha comes only from the rows not yet assigned hard"),
    "ordering_F_sigma_le_F_alpha": ("both", "F_sigma is at most F_alpha"),
    "centroid_map_softmax": ("softmax", "a softmax update lands near Lloyd's (worst cluster)"),
    "centroid_map_entmax": ("entmax", "an entmax update lands near Lloyd's (worst cluster)"),
    "fixed_point_softmax_step": ("softmax",
                                 "at a Lloyd fixed point, a softmax update moves it little"),
}


#: Constants of a certificate that only its entmax rows use.
_ENTMAX_CONSTANTS = ("alpha", "tsallis_gap", "n_unidentified")


@dataclass
class Certificate:
    """Every bound of the paper evaluated at one configuration.

    Attributes
    ----------
    checks : list of BoundCheck
        One row per bound.
    constants : dict
        The configuration's constants that enter the bounds (``sigma``,
        ``alpha``, ``margin_min``, ``beta``, ``rho``, ``R``, ``q``, ``r_star``,
        ``eps``, ``sigma_star``, ...).
    """

    checks: list
    constants: dict = field(default_factory=dict)

    @property
    def all_hold(self):
        """True when every bound holds within its tolerance."""
        return all(check.holds for check in self.checks)

    def __getitem__(self, name):
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(name)

    def __contains__(self, name):
        """Whether a check of that name is in the certificate (as ``certificate[name]`` finds)."""
        return any(check.name == name for check in self.checks)

    def __iter__(self):
        return iter(self.checks)

    def __len__(self):
        return len(self.checks)

    def for_relaxation(self, kind):
        """The checks about the ``kind`` relaxation (``"softmax"`` or ``"entmax"``) alone.

        A softmax fit's certificate has no entmax rows and none of their constants
        (``alpha``, the Tsallis gap, the unidentified weight); an entmax fit's
        keeps the comparison of the two objectives (Prop 7).
        """
        keep = {kind, "both"} if kind == "entmax" else {kind}
        checks = [c for c in self.checks if MEANINGS.get(c.name, ("both",))[0] in keep]
        constants = dict(self.constants)
        if kind == "softmax":
            for name in _ENTMAX_CONSTANTS:
                constants.pop(name, None)
        return Certificate(checks, constants)

    def to_frame(self):
        """The checks as a :class:`pandas.DataFrame`, one row per bound (needs pandas)."""
        import pandas as pd

        columns = ["bound_name", "meaning", "source", "observed", "relation", "bound",
                   "tolerance", "holds"]
        rows = [(c.name, _meaning(c.name), c.source, c.observed, c.relation, c.bound,
                 c.tolerance, c.holds) for c in self.checks]
        return pd.DataFrame(rows, columns=columns).set_index("bound_name")

    def __repr__(self):
        head = ("check", "source", "observed", "", "bound", "tolerance", "holds", "meaning")
        body = [
            (c.name, c.source, f"{c.observed:.6g}", c.relation, f"{c.bound:.6g}",
             f"{c.tolerance:.2g}", "yes" if c.holds else "NO", _meaning(c.name))
            for c in self.checks
        ]
        widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
                 for row in [head, *body]]
        shown = ("sigma", "alpha", "margin_min", "beta", "rho", "q", "sigma_star")
        consts = ", ".join(f"{key}={self.constants[key]:.4g}" for key in shown
                           if key in self.constants)
        verdict = "all bounds hold" if self.all_hold else "SOME BOUNDS FAIL"
        return f"Certificate({verdict}; {consts})\n" + "\n".join(lines)


def _meaning(name):
    return MEANINGS.get(name, ("both", ""))[1]

