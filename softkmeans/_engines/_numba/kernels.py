"""Parallel passes of the numba engine over dense and CSR data.

One pass walks over the rows of X in chunks, grouped into slots of
consecutive chunks (:func:`.threads.slot_layout`): each kernel call runs a
range of slots, adding each slot's rows, in order, into that slot's
accumulators; the caller runs ranges of slots on threads (the kernels release
the GIL) and sums the slots' accumulators in slot order, so that the results
do not depend on the number of threads. Chunk sizes and product blocks are
chosen by the caller (:func:`.layout.pass_layout`). Nothing of size
``n_samples x n_clusters`` is allocated unless the caller passes an output for
it (``out_mode``).

Dense X, one chunk of rows at a time (:func:`.layout.chunk_rows` rows):

1. the cross term ``C X_chunk^T`` is one GEMM (BLAS at one thread, as in
   scikit-learn's Lloyd kernel), or with ``blocked_products`` and at least a
   tile of features (16 float32, 8 float64) one GEMM per block of
   :func:`.layout.product_block` centroids on the chunk transposed by
   :func:`.transpose.transpose_rows`, laid out centroid-major and turned
   in place into ``u = ||c||^2 - 2 x.c`` (the squared distances less ``||x||^2``, in the
   dtype of X), so that the nearest and second nearest centroid of every row
   and the dense softmax weights are computed by loops over rows, which
   vectorize; no distance matrix is stored;
2. a softmax chunk whose rows are mostly not one-hot is finished densely: its
   weights ``E`` overwrite ``u`` with one exp per entry (pruned entries set to
   0), ``sums += E (s * X_chunk)`` is one more GEMM (by blocks of centroids
   with ``blocked_products``) and ``masses += E s`` a GEMV, ``s`` holding
   each row's weight over its normalizer, or, where nearly every row takes
   part and the centroids are few for the features, ``E`` is scaled by ``s``
   and multiplied by the chunk itself, without a copy of its rows (a row-by-row
   visit of the
   candidates would read the centroid-major values across cache lines, which
   costs more than the exps it saves, unless a block of centroids keeps at most
   ``1 / SPARSE_FRACTION`` of its weights, as in well-separated data: such a
   block marks the kept ones in one vectorized loop and computes only those,
   with the same bits). With d = 64 this iteration costs two
   GEMMs, about one Lloyd iteration of scikit-learn (one GEMM and an argmin)
   with ``blocked_products``, and the exps and the row loop on top;
3. otherwise the one-hot rows (Lloyd's, or identified entmax or softmax rows)
   add ``x_i`` to one centroid's sums in one loop, and the other rows visit
   their candidate centroids one by one (:mod:`.rows`), but for entmax-1.5
   and 2, whose rows' responsibilities are computed together
   (:mod:`.entmax_chunk`, the same bits); passes that write per-row outputs
   take every row one by one.

CSR X is processed row by row with float64 products. ``blocked_products`` and the other
choices of :mod:`.layout` say when blocks and transposes pay.

Compilation: numba compiles every jitted function with all of its callees
linked in and optimizes and translates that whole tree again, so each level
of calls repeats the work below it. The passes are therefore flat (the
chunk loop is written out in :func:`dense_pass`, the row loop in
:func:`csr_pass`, the dense softmax finish is one function), which keeps the
compilation of a first fit short; the functions only kernels call have no
Python wrappers.
"""

from collections import namedtuple

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

from ..._jit import INNER_JIT_OPTIONS, JIT_OPTIONS
from .elementary import exp_as, exp_nonpositive, log1p_nonnegative
from .entmax_chunk import compact_row, entmax_chunk, no_rows, sorted_entmax
from .rows import (
    ENTMAX,
    SOFTMAX,
    is_hard_row,
    row_given_nearest,
    row_responsibilities,
    softmax_floor,
)
from .transpose import transpose_rows

__all__ = ["DENSE_FRACTION", "IN_PLACE_ROWS", "LEAD_IN_PRODUCT_MIN", "MULTIPLY_ADDS_PER_VALUE",
           "PACKED_ROW_COST",
           "SUM_BLOCK", "SPARSE_FRACTION",
           "SPARSE_SAMPLE", "OUT_NONE", "OUT_RESP", "OUT_DIST", "OUT_GAP", "OUT_FARTHEST",
           "DenseData", "CsrData", "DenseCentroids",
           "CsrCentroids", "PassSpec", "PassLayout", "RowOutputs", "SlotSums", "dense_inverse",
           "dense_pass", "csr_pass", "dense_row_sq_norms", "add_up_slots",
           "shift_centroids"]

#: A chunk's softmax is computed densely when more than ``1/4`` of its rows are not one-hot.
DENSE_FRACTION = 4

#: What a pass writes into its ``out`` array: in row ``i``, nothing, the
#: responsibilities, the squared distances, or ``row_gap`` (column 0); or, in row
#: ``slot``, the largest squared distance to each centroid over the slot's rows with
#: positive weight (and nothing else: its statistics stay 0).
OUT_NONE, OUT_RESP, OUT_DIST, OUT_GAP, OUT_FARTHEST = 0, 1, 2, 3, 4

_JIT = JIT_OPTIONS
_INNER = INNER_JIT_OPTIONS

# The arguments of a pass, grouped. The engine passes plain tuples in these fields' order
# (numba's dispatcher types a plain tuple on a faster path than a namedtuple) and the
# kernels name them again, for free. Arrays the kernels only read are read-only views (see
# the engine).

#: Dense data: ``X`` (C-contiguous), the ``shift`` subtracted before the cross term (dtype of
#: X; empty for none), each row's ``weights`` and squared norm ``x_sq`` (of the shifted row;
#: float64).
DenseData = namedtuple("DenseData", ["X", "shift", "weights", "x_sq"])
#: CSR data: X's ``data``, ``indices`` and ``indptr``, each row's ``weights`` and ``x_sq``.
CsrData = namedtuple("CsrData", ["data", "indices", "indptr", "weights", "x_sq"])
#: Centroids of a dense pass: ``centers`` in the dtype of X (C-contiguous), the squared norms
#: ``c_sq`` of the float64 centroids, and ``twins[j]``, the first centroid equal to ``j``.
DenseCentroids = namedtuple("DenseCentroids", ["centers", "c_sq", "twins"])
#: Centroids of a CSR pass: ``centers_t`` (``C^T``, float64, C-contiguous) and ``c_sq``.
CsrCentroids = namedtuple("CsrCentroids", ["centers_t", "c_sq"])
#: What a pass computes: the relaxation's ``kind`` (:data:`.rows.KINDS`), ``tau``,
#: ``alpha``, ``inv_tau`` (:func:`dense_inverse`; dense passes only), whether to accumulate
#: ``with_sums`` and what to write into the outputs' ``out`` (``out_mode``).
PassSpec = namedtuple("PassSpec", ["kind", "tau", "alpha", "inv_tau", "with_sums", "out_mode"])
#: How a pass splits its rows: ``chunk`` rows per chunk, ``slot_chunks`` chunks per slot;
#: dense passes compute their products by blocks of ``step`` centroids, on the transposed
#: chunk if ``transposes`` (:func:`.layout.pass_layout`).
PassLayout = namedtuple("PassLayout", ["chunk", "slot_chunks", "step", "transposes"])
#: What a pass writes per row (``labels``, ``margins``, ``dmin``) and the ``out`` array of
#: ``out_mode``.
RowOutputs = namedtuple("RowOutputs", ["labels", "margins", "dmin", "out"])
#: The statistics a slot adds its rows into: ``sums`` (k x d), ``masses`` (k) and
#: ``scalars`` (objective, inertia, gap); the pass's arrays hold one row per slot.
SlotSums = namedtuple("SlotSums", ["sums", "masses", "scalars"])
#: One dense chunk's values per row: ``label`` and ``dmin`` (the nearest centroid and its
#: squared distance), ``second`` (the second smallest), whether the row is ``hard``
#: (one-hot); for a dense softmax finish, ``others`` (the sum of the weights relative to the
#: second nearest's), ``ratio`` (``s_r``), ``row_gap``, ``kept`` (rows in the products), and
#: in the dtype of X: ``u_second`` (the second smallest ``||c||^2 - 2 x.c``), ``floor`` (the
#: smallest kept exponent), ``partial`` (blocked sums of ``others``) and ``scale`` (each
#: row's factor in the products); ``kept_bits``, a block's kept centroids in each row as the
#: bits of a uint64, and ``kept_weights``, their weights row by row (dtype of X, ``SUM_BLOCK
#: / SPARSE_FRACTION`` per row).
ChunkRows = namedtuple("ChunkRows", ["label", "dmin", "second", "hard", "others", "ratio",
                                     "row_gap", "kept", "u_second", "floor", "partial",
                                     "scale", "kept_bits", "kept_weights"])
#: The products of a dense softmax finish: ``scaled_x`` (the rows times their scale), and
#: their results ``mass_product`` (k) and ``sum_product`` (k x d), in the dtype of X.
Products = namedtuple("Products", ["scaled_x", "mass_product", "sum_product"])


def dense_inverse(tau, dtype):
    """``1 / tau`` in ``dtype`` for the dense softmax finish, or 0 where it is too large.

    Dense softmax exponents are differences of distances in ``dtype`` times it.
    Beyond ``1e-8`` of the dtype's largest value (``tau`` below about 3e-31 in
    float32; never in float64, whose ``tau`` is at least 2e-300) the
    differences that still carry a weight are so close to the dtype's smallest
    values that no product in it is exact enough: 0 then sends every soft row
    to the row-by-row path, which divides by ``tau`` in float64. At such
    temperatures the soft rows are the tied ones.
    """
    scalar = _FLOAT_TYPES[np.dtype(dtype)]
    return scalar(0.0 if tau * _INVERSE_LIMITS[scalar] <= 1.0 else 1.0 / tau)


#: The scalar type of each float dtype, and ``1e-8`` of its largest value (:func:`dense_inverse`).
_FLOAT_TYPES = {np.dtype(t): t for t in (np.float32, np.float64)}
_INVERSE_LIMITS = {t: float(np.finfo(t).max) * 1e-8 for t in (np.float32, np.float64)}


#: A dense softmax row adds its nearest centroid's share through the chunk's product
#: (entry ``1 / s``, finite in float32) when ``s`` is at least this.
LEAD_IN_PRODUCT_MIN = 1e-30

#: A dense softmax chunk scales its weights in place and multiplies the whole chunk
#: (:func:`_weights_in_place`) when at least ``IN_PLACE_ROWS[0] / IN_PLACE_ROWS[1]`` of its
#: rows take part in the products and scaling every row's ``k`` weights touches no more
#: values than packing the rows that take part: each costs its features, ``PACKED_ROW_COST``
#: values of bookkeeping and, when some rows stay out, its ``k`` weights. Otherwise those
#: rows are packed, which spares the products the rows left out.
IN_PLACE_ROWS = (3, 4)
PACKED_ROW_COST = 8
#: Multiply-adds of a product that cost as much as one value touched by a loop: the rows
#: left out of an in-place chunk's products still enter them, ``k * d`` each.
MULTIPLY_ADDS_PER_VALUE = 8

#: ``others`` sums of dense softmax weights run in the dtype of X over blocks of this many
#: centroids, then in float64.
SUM_BLOCK = 64

#: A block of more than ``2 * SPARSE_FRACTION`` centroids of a dense softmax chunk computes
#: only its kept weights when at most ``1 / SPARSE_FRACTION`` of its entries are kept, in its
#: first ``SPARSE_SAMPLE`` rows and in all: a kept weight computed on its own costs several
#: entries of the dense loop, and counting them a fraction of an entry each.
SPARSE_FRACTION = 16
SPARSE_SAMPLE = 32


@njit(**_INNER)
def _record_row(outputs, out_mode, slot, i, weight, label, row_dmin, margin, gap, m, idx, val):
    """Store row ``i``'s summary and add its compact responsibilities ``(idx, val)[:m]`` to
    the ``slot``'s statistics."""
    labels, margins, dmin, out = outputs
    masses, scalars = slot.masses, slot.scalars
    labels[i] = label
    margins[i] = margin
    dmin[i] = row_dmin
    scalars[0] += weight * (row_dmin - gap)
    scalars[1] += weight * row_dmin
    scalars[2] += weight * gap
    for q in range(m):
        masses[idx[q]] += weight * val[q]
    if out_mode == OUT_RESP:
        for j in range(out.shape[1]):
            out[i, j] = 0.0
        for q in range(m):
            out[i, idx[q]] = val[q]
    elif out_mode == OUT_GAP:
        out[i, 0] = gap


@njit(**_INNER)
def _axpy(coef, X, i, sums, j):
    """``sums[j] += coef * X[i]`` in float64."""
    for f in range(X.shape[1]):
        sums[j, f] += coef * X[i, f]


@njit(**_INNER)
def _shifted_distances_and_nearest(U, x_sq, c_sq, per_row):
    """Turn the cross term ``U`` into ``||c_j||^2 - 2 x_r.c_j`` and find each row's nearest two.

    ``U`` (centroid-major, dtype of X) then holds every squared distance less
    the row's own ``||x_r||^2``; ``c_sq`` is in the dtype of X. A value of
    ``U`` is one rounding of the cross term (doubling is exact; equal
    centroids get the same cross term, see :func:`dense_pass`), so tied
    centroids stay exactly tied and, as in scikit-learn's Lloyd kernel, the
    distances are compared in the dtype of X. ``first``, ``second`` receive
    the two smallest squared distances ``max(||x||^2 + u, 0)`` of each row in
    float64 (ties keep the first index in ``label``; ``second`` is ``inf``
    with a single centroid) and ``u_second`` the second smallest ``u``: fields of
    ``per_row`` (:data:`ChunkRows`), ``first`` its ``dmin``.

    The running minima live in arrays allocated here: LLVM cannot tell
    whether buffers of the caller overlap ``U`` and would not vectorize the
    loop.
    """
    k, rows = U.shape
    u_first = np.empty(rows, U.dtype)
    u_second = np.empty(rows, U.dtype)
    nearest = np.empty(rows, np.int32)
    for r in range(rows):
        u_first[r] = u_second[r] = np.inf
        nearest[r] = 0
    two = U.dtype.type(2.0)
    for j in range(k):
        cj = c_sq[j]
        j32 = np.int32(j)
        for r in range(rows):
            u = cj - two * U[j, r]
            U[j, r] = u
            f = u_first[r]
            u_second[r] = min(max(u, f), u_second[r])
            nearest[r] = j32 if u < f else nearest[r]
            u_first[r] = min(u, f)
    label, first, second = per_row.label, per_row.dmin, per_row.second
    row_u_second = per_row.u_second
    for r in range(rows):
        label[r] = nearest[r]
        row_u_second[r] = u_second[r]
        first[r] = max(x_sq[r] + np.float64(u_first[r]), 0.0)
        second[r] = max(x_sq[r] + np.float64(u_second[r]), 0.0)


@njit(**_INNER)
def _one_hot_rows(Xc, weights, start, per_row, with_sums, outputs, slot):
    """Lloyd's statistics of a chunk's one-hot rows (``per_row.hard``): each adds itself to its
    nearest."""
    first, label, hard = per_row.dmin, per_row.label, per_row.hard
    labels, dmin = outputs.labels, outputs.dmin
    sums, masses, scalars = slot
    objective = 0.0
    for r in range(Xc.shape[0]):
        if not hard[r]:
            continue
        i = start + r
        j = label[r]
        w = weights[i]
        labels[i] = j
        dmin[i] = first[r]
        objective += w * first[r]
        masses[j] += w
        if with_sums:
            for f in range(Xc.shape[1]):
                sums[j, f] += w * Xc[r, f]
    scalars[0] += objective
    scalars[1] += objective


@njit(**_INNER)
def _sorted_entmax_rows(Xc, weights, start, U, xc_sq, per_row, compact, spec, outputs, slot,
                        row, idx, val, work):
    """Statistics of a chunk's soft entmax rows, in row order, from their ``compact``
    responsibilities (:func:`.entmax_chunk.entmax_chunk`), or from
    :func:`.rows.row_given_nearest` for a row with more candidates than their width.

    Every row adds the same terms in the same order as :func:`dense_pass`'s row loop, without
    its branches on the outputs.
    """
    first, label, hard = per_row.dmin, per_row.label, per_row.hard
    labels, dmin = outputs.labels, outputs.dmin
    sums, masses, scalars = slot
    objective, inertia, gap_sum = scalars[0], scalars[1], scalars[2]
    q = np.intp(0)  # not the literal 0, for which numba would compile compact_row once more
    for r in range(Xc.shape[0]):
        if hard[r]:
            continue
        i = start + r
        w = weights[i]
        if compact.count[q] <= compact.width:
            m, gap = compact_row(compact, q, idx, val)
        else:
            for j in range(U.shape[0]):
                row[j] = max(xc_sq[r] + np.float64(U[j, r]), 0.0)
            m, gap = row_given_nearest(row, spec.kind, label[r], first[r], per_row.second[r],
                                       spec.tau, spec.alpha, idx, val, work)
        q += 1
        for p in range(m):
            masses[idx[p]] += w * val[p]
            if spec.with_sums:
                coef = w * val[p]
                for f in range(Xc.shape[1]):
                    sums[idx[p], f] += coef * Xc[r, f]
        labels[i] = label[r]
        dmin[i] = first[r]
        objective += w * (first[r] - gap)
        inertia += w * first[r]
        gap_sum += w * gap
    scalars[0], scalars[1], scalars[2] = objective, inertia, gap_sum


@njit(**_INNER, error_model="numpy")  # no zero-division checks: the loop vectorizes
def _lead_ratios(first, second, tau, rows, ratio, floor):
    """Each row's ``ratio``, ``s_r = exp(-(second_r - dmin_r) / tau)`` (``tau > 0``), and
    ``floor``, its smallest kept exponent (:func:`.rows.softmax_floor`) in the dtype of X."""
    dtype = floor.dtype.type
    for r in range(rows):
        ratio[r] = exp_nonpositive(-(second[r] - first[r]) / tau)
        floor[r] = dtype(softmax_floor(first[r], second[r], tau))


@njit(**_INNER, error_model="numpy")  # no zero-division checks: the loop vectorizes
def _soft_row_terms(others, w, tau, rows, ratio, row_gap, scale):
    """Each row's gap and product scale from its ``ratio`` ``s_r`` (:func:`_lead_ratios`).

    With ``S_r = s_r others_r`` (``others`` as in :func:`_dense_softmax_chunk`):
    ``row_gap = tau log1p(S)`` and ``scale = w s / (1 + S)``.
    """
    for r in range(rows):
        q = ratio[r]
        other_weights = q * others[r]  # S_r: the weights of the others, the nearest's 1
        row_gap[r] = tau * log1p_nonnegative(other_weights)
        scale[r] = w[r] * q / (1.0 + other_weights)


@njit(**_INNER)
def _kept_bits(E, j0, j1, u_second, floor, inv_tau, kept_bits, rows):
    """Mark in ``kept_bits[r]`` (bit ``j - j0``) the centroids ``j0 <= j < j1`` whose weight row
    ``r < rows`` keeps (see :func:`_dense_softmax_chunk`); returns how many entries are kept."""
    zero = E.dtype.type(0.0)
    count = 0
    kept_bits[:rows] = 0
    for j in range(j0, j1):
        bit = np.uint64(1) << np.uint64(j - j0)
        for r in range(rows):
            keep = min((u_second[r] - E[j, r]) * inv_tau, zero) >= floor[r]
            kept_bits[r] |= bit if keep else np.uint64(0)
            count += keep
    return count


@njit(**_INNER)
def _sparse_weights(E, j0, j1, u_second, inv_tau, per_row):
    """The weights of centroids ``j0`` to ``j1`` that each row keeps (``per_row.kept_bits``), only.

    The same values and sums as the dense loop of :func:`_dense_softmax_chunk`, which adds
    exact zeros in between: each row's ``partial`` sum, in the dtype of X, is added to its
    ``others``. ``E`` gets the weights (0 elsewhere) of the rows with ``ratio`` at least
    :data:`LEAD_IN_PRODUCT_MIN` only, those of the products; the exponents are gathered,
    then exponentiated in one loop, which vectorizes.
    """
    rows = E.shape[1]
    zero = E.dtype.type(0.0)
    kept_bits, weights, ratio, others = (per_row.kept_bits, per_row.kept_weights,
                                         per_row.ratio, per_row.others)
    n = 0
    for r in range(rows):
        bits = kept_bits[r]
        while bits:
            j = j0 + np.intp(trailing_zeros(bits))
            bits &= bits - np.uint64(1)
            weights[n] = min((u_second[r] - E[j, r]) * inv_tau, zero)
            n += 1
    for q in range(n):
        weights[q] = exp_as(E, weights[q])
    n = 0
    for r in range(rows):
        bits = kept_bits[r]
        in_products = ratio[r] >= LEAD_IN_PRODUCT_MIN
        if in_products:
            for j in range(j0, j1):
                E[j, r] = zero
        partial = zero
        while bits:
            j = j0 + np.intp(trailing_zeros(bits))
            bits &= bits - np.uint64(1)
            partial += weights[n]
            if in_products:
                E[j, r] = weights[n]
            n += 1
        others[r] += partial


@njit(**_INNER)
def _weights_in_place(E, w, per_row, rows):
    """Turn ``E`` into each row's weights times its sample weight, for the products.

    A row ``r`` taking part in the products (``s_r`` at least
    :data:`LEAD_IN_PRODUCT_MIN`) gets ``E[j, r]`` times its float64 factor
    ``w_r s_r / (1 + S_r)`` for the other centroids; any other row 0 there (its
    columns may hold values that the sparse blocks left unwritten). Every row's
    nearest centroid gets its lead weight ``w_r / (1 + S_r)``. Products run in
    float64 and values below the smallest normal number of the dtype become 0:
    below ``1e-38`` of a centroid's mass in float32, and subnormal arithmetic is
    slow (a light centroid's mass is summed again exactly, see the engine).
    """
    k = E.shape[0]
    dtype = E.dtype.type
    zero = dtype(0.0)
    tiny = np.float64(np.finfo(E.dtype).tiny)
    label, others, ratio = per_row.label, per_row.others, per_row.ratio
    factor = np.empty(rows)
    for r in range(rows):
        kept = ratio[r] >= LEAD_IN_PRODUCT_MIN
        factor[r] = w[r] * ratio[r] / (1.0 + ratio[r] * others[r]) if kept else 0.0
    for j in range(k):
        for r in range(rows):
            weight = np.float64(E[j, r]) * factor[r]
            E[j, r] = dtype(weight) if weight >= tiny else zero
    for r in range(rows):
        E[label[r], r] = dtype(w[r] / (1.0 + ratio[r] * others[r]))


@njit(**_INNER)
def _dense_softmax_chunk(Xc, w, start, E, per_row, spec, step, products, outputs, slot):
    """Finish a chunk whose rows are mostly soft: one exp per entry, a GEMM and a GEMV.

    ``Xc`` and ``w`` are the chunk's rows and weights, from row ``start``;
    ``per_row`` its per-row values (:data:`ChunkRows`), ``products`` the
    buffers of its products (:data:`Products`).

    ``E`` holds the chunk's shifted distances ``u`` and is overwritten with
    ``E[j, r] = exp(-(d_jr - second_r) / tau)`` for the kept centroids other
    than the nearest (the skip rule of :mod:`.rows`), 0 elsewhere, in the
    columns that the products read: a block that computes its kept weights
    only writes none in the columns of rows left out of the products, which
    keep their distances (so no output of every weight takes that path). The
    exponent is ``(u_second_r - u_jr) / tau`` in the dtype of X: a tied
    centroid's exponent is exactly 0, and in float32 the exponent errs by
    about as much as the float32 cross term already does. Every kept weight
    lies in ``[exp(-37), 1]``, so float32 holds it without underflow. Row sums
    of ``E`` (``others``) run in the dtype of X over blocks of
    :data:`SUM_BLOCK` centroids, then in float64; ``inv_tau`` is
    :func:`dense_inverse` (not 0).

    With ``s_r = exp(-(second_r - dmin_r) / tau)`` (float64), a row's weights are 1
    for its nearest centroid and ``s_r E[j, r]`` for the others, so
    ``S_r = s_r sum_j E[j, r]`` keeps its relative precision however small it
    is. The sums are one product ``E @ (scale * X_chunk)`` (by blocks of
    ``step`` centroids) and the masses one GEMV ``E @ scale``, with
    ``scale_r = w_r s_r / (1 + S_r)``, in which the nearest centroid's entry
    is ``1 / s_r``. A row whose ``s_r`` is below :data:`LEAD_IN_PRODUCT_MIN`
    adds that share on its own instead and gets ``scale_r = 0``: its other
    weights, below ``1e-30`` of its own, are below the resolution of every
    centroid's sums but a light one's, which the engine sums again exactly
    (in float32 their products would be subnormal or 0, and subnormal
    arithmetic is slow). The row's gap keeps them. The products then run over the
    other rows only (their columns of ``E`` packed, their indices in
    ``kept``), or not at all: at a low temperature few rows take part after
    the first iteration, and a product over every row would cost as much as
    the cross term. Where nearly every row takes part and packing would touch
    more values than ``E`` holds (:data:`IN_PLACE_ROWS`), ``E`` is scaled in
    place instead (:func:`_weights_in_place`) and multiplied by the chunk
    itself, every row's nearest centroid included. The masses are not a column
    of the product: one more column than a multiple of the kernels' width costs
    more than the GEMV.
    """
    k, rows = E.shape
    n_features = Xc.shape[1]
    dtype = E.dtype.type
    zero = dtype(0.0)
    tau, inv_tau, with_sums, out_mode = spec.tau, spec.inv_tau, spec.with_sums, spec.out_mode
    labels, dmin, out = outputs.labels, outputs.dmin, outputs.out
    sums, masses, scalars = slot
    (label, first, second, _, others, ratio, row_gap, kept, u_second, floor, partial,
     scale, kept_bits, _) = per_row
    scaled_x, mass_product, sum_product = products
    _lead_ratios(first, second, tau, rows, ratio, floor)
    for r in range(rows):
        E[label[r], r] = np.inf  # its exponent is -inf: below the floor, so 0
    others[:rows] = 0.0
    for j0 in range(0, k, SUM_BLOCK):
        j1 = min(j0 + SUM_BLOCK, k)
        # the sample spares most dense blocks the full count
        if (j1 - j0 > 2 * SPARSE_FRACTION and out_mode != OUT_RESP and rows > SPARSE_SAMPLE
                and _kept_bits(E, j0, j1, u_second, floor, inv_tau, kept_bits, SPARSE_SAMPLE)
                * SPARSE_FRACTION <= (j1 - j0) * SPARSE_SAMPLE
                and _kept_bits(E, j0, j1, u_second, floor, inv_tau, kept_bits, rows)
                * SPARSE_FRACTION <= (j1 - j0) * rows):
            _sparse_weights(E, j0, j1, u_second, inv_tau, per_row)
            continue
        partial[:rows] = zero
        for j in range(j0, j1):
            for r in range(rows):
                arg = min((u_second[r] - E[j, r]) * inv_tau, zero)
                e = exp_as(E, arg)
                e = e if arg >= floor[r] else zero
                E[j, r] = e
                partial[r] += e
        for r in range(rows):
            others[r] += partial[r]
    if out_mode == OUT_RESP:  # float64 row sums: every written row sums to 1 to rounding
        others[:rows] = 0.0
        for j in range(k):
            for r in range(rows):
                others[r] += E[j, r]
    _soft_row_terms(others, w, tau, rows, ratio, row_gap, scale)
    objective, inertia, gap_sum = scalars[0], scalars[1], scalars[2]
    for r in range(rows):  # in registers: adding into the array would chain its stores
        gap = row_gap[r]
        objective += w[r] * (first[r] - gap)
        inertia += w[r] * first[r]
        gap_sum += w[r] * gap
    scalars[0], scalars[1], scalars[2] = objective, inertia, gap_sum
    for r in range(rows):
        labels[start + r] = label[r]
        dmin[start + r] = first[r]
    if out_mode == OUT_RESP:
        for r in range(rows):
            total = 1.0 + ratio[r] * others[r]
            for j in range(k):
                out[start + r, j] = E[j, r] * (ratio[r] / total)
            out[start + r, label[r]] = 1.0 / total
    elif out_mode == OUT_GAP:
        for r in range(rows):
            out[start + r, 0] = row_gap[r]
    kept_rows = 0
    for r in range(rows):
        kept_rows += ratio[r] >= LEAD_IN_PRODUCT_MIN
    packing = kept_rows * (n_features + PACKED_ROW_COST) + (k * kept_rows if kept_rows < rows
                                                             else 0)
    # in place: every weight scaled, and the products' multiply-adds on the rows left out
    in_place = k * rows + (rows - kept_rows) * k * n_features // MULTIPLY_ADDS_PER_VALUE
    if kept_rows * IN_PLACE_ROWS[1] >= rows * IN_PLACE_ROWS[0] and in_place <= packing:
        _weights_in_place(E, w, per_row, rows)
        ones = partial[:rows]
        ones[:] = dtype(1.0)
        np.dot(E, ones, mass_product)
        masses += mass_product
        if with_sums:
            _add_products(E, Xc, step, sum_product, sums)
        return
    m = 0  # rows in the products so far
    for r in range(rows):
        if ratio[r] >= LEAD_IN_PRODUCT_MIN:
            E[label[r], r] = dtype(1.0 / ratio[r])
            if with_sums:
                for f in range(n_features):
                    scaled_x[m, f] = Xc[r, f] * scale[r]
            scale[m] = scale[r]
            kept[m] = r
            m += 1
        else:
            lead = w[r] / (1.0 + ratio[r] * others[r])
            masses[label[r]] += lead
            if with_sums:
                _axpy(lead, Xc, r, sums, label[r])
    if m == 0:
        return
    # The products over the m rows that take part: E's columns packed in place, in order
    # (a packed entry never lands beyond the entry it comes from).
    packed = E.reshape(k * rows)[:k * m].reshape((k, m))
    if m < rows:
        for j in range(k):
            for q in range(m):
                packed[j, q] = E[j, kept[q]]
    np.dot(packed, scale[:m], mass_product)
    masses += mass_product
    if with_sums:
        _add_products(packed, scaled_x[:m], step, sum_product, sums)


@njit(**_INNER)
def _add_products(weights, rows, step, product, sums):
    """``sums += weights @ rows``, the product by blocks of ``step`` centroids in the dtype of
    the rows, the sums in float64."""
    k, n_features = product.shape
    for j0 in range(0, k, step):
        j1 = min(j0 + step, k)
        np.dot(weights[j0:j1], rows, product[j0:j1])
    for j in range(k):
        for f in range(n_features):
            sums[j, f] += product[j, f]


@njit(**_JIT)
def dense_pass(data, centroids, spec, layout, outputs, accumulators, slot_start, slot_stop):
    """Slots ``slot_start`` to ``slot_stop`` of a pass over dense data (:data:`DenseData`).

    Slot ``s`` holds chunks ``s * slot_chunks`` to ``(s + 1) * slot_chunks``
    of ``chunk`` rows (:data:`PassLayout`), each finished as the module
    docstring describes for the relaxation and outputs of ``spec``
    (:data:`PassSpec`); the per-row ``outputs`` (:data:`RowOutputs`) are
    written in place and the statistics added to the slot's row of the
    ``accumulators`` (:data:`SlotSums`: ``sums[s, :k]``, ``masses[s, :k]``
    and ``scalars[s, :3]``, objective, inertia, gap). ``centroids``
    (:data:`DenseCentroids`) are in the dtype of X; their ``c_sq`` are the
    squared norms of the float64 centroids. With a ``shift`` (in the dtype
    of X; empty for none) the cross term is that of the chunk less the
    shift, copied chunk by chunk, and ``centers``, ``c_sq`` and ``x_sq`` are
    those of the shifted points: distances are the same, computed without
    the cancellation of data far from the origin; the sums are of X itself.
    ``twins[j]`` is the first centroid equal to centroid ``j``: its cross
    term is copied, so that equal centroids tie exactly (BLAS rounds a
    product by the position of its rows and columns); ``inv_tau`` is
    :func:`dense_inverse` (0: no dense softmax finish). The products run by
    blocks of ``step`` centroids (``k`` for one call each), the cross term on
    the transposed chunk if ``transposes``: see :func:`.layout.pass_layout`.
    """
    spec, outputs, accumulators = PassSpec(*spec), RowOutputs(*outputs), SlotSums(*accumulators)
    X, shift, weights, x_sq = data
    centers, c_sq, twins = centroids
    kind, tau, alpha, inv_tau, with_sums, out_mode = spec
    chunk, slot_chunks, step, transposes = layout
    margins, out = outputs.margins, outputs.out
    n, n_features = X.shape
    k = centers.shape[0]
    c_sq_x = c_sq.astype(X.dtype)
    cross = np.empty(k * chunk, X.dtype)
    shifted = shift.shape[0] > 0
    transposed = np.empty(n_features * chunk if transposes or shifted else 0, X.dtype)
    per_row = ChunkRows(np.empty(chunk, np.intp), np.empty(chunk), np.empty(chunk),
                        np.empty(chunk, np.bool_), np.empty(chunk), np.empty(chunk),
                        np.empty(chunk), np.empty(chunk, np.intp), np.empty(chunk, X.dtype),
                        np.empty(chunk, X.dtype), np.empty(chunk, X.dtype),
                        np.empty(chunk, X.dtype), np.empty(chunk, np.uint64),
                        np.empty(SUM_BLOCK // SPARSE_FRACTION * chunk, X.dtype))
    first, second, hard = per_row.dmin, per_row.second, per_row.hard
    products = Products(np.empty((chunk, n_features), X.dtype), np.empty(k, X.dtype),
                        np.empty((k, n_features), X.dtype))
    row = np.empty(k)
    work = np.empty(k)
    idx = np.empty(k + 1, np.intp)
    val = np.empty(k + 1)
    n_chunks = (n + chunk - 1) // chunk
    sorted_rows = kind == ENTMAX and sorted_entmax(alpha)
    no_compact = no_rows()
    for s in range(slot_start, slot_stop):
        slot = SlotSums(accumulators.sums[s, :k], accumulators.masses[s, :k],
                        accumulators.scalars[s])
        sums = slot.sums
        for c in range(s * slot_chunks, min((s + 1) * slot_chunks, n_chunks)):
            start = c * chunk
            rows = min(chunk, n - start)
            stop = start + rows
            Xc = X[start:stop]
            xc_sq = x_sq[start:stop]
            U = cross[:k * rows].reshape((k, rows))
            if transposes:
                Xt = transposed[:n_features * rows].reshape((n_features, rows))
                transpose_rows(X, start, Xt)
                if shifted:
                    for f in range(n_features):
                        for r in range(rows):
                            Xt[f, r] -= shift[f]
                for j0 in range(0, k, step):
                    np.dot(centers[j0:min(j0 + step, k)], Xt, U[j0:min(j0 + step, k)])
            elif shifted:  # the same product as above, in one block (no other specialization)
                Xt = transposed[:n_features * rows].reshape((n_features, rows))
                for f in range(n_features):
                    for r in range(rows):
                        Xt[f, r] = Xc[r, f] - shift[f]
                np.dot(centers[0:k], Xt, U[0:k])
            else:
                np.dot(centers, Xc.T, U)
            for j in range(k):
                if twins[j] != j:
                    for r in range(rows):  # a loop: a slice assignment compiles its error path
                        U[j, r] = U[twins[j], r]
            _shifted_distances_and_nearest(U, xc_sq, c_sq_x, per_row)
            label = per_row.label
            if out_mode == OUT_FARTHEST:
                for j in range(k):
                    far = out[s, j]
                    for r in range(rows):
                        if weights[start + r] > 0.0:
                            far = max(far, xc_sq[r] + np.float64(U[j, r]))
                    out[s, j] = far
                continue
            for r in range(rows):
                margins[start + r] = second[r] - first[r] if k > 1 else 0.0
            one_hot = 0
            for r in range(rows):
                hard[r] = is_hard_row(kind, first[r], second[r], tau, alpha)
                one_hot += hard[r]
            if kind == SOFTMAX and inv_tau > 0 and (rows - one_hot) * DENSE_FRACTION > rows:
                _dense_softmax_chunk(Xc, weights[start:stop], start, U, per_row, spec, step,
                                     products, outputs, slot)
                continue
            if out_mode == OUT_NONE:  # the one-hot rows in one loop, the others one by one below
                _one_hot_rows(Xc, weights, start, per_row, with_sums, outputs, slot)
                if one_hot == rows:
                    continue
            compact = no_compact
            if sorted_rows:  # the entmax rows of alpha 1.5 or 2 computed together
                compact = entmax_chunk(U, xc_sq, per_row, tau, alpha)
                if out_mode == OUT_NONE:
                    _sorted_entmax_rows(Xc, weights, start, U, xc_sq, per_row, compact, spec,
                                        outputs, slot, row, idx, val, work)
                    continue
            n_soft = np.intp(0)  # soft rows so far
            # No array views are created per row below: each one costs an atomic reference count.
            for r in range(rows):
                if out_mode == OUT_NONE and hard[r]:
                    continue
                i = start + r
                if out_mode == OUT_DIST:
                    for j in range(k):
                        out[i, j] = max(xc_sq[r] + np.float64(U[j, r]), 0.0)
                if hard[r]:
                    m, gap = 1, 0.0
                    idx[0] = label[r]
                    val[0] = 1.0
                elif sorted_rows and compact.count[n_soft] <= compact.width:
                    m, gap = compact_row(compact, n_soft, idx, val)
                else:
                    for j in range(k):
                        row[j] = max(xc_sq[r] + np.float64(U[j, r]), 0.0)
                    m, gap = row_given_nearest(row, kind, label[r], first[r], second[r], tau, alpha,
                                               idx, val, work)
                n_soft += not hard[r]
                w = weights[i]
                _record_row(outputs, out_mode, slot, i, w, label[r], first[r], margins[i], gap, m,
                            idx, val)
                if with_sums:
                    for q in range(m):
                        _axpy(w * val[q], X, i, sums, idx[q])


@njit(**_JIT)
def shift_centroids(centers, shift, shifted, c_sq):
    """``shifted = centers - shift`` in the dtype of ``shifted``, and ``c_sq`` the squared
    norms of the float64 differences (``centers`` and ``shift`` float64; ``shift`` empty for
    none)."""
    with_shift = shift.shape[0] > 0
    for j in range(centers.shape[0]):
        norm = 0.0
        for f in range(centers.shape[1]):
            value = centers[j, f] - (shift[f] if with_shift else 0.0)
            shifted[j, f] = value
            norm += value * value
        c_sq[j] = norm


@njit(**_JIT)
def add_up_slots(sums, masses, scalars, n_clusters):
    """Add every slot's statistics into slot 0's, in slot order, and read the pass's totals.

    ``sums[0, :n_clusters]``, ``masses[0, :n_clusters]`` and ``scalars[0, :3]``
    become the sums over the first axis, in slot order: the same bits whatever
    the number of threads. Returns the objective, the inertia, the gap and the
    smallest mass: scalars only, since a returned array is boxed with Python
    calls, where an interrupt would leave an exception set behind the result.
    """
    for s in range(1, sums.shape[0]):  # loops: array expressions compile far longer
        for j in range(n_clusters):
            for f in range(sums.shape[2]):
                sums[0, j, f] += sums[s, j, f]
            masses[0, j] += masses[s, j]
        for t in range(3):
            scalars[0, t] += scalars[s, t]
    smallest = np.inf
    for j in range(n_clusters):
        smallest = min(smallest, masses[0, j])
    return scalars[0, 0], scalars[0, 1], scalars[0, 2], smallest


@njit(**_JIT)
def dense_row_sq_norms(X, shift, out, n_parts, part_start, part_stop):
    """``||x_i - shift||^2`` of parts ``part_start`` to ``part_stop`` of ``n_parts`` blocks of
    rows, in float64 without copying X.

    ``shift`` is float64, of length ``n_features``, or empty for no shift.
    """
    n, d = X.shape
    shifted = shift.shape[0] > 0
    body = d - d % 4
    for i in range(part_start * n // n_parts, part_stop * n // n_parts):
        # four partial sums, added in a fixed order: four chains of multiply-adds in flight
        acc0 = acc1 = acc2 = acc3 = 0.0
        for f in range(0, body, 4):
            v0 = np.float64(X[i, f]) - (shift[f] if shifted else 0.0)
            v1 = np.float64(X[i, f + 1]) - (shift[f + 1] if shifted else 0.0)
            v2 = np.float64(X[i, f + 2]) - (shift[f + 2] if shifted else 0.0)
            v3 = np.float64(X[i, f + 3]) - (shift[f + 3] if shifted else 0.0)
            acc0 += v0 * v0
            acc1 += v1 * v1
            acc2 += v2 * v2
            acc3 += v3 * v3
        for f in range(body, d):
            v = np.float64(X[i, f]) - (shift[f] if shifted else 0.0)
            acc0 += v * v
        out[i] = (acc0 + acc1) + (acc2 + acc3)


@njit(**_JIT)
def csr_pass(csr, centroids, spec, layout, outputs, accumulators, slot_start, slot_stop):
    """Slots ``slot_start`` to ``slot_stop`` of a pass over CSR data (:data:`CsrData`).

    As :func:`dense_pass`, row by row, in chunks of ``layout.chunk`` rows
    (its ``step`` and ``transposes`` unused); ``centroids`` are
    :data:`CsrCentroids` and products are accumulated in float64.
    """
    outputs, accumulators = RowOutputs(*outputs), SlotSums(*accumulators)
    data, indices, indptr, weights, x_sq = csr
    centers_t, c_sq = centroids
    kind, tau, alpha, _, with_sums, out_mode = spec
    rows, slot_chunks, _, _ = layout
    out = outputs.out
    n = indptr.shape[0] - 1
    k = centers_t.shape[1]
    dist = np.empty(k)
    work = np.empty(k)
    idx = np.empty(k + 1, np.intp)
    val = np.empty(k + 1)
    n_chunks = (n + rows - 1) // rows
    for s in range(slot_start, slot_stop):
        slot = SlotSums(accumulators.sums[s, :k], accumulators.masses[s, :k],
                        accumulators.scalars[s])
        sums = slot.sums
        for c in range(s * slot_chunks, min((s + 1) * slot_chunks, n_chunks)):
            for i in range(c * rows, min((c + 1) * rows, n)):
                for j in range(k):
                    dist[j] = 0.0
                for p in range(indptr[i], indptr[i + 1]):
                    v = np.float64(data[p])
                    col = indices[p]
                    for j in range(k):
                        dist[j] += v * centers_t[col, j]
                for j in range(k):
                    dist[j] = max(x_sq[i] - 2.0 * dist[j] + c_sq[j], 0.0)
                if out_mode == OUT_FARTHEST:
                    if weights[i] > 0.0:
                        for j in range(k):
                            out[s, j] = max(out[s, j], dist[j])
                    continue
                if out_mode == OUT_DIST:
                    for j in range(k):
                        out[i, j] = dist[j]
                m, label, row_dmin, margin, gap = row_responsibilities(dist, kind, tau, alpha, idx,
                                                                       val, work)
                w = weights[i]
                _record_row(outputs, out_mode, slot, i, w, label, row_dmin, margin, gap, m, idx,
                            val)
                if with_sums:
                    for q in range(m):
                        coef = w * val[q]
                        j = idx[q]
                        for p in range(indptr[i], indptr[i + 1]):
                            sums[j, indices[p]] += coef * data[p]
