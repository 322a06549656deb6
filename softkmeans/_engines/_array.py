"""The array-namespace engine, and over numpy in float64 the reference engine.

:class:`ArrayEngine` walks over X in row blocks. It computes each block's
squared distances through the expansion ``||x||^2 - 2 x.mu + ||mu||^2`` (dense
data far from the origin shifted first, :func:`._conditioning.centering_shift`),
turns them into responsibilities with its block kernels
(:class:`._array_kernels.ArrayKernels`) and accumulates the sufficient
statistics in float64. Nothing of size ``n_samples x n_clusters`` is
allocated unless a caller asks for it (``responsibilities``,
``sq_distances``).

Three settings make it one engine or another:

- the namespace ``xp``: numpy here, CuPy in
  :class:`softkmeans._engines._cupy.CupyEngine` (whose kernels are fused
  CUDA kernels);
- the compute dtype: that of X for the device engine (float32 stays
  float32), float64 for :class:`NumpyEngine`, the readable reference every
  other engine is tested against;
- the size of a block: small on the CPU (:data:`._chunks.BLOCK_ELEMENTS`),
  large on a device (:data:`DEVICE_BLOCK_ELEMENTS`), where kernel launches
  should be few.

``X``, ``sample_weight`` and ``x_sq`` are host arrays, ``row(i)`` a host
float64 vector, and :class:`~softkmeans._engines._stats.PassStats` holds host
arrays. The ``n_samples x n_clusters`` results are returned where the input
lives, so that a CuPy input keeps them on the GPU.
"""

import numpy as np
import scipy.sparse

from .._core.bounds import unit_roundoff
from .._core.responsibilities import RelaxationSpec
from ._array_kernels import ArrayKernels
from ._block import BlockEngine
from ._chunks import BLOCK_ELEMENTS, row_blocks
from ._conditioning import centering_shift, power_of_two_scale
from ._namespace import is_cupy_array, to_numpy
from ._stats import PassStats

__all__ = ["ArrayEngine", "DEVICE_BLOCK_ELEMENTS", "FLOAT32_TAU_RANGE", "NumpyEngine",
           "first_equal_rows", "row_sq_norms", "twin_columns"]

#: Entries of one (rows x n_clusters) block on a device: 2^27 (512 MiB in float32).
DEVICE_BLOCK_ELEMENTS = 1 << 27
#: ``2 sigma^2`` for which float32 blocks are computed in float32; outside, in float64. Beyond
#: it ``1 / (2 sigma^2)`` (tiny sigma) or the row gaps ``2 sigma^2 log(1 + S)`` (huge sigma)
#: leave float32's range, and gave NaN or inf.
FLOAT32_TAU_RANGE = (2.0**-100, 2.0**100)
#: Up to this many centroids, :func:`first_equal_rows` looks rows up in a dictionary.
_FEW_CENTROIDS = 64


def row_sq_norms(X, shift=None, xp=np, block_elements=BLOCK_ELEMENTS):
    """``||x_i - shift||^2`` of every row, summed in float64 whatever the dtype of X.

    Dense X is converted block by block, so that no float64 copy of the whole
    of X exists; ``shift`` (dense X only) is a float64 point of ``xp``, none by
    default. X is a numpy array or SciPy CSR matrix with ``xp=numpy``, their
    CuPy counterparts with ``xp=cupy``.
    """
    if hasattr(X, "indptr"):  # CSR
        squares = X.data.astype(np.float64) ** 2
        return type(X)((squares, X.indices, X.indptr), shape=X.shape) @ xp.ones(X.shape[1])
    out = xp.empty(X.shape[0])
    for rows in row_blocks(X.shape[0], X.shape[1], block_elements):
        block = X[rows].astype(np.float64)
        if shift is not None:
            block -= shift
        out[rows] = xp.sum(block * block, axis=1)
    return out


def first_equal_rows(centers, c_sq):
    """``first[j]``: the first centroid equal to centroid ``j`` (``j`` itself if none is).

    BLAS rounds a product by the position of its rows and columns, so equal
    centroids would get distances an ulp apart; every engine gives them the
    first one's, so that they tie exactly (hard ties go to the first, cold
    softmax splits evenly). Equal centroids have equal squared norms: only
    those are compared (a dictionary of rows for a few centroids, the cheaper
    way there).

    Parameters
    ----------
    centers : ndarray of shape (n_clusters, n_features)
    c_sq : ndarray of shape (n_clusters,)
        Their squared norms.

    Returns
    -------
    ndarray of shape (n_clusters,), intp
    """
    if len(centers) <= _FEW_CENTROIDS:
        seen = {}
        return np.array([seen.setdefault(bytes(row), j)  # + 0.0: -0.0 is 0.0
                         for j, row in enumerate(centers + 0.0)], dtype=np.intp)
    first = np.arange(len(centers))
    order = np.argsort(c_sq, kind="stable")  # equal norms keep the order of the centroids
    new_norm = np.diff(c_sq[order]) != 0
    if new_norm.all():
        return first
    starts = np.flatnonzero(np.r_[True, new_norm, True])
    for start, stop in zip(starts[:-1], starts[1:], strict=True):
        if stop - start > 1:
            group = order[start:stop]
            _, index, inverse = np.unique(centers[group], axis=0, return_index=True,
                                          return_inverse=True)
            first[group] = group[index[inverse.ravel()]]
    return first


def twin_columns(centers, c_sq):
    """``(copies, originals)``: the centroids equal to an earlier one, and that first one.

    See :func:`first_equal_rows`; a block of distances (or cross terms) gets
    ``block[:, copies] = block[:, originals]``. Both are empty when no two
    centroids are equal.
    """
    first = first_equal_rows(centers, c_sq)
    copies = np.flatnonzero(first != np.arange(len(first)))
    return copies, first[copies]


class ArrayEngine(BlockEngine):
    """Chunked passes over one data set with the array namespace ``xp`` (numpy here).

    The passes that write or reduce a value per row and centroid are
    :class:`._block.BlockEngine`'s over :meth:`_blocks`, in the compute dtype
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
    compute_dtype : dtype, default=None
        The dtype of the distances and responsibilities: that of X when None.
        The statistics are summed in float64 either way.

    Examples
    --------
    >>> import numpy as np
    >>> from softkmeans._engines._array import ArrayEngine
    >>> from softkmeans._core.responsibilities import RelaxationSpec
    >>> X = np.array([[0.0, 0.0], [0.0, 1.0], [4.0, 0.0]])
    >>> stats = ArrayEngine(X).estep(X[[0, 2]], RelaxationSpec("hard"))
    >>> stats.labels.tolist(), stats.masses.tolist()
    ([0, 0, 1], [2.0, 1.0])
    """

    name = "array"
    xp = np
    sparse = scipy.sparse

    def __init__(self, X, sample_weight=None, block_elements=DEVICE_BLOCK_ELEMENTS,
                 compute_dtype=None):
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
        self._compute_dtype = np.dtype(X.dtype if compute_dtype is None else compute_dtype)
        self._w64 = self._to_device(self.sample_weight)
        # the weights in the compute dtype, over a power of two; sums and masses are scaled back
        self._weight_scale = power_of_two_scale(self.sample_weight)
        self._w = (self._w64 / self._weight_scale).astype(self._compute_dtype)
        self.x_sq = np.asarray(self._to_host(self._row_sq_norms()), dtype=np.float64)
        shift = None if self._is_sparse else centering_shift(self._X)
        self._shift = None if shift is None else self._to_device(shift)
        self._distance_norms = self.x_sq
        if self._shift is not None:
            shifted = self._row_sq_norms(self._shift)
            self._distance_norms = np.asarray(self._to_host(shifted), dtype=np.float64)
        # of the points the distances are computed from, in the compute dtype
        self._x_sq = self._to_device(self._distance_norms).astype(self._compute_dtype)

    @property
    def unit_roundoff(self):
        """Unit roundoff of the passes' arithmetic, which runs in the compute dtype."""
        return unit_roundoff(self._compute_dtype)

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

    def _row_sq_norms(self, shift=None):
        """``||x_i - shift||^2`` in float64, in the engine's namespace (:func:`row_sq_norms`)."""
        return row_sq_norms(self._X, shift, self.xp, self.block_elements)

    def _data_blocks(self, centers):
        """Row blocks, each as ``(rows, Xb, D)``: the block in the compute dtype (shifted;
        CSR as it is) and its squared distances to ``centers``.

        With a shift (:func:`._conditioning.centering_shift`) the distances are
        those of the shifted block to the shifted centroids: the same
        distances, without the cancellation of data far from the origin.
        """
        C64 = self._to_device(np.asarray(centers, dtype=np.float64))
        if self._shift is not None:
            C64 = C64 - self._shift
            shift = self._shift.astype(self._compute_dtype)
        c_sq = self.xp.sum(C64 * C64, axis=1).astype(self._compute_dtype)
        C = C64.astype(self._compute_dtype)
        host = np.asarray(centers, dtype=np.float64)
        copies, originals = (self._to_device(a) for a in
                             twin_columns(host, np.einsum("ij,ij->i", host, host)))
        for rows in row_blocks(self.n_samples, C.shape[0], self.block_elements):
            Xb = self._X[rows]
            if Xb.dtype != self._compute_dtype:  # the reference on float32 data
                Xb = Xb.astype(self._compute_dtype)
            if self._shift is not None:
                Xb = Xb - shift
            cross = self.xp.asarray(Xb @ C.T)
            if len(copies):  # equal centroids tie exactly (see first_equal_rows)
                cross[:, copies] = cross[:, originals]
            yield rows, Xb, self.kernels.finish_distances(cross, self._x_sq[rows], c_sq)

    def _blocks(self, centers):
        for rows, _, D in self._data_blocks(centers):
            yield rows, D

    def _in_range(self, D, spec):
        """The block ``D``, in float64 where the temperature is out of float32's range."""
        if D.dtype == np.float32 and spec.kind != "hard":
            low, high = FLOAT32_TAU_RANGE
            if not low <= spec.tau <= high:
                return D.astype(np.float64)
        return D

    # --------------------------------------------------------------- passes
    def _assign(self, D, spec):
        """labels, dmin, margins, responsibilities, row gaps and the rows with mass on more
        than one centroid of a block (both None when hard).

        A softmax row is spread unless every other weight underflows to 0, an
        entmax row when it has more than one nonzero entry.
        """
        kernels = self.kernels
        D = self._in_range(D, spec)
        labels, dmin, margins = kernels.nearest_two(D)
        if spec.kind == "hard":
            return labels, dmin, margins, None, self.xp.zeros_like(dmin), None
        if spec.kind == "softmax":
            others = kernels.softmax_others(D, labels, dmin, spec.tau)
            resp = kernels.softmax_resp(D, dmin, others, spec.tau)
            return labels, dmin, margins, resp, spec.tau * self.xp.log1p(others), others > 0
        resp, row_gap = kernels.entmax(D, dmin, spec)
        return labels, dmin, margins, resp, row_gap, self.xp.count_nonzero(resp, axis=1) > 1

    def _one_hot_t(self, labels, n_clusters, values=None):
        """The (n_clusters x rows) one-hot matrix of ``labels``, sparse, holding ``values``
        (ones when None)."""
        xp, m = self.xp, labels.shape[0]
        values = xp.ones(m, dtype=self._compute_dtype) if values is None else values
        return self.sparse.csc_matrix(
            (values, labels.astype(np.int32), xp.arange(m + 1, dtype=np.int32)),
            shape=(n_clusters, m),
        )

    def _accumulate(self, sums, masses, Xb, w, labels, resp, spread, with_sums):
        """``masses += R^T w`` and, when ``with_sums``, ``sums += R^T (w Xb)`` (float64).

        The rows that are not ``spread`` (all rows of a hard block) go through
        their labels' sparse one-hot matrix, the others through dense
        products: rows that entmax identifies give Lloyd's sums to the bit.
        """
        xp = self.xp
        if resp is not None:
            n_soft = int(xp.count_nonzero(spread))
            if n_soft == labels.shape[0]:
                self._add_soft(sums, masses, Xb, w, resp, with_sums)
                return
            if n_soft:
                soft = xp.flatnonzero(spread)
                self._add_soft(sums, masses, Xb[soft], w[soft], resp[soft], with_sums)
                one_hot = xp.flatnonzero(~spread)
                Xb, w, labels = Xb[one_hot], w[one_hot], labels[one_hot]
        weighted_t = self._one_hot_t(labels, masses.shape[0], w)
        masses += _dense(weighted_t @ xp.ones(labels.shape[0]))  # in a fixed order, not atomics
        if with_sums:
            self._add_products(sums, Xb, weighted_t)

    def _add_soft(self, sums, masses, Xb, w, resp, with_sums):
        """The dense part of :meth:`_accumulate`; weighs ``resp`` in place."""
        masses += self.xp.asarray(w.astype(resp.dtype) @ resp, dtype=np.float64)
        if with_sums:
            resp *= w[:, None].astype(resp.dtype)
            self._add_products(sums, Xb, resp.T)

    def _add_products(self, sums, Xb, weighted_t):
        """``sums += weighted_t @ Xb`` in float64 (``weighted_t``: n_clusters x rows)."""
        if self._is_sparse:
            sums += _dense(Xb.T @ weighted_t.T).T
        else:
            sums += _dense(weighted_t @ Xb.astype(weighted_t.dtype, copy=False))

    def estep(self, centers, spec, with_sums=True):
        """One pass (:meth:`softkmeans._engines._contract.Engine.estep`); host arrays."""
        xp = self.xp
        k, d = centers.shape
        n = self.n_samples
        sums = xp.zeros((k, d))
        masses = xp.zeros(k)
        labels = xp.empty(n, dtype=np.int32)
        margins = xp.empty(n, dtype=self._compute_dtype)
        dmin = xp.empty(n, dtype=self._compute_dtype)
        totals = xp.zeros(3)
        for rows, Xb, D in self._data_blocks(centers):
            lab, dm, mg, resp, row_gap, spread = self._assign(D, spec)
            self._accumulate(sums, masses, Xb, self._w[rows], lab, resp, spread, with_sums)
            w = self._w64[rows]
            totals += xp.stack([w @ (dm - row_gap).astype(np.float64),
                                w @ dm.astype(np.float64), w @ row_gap.astype(np.float64)])
            labels[rows] = lab
            margins[rows] = mg
            dmin[rows] = dm
        sums = self._to_host(sums) * self._weight_scale
        masses = self._to_host(masses) * self._weight_scale
        if with_sums and self._shift is not None:
            sums += masses[:, None] * self._to_host(self._shift)[None, :]
        objective, inertia, gap = (float(v) for v in self._to_host(totals))
        return PassStats(
            sums, masses, objective, inertia, gap, self._to_host(labels),
            self._to_host(margins).astype(np.float64), self._to_host(dmin).astype(np.float64),
        )

    def _block_responsibilities(self, D, spec):
        labels, _, _, resp, _, _ = self._assign(D, spec)
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


class NumpyEngine(ArrayEngine):
    """The reference engine: :class:`ArrayEngine` over numpy, in float64 whatever the dtype
    of X, in blocks of :data:`._chunks.BLOCK_ELEMENTS` distances.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
        Validated data (float32 or float64).
    sample_weight : ndarray of shape (n_samples,), default=None
        Non-negative weights; ones when None.
    """

    name = "numpy"

    def __init__(self, X, sample_weight=None):
        super().__init__(X, sample_weight, block_elements=BLOCK_ELEMENTS,
                         compute_dtype=np.float64)


def _dense(a):
    """A dense array from a matrix product that may have returned a sparse matrix."""
    return a.toarray() if hasattr(a, "toarray") else a
