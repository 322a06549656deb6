"""Block kernels of the array-namespace engines, written once against the array API standard.

The responsibilities of the array family are computed here and nowhere else:
:class:`ArrayKernels` is the reference, operations of the array API standard
over an ``array-api-compat`` namespace ``xp``, so that they run with numpy (on
the CPU, in CI), array-api-strict, PyTorch (CPU or CUDA) and CuPy.
:class:`softkmeans._engines._cupy.CupyKernels` replaces some methods by fused
CUDA kernels, :class:`NumpyKernels` writes numpy's elementwise results in
place; both are tested against this class. :func:`block_responsibilities`
gives one block's results at once (the reproduction and the tests read it).

Every method takes a block ``D`` of squared distances (rows: observations,
columns: centroids) in the engine's compute dtype, and follows the conventions
of :mod:`softkmeans._core.responsibilities` (shift by the row minimum, gap from
``log1p``).

The entmax threshold is exact: by sorting for alpha = 1.5 and 2 (Peters et al.
2019, Algorithm 2), by bisection to the resolution of float64 otherwise. Only
the centroids within ``2 sigma^2 / (alpha - 1)`` of the nearest one can carry
mass, so for alpha = 1.5 and 2 the sort runs on those candidates alone (a few
per row once the clusters are resolved) instead of on all ``n_clusters``
values.
"""

from dataclasses import dataclass

import numpy as np
from sklearn.externals.array_api_compat import device as array_device
from sklearn.externals.array_api_compat import is_numpy_namespace
from sklearn.externals.array_api_compat import numpy as np_compat

__all__ = ["ArrayKernels", "BlockResult", "CANDIDATE_CAP", "NumpyKernels",
           "block_responsibilities"]

#: Rows with more entmax candidates than this are sorted in full.
CANDIDATE_CAP = 32
#: Halvings of the entmax bisection: the bracket ``[-1, 0]`` to the resolution of float64.
BISECTION_STEPS = 80


@dataclass
class BlockResult:
    """Per-row results of one block (:func:`block_responsibilities`).

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


def block_responsibilities(D, spec, xp=np_compat):
    """The responsibilities of one block and its per-row results, by the reference kernels.

    Parameters
    ----------
    D : array of shape (n_rows, n_clusters)
        Squared distances (not modified).
    spec : RelaxationSpec
        Relaxation and temperature.
    xp : module, default=array_api_compat.numpy
        Array namespace of ``D``.

    Returns
    -------
    BlockResult

    Examples
    --------
    >>> import numpy as np
    >>> from softkmeans._core.responsibilities import RelaxationSpec
    >>> from softkmeans._engines._array_kernels import block_responsibilities
    >>> block = block_responsibilities(np.array([[0.0, 2.0]]), RelaxationSpec("softmax", 1.0))
    >>> block.resp.round(4).tolist(), block.labels.tolist()
    ([[0.7311, 0.2689]], [0])
    """
    kernels = NumpyKernels() if is_numpy_namespace(xp) else ArrayKernels(xp)
    labels, dmin, margins, resp, row_gap, _ = kernels.assign(xp.asarray(D, copy=True), spec)
    if resp is None:
        clusters = xp.arange(D.shape[1], device=array_device(D))
        resp = xp.astype(labels[:, None] == clusters[None, :], D.dtype)
    return BlockResult(resp, labels, dmin, margins, dmin - row_gap, row_gap)


def at_least(x, low, xp):
    """``maximum(x, low)`` elementwise for a Python number ``low``, in the dtype of ``x``
    (the compat namespaces do not all take a number in ``maximum``)."""
    return xp.maximum(x, xp.asarray(low, dtype=x.dtype, device=array_device(x)))


def _threshold_sorted(u, power_two, xp):
    """Exact threshold for alpha = 1.5 (``power_two``) or alpha = 2 by sorting.

    ``u`` holds the scaled logits of each row (maximum 0). For alpha = 1.5 the
    responsibilities are ``[u - t]_+^2``; for alpha = 2 (sparsemax) they are
    ``[u - t]_+``. The support size is the number of sizes ``s`` whose
    candidate threshold lies below the ``s``-th largest value.
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
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        mass = xp.sum(at_least(u - mid[:, None], 0.0, xp) ** exponent, axis=1)
        above = mass >= 1.0
        lo = xp.where(above, mid, lo)
        hi = xp.where(above, hi, mid)
    return lo


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

    def log_sum_exp(self, D, tau):
        """``log sum_j exp(-d_ij / tau)`` of every row, in float64."""
        xp = self.xp
        labels, dmin, _ = self.nearest_two(D)
        others = self.softmax_others(D, labels, dmin, tau)
        return -xp.astype(dmin, xp.float64) / tau + xp.log1p(xp.astype(others, xp.float64))

    def assign(self, D, spec):
        """labels, dmin, margins, responsibilities, row gaps and the rows with mass on more
        than one centroid of a block (both None when hard); ``D`` may be overwritten.

        A softmax row is spread unless every other weight underflows to 0, an
        entmax row when it has more than one nonzero entry.
        """
        xp = self.xp
        labels, dmin, margins = self.nearest_two(D)
        if spec.kind == "hard":
            return labels, dmin, margins, None, xp.zeros_like(dmin), None
        if spec.kind == "softmax":
            tau = float(spec.tau)
            others = self.softmax_others(D, labels, dmin, tau)
            resp = self.softmax_resp(D, dmin, others, tau)
            return labels, dmin, margins, resp, tau * xp.log1p(others), others > 0
        resp, row_gap = self.entmax(D, dmin, spec)
        return labels, dmin, margins, resp, row_gap, xp.count_nonzero(resp, axis=1) > 1

    def entmax(self, D, dmin, spec):
        """Entmax responsibilities ``[(alpha-1) z_ij - t_i]_+^(1/(alpha-1))`` and the row
        gaps ``tau H_alpha(r_i) - sum_j r_ij (d_ij - dmin_i)``.

        ``H_alpha(p) = (1 - sum_j p_j^alpha) / (alpha (alpha - 1))`` is the
        Tsallis entropy. The scaled logits ``u = (alpha - 1) z``, shifted to a
        row maximum of 0, are clipped below at -2: values at or below -1 are
        never in the support (the threshold is at least ``max - 1``), and the
        clip keeps powers and squares finite at any temperature. Zeros are
        exact zeros.
        """
        xp = self.xp
        alpha, tau = float(spec.alpha), float(spec.tau)
        excess = D - dmin[:, None]
        u = self._at_least(-(alpha - 1.0) * excess / tau, -2.0)
        if alpha in (1.5, 2.0):
            t = self.entmax_threshold(u, alpha == 1.5)
        else:
            t = _threshold_bisection(u, 1.0 / (alpha - 1.0), xp)
        resp = at_least(u - t[:, None], 0.0, xp) ** (1.0 / (alpha - 1.0))
        resp /= xp.sum(resp, axis=1)[:, None]
        entropy = (1.0 - xp.sum(resp**alpha, axis=1)) / (alpha * (alpha - 1.0))
        return resp, tau * entropy - xp.sum(resp * excess, axis=1)

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
