"""The numba engine: the numpy oracle's passes as parallel compiled kernels.

Each pass is one sweep over X, split over threads by chunks of rows
(:mod:`._numba_kernels`; the kernels release the GIL and run on a pool of
Python threads, which spares numba's parallel compilation, the larger part of
the first fit's JIT time), with per-thread buffers reduced after the loop. Only
the centroids that can carry a responsibility are visited (:mod:`._numba_rows`
documents the pruning and its exactness), so that a low-temperature iteration
costs about what a Lloyd iteration costs.

Precision: float64 data gives the oracle's numbers to rounding. For float32
data the cross term ``X C^T`` is a float32 GEMM (as in scikit-learn) and dense
softmax weights use a float32 exp, so results agree with the oracle (which
works in float64) to float32 precision.

Threads: ``n_threads`` when given, otherwise the OpenMP limit in effect
(``OMP_NUM_THREADS`` or a ``threadpoolctl`` limit, as scikit-learn reads it),
capped by ``NUMBA_NUM_THREADS`` (the number of CPUs unless set), and by the
size of the pass (one thread per :data:`WORK_PER_THREAD` multiply-adds). BLAS
runs at one thread inside a pass. Results do not depend on the number of
threads beyond rounding.
"""

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from functools import lru_cache

import numba
import numpy as np
import scipy.sparse as sp

from .._core.responsibilities import RelaxationSpec
from ._numba_kernels import (
    OUT_DIST,
    OUT_FARTHEST,
    OUT_GAP,
    OUT_NONE,
    OUT_RESP,
    bounded_inverse,
    chunk_rows,
    csr_pass,
    dense_pass,
    dense_row_sq_norms,
    pass_layout,
)
from ._numba_rows import KINDS
from ._numpy import NumpyEngine, _row_sq_norms
from ._stats import PassStats

__all__ = ["NumbaEngine", "blocked_products", "compile_kernels", "effective_n_threads",
           "run_threads"]

_HARD = RelaxationSpec("hard")
#: A pass gets one more thread per this many multiply-adds of its distance computation;
#: below it, waking a thread costs more than it saves.
WORK_PER_THREAD = 1 << 22
#: float64 values between the accumulators of two threads: 128 bytes, two cache lines.
ACCUMULATOR_GAP = 16
_NO_OUT = np.empty((0, 0))
_controller = None
#: OpenBLAS core types (``threadpoolctl``'s ``architecture``) with small-matrix GEMM kernels.
SMALL_KERNEL_CORES = frozenset({"skylakex", "cooperlake", "sapphirerapids"})


def effective_n_threads(n_threads=None):
    """Number of threads a pass uses.

    Parameters
    ----------
    n_threads : int, default=None
        Requested count; None follows the OpenMP limit in effect (see the
        module docstring).

    Returns
    -------
    int
        Between 1 and ``numba.config.NUMBA_NUM_THREADS``.
    """
    if n_threads is None:
        from sklearn.utils._openmp_helpers import _openmp_effective_n_threads

        n_threads = _openmp_effective_n_threads()
    return int(max(1, min(n_threads, numba.config.NUMBA_NUM_THREADS)))


def _blas_controller():
    global _controller
    if _controller is None:
        import scipy.linalg.cython_blas  # noqa: F401  (numba's BLAS: loaded before the listing)
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    return _controller


@lru_cache(maxsize=1)
def blocked_products():
    """Whether dense passes compute their products by blocks of centroids.

    True when every BLAS library loaded is an OpenBLAS running kernels of
    :data:`SMALL_KERNEL_CORES` (as ``threadpoolctl`` reports it; the
    ``OPENBLAS_CORETYPE`` variable changes it). Their small-matrix kernels
    multiply blocks of a few dozen centroids without packing, faster than
    one call for all centroids; other kernels (OpenBLAS's Haswell and Zen
    ones, measured) are slower by blocks. See :mod:`._numba_kernels`.

    Returns
    -------
    bool
    """
    libraries = [info for info in _blas_controller().info() if info["user_api"] == "blas"]
    return bool(libraries) and all(
        info["internal_api"] == "openblas"
        and str(info.get("architecture", "")).lower() in SMALL_KERNEL_CORES
        for info in libraries
    )


def _accumulators(n_threads, n_clusters, n_features):
    """Zeroed sums, masses and scalars (objective, inertia, gap) of each thread of a pass.

    Thread ``t`` adds into ``sums[t, :n_clusters]``, ``masses[t, :n_clusters]``
    and ``scalars[t, :3]``; the padding after each keeps every two threads'
    entries :data:`ACCUMULATOR_GAP` float64 values apart, on different cache
    lines (threads writing one line in turn slow each other down).
    """
    gap = ACCUMULATOR_GAP
    return (np.zeros((n_threads, n_clusters + -(-gap // n_features), n_features)),
            np.zeros((n_threads, n_clusters + gap)), np.zeros((n_threads, 3 + gap)))


def _read_only(array):
    """A read-only view of ``array``.

    numba types a read-only array apart from a writable one and would compile
    every pass kernel (seconds) once more for it; the kernels only read their
    inputs, so they always get read-only views and one compilation serves both.
    """
    view = array.view()
    view.flags.writeable = False
    return view


def _forget_pool():
    global _pool, _pool_size, _pool_lock
    _pool, _pool_size, _pool_lock = None, 0, threading.Lock()


_forget_pool()
os.register_at_fork(after_in_child=_forget_pool)  # a forked child has none of the threads


def _submit(kernel, n_threads, args):
    """Submit every thread's share to the pool (grown to ``n_threads`` workers if needed)."""
    global _pool, _pool_size
    with _pool_lock:
        if _pool_size < n_threads:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool = ThreadPoolExecutor(max_workers=n_threads, thread_name_prefix="softkmeans")
            _pool_size = n_threads
        return [_pool.submit(kernel, *args, t, n_threads) for t in range(n_threads)]


def run_threads(kernel, n_threads, *args, limit_blas=True):
    """``kernel(*args, thread, n_threads)`` for every thread, concurrently; their results.

    BLAS is held to one thread meanwhile, as in scikit-learn's Lloyd kernel
    (``limit_blas=False``: the caller already holds it there).
    """
    with _blas_controller().limit(limits=1, user_api="blas") if limit_blas else nullcontext():
        if n_threads == 1:
            return [kernel(*args, 0, 1)]
        return [future.result() for future in _submit(kernel, n_threads, args)]


class NumbaEngine(NumpyEngine):
    """Chunked passes over one data set, compiled with numba and run in parallel.

    Same interface and results (to rounding) as
    :class:`~softkmeans._backends._numpy.NumpyEngine`.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
        Validated data (float32 or float64).
    sample_weight : ndarray of shape (n_samples,), default=None
        Non-negative weights; ones when None.
    n_threads : int, default=None
        Threads of a pass; None follows the OpenMP limit in effect.

    Examples
    --------
    >>> import numpy as np
    >>> from softkmeans._backends._numba import NumbaEngine
    >>> from softkmeans._core.responsibilities import RelaxationSpec
    >>> X = np.array([[0.0, 0.0], [0.0, 1.0], [5.0, 0.0]])
    >>> stats = NumbaEngine(X).estep(X[[0, 2]], RelaxationSpec("entmax", sigma=0.3))
    >>> stats.labels.tolist(), stats.masses.tolist()
    ([0, 0, 1], [2.0, 1.0])
    """

    name = "numba"

    def __init__(self, X, sample_weight=None, n_threads=None):
        if sp.issparse(X):
            X = sp.csr_matrix(X)
            x_sq = _row_sq_norms(X)
            self._csr_arrays = tuple(_read_only(a) for a in (X.data, X.indices, X.indptr))
        else:
            if X.dtype not in (np.float32, np.float64):
                X = np.asarray(X, dtype=np.float64)
            X = _read_only(np.ascontiguousarray(X))
            x_sq = np.empty(X.shape[0])  # no float64 copy of X
            run_threads(dense_row_sq_norms, effective_n_threads(n_threads), X, x_sq)
        self.X = X
        self.sample_weight = _read_only(
            np.ones(X.shape[0]) if sample_weight is None
            else np.asarray(sample_weight, dtype=np.float64)
        )
        self.x_sq = x_sq
        self.n_threads = n_threads
        self._blas_limit = None
        self._sessions = 0

    def __enter__(self):
        """Hold BLAS to one thread for every pass until the session ends (see PassSession).

        Sessions nest: the limit is set by the outermost one.
        """
        if self._sessions == 0:
            self._blas_limit = _blas_controller().limit(limits=1, user_api="blas")
        self._sessions += 1
        return self

    def __exit__(self, *exc_info):
        """Leave the session; the outermost one restores the BLAS thread counts it found."""
        self._sessions -= 1
        if self._sessions == 0:
            limit, self._blas_limit = self._blas_limit, None
            limit.restore_original_limits()

    def _pass(self, centers, spec, with_sums, out_mode=OUT_NONE, out=_NO_OUT):
        """Run one kernel pass; returns (sums, masses, scalars, labels, margins, dmin)."""
        centers = np.asarray(centers, dtype=np.float64)
        c_sq = np.einsum("ij,ij->i", centers, centers)
        n = self.n_samples
        X = self.X
        labels = np.empty(n, dtype=np.int32)
        margins = np.empty(n)
        dmin = np.empty(n)
        work = (X.nnz if sp.issparse(X) else X.size) * centers.shape[0]
        n_threads = min(effective_n_threads(self.n_threads), 1 + work // WORK_PER_THREAD)
        k, n_features = centers.shape
        sums, masses, scalars = _accumulators(n_threads, k, n_features)
        kind, tau = KINDS[spec.kind], spec.tau
        rest = (float(spec.alpha), with_sums, out_mode, out, labels, margins, dmin, sums, masses,
                scalars)
        limit_blas = self._sessions == 0  # a session holds the limit already
        if sp.issparse(X):
            centers_t = np.ascontiguousarray(centers.T)
            run_threads(csr_pass, n_threads, *self._csr_arrays, self.sample_weight, self.x_sq,
                        centers_t, c_sq, chunk_rows(k), kind, tau, *rest, limit_blas=limit_blas)
        else:
            layout = pass_layout(k, n_features, X.dtype, blocked_products())
            run_threads(dense_pass, n_threads, X, self.sample_weight, self.x_sq,
                        centers.astype(X.dtype), c_sq, *layout, kind, tau,
                        bounded_inverse(tau, X.dtype), *rest, limit_blas=limit_blas)
        parts = ((sums, k), (masses, k), (scalars, 3))
        sums, masses, scalars = (a[0, :size] if n_threads == 1 else a[:, :size].sum(axis=0)
                                 for a, size in parts)
        return sums, masses, scalars, labels, margins, dmin

    def estep(self, centers, spec, with_sums=True):
        """One pass: responsibilities at ``centers`` and their statistics.

        Parameters
        ----------
        centers : ndarray of shape (n_clusters, n_features)
        spec : RelaxationSpec
        with_sums : bool, default=True
            Accumulate ``sums`` (the cross-product ``R^T X``); prediction
            passes skip it.

        Returns
        -------
        PassStats
        """
        sums, masses, scalars, labels, margins, dmin = self._pass(centers, spec, with_sums)
        objective, inertia, gap = (float(v) for v in scalars)
        return PassStats(sums, masses, objective, inertia, gap, labels, margins, dmin)

    def responsibilities(self, centers, spec):
        """Responsibilities of every observation, shape (n_samples, n_clusters)."""
        out = np.empty((self.n_samples, centers.shape[0]))
        self._pass(centers, spec, False, OUT_RESP, out)
        return out

    def sq_distances(self, centers):
        """Squared distances to every centroid, shape (n_samples, n_clusters)."""
        out = np.empty((self.n_samples, centers.shape[0]))
        self._pass(centers, _HARD, False, OUT_DIST, out)
        return out

    def max_sq_distances(self, points):
        """``max_i ||x_i - p||^2`` over the observations with positive weight, for every point."""
        out = np.zeros((effective_n_threads(self.n_threads), points.shape[0]))
        self._pass(points, _HARD, False, OUT_FARTHEST, out)
        return out.max(axis=0)

    def log_sum_exp(self, centers, sigma):
        """``log sum_j exp(-d_ij / (2 sigma^2))`` of every observation."""
        spec = RelaxationSpec("softmax", sigma)
        out = np.empty((self.n_samples, 1))
        dmin = self._pass(centers, spec, False, OUT_GAP, out)[5]
        return -dmin / spec.tau + out[:, 0] / spec.tau


def compile_kernels(file=None):
    """Compile every kernel a fit can call, or load it from numba's on-disk cache.

    One pass over a tiny data set per input kind (dense and CSR, float32 and
    float64) compiles all of that kind's kernels: every estimator, relaxation
    and output of the engine goes through the same pass kernel. Compiling
    takes seconds per kind and happens once per installation; a process that
    finds the kernels in the cache loads them in a fraction of a second. Run
    it (``python -m softkmeans compile``) where the package is installed for
    many short-lived processes, e.g. when building a container image.

    Parameters
    ----------
    file : file-like, default=None
        Where to print one line per input kind; nothing is printed when None.

    Returns
    -------
    dict
        Seconds taken per input kind, keyed by ``(layout, dtype name)``.

    Examples
    --------
    >>> from softkmeans._backends._numba import compile_kernels
    >>> sorted(compile_kernels())
    [('CSR', 'float32'), ('CSR', 'float64'), ('dense', 'float32'), ('dense', 'float64')]
    """
    data = np.random.default_rng(0).normal(size=(64, 3))
    spec = RelaxationSpec("softmax", 1.0)
    seconds = {}
    for layout, to_layout in (("dense", np.asarray), ("CSR", sp.csr_matrix)):
        for dtype in (np.float32, np.float64):
            start = time.perf_counter()
            NumbaEngine(to_layout(data.astype(dtype))).estep(data[:4], spec)
            key = (layout, np.dtype(dtype).name)
            seconds[key] = time.perf_counter() - start
            if file is not None:
                print(f"{layout:>5} {key[1]}: {seconds[key]:5.1f} s", file=file)
    return seconds
