"""The numba engine: the numpy oracle's passes as parallel compiled kernels.

Each pass is one sweep over X in chunks of rows, grouped into slots whose
accumulators are summed in slot order after the loop (:mod:`.threads`; the
kernels release the GIL and run on Python threads, which spares numba's
parallel compilation, the larger part of the first fit's JIT time). Only
the centroids that can carry a responsibility are visited (:mod:`.rows`
documents the pruning and its exactness), so that a low-temperature iteration
costs about what a Lloyd iteration costs.

Precision: float64 data gives the oracle's numbers to rounding. For float32
data the cross term ``X C^T`` is a float32 GEMM (as in scikit-learn) and dense
softmax weights use a float32 exp, so results agree with the oracle (which
works in float64) to float32 precision. Dense data far from the origin are
centred chunk by chunk for the cross term
(:func:`softkmeans._engines._conditioning.centering_shift`).

Compilation: by numba, on a kernel's first call in the process, or ahead of
time (:mod:`.compile`).

Threads: ``n_threads`` when given, otherwise the OpenMP limit in effect
(``OMP_NUM_THREADS`` or a ``threadpoolctl`` limit, as scikit-learn reads it),
capped by ``NUMBA_NUM_THREADS`` (the number of CPUs unless set), and by the
size of the pass (one thread per :data:`WORK_PER_THREAD` multiply-adds). BLAS
runs at one thread inside a pass on several threads. Results are the same bits
whatever the number of threads.
"""

import copy
from contextlib import nullcontext

import numpy as np
import scipy.sparse as sp

from ..._core.bounds import UNIT_ROUNDOFF, unit_roundoff
from ..._core.responsibilities import HARD, RelaxationSpec
from ..._jit import read_only
from .._array import NumpyEngine, first_equal_rows, row_sq_norms
from .._blas import one_blas_thread
from .._chunks import row_blocks
from .._conditioning import centering_shift, power_of_two_scale
from .._in_memory import InMemorySteps
from .._stats import PassStats
from .kernels import (
    OUT_DIST,
    OUT_FARTHEST,
    OUT_GAP,
    OUT_NONE,
    OUT_RESP,
    add_up_slots,
    csr_pass,
    dense_inverse,
    dense_pass,
    dense_row_sq_norms,
    shift_centroids,
)
from .layout import blocked_products, chunk_rows, pass_layout
from .rows import KINDS
from .threads import effective_n_threads, run_in_threads, slot_layout

__all__ = ["NumbaEngine"]

#: A pass gets one more thread per this many multiply-adds of its distance computation;
#: below it, waking a thread costs more than it saves.
WORK_PER_THREAD = 1 << 22
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


def _accumulators(n_slots, n_clusters, n_features):
    """Zeroed sums, masses and scalars (objective, inertia, gap) of each slot of a pass.

    Slot ``s`` adds into ``sums[s, :n_clusters]``, ``masses[s, :n_clusters]``
    and ``scalars[s, :3]``; the padding after each keeps every two slots'
    entries :data:`ACCUMULATOR_GAP` float64 values apart, on different cache
    lines (threads writing one line in turn slow each other down).
    """
    gap = ACCUMULATOR_GAP
    return (np.zeros((n_slots, n_clusters + -(-gap // n_features), n_features)),
            np.zeros((n_slots, n_clusters + gap)), np.zeros((n_slots, 3 + gap)))


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


class NumbaEngine(InMemorySteps):
    """Chunked passes over one data set, compiled with numba and run in parallel.

    The contract of :class:`~softkmeans._engines._contract.Engine`, with the
    results (to rounding) of the reference
    :class:`~softkmeans._engines._array.NumpyEngine`.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
        Validated data (float32 or float64).
    sample_weight : ndarray of shape (n_samples,), default=None
        Non-negative weights; ones when None.
    n_threads : int, default=None
        Threads of a pass; None follows the OpenMP limit in effect when the engine is made.

    Examples
    --------
    >>> import numpy as np
    >>> from softkmeans._engines._numba.engine import NumbaEngine
    >>> from softkmeans._core.responsibilities import RelaxationSpec
    >>> X = np.array([[0.0, 0.0], [0.0, 1.0], [5.0, 0.0]])
    >>> stats = NumbaEngine(X).estep(X[[0, 2]], RelaxationSpec("entmax", sigma=0.3))
    >>> stats.labels.tolist(), stats.masses.tolist()
    ([0, 0, 1], [2.0, 1.0])
    """

    name = "numba"

    def __init__(self, X, sample_weight=None, n_threads=None):
        self._csr_arrays = None  # (data, indices, indptr) of CSR X
        if sp.issparse(X):
            X = sp.csr_matrix(X)
            self._csr_arrays = tuple(read_only(a) for a in (X.data, X.indices, X.indptr))
        else:
            if X.dtype not in (np.float32, np.float64):
                X = np.asarray(X, dtype=np.float64)
            X = read_only(np.ascontiguousarray(X))
        self.X = X
        self.n_threads = n_threads
        self._threads = effective_n_threads(n_threads)  # the limit in effect when made
        self.sample_weight = read_only(
            np.ones(X.shape[0]) if sample_weight is None
            else np.asarray(sample_weight, dtype=np.float64)
        )
        # Dense softmax chunks multiply the weights into float32 products: the kernels take them
        # over a power of two, and the sums are scaled back.
        self._weight_scale = power_of_two_scale(self.sample_weight)
        self._total_weight = float(self.sample_weight.sum())
        self._kernel_weights = (self.sample_weight if self._weight_scale == 1.0
                                else read_only(self.sample_weight / self._weight_scale))
        self.x_sq = self._sq_norms(X)
        self._shift = None if sp.issparse(X) else centering_shift(X, self.x_sq)
        self._shifted_x_sq = None  # ||x_i - shift||^2, made on the first pass (by the kernels)
        self._reference_engine = None
        self._data = None  # what the kernels read of X, made on the first pass
        self._layouts = {}  # (n_clusters, n_features) -> how a pass of that shape splits

    def _sq_norms(self, X, shift=None):
        """``||x_i - shift||^2`` in float64; by the kernels for dense X (no copy of X)."""
        if sp.issparse(X):
            return row_sq_norms(X, shift)
        x_sq = np.empty(X.shape[0])
        n_threads = min(self._threads, 1 + X.size // WORK_PER_THREAD)
        run_in_threads(dense_row_sq_norms, n_threads, n_threads, X,
                       _NO_SHIFT if shift is None else shift, x_sq, n_threads)
        return x_sq

    @property
    def n_samples(self):
        return self.X.shape[0]

    @property
    def distance_shift(self):
        """The point (float64) subtracted from X and the centroids before their distances,
        or None (:func:`.._conditioning.centering_shift`)."""
        return self._shift

    def distance_norms(self):
        """``||x_i - shift||^2`` in float64 (``x_sq`` when X is not shifted)."""
        if self._shift is None:
            return self.x_sq
        if self._shifted_x_sq is None:
            self._shifted_x_sq = self._sq_norms(self.X, self._shift)
        return self._shifted_x_sq

    def row(self, i):
        """Observation ``i`` as a dense float64 vector."""
        x = self.X[i]
        return np.asarray(x.toarray() if sp.issparse(x) else x, dtype=np.float64).ravel()

    def _reference(self):
        """The reference engine on the same data (made once), for the float64 distances of a
        few centroids (:meth:`_sum_exactly`, ``sq_distances`` of float32 data)."""
        if self._reference_engine is None:
            self._reference_engine = NumpyEngine(self.X, self.sample_weight)
        return self._reference_engine

    def _kernel_data(self):
        """``(shift, x_sq)`` the dense kernels take: the shift in the dtype of X (empty for
        none) and the squared norms of the shifted rows."""
        shift = _NO_SHIFT if self._shift is None else self._shift
        return shift.astype(self.X.dtype), self.distance_norms()

    @property
    def unit_roundoff(self):
        """Unit roundoff of the passes' arithmetic: dense float32 data are multiplied in float32."""
        return UNIT_ROUNDOFF if sp.issparse(self.X) else unit_roundoff(self.X.dtype)

    def _work(self, n_clusters):
        """Multiply-adds of a pass's distance computation."""
        return (self.X.nnz if sp.issparse(self.X) else self.X.size) * n_clusters

    def _slots(self, n_clusters, n_features):
        """``(n_slots, chunks_per_slot, rows_per_chunk)`` of a pass (:func:`.threads.slot_layout`).

        They depend on the data and the shape of the centroids, never on the
        number of threads: so do the results.
        """
        rows = chunk_rows(n_clusters)
        n_chunks = -(-self.n_samples // rows)
        accumulator = (n_clusters + ACCUMULATOR_GAP) * (n_features + 1)
        return (*slot_layout(n_chunks, accumulator, self._work(n_clusters)), rows)

    def _pass(self, centers, spec, with_sums, out_mode=OUT_NONE, out=_NO_OUT):
        """Run one kernel pass; returns ``(sums, masses, (objective, inertia, gap), smallest
        mass, labels, margins, dmin)``.

        A pass on several threads holds BLAS at one thread (:func:`.._blas.one_blas_thread`),
        each of them calling it; a pass on the calling thread alone calls BLAS as numpy does.
        ``OUT_FARTHEST`` takes an ``out`` of ``n_slots`` rows (:meth:`_slots`).
        """
        # a writable C-ordered copy: one compiled type, whatever the caller's array
        centers = np.array(centers, dtype=np.float64, order="C")
        n = self.n_samples
        X = self.X
        sparse = self._csr_arrays is not None
        labels = np.empty(n, dtype=np.int32)
        margins = np.empty(n)
        dmin = np.empty(n)
        k, n_features = centers.shape
        # the centroids shifted like X, in its dtype (float64 for CSR X), and their float64
        # squared norms
        shifted, c_sq = np.empty((k, n_features), np.float64 if sparse else X.dtype), np.empty(k)
        shift_centroids(centers, _NO_SHIFT if self._shift is None else self._shift, shifted,
                        c_sq)
        n_slots, n_threads, layout = self._layout(k, n_features)
        accumulators = _accumulators(n_slots, k, n_features)
        kind, tau, alpha = KINDS[spec.kind], spec.tau, float(spec.alpha)
        data = self._kernel_inputs()
        # plain tuples in the fields' order of the kernels' namedtuples (see .kernels)
        if sparse:
            centroids = (np.ascontiguousarray(shifted.T), c_sq)
            inv_tau = 0.0
            kernel = csr_pass
        else:
            unrounded = centers if self._shift is None else centers - self._shift
            centroids = (shifted, c_sq, first_equal_rows(unrounded, c_sq))
            inv_tau = dense_inverse(tau, X.dtype)
            kernel = dense_pass
        with one_blas_thread() if n_threads > 1 else nullcontext():
            run_in_threads(kernel, n_slots, n_threads, data, centroids,
                           (kind, tau, alpha, inv_tau, with_sums, out_mode), layout,
                           (labels, margins, dmin, out), accumulators)
        # the slots in slot order: the same sums whatever the number of threads
        sums, masses, scalars = accumulators
        *totals, smallest = add_up_slots(sums, masses, scalars, k)
        sums, masses = sums[0, :k], masses[0, :k]
        scale = self._weight_scale
        if scale != 1.0:
            sums, masses, smallest = sums * scale, masses * scale, smallest * scale
            totals = [value * scale for value in totals]
        return sums, masses, tuple(totals), smallest, labels, margins, dmin

    def _layout(self, n_clusters, n_features):
        """``(n_slots, n_threads, layout)`` of a pass with centroids of this shape, made once
        per shape (:meth:`_slots`, :func:`.layout.pass_layout`); ``layout`` is a tuple of the
        fields of :data:`.kernels.PassLayout`."""
        key = (n_clusters, n_features)
        if key not in self._layouts:
            n_slots, slot_chunks, rows = self._slots(n_clusters, n_features)
            n_threads = min(self._threads, 1 + self._work(n_clusters) // WORK_PER_THREAD)
            if sp.issparse(self.X):
                layout = (rows, slot_chunks, n_clusters, False)
            else:
                chunk, step, transposes = pass_layout(n_clusters, n_features, self.X.dtype,
                                                      blocked_products())
                layout = (chunk, slot_chunks, step, transposes)
            self._layouts[key] = n_slots, n_threads, layout
        return self._layouts[key]

    def _kernel_inputs(self):
        """What the pass kernels read of X: a tuple of :data:`.kernels.DenseData`'s or
        ``CsrData``'s fields."""
        if self._data is None:
            if sp.issparse(self.X):
                self._data = (*self._csr_arrays, self._kernel_weights, self.x_sq)
            else:
                shift, x_sq = self._kernel_data()
                self._data = (self.X, shift, self._kernel_weights, x_sq)
        return self._data

    def estep(self, centers, spec, with_sums=True):
        """One pass (:meth:`softkmeans._engines._contract.Engine.estep`)."""
        sums, masses, totals, smallest, labels, margins, dmin = self._pass(centers, spec,
                                                                           with_sums)
        stats = PassStats(sums, masses, *totals, labels, margins, dmin)
        light_mass = LIGHT_MASS * self._total_weight
        if spec.kind == "softmax" and with_sums and smallest < light_mass:
            self._sum_exactly(np.asarray(centers, dtype=np.float64),
                              np.flatnonzero(masses < light_mass), spec, stats)
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
        row_gaps = np.empty((self.n_samples, 1))
        self._pass(centers, spec, False, OUT_GAP, row_gaps)
        log_norm = row_gaps[:, 0] / spec.tau
        masses, sums = np.zeros(len(light)), np.zeros((len(light), centers.shape[1]))
        for rows, D in self._reference()._blocks(centers[light]):
            excess = D - stats.dmin[rows, None]
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
        view._reference_engine, view._data, view._layouts = None, None, {}
        view.X = self.X[rows]
        if sp.issparse(self.X):
            view._csr_arrays = tuple(read_only(a) for a in
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

    def responsibilities(self, centers, spec, dtype=np.float64):
        """Responsibilities of every observation, shape (n_samples, n_clusters), in ``dtype``.

        Besides the output, at most one block of :data:`OUTPUT_BLOCK_ELEMENTS`
        float64 values is allocated.
        """
        return self._output_pass(centers, spec, OUT_RESP, dtype)

    def sq_distances(self, centers, dtype=np.float64, sqrt=False):
        """Squared distances to every centroid, shape (n_samples, n_clusters), in ``dtype``.

        ``sqrt=True`` gives the distances, as
        :meth:`NumpyEngine.sq_distances <softkmeans._engines._array.NumpyEngine.sq_distances>`.
        For dense float32 data they are the numpy engine's, from float64
        products as scikit-learn's ``transform`` computes them (at the numpy
        engine's speed, with BLAS's threads): the kernels' float32 cross term
        errs by about ``1e-7 ||x||^2``, 10% of the distance of a point close
        to its centroid.
        """
        if self.X.dtype != np.float32 or sp.issparse(self.X):
            return self._kernel_sq_distances(centers, dtype, sqrt)
        return self._reference().sq_distances(centers, dtype, sqrt)

    def _kernel_sq_distances(self, centers, dtype=np.float64, sqrt=False):
        return self._output_pass(centers, HARD, OUT_DIST, dtype, sqrt)

    def max_sq_distances(self, points):
        """``max_i ||x_i - p||^2`` over the observations with positive weight, for every point."""
        out = np.zeros((self._slots(*points.shape)[0], points.shape[0]))
        self._pass(points, HARD, False, OUT_FARTHEST, out)
        return out.max(axis=0)

    def log_sum_exp(self, centers, sigma):
        """``log sum_j exp(-d_ij / (2 sigma^2))`` of every observation."""
        spec = RelaxationSpec("softmax", sigma)
        out = np.empty((self.n_samples, 1))
        dmin = self._pass(centers, spec, False, OUT_GAP, out)[-1]
        return -dmin / spec.tau + out[:, 0] / spec.tau
