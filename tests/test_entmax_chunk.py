"""A dense chunk's entmax rows computed together: the row kernel's bits, and the oracle's values."""

import numpy as np
import pytest
from numba import njit

from softkmeans._core.responsibilities import RelaxationSpec
from softkmeans._engines._array import NumpyEngine
from softkmeans._engines._numba.engine import NumbaEngine
from softkmeans._engines._numba.entmax_chunk import MAX_SORTED, compact_row, entmax_chunk
from softkmeans._engines._numba.kernels import ChunkRows
from softkmeans._engines._numba.rows import ENTMAX, is_hard_row, nearest_two, row_given_nearest


@njit
def _both_ways(U, x_sq, tau, alpha):
    """Each soft row of the chunk ``U`` by :func:`entmax_chunk` and by the row kernel.

    Returns the chunk's width, whether each row was soft and fitted in it, and
    per row and way (0: row kernel, 1: chunk) the gap and the responsibilities.
    """
    k, rows = U.shape
    D = np.empty((rows, k))
    for r in range(rows):
        for j in range(k):
            D[r, j] = max(x_sq[r] + U[j, r], 0.0)
    label, first, second = np.empty(rows, np.intp), np.empty(rows), np.empty(rows)
    hard = np.empty(rows, np.bool_)
    for r in range(rows):
        label[r], first[r], second[r] = nearest_two(D[r])
        hard[r] = is_hard_row(ENTMAX, first[r], second[r], tau, alpha)
    unused = np.empty(rows)
    per_row = ChunkRows(label, first, second, hard, unused, unused, unused,
                        np.empty(rows, np.intp), unused, unused, unused, unused,
                        np.empty(rows, np.uint64), unused)
    compact = entmax_chunk(U, x_sq, per_row, tau, alpha)
    idx, val, work = np.empty(k + 1, np.intp), np.empty(k + 1), np.empty(k)
    gaps, resp = np.zeros((rows, 2)), np.zeros((rows, 2, k))
    in_chunk = np.zeros(rows, np.bool_)
    q = 0
    for r in range(rows):
        if hard[r]:
            continue
        m, gaps[r, 0] = row_given_nearest(D[r], ENTMAX, label[r], first[r], second[r], tau, alpha,
                                          idx, val, work)
        for p in range(m):
            resp[r, 0, idx[p]] = val[p]
        if compact.count[q] <= compact.width:
            in_chunk[r] = True
            m, gaps[r, 1] = compact_row(compact, q, idx, val)
            for p in range(m):
                resp[r, 1, idx[p]] = val[p]
        q += 1
    return compact.width, in_chunk, gaps, resp


@pytest.mark.parametrize("alpha", [1.5, 2.0])
@pytest.mark.parametrize("n_clusters, tau", [(6, 0.3), (6, 3.0), (20, 1.0), (70, 0.3), (70, 1.0)])
def test_a_chunks_rows_get_the_row_kernels_bits(n_clusters, tau, alpha):
    rng = np.random.RandomState(n_clusters)
    X, C = rng.normal(size=(256, 3)), rng.normal(size=(n_clusters, 3))
    U = np.ascontiguousarray((C**2).sum(axis=1)[:, None] - 2.0 * C @ X.T)
    width, in_chunk, gaps, resp = _both_ways(U, (X**2).sum(axis=1), tau, alpha)
    assert 0 < width <= MAX_SORTED
    assert in_chunk.sum() > 50
    np.testing.assert_array_equal(gaps[in_chunk, 1], gaps[in_chunk, 0])
    np.testing.assert_array_equal(resp[in_chunk, 1], resp[in_chunk, 0])
    if n_clusters == 70 and tau == 1.0:  # more candidates than a chunk sorts: the row kernel's
        soft = resp[:, 0].max(axis=1) < 1.0
        assert np.any(soft & ~in_chunk)


@pytest.mark.parametrize("alpha", [1.5, 2.0])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_rows_with_more_candidates_than_a_chunk_sorts_match_the_oracle(dtype, alpha):
    """40 centroids near every row: most rows have more than MAX_SORTED candidates."""
    rng = np.random.RandomState(0)
    X = rng.normal(size=(600, 4)).astype(dtype)
    centers = rng.normal(size=(40, 4)) * 0.3
    weights = rng.uniform(0.5, 2.0, size=X.shape[0])
    spec = RelaxationSpec("entmax", 1.5, alpha)
    got, want = NumbaEngine(X, weights), NumpyEngine(X, weights)
    resp, resp_want = got.responsibilities(centers, spec), want.responsibilities(centers, spec)
    dist = want.sq_distances(centers)
    window = spec.tau / (alpha - 1.0)
    candidates = (dist - dist.min(axis=1, keepdims=True) < window).sum(axis=1)
    assert np.mean(candidates > MAX_SORTED) > 0.5
    rtol = 1e-10 if dtype == np.float64 else 2e-5
    np.testing.assert_allclose(resp, resp_want, rtol=rtol, atol=rtol)
    if dtype == np.float64:
        np.testing.assert_array_equal(resp == 0, resp_want == 0)
    stats, stats_want = got.estep(centers, spec), want.estep(centers, spec)
    np.testing.assert_allclose(stats.masses, stats_want.masses, rtol=rtol)
    np.testing.assert_allclose(stats.sums, stats_want.sums, rtol=rtol,
                               atol=rtol * np.abs(stats_want.sums).max())
    np.testing.assert_allclose(stats.gap, stats_want.gap, rtol=rtol)
