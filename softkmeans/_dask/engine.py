"""An engine over a dask array: one in-memory engine per block, statistics summed by dask.

:class:`BlockwiseEngine` implements the engine contract
(:class:`softkmeans._engines._contract.Engine`) for a dask array of rows.
Each pass maps a task over the blocks that builds the block's own engine
(:func:`softkmeans._engines.get_engine`: numba, numpy or CuPy for CuPy
blocks) and runs its pass; the sufficient statistics, ``k x d`` sums and
``k`` masses plus three scalars, are summed by dask's tree reduction, so an
iteration moves one ``O(k d)`` vector per block to the client and never the
data. Per-row results (labels, margins, smallest distances) are lazy dask
arrays chunked like the rows; :meth:`BlockwiseEngine.persist` computes them
once, at the end of a fit.

Besides the contract, the engine reduces over its blocks what an in-memory
fit reads from the whole of X: ``lambda_max`` (:meth:`~BlockwiseEngine.lambda_max`),
the start of ``sigma="auto"`` (:meth:`~BlockwiseEngine.start_distances`) and the
seeding (:meth:`~BlockwiseEngine.draw_seeds`, :mod:`softkmeans._dask.seeding`).
"""

import functools

import dask
import dask.array as da
import numpy as np

from .._core.responsibilities import HARD
from .._core.row_blocks import float64_blocks
from .._core.temperature import exact_zero_distances
from .._engines import get_engine
from .._engines._blas import one_blas_thread
from .._engines._namespace import to_numpy
from .._engines._stats import PassStats
from .seeding import draw_seeds

__all__ = ["BlockwiseEngine"]

#: Rows of the first block that give the engine its precision and its distance shift.
_HEAD_ROWS = 4096


def blas_held(task):
    """Run ``task`` with BLAS held at one thread (:func:`.._engines._blas.one_blas_thread`).

    Dask runs blocks on several threads of one process, each calling BLAS; the
    hold is counted across them, so that BLAS gets its threads back when the
    last task of the process ends, whichever thread runs it.
    """

    @functools.wraps(task)
    def held(*args, **kwargs):
        with one_blas_thread():
            return task(*args, **kwargs)

    return held


def block_engine(block, weights, options):
    """The in-memory engine of one block (``weights``: a column of weights, or None)."""
    backend, n_threads = options
    if isinstance(block, np.ndarray):
        block = np.ascontiguousarray(block)
    weights = None if weights is None else np.ascontiguousarray(weights[:, 0], dtype=np.float64)
    return get_engine(backend, block, weights, n_threads)


@blas_held
def _pass_vector(block, weights, centers, spec, with_sums, options):
    """One block's statistics as a row: ``sums.ravel(), masses, objective, inertia, gap``."""
    k, d = centers.shape
    out = np.zeros((1, k * d + k + 3))
    if block.shape[0]:
        stats = block_engine(block, weights, options).estep(centers, spec, with_sums)
        out[0, :k * d] = stats.sums.ravel()
        out[0, k * d:-3] = stats.masses
        out[0, -3:] = stats.objective, stats.inertia, stats.gap
    return out


@blas_held
def _pass_rows(block, weights, centers, spec, options):
    """One block's labels, margins and smallest squared distances, as three columns."""
    if not block.shape[0]:
        return np.empty((0, 3))
    stats = block_engine(block, weights, options).estep(centers, spec, with_sums=False)
    return np.column_stack([stats.labels, stats.margins, stats.dmin])


@blas_held
def _row_output(block, weights, centers, method, options, kwargs):
    """``engine.method(centers, **kwargs)`` of one block: one row per observation."""
    if not block.shape[0]:
        shape = (0,) if method == "log_sum_exp" else (0, centers.shape[0])
        return np.empty(shape, dtype=kwargs.get("dtype", np.float64))
    return getattr(block_engine(block, weights, options), method)(centers, **kwargs)


@blas_held
def _max_sq_distances(block, weights, points, options):
    if not block.shape[0]:
        return np.zeros((1, points.shape[0]))
    return block_engine(block, weights, options).max_sq_distances(points)[None]


def _float64_rows(block, shift):
    """``(rows, block[rows] - shift)`` in float64, a bounded number of entries at a time."""
    for rows, part in float64_blocks(to_numpy(block)):
        yield rows, part if shift is None else part - shift


def _shifted_sq_norms(block, shift):
    """``||x_i - shift||^2`` of one block's rows, in float64."""
    out = np.empty(block.shape[0])
    for rows, part in _float64_rows(block, shift):
        np.einsum("ij,ij->i", part, part, out=out[rows])
    return out


@blas_held
def _moments(block, weights, pivot, scale):
    """``sum w y y^T``, ``sum w y`` and ``sum w`` of one block, ``y = x - pivot``, as a row."""
    d = block.shape[1]
    out = np.zeros((1, d * d + d + 1))
    w = None if weights is None else to_numpy(weights)[:, 0] * scale
    gram, total = np.zeros((d, d)), np.zeros(d)
    for rows, y in _float64_rows(block, pivot):
        wy = y if w is None else y * w[rows, None]
        gram += wy.T @ y
        total += wy.sum(axis=0)
    out[0, :d * d], out[0, d * d:-1] = gram.ravel(), total
    out[0, -1] = block.shape[0] if w is None else w.sum()
    return out


@blas_held
def _start_terms(block, weights, centers, scale, options):
    """``sum w dmin``, ``sum w`` and whether a positive-weight row lies off every centroid."""
    if not block.shape[0]:
        return np.zeros((1, 3))
    engine = block_engine(block, weights, options)
    start = engine.estep(centers, HARD, with_sums=False)
    dmin = exact_zero_distances(engine.X, centers, start.labels, start.dmin, engine.x_sq,
                                engine.unit_roundoff)
    w = engine.sample_weight * scale
    return np.array([[w @ dmin, w.sum(), float(np.any(dmin[w > 0] > 0))]])


class BlockwiseEngine:
    """Passes over a dask array of rows, block by block (see the module docstring).

    Parameters
    ----------
    X : dask array of shape (n_samples, n_features)
        Validated: float32 or float64, known row chunks, one chunk of columns.
    sample_weight : dask array of shape (n_samples,) or None
        Non-negative float64 weights chunked like the rows of X; None gives ones.
    backend : str
        The engine of each block (``"auto"``: numba, or CuPy for CuPy blocks).
    n_threads : int or None
        Threads of each block's pass; None is 1 (dask runs the blocks in parallel).
    """

    def __init__(self, X, sample_weight, backend, n_threads):
        self.X = X
        self._weights = None if sample_weight is None else sample_weight[:, None]
        self._options = (backend, 1 if n_threads is None else n_threads)
        head = X[:min(_HEAD_ROWS, X.shape[0])].compute()
        probe = get_engine(backend, np.ascontiguousarray(head) if isinstance(
            head, np.ndarray) else head, None, self._options[1])
        self.name = f"dask[{probe.name}]"
        self._unit_roundoff = probe.unit_roundoff
        self._shift = probe.distance_shift
        self._pivot = np.asarray(to_numpy(head), dtype=np.float64).mean(axis=0)
        self._largest = None

    # ------------------------------------------------------------ contract
    @property
    def sample_weight(self):
        """The weights, a dask array (ones when none were given)."""
        if self._weights is None:
            return da.ones(self.X.shape[0], chunks=self.X.chunks[0])
        return self._weights[:, 0]

    @property
    def x_sq(self):
        """``||x_i||^2`` in float64, a lazy dask array."""
        return self.X.map_blocks(_shifted_sq_norms, None, drop_axis=1, dtype=np.float64)

    @property
    def n_samples(self):
        return self.X.shape[0]

    @property
    def unit_roundoff(self):
        """Of the blocks' passes (as the in-memory engine of the same backend and dtype)."""
        return self._unit_roundoff

    @property
    def distance_shift(self):
        """The point of the first block's engine (any point near the data serves)."""
        return self._shift

    def distance_norms(self):
        """``||x_i - shift||^2`` in float64, a lazy dask array."""
        return self.X.map_blocks(_shifted_sq_norms, self._shift, drop_axis=1, dtype=np.float64)

    def row(self, i):
        """Observation ``i`` as a dense float64 vector (one block is read)."""
        return np.asarray(to_numpy(self.X[int(i)].compute()), dtype=np.float64).ravel()

    def estep(self, centers, spec, with_sums=True):
        """One pass: the statistics summed over the blocks (computed), per-row ones lazy.

        ``labels``, ``margins`` and ``dmin`` of the result are dask arrays that a
        compute evaluates by another pass (:meth:`persist` keeps them).
        """
        centers = np.asarray(centers, dtype=np.float64)
        k, d = centers.shape
        parts = self.map_blocks(_pass_vector, dask.delayed(centers), spec, with_sums, self._options,
                          chunks=(1, k * d + k + 3), dtype=np.float64)
        total = parts.sum(axis=0).compute()
        rows = self._per_row(centers, spec)
        return _stats(total, k, d, rows)

    def responsibilities(self, centers, spec, dtype=np.float64):
        return self._rows("responsibilities", centers, {"spec": spec, "dtype": dtype})

    def sq_distances(self, centers, dtype=np.float64, sqrt=False):
        return self._rows("sq_distances", centers, {"dtype": dtype, "sqrt": sqrt})

    def log_sum_exp(self, centers, sigma):
        return self._rows("log_sum_exp", centers, {"sigma": sigma})

    def max_sq_distances(self, points):
        points = np.asarray(points, dtype=np.float64)
        parts = self.map_blocks(_max_sq_distances, dask.delayed(points), self._options,
                          chunks=(1, points.shape[0]), dtype=np.float64)
        return parts.max(axis=0).compute()

    # ------------------------------------------------- whole-data reductions
    def persist(self, stats):
        """``stats`` with its labels and margins computed (one pass) and kept by dask."""
        labels, margins = dask.persist(stats.labels, stats.margins)
        return PassStats(stats.sums, stats.masses, stats.objective, stats.inertia, stats.gap,
                           labels, margins, stats.dmin)

    def lambda_max(self):
        """Largest eigenvalue of the weighted covariance, from ``d x d`` moments per block."""
        d = self.X.shape[1]
        parts = self.map_blocks(_moments, self._pivot, self._weight_scale(),
                          chunks=(1, d * d + d + 1), dtype=np.float64)
        total = parts.sum(axis=0).compute()
        mass = total[-1]
        mean = total[d * d:-1] / mass
        cov = total[:d * d].reshape(d, d) / mass - np.outer(mean, mean)
        return float(max(np.linalg.eigvalsh(cov)[-1], 0.0))

    def start_distances(self, centers):
        """``(weighted mean, any positive)`` of the squared distances to the nearest of
        ``centers`` (see :meth:`softkmeans._engines._in_memory.InMemorySteps.start_distances`)."""
        centers = np.asarray(centers, dtype=np.float64)
        parts = self.map_blocks(_start_terms, dask.delayed(centers), self._weight_scale(),
                          self._options, chunks=(1, 3), dtype=np.float64)
        weighted, total, apart = parts.sum(axis=0).compute()
        return float(weighted / total), bool(apart > 0)

    def min_sq_distances(self, points):
        """Squared distance of every row to its nearest of ``points``, a lazy dask array."""
        return self._per_row(np.asarray(points, dtype=np.float64), HARD)[:, 2]

    def draw_seeds(self, init, n_clusters, rng):
        """Starting centroids for ``init="k-means++"`` (k-means||) or ``"random"``
        (:func:`softkmeans._dask.seeding.draw_seeds`)."""
        return draw_seeds(self, init, n_clusters, rng)

    def top_rows(self, scores, count):
        """Indices of the ``count`` largest of the per-row ``scores`` (a dask array), the
        largest first, ties in index order: the ``count``-th largest value blockwise,
        then the rows at or above it."""
        if count <= 0:
            return np.empty(0, dtype=np.intp)
        threshold = float(scores.topk(count).compute().min())
        rows = da.flatnonzero(scores >= threshold).compute()
        values = np.asarray(scores[rows].compute())
        return rows[np.lexsort((rows, -values))][:count]

    def relative_weights(self):
        """The weights over the largest, as a column dask array, or None for unit weights."""
        return None if self._weights is None else self._weights * self._weight_scale()

    # ---------------------------------------------------------------- blocks
    def _weight_scale(self):
        """``1 / max(sample_weight)`` (computed once)."""
        if self._largest is None:
            self._largest = 1.0 if self._weights is None else float(self._weights.max().compute())
        return 1.0 / self._largest

    def map_blocks(self, func, *args, chunks, dtype, drop_axis=None):
        """``func(block, weights, *args)`` over the blocks (weights: a column or None)."""
        meta = np.empty((0,) * len(chunks), dtype=dtype)
        return da.map_blocks(func, self.X, self._weights, *args, chunks=chunks, dtype=dtype,
                             drop_axis=drop_axis, meta=meta)

    def _per_row(self, centers, spec):
        """Labels, margins and smallest distances as the columns of a lazy dask array."""
        return self.map_blocks(_pass_rows, dask.delayed(centers), spec, self._options,
                         chunks=(self.X.chunks[0], (3,)), dtype=np.float64)

    def _rows(self, method, centers, kwargs):
        """``engine.method(centers, **kwargs)`` of every block, a lazy dask array."""
        centers = np.asarray(centers, dtype=np.float64)
        one_column = method == "log_sum_exp"
        chunks = (self.X.chunks[0],) if one_column else (self.X.chunks[0], (centers.shape[0],))
        return self.map_blocks(_row_output, dask.delayed(centers), method, self._options, kwargs,
                         chunks=chunks, dtype=kwargs.get("dtype", np.float64),
                         drop_axis=1 if one_column else None)


def _stats(total, k, d, rows):
    """A :class:`~softkmeans._engines._stats.PassStats` from a summed row and lazy rows."""
    return PassStats(total[:k * d].reshape(k, d), total[k * d:-3], float(total[-3]),
                     float(total[-2]), float(total[-1]), rows[:, 0].astype(np.int32),
                     rows[:, 1], rows[:, 2])
