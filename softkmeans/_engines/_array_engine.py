"""The device engine, generic over an array namespace.

:class:`ArrayEngine` runs the passes of the GPU engine with whatever namespace
its subclass names: numpy here (so that CI, without a GPU, runs the GPU code
path and compares it with the numpy oracle), CuPy in
:class:`softkmeans._engines._cupy.CupyEngine`. It differs from the oracle
:class:`~softkmeans._engines._numpy.NumpyEngine` in ways that matter on a GPU,
not in what it computes:

- it computes in the dtype of X (float32 stays float32) and sums the
  statistics in float64; dense data far from the origin are centred for
  their distances (:func:`._conditioning.centering_shift`), as by every engine;
- its row blocks are large (:data:`DEVICE_BLOCK_ELEMENTS`), so that kernel
  launches are few;
- the update's ``R^T [w X, w]`` is one matrix product (a sparse one-hot matrix
  for hard assignments), with the weights folded into a copy of X made once;
- the block kernels are a replaceable :class:`ArrayKernels` object (fused CUDA
  kernels on a GPU), and the entmax threshold sorts each row's candidates only.

The engine contract is that of the oracle: ``X``, ``sample_weight`` and
``x_sq`` are host (numpy) arrays, ``row(i)`` is a host float64 vector, and
:class:`~softkmeans._engines._stats.PassStats` holds host arrays. The
``n_samples x n_clusters`` results (``responsibilities``, ``sq_distances``,
``log_sum_exp``) are returned where the input lives, so that a CuPy input
keeps them on the GPU.
"""

import numpy as np
import scipy.sparse

from .._core.bounds import unit_roundoff
from .._core.responsibilities import RelaxationSpec
from ._array_kernels import ArrayKernels
from ._block import BlockEngine
from ._chunks import row_blocks
from ._conditioning import centering_shift, power_of_two_scale
from ._namespace import is_cupy_array, to_numpy
from ._numpy import twin_columns
from ._stats import PassStats

__all__ = ["ArrayEngine", "DEVICE_BLOCK_ELEMENTS", "FLOAT32_TAU_RANGE"]

#: Entries of one (rows x n_clusters) block on a device: 2^27 (512 MiB in float32).
DEVICE_BLOCK_ELEMENTS = 1 << 27
#: ``2 sigma^2`` for which float32 blocks are computed in float32; outside, in float64. Beyond
#: it ``1 / (2 sigma^2)`` (tiny sigma) or the row gaps ``2 sigma^2 log(1 + S)`` (huge sigma)
#: leave float32's range, and gave NaN or inf.
FLOAT32_TAU_RANGE = (2.0**-100, 2.0**100)


class ArrayEngine(BlockEngine):
    """Chunked passes of the device engine, here with numpy.

    The passes that write or reduce a value per row and centroid are
    :class:`._block.BlockEngine`'s over :meth:`_blocks`, in the dtype of X
    unless a caller names another.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
        Validated data (float32 or float64), on the host or in the engine's
        namespace.
    sample_weight : ndarray of shape (n_samples,), default=None
        Non-negative weights on the host; ones when None.
    block_elements : int, default=DEVICE_BLOCK_ELEMENTS
        Entries of one block of distances.

    Examples
    --------
    >>> import numpy as np
    >>> from softkmeans._engines._array_engine import ArrayEngine
    >>> from softkmeans._core.responsibilities import RelaxationSpec
    >>> X = np.array([[0.0, 0.0], [0.0, 1.0], [4.0, 0.0]])
    >>> stats = ArrayEngine(X).estep(X[[0, 2]], RelaxationSpec("hard"))
    >>> stats.labels.tolist(), stats.masses.tolist()
    ([0, 0, 1], [2.0, 1.0])
    """

    name = "array"
    xp = np
    sparse = scipy.sparse

    def __init__(self, X, sample_weight=None, block_elements=DEVICE_BLOCK_ELEMENTS):
        self._input = X
        self._host_X = None
        self._keep_on_device = is_cupy_array(X)
        self.block_elements = block_elements
        self.kernels = self._make_kernels()
        n = X.shape[0]
        self.sample_weight = (
            np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        )
        self._X = self._to_device(X)
        self._is_sparse = self.sparse.issparse(self._X)
        self.dtype = np.dtype(X.dtype)
        self._w64 = self._to_device(self.sample_weight)
        # the products' weights, over a power of two; sums and masses are scaled back
        self._weight_scale = power_of_two_scale(self.sample_weight)
        self._w = (self._w64 / self._weight_scale).astype(self.dtype)
        x_sq = self._row_sq_norms()
        self.x_sq = np.asarray(self._to_host(x_sq), dtype=np.float64)
        shift = None if self._is_sparse else centering_shift(self._X)
        self._shift = None if shift is None else self._to_device(shift)
        self._distance_norms = self.x_sq
        if self._shift is not None:
            x_sq = self._row_sq_norms(self._shift)
            self._distance_norms = np.asarray(self._to_host(x_sq), dtype=np.float64)
        self._x_sq = x_sq.astype(self.dtype)  # of the points the distances are computed from
        self._Xw = self._weighted_X()

    @property
    def unit_roundoff(self):
        """Unit roundoff of the passes' arithmetic, which runs in the dtype of X."""
        return unit_roundoff(self.dtype)

    @property
    def _compute_dtype(self):
        return self.dtype

    # ------------------------------------------------------------ namespace
    def _make_kernels(self):
        return ArrayKernels(self.xp)

    def _to_device(self, a):
        return a

    def _to_host(self, a):
        return a

    def _output(self, a):
        """An ``n_samples``-sized result, where the input lives."""
        return a if self._keep_on_device else self._to_host(a)

    # ----------------------------------------------------------------- data
    @property
    def X(self):
        """The data on the host (copied from the device once, when first asked for)."""
        if self._host_X is None:
            self._host_X = to_numpy(self._input)
        return self._host_X

    @property
    def n_samples(self):
        return self._X.shape[0]

    @property
    def distance_shift(self):
        """The point (float64, on the host) subtracted from X and the centroids before their
        distances, or None (:func:`._conditioning.centering_shift`)."""
        return None if self._shift is None else self._to_host(self._shift)

    def distance_norms(self):
        """``||x_i - shift||^2`` in float64 on the host (``x_sq`` when X is not shifted)."""
        return self._distance_norms

    def row(self, i):
        """Observation ``i`` as a dense float64 host vector."""
        x = self._X[i:i + 1]
        x = x.toarray() if self._is_sparse else x
        return np.asarray(self._to_host(x), dtype=np.float64).ravel()

    def _with_data(self, data):
        """A CSR matrix with the sparsity pattern of X and the stored values ``data``."""
        X = self._X
        return self.sparse.csr_matrix((data, X.indices, X.indptr), shape=X.shape)

    def _row_sq_norms(self, shift=None):
        """``||x_i - shift||^2`` in float64 (``shift``, a device float64 point: dense X only)."""
        xp = self.xp
        if self._is_sparse:
            data = self._X.data.astype(np.float64)
            return self._with_data(data * data) @ xp.ones(self._X.shape[1])
        X64 = self._X.astype(np.float64)
        if shift is not None:
            X64 -= shift
        return xp.sum(X64 * X64, axis=1)

    def _weighted_X(self):
        """``w X`` (CSR), or ``[w (X - shift), w]`` (dense) so that one product gives sums and
        masses; the sums of the shifted rows keep the precision of the data's spread, not of
        their distance to the origin (:meth:`estep` adds ``masses * shift`` back)."""
        xp, X, w = self.xp, self._X, self._w
        if not self._is_sparse:
            if self._shift is not None:
                X = X - self._shift.astype(self.dtype)
            return xp.concatenate([X * w[:, None], w[:, None]], axis=1)
        row_of_entry = xp.searchsorted(X.indptr, xp.arange(X.nnz), side="right") - 1
        return self._with_data(X.data * w[row_of_entry])

    def _blocks(self, centers):
        """Row blocks and their squared distances to ``centers``, in the dtype of X.

        With a shift (:func:`._conditioning.centering_shift`) the distances are
        those of the shifted block to the shifted centroids: the same
        distances, without the cancellation of data far from the origin.
        """
        C64 = self._to_device(np.asarray(centers, dtype=np.float64))
        if self._shift is not None:
            C64 = C64 - self._shift
            shift = self._shift.astype(self.dtype)
        c_sq = self.xp.sum(C64 * C64, axis=1).astype(self.dtype)
        C = C64.astype(self.dtype)
        host = np.asarray(centers, dtype=np.float64)
        copies, originals = (self._to_device(a) for a in
                             twin_columns(host, np.einsum("ij,ij->i", host, host)))
        for rows in row_blocks(self.n_samples, C.shape[0], self.block_elements):
            Xb = self._X[rows] if self._shift is None else self._X[rows] - shift
            cross = self.xp.asarray(Xb @ C.T)
            if len(copies):  # equal centroids tie exactly (see first_equal_rows)
                cross[:, copies] = cross[:, originals]
            yield rows, self.kernels.finish_distances(cross, self._x_sq[rows], c_sq)

    def _in_range(self, D, spec):
        """The block ``D``, in float64 where the temperature is out of float32's range."""
        if D.dtype == np.float32 and spec.kind != "hard":
            low, high = FLOAT32_TAU_RANGE
            if not low <= spec.tau <= high:
                return D.astype(np.float64)
        return D

    # --------------------------------------------------------------- passes
    def _assign(self, D, spec):
        """labels, dmin, margins, responsibilities (None when hard) and row gaps of a block."""
        kernels = self.kernels
        D = self._in_range(D, spec)
        labels, dmin, margins = kernels.nearest_two(D)
        if spec.kind == "hard":
            return labels, dmin, margins, None, self.xp.zeros_like(dmin)
        if spec.kind == "softmax":
            others = kernels.softmax_others(D, labels, dmin, spec.tau)
            resp = kernels.softmax_resp(D, dmin, others, spec.tau)
            return labels, dmin, margins, resp, spec.tau * self.xp.log1p(others)
        resp, row_gap = kernels.entmax(D, dmin, spec)
        return labels, dmin, margins, resp, row_gap

    def _one_hot_t(self, labels, n_clusters):
        """The (n_clusters x rows) one-hot matrix of ``labels``, sparse."""
        xp, m = self.xp, labels.shape[0]
        return self.sparse.csc_matrix(
            (xp.ones(m, dtype=self.dtype), labels.astype(np.int32),
             xp.arange(m + 1, dtype=np.int32)),
            shape=(n_clusters, m),
        )

    def _accumulate(self, acc, rows, resp_t, with_sums):
        """``acc[:, :d] += R^T (w X)`` (when ``with_sums``) and ``acc[:, d] += R^T w``."""
        d = acc.shape[1] - 1
        if with_sums and not self._is_sparse:
            acc += _dense(resp_t @ self._Xw[rows])
            return
        acc[:, d] += _dense(resp_t @ self._w[rows][:, None])[:, 0]
        if with_sums:
            acc[:, :d] += _dense(self._Xw[rows].T @ resp_t.T).T

    def estep(self, centers, spec, with_sums=True):
        """One pass (:meth:`softkmeans._engines._contract.Engine.estep`); host arrays."""
        xp = self.xp
        k, d = centers.shape
        n = self.n_samples
        acc = xp.zeros((k, d + 1))
        labels = xp.empty(n, dtype=np.int32)
        margins = xp.empty(n, dtype=self.dtype)
        dmin = xp.empty(n, dtype=self.dtype)
        totals = xp.zeros(3)
        for rows, D in self._blocks(centers):
            lab, dm, mg, resp, row_gap = self._assign(D, spec)
            resp_t = self._one_hot_t(lab, k) if resp is None else resp.T
            self._accumulate(acc, rows, resp_t, with_sums)
            w = self._w64[rows]
            totals += xp.stack([w @ (dm - row_gap).astype(np.float64),
                                w @ dm.astype(np.float64), w @ row_gap.astype(np.float64)])
            labels[rows] = lab
            margins[rows] = mg
            dmin[rows] = dm
        acc, totals = self._to_host(acc) * self._weight_scale, self._to_host(totals)
        objective, inertia, gap = (float(v) for v in totals)
        sums, masses = np.ascontiguousarray(acc[:, :d]), np.ascontiguousarray(acc[:, d])
        if with_sums and self._shift is not None:
            sums += masses[:, None] * self._to_host(self._shift)[None, :]
        return PassStats(
            sums, masses, objective,
            inertia, gap, self._to_host(labels),
            self._to_host(margins).astype(np.float64), self._to_host(dmin).astype(np.float64),
        )

    def _block_responsibilities(self, D, spec):
        labels, _, _, resp, _ = self._assign(D, spec)
        return _dense(self._one_hot_t(labels, D.shape[1]).T) if resp is None else resp

    def _block_log_sum_exp(self, D, sigma):
        """In float64."""
        spec = RelaxationSpec("softmax", sigma)
        D = self._in_range(D, spec)
        labels, dmin, _ = self.kernels.nearest_two(D)
        others = self.kernels.softmax_others(D, labels, dmin, spec.tau)
        return -dmin.astype(np.float64) / spec.tau + self.xp.log1p(others.astype(np.float64))

    def _weights_on_device(self):
        return self._w64


def _dense(a):
    """A dense array from a matrix product that may have returned a sparse matrix."""
    return a.toarray() if hasattr(a, "toarray") else a
