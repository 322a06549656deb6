"""Parallel passes of the numba engine over dense and CSR data.

One pass walks over the rows of X in chunks, split over threads with
``prange``; each thread adds its rows' statistics into buffers of its own,
which the caller reduces after the loop. Nothing of size
``n_samples x n_clusters`` is allocated unless the caller passes an output for
it (``out_mode``).

Dense X, one chunk of rows at a time (:func:`chunk_rows` rows):

1. the cross term ``C X_chunk^T`` is one GEMM (BLAS at one thread, as in
   scikit-learn's Lloyd kernel), laid out centroid-major so that the distances,
   the nearest and second nearest centroid of every row and the dense softmax
   weights are computed by loops over rows, which vectorize;
2. a softmax chunk whose rows are mostly not one-hot is finished densely: its
   weights ``E`` are one exp per entry (pruned entries are set to 0),
   ``masses += E s`` is a GEMV and ``sums += E (s * X_chunk)`` one more GEMM,
   ``s`` holding each row's weight over its normalizer (a row-by-row visit of
   the candidates would read the centroid-major distances across cache lines,
   which costs more than the exps it saves);
3. otherwise each row is finished on its own: a one-hot row (Lloyd's, or an
   identified entmax or softmax row) adds ``x_i`` to one centroid's sums, and
   only the other rows visit their candidate centroids (:mod:`._numba_rows`).

CSR X is processed row by row with float64 products.
"""

import math

import numpy as np
from numba import njit, prange

from ._numba_rows import (
    JIT_OPTIONS,
    SOFTMAX,
    exp_as,
    exp_nonpositive,
    is_hard_row,
    row_given_nearest,
    row_responsibilities,
    softmax_cutoff,
)

__all__ = ["DENSE_FRACTION", "OUT_NONE", "OUT_RESP", "OUT_DIST", "OUT_GAP", "chunk_rows",
           "dense_pass", "csr_pass", "dense_row_sq_norms"]

#: A chunk's softmax is computed densely when more than ``1/4`` of its rows are not one-hot.
DENSE_FRACTION = 4

#: What a pass writes into its ``out`` array, row ``i``: nothing, the
#: responsibilities, the squared distances, or ``row_gap`` (column 0).
OUT_NONE, OUT_RESP, OUT_DIST, OUT_GAP = 0, 1, 2, 3

_JIT = JIT_OPTIONS


@njit(**_JIT)
def chunk_rows(n_clusters):
    """Rows per chunk: 256 (scikit-learn's choice), fewer for many centroids (32 at least)."""
    return max(32, min(256, (1 << 17) // max(n_clusters, 1)))


@njit(**_JIT)
def _thread_buffers(n_threads, n_clusters, n_features):
    """Per-thread accumulators: sums, masses, (objective, inertia, gap)."""
    return (np.zeros((n_threads, n_clusters, n_features)), np.zeros((n_threads, n_clusters)),
            np.zeros((n_threads, 3)))


@njit(**_JIT)
def _record_row(i, label, row_dmin, margin, gap, weight, m, idx, val, masses, scalars, labels,
                margins, dmin, out_mode, out):
    """Store row ``i``'s summary and add its compact responsibilities to the statistics."""
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


@njit(**_JIT)
def _axpy(coef, X, i, sums, j):
    """``sums[j] += coef * X[i]`` in float64."""
    for f in range(X.shape[1]):
        sums[j, f] += coef * X[i, f]


@njit(**_JIT)
def _distances_and_nearest(cross, x_sq, c_sq, D, first, second, label):
    """``D = max(||x||^2 - 2 cross + ||c||^2, 0)`` (centroid-major) and each row's nearest two.

    Ties keep the first index; ``second`` is the smallest distance to another
    centroid (``inf`` with a single centroid).
    """
    k, rows = D.shape
    first[:rows] = np.inf
    second[:rows] = np.inf
    label[:rows] = 0
    for j in range(k):
        cj = c_sq[j]
        for r in range(rows):
            v = max(x_sq[r] - 2.0 * cross[j, r] + cj, 0.0)
            D[j, r] = v
            f = first[r]
            closer = v < f
            runner = v if v > f else f
            second[r] = runner if runner < second[r] else second[r]
            label[r] = j if closer else label[r]
            first[r] = v if closer else f


@njit(**_JIT)
def _softmax_dense(D, second, cutoff, label, tau, E, others):
    """Softmax weights relative to the second nearest centroid, into ``E`` (dtype of X).

    ``E[j, r] = exp(-(D[j, r] - second_r) / tau)`` for the kept centroids other
    than the nearest, 0 elsewhere; every kept weight lies in ``[exp(-37), 1]``,
    so float32 holds it without underflow. ``others`` receives each row's sum
    of ``E`` (in float64).
    """
    k, rows = D.shape
    for j in range(k):
        for r in range(rows):
            v = D[j, r]
            e = exp_as(E, -(v - second[r]) / tau)
            E[j, r] = e if v <= cutoff[r] else 0.0
    for r in range(rows):
        E[label[r], r] = 0.0
        others[r] = 0.0
    for j in range(k):
        for r in range(rows):
            others[r] += E[j, r]


@njit(**_JIT)
def _dense_chunk(X, weights, x_sq, centers, c_sq, kind, tau, alpha, with_sums, out_mode, out,
                 labels, margins, dmin, start, n_rows, cross_buf, dist_buf, near, scale,
                 scaled_x, label, row, work, idx, val, mass_buf, block, sums, masses, scalars):
    """Rows ``start:start + n_rows`` of a dense pass, into one thread's buffers."""
    rows = min(n_rows, X.shape[0] - start)
    k = centers.shape[0]
    stop = start + rows
    Xc = X[start:stop]
    D = dist_buf[:k * rows].reshape((k, rows))
    first, second, aux = near[0], near[1], near[2]
    cross = cross_buf[:k * rows].reshape((k, rows))
    np.dot(centers, Xc.T, cross)
    _distances_and_nearest(cross, x_sq[start:stop], c_sq, D, first, second, label)
    for r in range(rows):
        margins[start + r] = second[r] - first[r] if k > 1 else 0.0
    dense = False
    if kind == SOFTMAX:
        soft_rows = 0
        for r in range(rows):
            aux[r] = softmax_cutoff(first[r], second[r], tau)
            soft_rows += not is_hard_row(kind, first[r], second[r], tau, alpha)
        dense = soft_rows * DENSE_FRACTION > rows
    if dense:
        _dense_softmax_chunk(Xc, weights[start:stop], D, first, second, aux, label, tau,
                             with_sums, out_mode, out, labels, dmin, start, cross, scale,
                             scaled_x, mass_buf, block, sums, masses, scalars)
        return
    # No array views are created per row below: each one costs an atomic reference count.
    for r in range(rows):
        i = start + r
        if out_mode == OUT_DIST:
            for j in range(k):
                out[i, j] = D[j, r]
        if is_hard_row(kind, first[r], second[r], tau, alpha):
            m, gap = 1, 0.0
            idx[0] = label[r]
            val[0] = 1.0
        else:
            for j in range(k):
                row[j] = D[j, r]
            m, gap = row_given_nearest(row, kind, label[r], first[r], second[r], tau, alpha,
                                       idx, val, work)
        w = weights[i]
        _record_row(i, label[r], first[r], margins[i], gap, w, m, idx, val, masses, scalars,
                    labels, margins, dmin, out_mode, out)
        if with_sums:
            for q in range(m):
                _axpy(w * val[q], X, i, sums, idx[q])


@njit(**_JIT)
def _dense_softmax_chunk(Xc, w, D, first, second, cutoff, label, tau, with_sums, out_mode, out,
                         labels, dmin, start, E, scale, Xs, mass_buf, block, sums, masses,
                         scalars):
    """Finish a chunk whose rows are mostly soft: one exp per entry, a GEMV and a GEMM.

    With ``s_r = exp(-(second_r - dmin_r) / tau)`` (float64), a row's weights
    are 1 for its nearest centroid and ``s_r E[j, r]`` for the others, so
    ``S_r = s_r sum_j E[j, r]`` keeps its relative precision however small it
    is. The nearest centroid's share is added row by row; the others' is
    ``E @ (scale * X_chunk)`` with ``scale_r = w_r s_r / (1 + S_r)``.
    """
    k, rows = D.shape
    others = cutoff  # spent once the weights are computed
    _softmax_dense(D, second, cutoff, label, tau, E, others)
    for r in range(rows):
        i = start + r
        ratio = exp_nonpositive(-(second[r] - first[r]) / tau)
        rest = ratio * others[r]
        total = 1.0 + rest
        gap = tau * math.log1p(rest)
        labels[i] = label[r]
        dmin[i] = first[r]
        scalars[0] += w[r] * (first[r] - gap)
        scalars[1] += w[r] * first[r]
        scalars[2] += w[r] * gap
        scale[r] = w[r] * ratio / total
        lead = w[r] / total
        masses[label[r]] += lead
        if with_sums:
            _axpy(lead, Xc, r, sums, label[r])
        if out_mode == OUT_RESP:
            for j in range(k):
                out[i, j] = E[j, r] * (ratio / total)
            out[i, label[r]] = 1.0 / total
        elif out_mode == OUT_GAP:
            out[i, 0] = gap
    np.dot(E, scale[:rows], mass_buf)
    masses += mass_buf
    if not with_sums:
        return
    for r in range(rows):
        for f in range(Xs.shape[1]):
            Xs[r, f] = Xc[r, f] * scale[r]
    np.dot(E, Xs[:rows], block)
    sums += block


@njit(parallel=True, **_JIT)
def dense_pass(X, weights, x_sq, centers, c_sq, kind, tau, alpha, with_sums, out_mode, out,
               labels, margins, dmin, n_threads):
    """One pass over dense ``X`` (C-contiguous); returns the per-thread buffers.

    ``centers`` (C-contiguous) is in the dtype of X; ``c_sq`` holds the squared
    norms of the float64 centroids.
    """
    n, n_features = X.shape
    k = centers.shape[0]
    rows = chunk_rows(k)
    sums, masses, scalars = _thread_buffers(n_threads, k, n_features)
    cross = np.empty((n_threads, k * rows), X.dtype)
    dist = np.empty((n_threads, k * rows))
    near = np.empty((n_threads, 3, rows))
    scale = np.empty((n_threads, rows), X.dtype)
    scaled_x = np.empty((n_threads, rows, n_features), X.dtype)
    label = np.empty((n_threads, rows), np.intp)
    row = np.empty((n_threads, k))
    work = np.empty((n_threads, k))
    idx = np.empty((n_threads, k + 1), np.intp)
    val = np.empty((n_threads, k + 1))
    mass_buf = np.empty((n_threads, k), X.dtype)
    block = np.empty((n_threads, k, n_features), X.dtype)
    n_chunks = (n + rows - 1) // rows
    for t in prange(n_threads):
        for c in range(t, n_chunks, n_threads):
            _dense_chunk(X, weights, x_sq, centers, c_sq, kind, tau, alpha, with_sums, out_mode,
                         out, labels, margins, dmin, c * rows, rows, cross[t], dist[t], near[t],
                         scale[t], scaled_x[t], label[t], row[t], work[t], idx[t], val[t],
                         mass_buf[t], block[t], sums[t], masses[t], scalars[t])
    return sums, masses, scalars


@njit(parallel=True, **_JIT)
def dense_row_sq_norms(X):
    """Squared norm of every row, accumulated in float64 without copying X."""
    out = np.empty(X.shape[0])
    for i in prange(X.shape[0]):
        acc = 0.0
        for f in range(X.shape[1]):
            v = np.float64(X[i, f])
            acc += v * v
        out[i] = acc
    return out


@njit(parallel=True, **_JIT)
def csr_pass(data, indices, indptr, n_features, weights, x_sq, centers_t, c_sq, kind, tau,
             alpha, with_sums, out_mode, out, labels, margins, dmin, n_threads):
    """One pass over CSR ``(data, indices, indptr)``; returns the per-thread buffers.

    ``centers_t`` is ``C^T`` in float64; products are accumulated in float64.
    """
    n = indptr.shape[0] - 1
    k = centers_t.shape[1]
    sums, masses, scalars = _thread_buffers(n_threads, k, n_features)
    dist = np.empty((n_threads, k))
    work = np.empty((n_threads, k))
    idx = np.empty((n_threads, k + 1), np.intp)
    val = np.empty((n_threads, k + 1))
    rows = chunk_rows(k)
    n_chunks = (n + rows - 1) // rows
    for t in prange(n_threads):
        for c in range(t, n_chunks, n_threads):
            for i in range(c * rows, min((c + 1) * rows, n)):
                _csr_row(data, indices, indptr, i, weights[i], x_sq[i], centers_t, c_sq, kind,
                         tau, alpha, with_sums, out_mode, out, labels, margins, dmin, dist[t],
                         work[t], idx[t], val[t], sums[t], masses[t], scalars[t])
    return sums, masses, scalars


@njit(**_JIT)
def _csr_row(data, indices, indptr, i, weight, x_sq, centers_t, c_sq, kind, tau, alpha,
             with_sums, out_mode, out, labels, margins, dmin, d, work, idx, val, sums, masses,
             scalars):
    """Row ``i`` of a CSR pass, into one thread's buffers."""
    for j in range(d.shape[0]):
        d[j] = 0.0
    for p in range(indptr[i], indptr[i + 1]):
        v = np.float64(data[p])
        col = indices[p]
        for j in range(d.shape[0]):
            d[j] += v * centers_t[col, j]
    for j in range(d.shape[0]):
        d[j] = max(x_sq - 2.0 * d[j] + c_sq[j], 0.0)
    if out_mode == OUT_DIST:
        for j in range(d.shape[0]):
            out[i, j] = d[j]
    m, label, row_dmin, margin, gap = row_responsibilities(d, kind, tau, alpha, idx, val, work)
    _record_row(i, label, row_dmin, margin, gap, weight, m, idx, val, masses, scalars, labels,
                margins, dmin, out_mode, out)
    if with_sums:
        for q in range(m):
            coef = weight * val[q]
            j = idx[q]
            for p in range(indptr[i], indptr[i + 1]):
                sums[j, indices[p]] += coef * data[p]
