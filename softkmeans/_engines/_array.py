"""The array-namespace engine, and over numpy in float64 the reference engine.

:class:`ArrayEngine` is written once against the array API standard: it runs
in the namespace and on the device of its data (numpy, PyTorch on the CPU or
a GPU, array-api-strict, CuPy) through ``array-api-compat``. It walks over X
in row blocks. It computes each block's squared distances through the
expansion ``||x||^2 - 2 x.mu + ||mu||^2`` (dense data far from the origin
shifted first, :func:`._conditioning.centering_shift`),
turns them into responsibilities with its block kernels
(:class:`._array_kernels.ArrayKernels`) and accumulates the sufficient
statistics in float64. Nothing of size ``n_samples x n_clusters`` is
allocated unless a caller asks for it (``responsibilities``,
``sq_distances``).

Three settings make it one engine or another:

- the namespace ``xp`` and its device, those of X: numpy for numpy and SciPy
  CSR data (whose hard rows are summed through a sparse one-hot matrix, the
  namespaces with a ``sparse`` module), the input's own namespace for a
  device array; :class:`softkmeans._engines._cupy.CupyEngine` adds fused
  CUDA kernels for CuPy;
- the compute dtype: that of X for the device engine (float32 stays
  float32), float64 for :class:`NumpyEngine`, the readable reference every
  other engine is tested against;
- the size of a block: small on the CPU (:data:`._chunks.BLOCK_ELEMENTS`),
  large on a device (:data:`DEVICE_BLOCK_ELEMENTS`), where kernel launches
  should be few.

``X`` (a host copy of a device input, made when first asked for),
``sample_weight`` and ``x_sq`` are host arrays, ``row(i)`` a host float64
vector, and :class:`~softkmeans._engines._stats.PassStats` holds host arrays:
the statistics are small, and the optimizers run on the host. The
``n_samples x n_clusters`` and per-row results (``responsibilities``,
``sq_distances``, ``log_sum_exp``) are returned where the input lives.
"""

import numpy as np
import scipy.sparse
from sklearn.externals.array_api_compat import device as array_device
from sklearn.externals.array_api_compat import is_numpy_namespace
from sklearn.externals.array_api_compat import numpy as np_compat

from .._core.bounds import unit_roundoff
from .._core.responsibilities import RelaxationSpec
from ._array_kernels import ArrayKernels, NumpyKernels
from ._block import BlockEngine
from ._chunks import BLOCK_ELEMENTS, row_blocks
from ._conditioning import centering_shift, power_of_two_scale
from ._namespace import host_dtype, is_device_array, namespace_and_device, to_numpy
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


def row_sq_norms(X, shift=None, xp=np_compat, block_elements=BLOCK_ELEMENTS):
    """``||x_i - shift||^2`` of every row, summed in float64 whatever the dtype of X.

    Dense X is converted block by block, so that no float64 copy of the whole
    of X exists; ``shift`` (dense X only) is a float64 point of ``xp``, none by
    default. ``xp`` is the ``array-api-compat`` namespace of X (numpy's for a
    numpy array or a SciPy CSR matrix, CuPy's for their CuPy counterparts).
    """
    if hasattr(X, "indptr"):  # CSR
        squares = X.data.astype(np.float64) ** 2
        return type(X)((squares, X.indices, X.indptr), shape=X.shape) @ xp.ones(X.shape[1])
    out = xp.empty(X.shape[0], dtype=xp.float64, device=array_device(X))
    for rows in row_blocks(X.shape[0], X.shape[1], block_elements):
        block = xp.astype(X[rows, :], xp.float64)
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
        if len(set(c_sq.tolist())) == len(centers):  # distinct norms: no two are equal
            return np.arange(len(centers))
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
    """Chunked passes over one data set in the array namespace and on the device of X.

    The passes that write or reduce a value per row and centroid are
    :class:`._block.BlockEngine`'s over :meth:`_blocks`, in the compute dtype
    unless a caller names another.

    Parameters
    ----------
    X : ndarray, CSR matrix or array of an array API namespace, shape (n_samples, n_features)
        Validated data (float32 or float64): numpy or SciPy CSR (computed with
        numpy), or a device array (PyTorch, array-api-strict, CuPy, ...),
        computed in its namespace and on its device.
    sample_weight : ndarray of shape (n_samples,), default=None
        Non-negative weights on the host; ones when None.
    block_elements : int, default=DEVICE_BLOCK_ELEMENTS
        Entries of one block of distances.
    compute_dtype : dtype, default=None
        The dtype (of X's namespace) of the distances and responsibilities:
        that of X when None. The statistics are summed in float64 either way.

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

    def __init__(self, X, sample_weight=None, block_elements=DEVICE_BLOCK_ELEMENTS,
                 compute_dtype=None):
        self._input = X
        self._host_X = None
        self._keep_on_device = is_device_array(X)
        self.xp, self.device, self.sparse = self._namespace(X)
        self.block_elements = block_elements
        self.kernels = self._make_kernels()
        n = X.shape[0]
        self.sample_weight = (
            np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        )
        self._X = self._to_device(X)
        self._is_sparse = self.sparse is not None and self.sparse.issparse(self._X)
        self._compute_dtype = X.dtype if compute_dtype is None else compute_dtype
        self._w64 = self._to_device(self.sample_weight)
        # the weights in the compute dtype, over a power of two; sums and masses are scaled back
        self._weight_scale = power_of_two_scale(self.sample_weight)
        self._w = self.xp.astype(self._w64 / self._weight_scale, self._compute_dtype)
        self.x_sq = np.asarray(to_numpy(self._row_sq_norms()), dtype=np.float64)
        shift = None if self._is_sparse else centering_shift(self._X)
        self._shift = None if shift is None else self._to_device(shift)
        self._distance_norms = self.x_sq
        if self._shift is not None:
            shifted = self._row_sq_norms(self._shift)
            self._distance_norms = np.asarray(to_numpy(shifted), dtype=np.float64)
        # of the points the distances are computed from, in the compute dtype
        self._x_sq = self.xp.astype(self._to_device(self._distance_norms), self._compute_dtype)

    @property
    def unit_roundoff(self):
        """Unit roundoff of the passes' arithmetic, which runs in the compute dtype."""
        return unit_roundoff(host_dtype(self._compute_dtype))

    # ------------------------------------------------------------ namespace
    def _namespace(self, X):
        """``(xp, device, sparse)``: X's ``array-api-compat`` namespace and device, and the
        module of its namespace's sparse matrices (None: dense only)."""
        xp, device = namespace_and_device(X)
        return xp, device, None if is_device_array(X) else scipy.sparse

    def _make_kernels(self):
        return NumpyKernels() if is_numpy_namespace(self.xp) else ArrayKernels(self.xp)

    def _to_device(self, a):
        """A host array (or X) in the engine's namespace, on its device (CSR as it is)."""
        if self.sparse is not None and self.sparse.issparse(a):
            return a
        return self.xp.asarray(a, device=self.device)

    def _output(self, a):
        """An ``n_samples``-sized result, where the input lives."""
        return a if self._keep_on_device else to_numpy(a)

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
        return None if self._shift is None else to_numpy(self._shift)

    def distance_norms(self):
        """``||x_i - shift||^2`` in float64 on the host (``x_sq`` when X is not shifted)."""
        return self._distance_norms

    def row(self, i):
        """Observation ``i`` as a dense float64 host vector."""
        x = self._X[i:i + 1, :]
        x = x.toarray() if self._is_sparse else x
        return np.asarray(to_numpy(x), dtype=np.float64).ravel()

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
        xp, dtype = self.xp, self._compute_dtype
        C64 = self._to_device(np.asarray(centers, dtype=np.float64))
        if self._shift is not None:
            C64 = C64 - self._shift
            shift = xp.astype(self._shift, dtype)
        c_sq = xp.astype(xp.sum(C64 * C64, axis=1), dtype)
        C = xp.astype(C64, dtype)
        host = np.asarray(centers, dtype=np.float64)
        first = first_equal_rows(host, np.einsum("ij,ij->i", host, host))
        # equal centroids tie exactly (see first_equal_rows)
        first = None if (first == np.arange(len(first))).all() else self._to_device(first)
        for rows in row_blocks(self.n_samples, C.shape[0], self.block_elements):
            Xb = self._X[rows, :]
            if Xb.dtype != dtype:  # the reference on float32 data
                Xb = Xb.astype(dtype) if self._is_sparse else xp.astype(Xb, dtype)
            if self._shift is not None:
                Xb = Xb - shift
            cross = xp.asarray(Xb @ C.T)
            if first is not None:
                cross = xp.take(cross, first, axis=1)
            yield rows, Xb, self.kernels.finish_distances(cross, self._x_sq[rows], c_sq)

    def _blocks(self, centers):
        for rows, _, D in self._data_blocks(centers):
            yield rows, D

    def _in_range(self, D, spec):
        """The block ``D``, in float64 where the temperature is out of float32's range."""
        xp = self.xp
        if D.dtype == xp.float32 and spec.kind != "hard":
            low, high = FLOAT32_TAU_RANGE
            if not low <= spec.tau <= high:
                return xp.astype(D, xp.float64)
        return D

    # --------------------------------------------------------------- passes
    def _assign(self, D, spec):
        """The kernels' per-row results of a block (:meth:`ArrayKernels.assign
        <._array_kernels.ArrayKernels.assign>`), in float64 where the temperature is out of
        float32's range."""
        return self.kernels.assign(self._in_range(D, spec), spec)

    def _one_hot_t(self, labels, n_clusters, values=None):
        """The (n_clusters x rows) one-hot matrix of ``labels`` holding ``values`` (ones when
        None): sparse where the namespace has sparse matrices, dense otherwise."""
        xp, m = self.xp, labels.shape[0]
        if self.sparse is None:
            clusters = xp.arange(n_clusters, dtype=labels.dtype, device=self.device)
            one_hot = xp.astype(clusters[:, None] == labels[None, :], self._compute_dtype)
            return one_hot if values is None else one_hot * values[None, :]
        values = xp.ones(m, dtype=self._compute_dtype) if values is None else values
        return self.sparse.csc_matrix(
            (values, xp.astype(labels, xp.int32), xp.arange(m + 1, dtype=xp.int32)),
            shape=(n_clusters, m),
        )

    def _accumulate(self, sums, masses, Xb, w, labels, resp, spread, with_sums):
        """``masses += R^T w`` and, when ``with_sums``, ``sums += R^T (w Xb)`` (float64).

        The rows that are not ``spread`` (all rows of a hard block) go through
        their labels' one-hot matrix, the others through dense products: rows
        that entmax identifies give Lloyd's sums to the bit.
        """
        xp = self.xp
        if resp is not None:
            n_soft = int(xp.count_nonzero(spread))
            if n_soft == labels.shape[0]:
                self._add_soft(sums, masses, Xb, w, resp, with_sums)
                return
            if n_soft:
                soft = xp.nonzero(spread)[0]
                self._add_soft(sums, masses, self._take_rows(Xb, soft), xp.take(w, soft),
                               xp.take(resp, soft, axis=0), with_sums)
                one_hot = xp.nonzero(~spread)[0]
                Xb, w, labels = self._take_rows(Xb, one_hot), xp.take(w, one_hot), xp.take(
                    labels, one_hot)
        weighted_t = self._one_hot_t(labels, masses.shape[0], w)
        if self.sparse is None:
            masses += xp.sum(xp.astype(weighted_t, xp.float64), axis=1)
        else:
            masses += _dense(weighted_t @ xp.ones(labels.shape[0]))  # in a fixed order
        if with_sums:
            self._add_products(sums, Xb, weighted_t)

    def _take_rows(self, Xb, rows):
        return Xb[rows] if self._is_sparse else self.xp.take(Xb, rows, axis=0)

    def _add_soft(self, sums, masses, Xb, w, resp, with_sums):
        """The dense part of :meth:`_accumulate`; weighs ``resp`` in place."""
        xp = self.xp
        w = xp.astype(w, resp.dtype)
        masses += xp.astype(w @ resp, xp.float64)
        if with_sums:
            resp *= w[:, None]
            self._add_products(sums, Xb, resp.T)

    def _add_products(self, sums, Xb, weighted_t):
        """``sums += weighted_t @ Xb`` in float64 (``weighted_t``: n_clusters x rows)."""
        if self._is_sparse:
            sums += _dense(Xb.T @ weighted_t.T).T
        else:
            sums += _dense(weighted_t @ self.xp.astype(Xb, weighted_t.dtype, copy=False))

    def estep(self, centers, spec, with_sums=True):
        """One pass (:meth:`softkmeans._engines._contract.Engine.estep`); host arrays."""
        xp, device = self.xp, self.device
        k, d = centers.shape
        n = self.n_samples
        sums = xp.zeros((k, d), dtype=xp.float64, device=device)
        masses = xp.zeros(k, dtype=xp.float64, device=device)
        labels = xp.empty(n, dtype=xp.int32, device=device)
        margins = xp.empty(n, dtype=self._compute_dtype, device=device)
        dmin = xp.empty(n, dtype=self._compute_dtype, device=device)
        totals = xp.zeros(3, dtype=xp.float64, device=device)
        for rows, Xb, D in self._data_blocks(centers):
            lab, dm, mg, resp, row_gap, spread = self._assign(D, spec)
            self._accumulate(sums, masses, Xb, self._w[rows], lab, resp, spread, with_sums)
            w = self._w64[rows]
            totals += xp.stack([w @ xp.astype(dm - row_gap, xp.float64),
                                w @ xp.astype(dm, xp.float64), w @ xp.astype(row_gap, xp.float64)])
            self._put(labels, rows, lab)
            self._put(margins, rows, mg)
            self._put(dmin, rows, dm)
        sums = to_numpy(sums) * self._weight_scale
        masses = to_numpy(masses) * self._weight_scale
        if with_sums and self._shift is not None:
            sums += masses[:, None] * to_numpy(self._shift)[None, :]
        objective, inertia, gap = (float(v) for v in to_numpy(totals))
        return PassStats(
            sums, masses, objective, inertia, gap, np.asarray(to_numpy(labels)),
            np.asarray(to_numpy(margins), dtype=np.float64),
            np.asarray(to_numpy(dmin), dtype=np.float64),
        )

    def _block_responsibilities(self, D, spec):
        labels, _, _, resp, _, _ = self._assign(D, spec)
        return _dense(self._one_hot_t(labels, D.shape[1]).T) if resp is None else resp

    def _block_log_sum_exp(self, D, sigma):
        """In float64."""
        spec = RelaxationSpec("softmax", sigma)
        return self.kernels.log_sum_exp(self._in_range(D, spec), spec.tau)

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
