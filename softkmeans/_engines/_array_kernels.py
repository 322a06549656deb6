"""Block kernels of the device engine, written once against the array API standard.

:class:`ArrayKernels` is the reference: operations of the array API standard
over an ``array-api-compat`` namespace ``xp``, so that they run with numpy (on
the CPU, in CI), array-api-strict, PyTorch (CPU or CUDA) and CuPy.
:class:`softkmeans._engines._cupy.CupyKernels` replaces some methods by fused
CUDA kernels, :class:`NumpyKernels` writes numpy's elementwise results in
place; both are tested against this class.

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

import numpy as np
from sklearn.externals.array_api_compat import device as array_device
from sklearn.externals.array_api_compat import numpy as np_compat

from .._core.responsibilities import (
    _scaled_logits,
    _threshold_bisection,
    _threshold_sorted,
    at_least,
    entmax_from_threshold,
)

__all__ = ["ArrayKernels", "CANDIDATE_CAP", "NumpyKernels"]

#: Rows with more entmax candidates than this are sorted in full.
CANDIDATE_CAP = 32


class ArrayKernels:
    """Reference block kernels over the array namespace ``xp``.

    Parameters
    ----------
    xp : module
        An ``array-api-compat`` namespace (numpy's, PyTorch's, CuPy's) or
        another namespace of the array API standard (array-api-strict).
    candidate_cap : int, default=CANDIDATE_CAP
        Largest number of entmax candidates of a row solved on its candidates
        alone; rows with more are sorted in full.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.externals.array_api_compat import numpy as xp
    >>> from softkmeans._engines._array_kernels import ArrayKernels
    >>> D = np.array([[1.0, 0.0, 9.0]])
    >>> labels, dmin, margins = ArrayKernels(xp).nearest_two(D)
    >>> int(labels[0]), float(dmin[0]), float(margins[0])
    (1, 0.0, 1.0)
    """

    def __init__(self, xp, candidate_cap=CANDIDATE_CAP):
        self.xp = xp
        self.candidate_cap = candidate_cap

    def _at_least(self, x, low):
        """``maximum(x, low)``; may overwrite ``x``."""
        return at_least(x, low, self.xp)

    def _exp(self, x):
        """``exp(x)``; may overwrite ``x``."""
        return self.xp.exp(x)

    def _zero_at(self, a, labels):
        """``a`` with ``a[i, labels[i]] = 0`` in every row; may overwrite ``a``."""
        columns = self.xp.arange(a.shape[1], device=array_device(a))
        return self.xp.where(columns[None, :] == labels[:, None], 0.0, a)

    def finish_distances(self, cross, x_sq, c_sq):
        """``max(||x||^2 - 2 cross + ||mu||^2, 0)`` from ``cross = X_b @ C.T`` (overwritten)."""
        cross *= -2.0
        cross += x_sq[:, None]
        cross += c_sq[None, :]
        return self._at_least(cross, 0.0)

    def nearest_two(self, D):
        """Labels, smallest squared distance and margin of each row (0 on ties)."""
        xp = self.xp
        labels = xp.argmin(D, axis=1)
        dmin = xp.take_along_axis(D, labels[:, None], axis=1)[:, 0]
        if D.shape[1] == 1:
            return labels, dmin, xp.zeros_like(dmin)
        above = D > dmin[:, None]
        second = xp.min(xp.where(above, D, xp.inf), axis=1)
        tied = xp.count_nonzero(~above, axis=1) > 1
        return labels, dmin, xp.where(tied, 0.0, second - dmin)

    def softmax_others(self, D, labels, dmin, tau):
        """``S_i = sum_{j != label_i} exp(-(d_ij - dmin_i) / tau)``."""
        xp = self.xp
        weights = xp.exp(-(D - dmin[:, None]) / tau)
        return xp.sum(self._zero_at(weights, labels), axis=1)

    def softmax_resp(self, D, dmin, others, tau):
        """Softmax responsibilities ``exp(-(d_ij - dmin_i) / tau) / (1 + S_i)`` (``D`` is
        overwritten)."""
        D -= dmin[:, None]
        D *= -1.0
        D /= tau
        D = self._exp(D)
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
        if u.shape[1] <= self.candidate_cap:
            return _threshold_sorted(u, power_two, xp)
        cand = u > -1.0
        counts = xp.count_nonzero(cand, axis=1)
        few = counts <= self.candidate_cap
        if bool(xp.all(few)):
            return self._candidate_threshold(u, cand, counts, power_two)
        rows_few, rows_many = xp.nonzero(few)[0], xp.nonzero(~few)[0]
        t_many = _threshold_sorted(xp.take(u, rows_many, axis=0), power_two, xp)
        if rows_few.shape[0] == 0:
            return t_many
        t_few = self._candidate_threshold(*(xp.take(a, rows_few, axis=0)
                                            for a in (u, cand, counts)), power_two)
        # the rows in their order again: position r of the concatenation holds row order[r]
        order = xp.concat([rows_few, rows_many])
        return xp.take(xp.concat([t_few, t_many]), xp.argsort(order))

    def _candidate_threshold(self, u, cand, counts, power_two):
        """The threshold of rows whose candidates (``cand``, ``counts`` per row) are few."""
        return _threshold_sorted(self._candidates(u, cand, counts), power_two, self.xp)

    def _candidates(self, u, cand, counts):
        """The ``(rows, max(counts))`` matrix of each row's candidates, padded with -2.

        The ``p``-th candidate of row ``i`` is candidate number ``starts_i + p``
        in row-major order; a search in the running count of candidates finds
        its position, without a scatter (which the standard does not have).
        """
        xp = self.xp
        n_rows, width = u.shape[0], int(xp.max(counts))
        running = xp.cumulative_sum(xp.reshape(xp.astype(cand, counts.dtype), (-1,)))
        starts = xp.cumulative_sum(counts) - counts
        slots = xp.arange(width, dtype=counts.dtype, device=array_device(u))[None, :]
        filled = slots < counts[:, None]
        rank = starts[:, None] + xp.where(filled, slots, 0) + 1
        flat = xp.searchsorted(running, xp.reshape(rank, (-1,)))
        top = xp.reshape(xp.take(xp.reshape(u, (-1,)), flat), (n_rows, width))
        return xp.where(filled, top, -2.0)


class NumpyKernels(ArrayKernels):
    """:class:`ArrayKernels` over numpy, with what the standard does not have: elementwise
    results written into their input (``out=``) and scatters, instead of new blocks and
    searches. The same values.
    """

    def __init__(self, candidate_cap=CANDIDATE_CAP):
        super().__init__(np_compat, candidate_cap)

    def _at_least(self, x, low):
        return np.maximum(x, low, out=x)

    def _exp(self, x):
        return np.exp(x, out=x)

    def _zero_at(self, a, labels):
        a[np.arange(a.shape[0]), labels] = 0.0
        return a

    def _candidates(self, u, cand, counts):
        rows, cols = np.nonzero(cand)
        position = np.arange(rows.size) - (np.cumsum(counts) - counts)[rows]
        top = np.full((u.shape[0], int(counts.max())), -2.0, dtype=u.dtype)
        top[rows, position] = u[rows, cols]
        return top
