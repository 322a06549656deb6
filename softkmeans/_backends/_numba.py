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
works in float64) to float32 precision. Dense data far from the origin are
centred chunk by chunk for the cross term (:func:`._conditioning.centering_shift`).

Compilation: with ``backend="auto"`` the kernels compile in the background (in a
child interpreter where numba caches them) while the passes run on the numpy
engine (:mod:`._numba_warmup`).

Threads: ``n_threads`` when given, otherwise the OpenMP limit in effect
(``OMP_NUM_THREADS`` or a ``threadpoolctl`` limit, as scikit-learn reads it),
capped by ``NUMBA_NUM_THREADS`` (the number of CPUs unless set), and by the
size of the pass (one thread per :data:`WORK_PER_THREAD` multiply-adds). BLAS
runs at one thread inside a pass. Results do not depend on the number of
threads beyond rounding.
"""

import copy
import functools
import os
import queue
import subprocess
import sys
import threading
import time
import weakref
from contextlib import contextmanager, nullcontext

import numba
import numpy as np
import scipy.sparse as sp

from .._core.bounds import UNIT_ROUNDOFF, unit_roundoff
from .._core.responsibilities import RelaxationSpec
from ._chunks import row_blocks
from ._conditioning import centering_shift, power_of_two_scale
from ._numba_kernels import (
    OUT_DIST,
    OUT_FARTHEST,
    OUT_GAP,
    OUT_NONE,
    OUT_RESP,
    chunk_rows,
    csr_pass,
    dense_inverse,
    dense_pass,
    dense_row_sq_norms,
    pass_layout,
)
from ._numba_rows import JIT_OPTIONS, KINDS
from ._numba_warmup import READY, warmup
from ._numpy import NumpyEngine, _row_sq_norms, first_equal_rows
from ._stats import PassStats

__all__ = ["CHILD_BUILD_TIMEOUT", "NUMPY_WORK_MAX", "NumbaEngine", "blocked_products",
           "compile_kernels", "effective_n_threads", "input_kind", "run_threads"]

_HARD = RelaxationSpec("hard")
#: A pass gets one more thread per this many multiply-adds of its distance computation;
#: below it, waking a thread costs more than it saves.
WORK_PER_THREAD = 1 << 22
#: Largest pass (multiply-adds of its distance computation) the numba engine runs on the numpy
#: engine while its kernels compile. Above it numpy passes finish too few iterations during the
#: compilation (which they slow down) to gain anything: at 2e5 x 64 data and 50 centroids
#: (6.4e8) a first fit took as long either way, at 1e6 x 64 and 100 centroids 13% longer.
NUMPY_WORK_MAX = 1 << 28
#: float64 values between the accumulators of two threads: 128 bytes, two cache lines.
ACCUMULATOR_GAP = 16
_NO_OUT = np.empty((0, 0))
_NO_SHIFT = np.empty(0)
#: Softmax centroids whose mass in a pass is below this fraction of the total weight get their
#: weights summed without the skip rule (``NumbaEngine._sum_exactly``). The skipped weights,
#: below ``exp(-37)`` of each row's weight, are below 1e-10 of any other centroid's mass.
LIGHT_MASS = 1e-6
#: ``exp(-x)`` is 0 in float64 beyond this ``x``.
_UNDERFLOW = 746.0
#: Values (rows x centroids) of the float64 block of a pass whose per-centroid output is asked
#: for in another dtype (``NumbaEngine._output_pass``): 32 MB, of ``4M d`` multiply-adds at
#: ``d`` features, work for ``1 + d`` threads (:data:`WORK_PER_THREAD`).
OUTPUT_BLOCK_ELEMENTS = 1 << 22
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


@functools.lru_cache(maxsize=1)
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


def _lower_exponents(centers, candidates, labels, dmin):
    """A lower bound of ``d_ij - dmin_i`` over the rows, for each candidate centroid ``j``.

    A row ``i`` nearest to centroid ``l`` lies within ``r_l``, the largest
    ``sqrt(dmin)`` of ``l``'s rows, of it; so ``d_ij - dmin_i >= g^2 - 2 g r_l``
    with ``g = ||c_j - c_l||``. The rows nearest to ``j`` itself are left out
    (the pass never skips their weight for ``j``). O(n) for the radii, O(k d)
    per candidate.
    """
    radius = np.full(len(centers), -np.inf)
    np.maximum.at(radius, labels, np.sqrt(dmin))
    occupied = np.flatnonzero(radius >= 0)
    diff_sq = (np.einsum("ij,ij->i", centers, centers)[occupied][None, :]
               + np.einsum("ij,ij->i", centers[candidates], centers[candidates])[:, None]
               - 2.0 * centers[candidates] @ centers[occupied].T)
    gaps = np.sqrt(np.maximum(diff_sq, 0.0))
    lower = gaps * (gaps - 2.0 * radius[occupied])
    # a row's weight for its own nearest centroid is never skipped: only the others count
    lower[candidates[:, None] == occupied[None, :]] = np.inf
    return lower.min(axis=1, initial=np.inf)


def _forget_threads():
    """Start without workers and without a BLAS limit (at import, and in a forked child)."""
    global _shares, _n_workers, _workers_lock, _blas_lock, _blas_owner, _blas_holds, _blas_limit
    global _blas_found
    _shares, _n_workers, _workers_lock = queue.SimpleQueue(), 0, threading.Lock()
    _blas_lock, _blas_owner, _blas_limit = threading.Lock(), None, None
    _blas_holds = weakref.WeakSet()
    _blas_found = None  # thread counts to restore, until a limit is known to be restored


_forget_threads()
if hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
    os.register_at_fork(after_in_child=_forget_threads)  # a forked child has none of the threads


class _Hold:
    """One hold of the BLAS limit, given back to :func:`_release_blas`."""

    __slots__ = ("__weakref__",)


def _hold_blas():
    """Hold BLAS to one thread (see :func:`blas_at_one_thread`); returns the hold.

    The owner's live holds are kept weakly: a hold lost to an exception
    between this call and its release (a KeyboardInterrupt) is collected and
    stops counting, so that the owner's next release still restores the
    thread counts (a count of holds would stay above 0 for good). The counts
    found are kept until a release has restored them: a limit set or
    restored halfway when an interrupt came is undone by the next hold.
    """
    global _blas_owner, _blas_limit, _blas_found
    hold = _Hold()
    with _blas_lock:
        if _blas_owner is None:
            controller = _blas_controller()
            if _blas_found is not None:  # a hold or a release was interrupted: undo its limit
                controller.limit(limits=_blas_found)
            _blas_found = {lib["prefix"]: lib["num_threads"] for lib in controller.info()
                           if lib["user_api"] == "blas"}
            limit = controller.limit(limits=1, user_api="blas")
            _blas_limit, _blas_owner = limit, threading.get_ident()
        if _blas_owner == threading.get_ident():
            _blas_holds.add(hold)
    return hold


def _release_blas(hold):
    """End a hold; the owner's last live one restores the thread counts it found."""
    global _blas_owner, _blas_limit, _blas_found
    with _blas_lock:
        if _blas_owner != threading.get_ident():
            return
        _blas_holds.discard(hold)
        if not _blas_holds:
            limit, _blas_limit, _blas_owner = _blas_limit, None, None
            limit.restore_original_limits()
            _blas_found = None


@contextmanager
def blas_at_one_thread():
    """Hold BLAS to one thread, process-wide, during a pass or a session.

    The thread count is process-wide, so one Python thread at a time owns the
    limit: the first to ask sets it, and its outermost hold restores the
    counts it found. A thread that asks while another owns it only runs in
    it (and, if the owner leaves first, on BLAS at its usual count until its
    next pass takes the limit). Limits set by overlapping holders on several
    threads would each restore what another had set and leave BLAS at one
    thread; and OpenBLAS (0.3.30, measured) ignores a thread count restored
    from another thread than the one that set the limit, so the owner
    restores it itself. Holds nest on the owner's thread (a session's passes
    only count).
    """
    hold = _hold_blas()
    try:
        yield
    finally:
        _release_blas(hold)


def _run_shares(shares):
    """A worker thread: runs the shares put on ``shares`` and returns each one's outcome."""
    while True:
        _run_share(*shares.get())


def _run_share(kernel, args, outcomes):
    """One share; its arguments (the pass's arrays) are not kept once it is done."""
    try:
        outcomes.put((args[-2], kernel(*args), None))
    except BaseException as exc:  # noqa: BLE001 - raised again by the thread that waits
        outcomes.put((args[-2], None, exc))


def _start_workers(count):
    """Make sure that ``count`` worker threads take shares."""
    global _n_workers
    with _workers_lock:
        while _n_workers < count:
            threading.Thread(target=_run_shares, args=(_shares,), daemon=True,
                             name=f"softkmeans-{_n_workers}").start()
            _n_workers += 1


def run_threads(kernel, n_threads, *args, limit_blas=True):
    """``kernel(*args, thread, n_threads)`` for every thread, concurrently; their results.

    The calling thread runs share 0 and daemon workers the others. Shares and
    outcomes pass through ``queue.SimpleQueue`` objects, whose operations are
    atomic in C: a KeyboardInterrupt in the calling thread (which abandons the
    pass; the workers finish its shares) leaves no lock held. With
    ``concurrent.futures``' pool, whose locks are Python code, an interrupt
    could leave one held, and every later pass, and the interpreter's exit,
    waited forever. BLAS is held to one thread meanwhile, as in scikit-learn's
    Lloyd kernel (:func:`blas_at_one_thread`; ``limit_blas=False`` leaves it
    alone).
    """
    with blas_at_one_thread() if limit_blas else nullcontext():
        if n_threads == 1:
            return [kernel(*args, 0, 1)]
        _start_workers(n_threads - 1)
        outcomes = queue.SimpleQueue()
        for thread in range(1, n_threads):
            _shares.put((kernel, (*args, thread, n_threads), outcomes))
        results = [None] * n_threads
        try:
            results[0] = kernel(*args, 0, n_threads)
        finally:  # wait for the other shares (an interrupt here abandons them to the workers)
            errors = []
            for _ in range(n_threads - 1):
                thread, result, error = outcomes.get()
                results[thread] = result
                errors += [error] if error is not None else []
        if errors:
            raise errors[0]
        return results


def input_kind(X):
    """The input kind of ``X``, which decides the kernels a pass over it runs.

    Parameters
    ----------
    X : ndarray or CSR matrix
        As the engine holds it (C-contiguous, or CSR).

    Returns
    -------
    tuple of str
        ``("dense", dtype)`` or ``("CSR", dtype, index dtype)``.
    """
    if sp.issparse(X):
        return ("CSR", X.dtype.name, X.indices.dtype.name)
    return ("dense", X.dtype.name)


def _build_kernels(kind):
    """Compile, or load from numba's cache, every kernel of a pass over input of ``kind``.

    One pass over a tiny data set of that kind compiles them all: every
    estimator, relaxation and output of the engine goes through the same pass
    kernel. BLAS is left alone: this may run on a background thread while a
    fit on another thread holds it to one thread, and limiting it here could
    restore the wrong thread count when the fit ends.
    """
    points = np.random.default_rng(0).normal(size=(64, 3))
    data = points.astype(kind[1])
    if kind[0] == "CSR":
        data = sp.csr_matrix(data)
        data.indices, data.indptr = (a.astype(kind[2]) for a in (data.indices, data.indptr))
    NumbaEngine(data)._pass(points[:4], RelaxationSpec("softmax", 1.0), True, limit_blas=False)


#: Seconds a child interpreter gets to compile the kernels of an input kind (about 10 s here);
#: one that runs longer is stopped, and the background thread compiles them itself.
CHILD_BUILD_TIMEOUT = 600.0
#: What a child interpreter runs to compile the kernels of an input kind into numba's cache.
_CHILD_BUILD = """
import sys
sys.path[:] = {path!r}
from softkmeans._backends._numba import _build_kernels
_build_kernels({kind!r})
"""


def _build_kernels_in_child(kind):
    """Compile the kernels of ``kind`` in a child interpreter, which caches them; whether it did.

    The child imports this package from where this process did, with this
    process's environment and numba cache directory.
    """
    env = dict(os.environ)
    if numba.config.CACHE_DIR:
        env["NUMBA_CACHE_DIR"] = numba.config.CACHE_DIR
    code = _CHILD_BUILD.format(path=sys.path, kind=kind)
    try:
        done = subprocess.run([sys.executable, "-c", code], env=env, check=False,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=CHILD_BUILD_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _can_build_in_child():
    """Whether a child interpreter can compile the kernels for this process.

    numba must cache them, and ``sys.executable`` must be a Python
    interpreter: an embedding application (uWSGI, a frozen executable) has
    its own program there.
    """
    program = os.path.basename(sys.executable or "").lower()
    return (JIT_OPTIONS["cache"] and program.startswith(("python", "pypy"))
            and not getattr(sys, "frozen", False))


def _kernels_in_background(X):
    """The :class:`._numba_warmup.KernelWarmup` of the kernels for ``X``.

    Their compilation starts in the background the first time an input kind
    is asked for (by a child interpreter where numba caches them); this waits
    while the thread loads them from numba's cache, not while they compile.
    """
    kind = input_kind(X)
    elsewhere = functools.partial(_build_kernels_in_child, kind) if _can_build_in_child() else None
    kernels = warmup(kind, functools.partial(_build_kernels, kind), elsewhere)
    kernels.wait_unless_compiling()
    return kernels


class _KernelsReady(Exception):
    """A numpy pass of the engine stops: the kernels became ready during it."""


def _numpy_until_compiled(method, numpy_method=None):
    """Make an engine method run the numpy engine's method of that name until the kernels are ready.

    A numpy pass that finds them ready at the end of a block of rows stops,
    and the pass runs again on the kernels. A pass of more than
    :data:`NUMPY_WORK_MAX` multiply-adds waits for the kernels instead,
    unless they are orphaned (a forked child: they never become ready).
    """
    numpy_method = numpy_method or getattr(NumpyEngine, method.__name__)

    @functools.wraps(method)
    def run(self, centers, *args, **kwargs):
        kernels = self._kernels
        if not kernels.ready.is_set():
            if self._work(centers) > NUMPY_WORK_MAX and not kernels.orphaned:
                kernels.ready.wait()
            else:
                try:
                    return numpy_method(self, centers, *args, **kwargs)
                except _KernelsReady:
                    pass
        return method(self, centers, *args, **kwargs)

    return run


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
    wait_for_kernels : bool, default=True
        Whether a pass whose kernels are not compiled yet waits for numba to
        compile them (seconds, once per installation). False (``backend="auto"``)
        has them compiled in the background and runs the passes on the numpy
        engine until they are ready (:mod:`._numba_warmup`); results are the
        same to rounding.

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

    def __init__(self, X, sample_weight=None, n_threads=None, wait_for_kernels=True):
        if sp.issparse(X):
            X = sp.csr_matrix(X)
            self._csr_arrays = tuple(_read_only(a) for a in (X.data, X.indices, X.indptr))
        else:
            if X.dtype not in (np.float32, np.float64):
                X = np.asarray(X, dtype=np.float64)
            X = _read_only(np.ascontiguousarray(X))
        self._kernels = READY if wait_for_kernels else _kernels_in_background(X)
        self.X = X
        self.n_threads = n_threads
        self.sample_weight = _read_only(
            np.ones(X.shape[0]) if sample_weight is None
            else np.asarray(sample_weight, dtype=np.float64)
        )
        # Dense softmax chunks multiply the weights into float32 products: the kernels take them
        # over a power of two, and the sums are scaled back.
        self._weight_scale = power_of_two_scale(self.sample_weight)
        self._total_weight = float(self.sample_weight.sum())
        self._kernel_weights = (self.sample_weight if self._weight_scale == 1.0
                                else _read_only(self.sample_weight / self._weight_scale))
        self.x_sq = self._sq_norms(X)
        self._shift = None if sp.issparse(X) else centering_shift(X)
        self._shifted_x_sq = None  # ||x_i - shift||^2, made on the first pass (by the kernels)
        self._holds = []  # of the BLAS limit, one per session entered (sessions nest)

    def _sq_norms(self, X, shift=None):
        """``||x_i - shift||^2`` in float64; by the kernels when they are ready (no copy of X)."""
        if sp.issparse(X) or not self._kernels.ready.is_set():
            return _row_sq_norms(X, shift)
        x_sq = np.empty(X.shape[0])
        n_threads = min(effective_n_threads(self.n_threads), 1 + X.size // WORK_PER_THREAD)
        run_threads(dense_row_sq_norms, n_threads, X, _NO_SHIFT if shift is None else shift,
                    x_sq, limit_blas=False)
        return x_sq

    def _kernel_data(self):
        """``(shift, x_sq)`` the dense kernels take: the shift in the dtype of X (empty for
        none) and the squared norms of the shifted rows."""
        shift = _NO_SHIFT if self._shift is None else self._shift
        return shift.astype(self.X.dtype), self.distance_norms()

    def __enter__(self):
        """Hold BLAS to one thread for every pass until the session ends (see PassSession).

        Sessions nest, and a pass inside one only counts a hold
        (:func:`blas_at_one_thread`) instead of calling ``threadpoolctl``.
        """
        self._holds.append(_hold_blas())
        return self

    def __exit__(self, *exc_info):
        """Leave the session; the owner's last hold restores the BLAS thread counts."""
        _release_blas(self._holds.pop())

    @property
    def unit_roundoff(self):
        """Unit roundoff of the passes' arithmetic: dense float32 data are multiplied in float32."""
        return UNIT_ROUNDOFF if sp.issparse(self.X) else unit_roundoff(self.X.dtype)

    def _work(self, centers):
        """Multiply-adds of a pass's distance computation."""
        return (self.X.nnz if sp.issparse(self.X) else self.X.size) * len(centers)

    def _blocks(self, centers):
        """The numpy engine's blocks of distances, stopping once the kernels are ready."""
        for block in super()._blocks(centers):
            if self._kernels.ready.is_set():
                raise _KernelsReady
            yield block

    def _pass(self, centers, spec, with_sums, out_mode=OUT_NONE, out=_NO_OUT, limit_blas=True):
        """Run one kernel pass; returns (sums, masses, scalars, labels, margins, dmin).

        BLAS is held to one thread during it (:func:`blas_at_one_thread`: inside
        a session, a count only) unless ``limit_blas`` is False.
        """
        centers, c_sq = self._shifted_centers(centers)
        n = self.n_samples
        X = self.X
        labels = np.empty(n, dtype=np.int32)
        margins = np.empty(n)
        dmin = np.empty(n)
        n_threads = min(effective_n_threads(self.n_threads),
                        1 + self._work(centers) // WORK_PER_THREAD)
        k, n_features = centers.shape
        sums, masses, scalars = _accumulators(n_threads, k, n_features)
        kind, tau = KINDS[spec.kind], spec.tau
        rest = (float(spec.alpha), with_sums, out_mode, out, labels, margins, dmin, sums, masses,
                scalars)
        if sp.issparse(X):
            centers_t = np.ascontiguousarray(centers.T)
            run_threads(csr_pass, n_threads, *self._csr_arrays, self._kernel_weights, self.x_sq,
                        centers_t, c_sq, chunk_rows(k), kind, tau, *rest, limit_blas=limit_blas)
        else:
            layout = pass_layout(k, n_features, X.dtype, blocked_products())
            shift, x_sq = self._kernel_data()
            run_threads(dense_pass, n_threads, X, shift, first_equal_rows(centers, c_sq),
                        self._kernel_weights, x_sq, centers.astype(X.dtype), c_sq, *layout, kind,
                        tau, dense_inverse(tau, X.dtype), *rest, limit_blas=limit_blas)
        parts = ((sums, k), (masses, k), (scalars, 3))
        sums, masses, scalars = (a[0, :size] if n_threads == 1 else a[:, :size].sum(axis=0)
                                 for a, size in parts)
        sums, masses, scalars = (a * self._weight_scale for a in (sums, masses, scalars))
        return sums, masses, scalars, labels, margins, dmin

    @_numpy_until_compiled
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
        stats = PassStats(sums, masses, objective, inertia, gap, labels, margins, dmin)
        if spec.kind == "softmax" and with_sums:
            light = np.flatnonzero(masses < LIGHT_MASS * self._total_weight)
            if light.size:
                self._sum_exactly(np.asarray(centers, dtype=np.float64), light, spec, stats)
        return stats

    def _sum_exactly(self, centers, light, spec, stats):
        """Sum the weights of the ``light`` centroids without the softmax skip rule.

        Skipped weights are below the resolution of each row's sum: rounding
        for the rows, but for a centroid of mass below :data:`LIGHT_MASS` of
        the total weight they may be a visible part of its mass, or all of it
        (it would stay in place where the oracle moves it to their weighted
        mean). Its mass and sums are replaced by sums over every row of
        ``exp(-(d_ij - dmin_i) / tau) / (1 + S_i)`` in float64, as the oracle
        sums them (``log1p(S_i)`` from a pass that writes each row's gap; the
        exponent is 0 in the rows it is nearest to, whose ``dmin_i`` the pass
        found), unless :func:`_lower_exponents` shows that every one
        underflows to 0 there, as the oracle's then do.
        """
        far = _lower_exponents(centers, light, stats.labels, stats.dmin) > _UNDERFLOW * spec.tau
        light = light[~far]
        if light.size == 0:
            return
        points, p_sq = self._shifted_centers(centers[light])
        row_gaps = np.empty((self.n_samples, 1))
        self._pass(centers, spec, False, OUT_GAP, row_gaps)
        log_norm = row_gaps[:, 0] / spec.tau
        masses, sums = np.zeros(len(light)), np.zeros((len(light), centers.shape[1]))
        for rows in row_blocks(self.n_samples, len(light)):
            excess = self._block_sq_distances(rows, points, p_sq) - stats.dmin[rows, None]
            excess[stats.labels[rows, None] == light] = 0.0
            # the pass's dmin and these distances round differently: no weight above its row's
            np.maximum(excess, 0.0, out=excess)
            weighted = np.exp(-excess / spec.tau - log_norm[rows, None])
            weighted *= self.sample_weight[rows, None]
            masses += weighted.sum(axis=0)
            Xb = self.X[rows]
            sums += weighted.T @ (Xb.toarray() if sp.issparse(Xb) else Xb)
        stats.masses[light], stats.sums[light] = masses, sums

    def _rows(self, rows):
        """This engine on the rows ``rows`` (a slice) of X, for a pass over them alone.

        Everything a pass reads of the rows is a view of this engine's arrays
        (the shift stays X's, so distances are the same); a CSR block's arrays
        are copies of that block's entries only.
        """
        view = copy.copy(self)
        view.X = self.X[rows]
        if sp.issparse(self.X):
            view._csr_arrays = tuple(_read_only(a) for a in
                                     (view.X.data, view.X.indices, view.X.indptr))
        elif self._shift is not None:
            view._shifted_x_sq = self.distance_norms()[rows]
        view.x_sq = self.x_sq[rows]
        view.sample_weight = self.sample_weight[rows]
        view._kernel_weights = self._kernel_weights[rows]
        return view

    def _output_pass(self, centers, spec, out_mode, dtype, sqrt=False):
        """A pass that writes a value per row and centroid (``out_mode``) into an array of
        ``dtype``, their square roots if ``sqrt``.

        The kernels write float64: for another dtype the pass runs over blocks
        of :data:`OUTPUT_BLOCK_ELEMENTS` values, each converted into the
        output, so that besides it only one block is allocated.
        """
        n, k = self.n_samples, centers.shape[0]
        out = np.empty((n, k), dtype=dtype)
        if out.dtype == np.float64:
            self._pass(centers, spec, False, out_mode, out)
            return np.sqrt(out, out=out) if sqrt else out
        blocks = list(row_blocks(n, k, OUTPUT_BLOCK_ELEMENTS))
        scratch = np.empty((blocks[0].stop - blocks[0].start) * k if blocks else 0)
        for rows in blocks:
            block = scratch[:(rows.stop - rows.start) * k].reshape(-1, k)
            self._rows(rows)._pass(centers, spec, False, out_mode, block)
            out[rows] = np.sqrt(block, out=block) if sqrt else block
        return out

    @_numpy_until_compiled
    def responsibilities(self, centers, spec, dtype=np.float64):
        """Responsibilities of every observation, shape (n_samples, n_clusters), in ``dtype``.

        Besides the output, at most one block of :data:`OUTPUT_BLOCK_ELEMENTS`
        float64 values is allocated.
        """
        return self._output_pass(centers, spec, OUT_RESP, dtype)

    def sq_distances(self, centers, dtype=np.float64, sqrt=False):
        """Squared distances to every centroid, shape (n_samples, n_clusters), in ``dtype``.

        ``sqrt=True`` gives the distances, as
        :meth:`NumpyEngine.sq_distances <softkmeans._backends._numpy.NumpyEngine.sq_distances>`.
        For dense float32 data they are the numpy engine's, from float64
        products as scikit-learn's ``transform`` computes them (at the numpy
        engine's speed, with BLAS's threads): the kernels' float32 cross term
        errs by about ``1e-7 ||x||^2``, 10% of the distance of a point close
        to its centroid.
        """
        if self.X.dtype != np.float32 or sp.issparse(self.X):
            return self._kernel_sq_distances(centers, dtype, sqrt)
        out = np.empty((self.n_samples, centers.shape[0]), dtype=dtype)
        for rows, D in NumpyEngine._blocks(self, centers):  # not this engine's numpy pass
            out[rows] = np.sqrt(D, out=D) if sqrt else D
        return out

    @functools.partial(_numpy_until_compiled, numpy_method=NumpyEngine.sq_distances)
    def _kernel_sq_distances(self, centers, dtype=np.float64, sqrt=False):
        return self._output_pass(centers, _HARD, OUT_DIST, dtype, sqrt)

    @_numpy_until_compiled
    def max_sq_distances(self, points):
        """``max_i ||x_i - p||^2`` over the observations with positive weight, for every point."""
        out = np.zeros((effective_n_threads(self.n_threads), points.shape[0]))
        self._pass(points, _HARD, False, OUT_FARTHEST, out)
        return out.max(axis=0)

    @_numpy_until_compiled
    def log_sum_exp(self, centers, sigma):
        """``log sum_j exp(-d_ij / (2 sigma^2))`` of every observation."""
        spec = RelaxationSpec("softmax", sigma)
        out = np.empty((self.n_samples, 1))
        dmin = self._pass(centers, spec, False, OUT_GAP, out)[5]
        return -dmin / spec.tau + out[:, 0] / spec.tau


def compile_kernels(file=None):
    """Compile every kernel a fit can call, or load it from numba's on-disk cache.

    Every input kind (dense and CSR, float32 and float64) in turn, in the
    foreground. Compiling takes seconds per kind and happens once per
    installation; a process that finds the kernels in the cache loads them
    in a fraction of a second. ``pip install`` runs this in the build
    directory (``setup.py``), so that the installed package carries the
    kernels. Fits with ``backend="auto"`` compile what they lack in the
    background instead; run this (``python -m softkmeans compile``) where the
    kernels were not compiled at installation (an editable install, a wheel
    built elsewhere, a cache in ``NUMBA_CACHE_DIR``) for many short-lived
    processes, e.g. when building a container image, so that none of them
    runs its first passes on the numpy engine meanwhile. numba reads a cache only from
    a directory it can write to: run this as the user the processes will run
    as, or point ``NUMBA_CACHE_DIR`` at the same directory, writable by them,
    both here and there (a cache that root filled next to the installed
    sources is ignored by a user who cannot write there, and compiled again).

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
    seconds = {}
    for layout in ("dense", "CSR"):
        for dtype in ("float32", "float64"):
            start = time.perf_counter()
            _build_kernels((layout, dtype, "int32"))
            seconds[layout, dtype] = time.perf_counter() - start
            if file is not None:
                print(f"{layout:>5} {dtype}: {seconds[layout, dtype]:5.1f} s", file=file)
    return seconds
