"""What an E-step computes: the relaxation, its temperature range and its conventions.

:class:`RelaxationSpec` names the assignment map of a pass (:data:`HARD`,
softmax or entmax-alpha at a temperature); the engines compute it, once per
engine family: the block kernels of the array-namespace engines (the reference
that every other engine is tested against) and the numba engine's compiled
rows (see :mod:`softkmeans._engines`).

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

__all__ = ["HARD", "SIGMA_MAX", "SIGMA_MIN", "RelaxationSpec", "check_sigma",
           "entmax_support_width"]


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


def entmax_support_width(sigma, alpha):
    """Largest ``d_ij - dmin_i`` of a centroid that can carry mass under entmax.

    A centroid with ``d_ij - dmin_i >= 2 sigma^2 / (alpha - 1)`` has an exactly
    zero responsibility (Lemma 19 of the paper); a row is one-hot exactly when
    its margin reaches this width.
    """
    return 2.0 * float(sigma) ** 2 / (float(alpha) - 1.0)
