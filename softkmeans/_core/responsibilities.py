"""Responsibilities of one block of rows, from its squared distances.

Every function here takes a block ``D`` of squared distances (rows: observations,
columns: centroids) in float64 and returns the quantities one E-step needs for
those rows. The entmax helpers that the array engine shares
(:func:`entmax_from_threshold` and the thresholds) use the array API standard
only, over a namespace ``xp`` of ``array-api-compat`` (numpy's by default), so
that the device engines run the same code that the numpy oracle runs.

Conventions (``doc/maths.rst``, the maths page of the documentation; Sec. 3 of the
paper):

- ``tau = 2 sigma^2``; logits ``z_ij = -d_ij / tau``;
- every computation is shifted by the row minimum ``dmin_i``, so the largest
  logit of a row is exactly 0 and no overflow or ``0 / 0`` can occur for any
  ``sigma`` in ``[SIGMA_MIN, SIGMA_MAX]`` (:func:`check_sigma`);
- ``row_objective`` is the row's contribution to the relaxed objective and
  ``row_gap`` is ``dmin_i - row_objective``, computed without cancellation.
"""

from dataclasses import dataclass

from sklearn.externals.array_api_compat import device as array_device
from sklearn.externals.array_api_compat import numpy as np_compat

__all__ = [
    "SIGMA_MIN",
    "SIGMA_MAX",
    "check_sigma",
    "RelaxationSpec",
    "HARD",
    "BlockResult",
    "block_responsibilities",
    "nearest_two",
    "softmax_block",
    "entmax_block",
    "entmax_from_threshold",
    "hard_block",
    "log_sum_exp_block",
    "entmax_support_width",
]


#: The temperatures every computation accepts. Within ``[SIGMA_MIN, SIGMA_MAX]`` the
#: entropic weight ``tau = 2 sigma^2`` lies in ``[2e-300, 2e300]``: ``tau`` and ``1 / tau``
#: are normal float64 numbers, with eight decades to spare for the quantities scaled by them
#: (``d / tau`` in scores, ``n tau log(k)`` in objectives). Beyond them ``tau`` underflows to 0
#: (``sigma`` below about ``1e-162``) or overflows (above about ``1e154``).
SIGMA_MIN, SIGMA_MAX = 1e-150, 1e150


def check_sigma(sigma, name="sigma"):
    """``sigma`` as a float, checked to lie in ``[SIGMA_MIN, SIGMA_MAX]``.

    Parameters
    ----------
    sigma : float
        A temperature.
    name : str, default="sigma"
        What the error message calls it.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        For a temperature outside the range (NaN and infinities included).
    """
    value = float(sigma)
    if not SIGMA_MIN <= value <= SIGMA_MAX:
        raise ValueError(
            f"{name} must lie in [{SIGMA_MIN:g}, {SIGMA_MAX:g}], where "
            f"2 sigma^2 and its inverse are normal float64 numbers; got {value!r}."
        )
    return value


@dataclass(frozen=True)
class RelaxationSpec:
    """Which assignment map an E-step uses.

    Parameters
    ----------
    kind : {"hard", "softmax", "entmax"}
        Hard nearest-centroid assignments, softmax (Shannon) or entmax-alpha
        (Tsallis) responsibilities.
    sigma : float
        Temperature in ``[SIGMA_MIN, SIGMA_MAX]`` (:func:`check_sigma`); ignored for
        ``"hard"``.
    alpha : float
        Entmax order, ``alpha > 1``; only used for ``"entmax"``.
    """

    kind: str
    sigma: float = 1.0
    alpha: float = 1.5

    def __post_init__(self):
        if self.kind != "hard":
            check_sigma(self.sigma)

    @property
    def tau(self):
        """Entropic weight ``2 sigma^2``."""
        return 2.0 * float(self.sigma) ** 2


#: Lloyd's nearest-centroid assignments, the relaxation of every hard pass.
HARD = RelaxationSpec("hard")


@dataclass
class BlockResult:
    """Per-row results of one block.

    Attributes
    ----------
    resp : array of shape (n_rows, n_clusters)
        Responsibilities; rows sum to 1.
    labels : array of shape (n_rows,)
        Index of the nearest centroid (the first one on ties).
    dmin : array of shape (n_rows,)
        Squared distance to the nearest centroid.
    margins : array of shape (n_rows,)
        Second smallest minus smallest squared distance (0 on ties, and 0 when
        there is a single centroid).
    row_objective : array of shape (n_rows,)
        Contribution of each row to the relaxation's objective.
    row_gap : array of shape (n_rows,)
        ``dmin - row_objective``, evaluated stably.
    """

    resp: object
    labels: object
    dmin: object
    margins: object
    row_objective: object
    row_gap: object


def nearest_two(D, xp=np_compat):
    """Nearest centroid, its squared distance and the margin of each row.

    Parameters
    ----------
    D : array of shape (n_rows, n_clusters)
        Squared distances.
    xp : module, default=array_api_compat.numpy
        Array namespace.

    Returns
    -------
    labels, dmin, margins : arrays of shape (n_rows,)
    """
    labels = xp.argmin(D, axis=1)
    rows = xp.arange(D.shape[0])
    dmin = D[rows, labels]
    if D.shape[1] == 1:
        return labels, dmin, xp.zeros_like(dmin)
    masked = D.copy()
    masked[rows, labels] = xp.inf
    margins = xp.min(masked, axis=1) - dmin
    return labels, dmin, margins


def hard_block(D, spec=None, xp=np_compat):
    """One-hot responsibilities of the nearest centroid (Lloyd's E-step)."""
    labels, dmin, margins = nearest_two(D, xp)
    resp = xp.zeros_like(D)
    resp[xp.arange(D.shape[0]), labels] = 1.0
    return BlockResult(resp, labels, dmin, margins, dmin, xp.zeros_like(dmin))


def softmax_block(D, spec, xp=np_compat):
    """Softmax responsibilities ``r_ij = softmax_j(-d_ij / (2 sigma^2))``.

    The row sum is split as ``1 + S_i`` with ``S_i`` the sum over the other
    centroids, so that the gap ``J_i - F_i = tau log1p(S_i)`` keeps full relative
    precision when ``S_i`` is far below machine epsilon.
    """
    labels, dmin, margins = nearest_two(D, xp)
    rows = xp.arange(D.shape[0])
    weights = xp.exp(-(D - dmin[:, None]) / spec.tau)
    weights[rows, labels] = 0.0
    others = xp.sum(weights, axis=1)
    weights[rows, labels] = 1.0
    resp = weights / (1.0 + others)[:, None]
    row_gap = spec.tau * xp.log1p(others)
    return BlockResult(resp, labels, dmin, margins, dmin - row_gap, row_gap)


def log_sum_exp_block(D, sigma, xp=np_compat):
    """``log sum_j exp(-d_ij / (2 sigma^2))`` per row, without overflow."""
    spec = RelaxationSpec("softmax", sigma)
    labels, dmin, _ = nearest_two(D, xp)
    weights = xp.exp(-(D - dmin[:, None]) / spec.tau)
    weights[xp.arange(D.shape[0]), labels] = 0.0
    return -dmin / spec.tau + xp.log1p(xp.sum(weights, axis=1))


def entmax_support_width(sigma, alpha):
    """Largest ``d_ij - dmin_i`` of a centroid that can carry mass under entmax.

    A centroid with ``d_ij - dmin_i >= 2 sigma^2 / (alpha - 1)`` has an exactly
    zero responsibility (Lemma 19 of the paper); a row is one-hot exactly when
    its margin reaches this width.
    """
    return 2.0 * float(sigma) ** 2 / (float(alpha) - 1.0)


def at_least(x, low, xp):
    """``maximum(x, low)`` elementwise for a Python number ``low``, in the dtype of ``x``
    (the compat namespaces do not all take a number in ``maximum``)."""
    return xp.maximum(x, xp.asarray(low, dtype=x.dtype, device=array_device(x)))


def _scaled_logits(D, dmin, spec, xp):
    """``(alpha - 1) z`` shifted to a row maximum of 0, clipped below at -2.

    Values at or below -1 can never be in the support (the threshold is at least
    ``max - 1``), so clipping them to -2 changes no responsibility and keeps
    powers and squares finite at any temperature.
    """
    scaled = -(float(spec.alpha) - 1.0) * (D - dmin[:, None]) / float(spec.tau)
    return at_least(scaled, -2.0, xp)


def _threshold_sorted(u, power_two, xp):
    """Exact threshold for alpha = 1.5 (``power_two``) or alpha = 2 by sorting.

    ``u`` holds the scaled logits of each row (maximum 0). For alpha = 1.5 the
    responsibilities are ``[u - t]_+^2`` (Peters et al. 2019, Algorithm 2); for
    alpha = 2 (sparsemax) they are ``[u - t]_+``.
    """
    k = u.shape[1]
    srt = -xp.sort(-u, axis=1)
    counts = xp.arange(1, k + 1, dtype=u.dtype, device=array_device(u))[None, :]
    csum = xp.cumulative_sum(srt, axis=1)
    if power_two:
        mean = csum / counts
        mean_sq = xp.cumulative_sum(srt * srt, axis=1) / counts
        delta = (1.0 - counts * (mean_sq - mean * mean)) / counts
        cand = mean - xp.sqrt(at_least(delta, 0.0, xp))
        support = xp.count_nonzero(cand <= srt, axis=1)
    else:
        cand = (csum - 1.0) / counts
        support = xp.count_nonzero(cand < srt, axis=1)
    support = at_least(support, 1, xp)
    return xp.take_along_axis(cand, (support - 1)[:, None], axis=1)[:, 0]


def _threshold_bisection(u, exponent, xp):
    """Threshold for general alpha by bisection, to the resolution of float64.

    ``sum_j [u_j - t]_+^exponent`` is decreasing in ``t``; it is at least 1 at
    ``t = -1`` and at most 1 at ``t = -(1/k)^(alpha-1)``.
    """
    k, device = u.shape[1], array_device(u)
    lo = xp.full(u.shape[0], -1.0, dtype=xp.float64, device=device)
    hi = xp.full(u.shape[0], -((1.0 / k) ** (1.0 / exponent)), dtype=xp.float64, device=device)
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        mass = xp.sum(at_least(u - mid[:, None], 0.0, xp) ** exponent, axis=1)
        above = mass >= 1.0
        lo = xp.where(above, mid, lo)
        hi = xp.where(above, hi, mid)
    return lo


def entmax_block(D, spec, xp=np_compat):
    """Entmax-alpha responsibilities ``[(alpha-1) z_ij - t_i]_+^(1/(alpha-1))``.

    Exact by sorting for ``alpha`` = 1.5 and 2, by bisection otherwise. Zeros
    are exact zeros. The row objective is
    ``sum_j r_ij d_ij - 2 sigma^2 H_alpha(r_i)`` with the Tsallis entropy
    ``H_alpha(p) = (1 - sum_j p_j^alpha) / (alpha (alpha - 1))``.
    """
    labels, dmin, margins = nearest_two(D, xp)
    alpha = float(spec.alpha)
    u = _scaled_logits(D, dmin, spec, xp)
    exponent = 1.0 / (alpha - 1.0)
    if alpha == 1.5:
        t = _threshold_sorted(u, True, xp)
    elif alpha == 2.0:
        t = _threshold_sorted(u, False, xp)
    else:
        t = _threshold_bisection(u, exponent, xp)
    resp, row_gap = entmax_from_threshold(u, t, D, dmin, spec, xp)
    return BlockResult(resp, labels, dmin, margins, dmin - row_gap, row_gap)


def entmax_from_threshold(u, t, D, dmin, spec, xp=np_compat):
    """Entmax responsibilities and row gaps once the threshold of each row is known.

    Parameters
    ----------
    u : array of shape (n_rows, n_clusters)
        Scaled logits ``(alpha - 1) z`` with row maximum 0.
    t : array of shape (n_rows,)
        Thresholds.
    D, dmin : arrays
        Squared distances and their row minima.
    spec : RelaxationSpec
    xp : module, default=array_api_compat.numpy

    Returns
    -------
    resp : array of shape (n_rows, n_clusters)
    row_gap : array of shape (n_rows,)
        ``tau H_alpha(r_i) - sum_j r_ij (d_ij - dmin_i)``.
    """
    alpha = float(spec.alpha)
    resp = at_least(u - t[:, None], 0.0, xp) ** (1.0 / (alpha - 1.0))
    resp /= xp.sum(resp, axis=1)[:, None]
    entropy = (1.0 - xp.sum(resp**alpha, axis=1)) / (alpha * (alpha - 1.0))
    excess = xp.sum(resp * (D - dmin[:, None]), axis=1)
    return resp, float(spec.tau) * entropy - excess


_BLOCKS = {"hard": hard_block, "softmax": softmax_block, "entmax": entmax_block}


def block_responsibilities(D, spec, xp=np_compat):
    """Dispatch to the block function of ``spec.kind``.

    Parameters
    ----------
    D : array of shape (n_rows, n_clusters), float64
        Squared distances.
    spec : RelaxationSpec
        Relaxation and temperature.
    xp : module, default=array_api_compat.numpy
        Array namespace.

    Returns
    -------
    BlockResult
    """
    return _BLOCKS[spec.kind](D, spec, xp)
