"""Block kernels of the device engine, written once against an array namespace ``xp``.

:class:`ArrayKernels` is the reference: plain array operations that run with
numpy (on the CPU, in CI) and with CuPy. :class:`softkmeans._engines._cupy.CupyKernels`
replaces some methods by fused CUDA kernels and is tested against this class.

Every method takes a block ``D`` of squared distances (rows: observations,
columns: centroids) in the engine's compute dtype, and follows the conventions
of :mod:`softkmeans._core.responsibilities` (shift by the row minimum, gap from
``log1p``); in float64 the results equal those of that module.

The entmax threshold differs from the reference in how it is found, not in what
it is: only the centroids within ``2 sigma^2 / (alpha - 1)`` of the nearest one
can carry mass, so for alpha = 1.5 and 2 the exact sort runs on those
candidates alone (a few per row once the clusters are resolved) instead of on
all ``n_clusters`` values.
"""

from .._core.responsibilities import (
    _scaled_logits,
    _threshold_bisection,
    _threshold_sorted,
    entmax_from_threshold,
)

__all__ = ["ArrayKernels", "CANDIDATE_CAP"]

#: Rows with more entmax candidates than this are sorted in full.
CANDIDATE_CAP = 32


class ArrayKernels:
    """Reference block kernels over the array namespace ``xp``.

    Parameters
    ----------
    xp : module
        ``numpy`` or ``cupy``.
    candidate_cap : int, default=CANDIDATE_CAP
        Largest number of entmax candidates of a row solved on its candidates
        alone; rows with more are sorted in full.

    Examples
    --------
    >>> import numpy as np
    >>> from softkmeans._engines._array_kernels import ArrayKernels
    >>> D = np.array([[1.0, 0.0, 9.0]])
    >>> labels, dmin, margins = ArrayKernels(np).nearest_two(D)
    >>> int(labels[0]), float(dmin[0]), float(margins[0])
    (1, 0.0, 1.0)
    """

    def __init__(self, xp, candidate_cap=CANDIDATE_CAP):
        self.xp = xp
        self.candidate_cap = candidate_cap

    def finish_distances(self, cross, x_sq, c_sq):
        """Turn ``cross = X_b @ C.T`` into ``max(||x||^2 - 2 cross + ||mu||^2, 0)`` in place."""
        cross *= -2.0
        cross += x_sq[:, None]
        cross += c_sq[None, :]
        return self.xp.maximum(cross, 0.0, out=cross)

    def nearest_two(self, D):
        """Labels, smallest squared distance and margin of each row (0 on ties)."""
        xp = self.xp
        labels = xp.argmin(D, axis=1)
        dmin = xp.take_along_axis(D, labels[:, None], axis=1)[:, 0]
        if D.shape[1] == 1:
            return labels, dmin, xp.zeros_like(dmin)
        above = D > dmin[:, None]
        second = xp.min(xp.where(above, D, xp.inf), axis=1)
        tied = xp.sum(~above, axis=1) > 1
        return labels, dmin, xp.where(tied, 0.0, second - dmin).astype(D.dtype)

    def softmax_others(self, D, labels, dmin, tau):
        """``S_i = sum_{j != label_i} exp(-(d_ij - dmin_i) / tau)``."""
        xp = self.xp
        weights = xp.exp(-(D - dmin[:, None]) / tau)
        weights[xp.arange(D.shape[0]), labels] = 0.0
        return xp.sum(weights, axis=1)

    def softmax_resp(self, D, dmin, others, tau):
        """Softmax responsibilities ``exp(-(d_ij - dmin_i) / tau) / (1 + S_i)``, over ``D``."""
        xp = self.xp
        D -= dmin[:, None]
        D *= -1.0
        D /= tau
        xp.exp(D, out=D)
        D /= (1.0 + others)[:, None]
        return D

    def entmax(self, D, dmin, spec):
        """Entmax responsibilities and the row gaps ``dmin_i - row_objective_i``."""
        xp = self.xp
        alpha = float(spec.alpha)
        u = _scaled_logits(D, dmin, spec, xp)
        if alpha in (1.5, 2.0):
            t = self.entmax_threshold(u, alpha == 1.5)
        else:
            t = _threshold_bisection(u, 1.0 / (alpha - 1.0), xp)
        return entmax_from_threshold(u, t, D, dmin, spec, xp)

    def entmax_threshold(self, u, power_two):
        """Exact threshold of the sorted algorithm, sorting each row's candidates only.

        ``u`` holds scaled logits with row maximum 0 and values clipped at -2;
        the candidates are the entries above -1, the only ones the threshold
        (at least -1) can keep. Rows with at most ``candidate_cap`` candidates
        are solved on a ``(rows, m)`` matrix of their candidates padded with -2;
        the others on their full rows.
        """
        xp = self.xp
        n_rows, k = u.shape
        if k <= self.candidate_cap:
            return _threshold_sorted(u, power_two, xp)
        cand = u > -1.0
        counts = xp.sum(cand, axis=1)
        few = counts <= self.candidate_cap
        if bool(xp.all(few)):
            return self._candidate_threshold(u, cand, counts, power_two)
        t = xp.empty(n_rows, dtype=u.dtype)
        rows_few = xp.flatnonzero(few)
        rows_many = xp.flatnonzero(~few)
        if rows_few.size:
            t[rows_few] = self._candidate_threshold(
                u[rows_few], cand[rows_few], counts[rows_few], power_two)
        t[rows_many] = _threshold_sorted(u[rows_many], power_two, xp)
        return t

    def _candidate_threshold(self, u, cand, counts, power_two):
        xp = self.xp
        width = int(xp.max(counts))
        rows, cols = xp.nonzero(cand)
        starts = xp.cumsum(counts) - counts
        position = xp.arange(rows.size) - starts[rows]
        top = xp.full((u.shape[0], width), -2.0, dtype=u.dtype)
        top[rows, position] = u[rows, cols]
        return _threshold_sorted(top, power_two, xp)
