"""Parallel passes of the numba engine over dense and CSR data.

One pass walks over the rows of X in chunks of :data:`CHUNK_ROWS`, split over
threads with ``prange``. For each chunk it computes the squared distances
(dense: one GEMM ``X_chunk @ C^T`` per chunk, BLAS at one thread, as
scikit-learn's Lloyd kernel does; CSR: a sparse row times ``C^T``), the
responsibilities of each row (:mod:`._numba_rows`), and adds the row's
statistics into buffers owned by the thread, which the caller reduces after the
loop. Nothing of size ``n_samples x n_clusters`` is allocated unless the caller
passes an output for it (``out_mode``).

``sums`` of a dense chunk are accumulated row by row (one ``axpy`` per nonzero
responsibility) unless more than ``1 / DENSE_SUMS_FRACTION`` of the chunk's
responsibilities are nonzero; then the chunk's responsibilities are scattered
into a dense block and ``R^T X_chunk`` is one more GEMM.
"""

import numpy as np
from numba import njit, prange

from ._numba_rows import row_responsibilities

__all__ = ["CHUNK_ROWS", "DENSE_SUMS_FRACTION", "OUT_NONE", "OUT_RESP", "OUT_DIST", "OUT_GAP",
           "dense_pass", "csr_pass"]

#: Rows per chunk (scikit-learn's Lloyd kernel uses 256 as well).
CHUNK_ROWS = 256
#: A dense chunk's ``R^T X`` goes through GEMM when more than ``1/8`` of ``R`` is nonzero.
DENSE_SUMS_FRACTION = 8

#: What a pass writes into its ``out`` array, row ``i``: nothing, the
#: responsibilities, the squared distances, or ``row_gap`` (column 0).
OUT_NONE, OUT_RESP, OUT_DIST, OUT_GAP = 0, 1, 2, 3

_JIT = {"cache": True, "nogil": True, "fastmath": {"contract"}}


@njit(**_JIT)
def _finish_row(d, i, kind, tau, alpha, weight, idx, val, work, masses, scalars, labels,
                margins, dmin, out_mode, out):
    """Responsibilities of row ``i`` from its distances ``d``; adds its statistics.

    ``scalars`` accumulates the weighted objective, inertia and gap. Returns
    the number of nonzero responsibilities, left in ``idx`` and ``val``.
    """
    m, label, row_dmin, margin, gap = row_responsibilities(d, kind, tau, alpha, idx, val, work)
    labels[i] = label
    margins[i] = margin
    dmin[i] = row_dmin
    scalars[0] += weight * (row_dmin - gap)
    scalars[1] += weight * row_dmin
    scalars[2] += weight * gap
    for q in range(m):
        masses[idx[q]] += weight * val[q]
    if out_mode == OUT_RESP:
        out[i, :] = 0.0
        for q in range(m):
            out[i, idx[q]] = val[q]
    elif out_mode == OUT_DIST:
        out[i, :] = d
    elif out_mode == OUT_GAP:
        out[i, 0] = gap
    return m


@njit(**_JIT)
def _thread_buffers(n_threads, n_clusters, n_features):
    """Per-thread accumulators: sums, masses, (objective, inertia, gap)."""
    return (np.zeros((n_threads, n_clusters, n_features)), np.zeros((n_threads, n_clusters)),
            np.zeros((n_threads, 3)))


@njit(parallel=True, **_JIT)
def dense_pass(X, weights, x_sq, centers_t, c_sq, kind, tau, alpha, with_sums, out_mode, out,
               labels, margins, dmin, n_threads):
    """One pass over dense ``X`` (C-contiguous); returns the per-thread buffers.

    ``centers_t`` is ``C^T`` (n_features x n_clusters, C-contiguous) in the dtype
    of X; ``c_sq`` the squared norms of the centroids (float64).
    """
    n, n_features = X.shape
    k = centers_t.shape[1]
    sums, masses, scalars = _thread_buffers(n_threads, k, n_features)
    cross = np.empty((n_threads, CHUNK_ROWS, k), X.dtype)
    block = np.empty((n_threads, k, n_features), X.dtype)
    dist = np.empty((n_threads, k))
    work = np.empty((n_threads, k))
    idx = np.empty((n_threads, CHUNK_ROWS, k + 1), np.intp)
    val = np.empty((n_threads, CHUNK_ROWS, k + 1))
    counts = np.empty((n_threads, CHUNK_ROWS), np.intp)
    n_chunks = (n + CHUNK_ROWS - 1) // CHUNK_ROWS
    for t in prange(n_threads):
        for c in range(t, n_chunks, n_threads):
            _dense_chunk(X, weights, x_sq, centers_t, c_sq, kind, tau, alpha, with_sums,
                         out_mode, out, labels, margins, dmin, c * CHUNK_ROWS, cross[t],
                         block[t], dist[t], work[t], idx[t], val[t], counts[t], sums[t],
                         masses[t], scalars[t])
    return sums, masses, scalars


@njit(**_JIT)
def _dense_chunk(X, weights, x_sq, centers_t, c_sq, kind, tau, alpha, with_sums, out_mode, out,
                 labels, margins, dmin, start, cross, block, d, work, idx, val, counts, sums,
                 masses, scalars):
    """Rows ``start:start + CHUNK_ROWS`` of a dense pass, into one thread's buffers."""
    rows = min(CHUNK_ROWS, X.shape[0] - start)
    k = centers_t.shape[1]
    Xc = X[start:start + rows]
    cr = cross[:rows]
    np.dot(Xc, centers_t, cr)
    nnz = 0
    for r in range(rows):
        i = start + r
        for j in range(k):
            d[j] = max(x_sq[i] - 2.0 * cr[r, j] + c_sq[j], 0.0)
        counts[r] = _finish_row(d, i, kind, tau, alpha, weights[i], idx[r], val[r], work,
                                masses, scalars, labels, margins, dmin, out_mode, out)
        nnz += counts[r]
    if not with_sums:
        return
    if nnz * DENSE_SUMS_FRACTION > rows * k:
        cr[:, :] = 0.0
        for r in range(rows):
            for q in range(counts[r]):
                cr[r, idx[r, q]] = weights[start + r] * val[r, q]
        np.dot(cr.T, Xc, block)
        sums += block
        return
    for r in range(rows):
        x = Xc[r]
        for q in range(counts[r]):
            coef = weights[start + r] * val[r, q]
            s = sums[idx[r, q]]
            for f in range(x.shape[0]):
                s[f] += coef * x[f]


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
    n_chunks = (n + CHUNK_ROWS - 1) // CHUNK_ROWS
    for t in prange(n_threads):
        for c in range(t, n_chunks, n_threads):
            _csr_chunk(data, indices, indptr, weights, x_sq, centers_t, c_sq, kind, tau, alpha,
                       with_sums, out_mode, out, labels, margins, dmin, c * CHUNK_ROWS,
                       dist[t], work[t], idx[t], val[t], sums[t], masses[t], scalars[t])
    return sums, masses, scalars


@njit(**_JIT)
def _csr_chunk(data, indices, indptr, weights, x_sq, centers_t, c_sq, kind, tau, alpha,
               with_sums, out_mode, out, labels, margins, dmin, start, d, work, idx, val, sums,
               masses, scalars):
    """Rows ``start:start + CHUNK_ROWS`` of a CSR pass, into one thread's buffers."""
    k = centers_t.shape[1]
    for i in range(start, min(start + CHUNK_ROWS, indptr.shape[0] - 1)):
        d[:] = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            v = np.float64(data[p])
            row_c = centers_t[indices[p]]
            for j in range(k):
                d[j] += v * row_c[j]
        for j in range(k):
            d[j] = max(x_sq[i] - 2.0 * d[j] + c_sq[j], 0.0)
        m = _finish_row(d, i, kind, tau, alpha, weights[i], idx, val, work, masses, scalars,
                        labels, margins, dmin, out_mode, out)
        if not with_sums:
            continue
        for q in range(m):
            coef = weights[i] * val[q]
            s = sums[idx[q]]
            for p in range(indptr[i], indptr[i + 1]):
                s[indices[p]] += coef * data[p]
