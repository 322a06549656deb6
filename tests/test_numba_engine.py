"""The numba engine against the numpy oracle, field by field."""

import multiprocessing
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from numba import njit
from threadpoolctl import threadpool_limits

from softkmeans import SoftKMeans
from softkmeans._core.optimize import alternating
from softkmeans._core.responsibilities import SIGMA_MAX, SIGMA_MIN, RelaxationSpec
from softkmeans._engines import _blas as blas
from softkmeans._engines import get_engine, resolve_backend
from softkmeans._engines._array import ArrayEngine, NumpyEngine, first_equal_rows
from softkmeans._engines._numba import engine as numba_engine
from softkmeans._engines._numba import threads
from softkmeans._engines._numba.elementary import (
    exp_nonpositive,
    exp_nonpositive32,
    log1p_nonnegative,
)
from softkmeans._engines._numba.engine import NumbaEngine
from softkmeans._engines._numba.kernels import (
    DENSE_FRACTION,
    IN_PLACE_ROWS,
    LEAD_IN_PRODUCT_MIN,
    MULTIPLY_ADDS_PER_VALUE,
    PACKED_ROW_COST,
    SPARSE_FRACTION,
    csr_pass,
    dense_pass,
)
from softkmeans._engines._numba.layout import chunk_rows, pass_layout, product_block
from softkmeans._engines._numba.rows import SOFTMAX_SKIP_EPS
from softkmeans._engines._numba.threads import effective_n_threads
from softkmeans._engines._numba.transpose import transpose_rows


@njit
def _transpose(X, start, out):
    transpose_rows(X, start, out)  # compiled without a Python wrapper: called from here


N_CLUSTERS = 7
N_SAMPLES = 2 * chunk_rows(N_CLUSTERS) + 90  # three chunks, the last one partial

SPECS = {
    "hard": RelaxationSpec("hard"),
    "softmax": RelaxationSpec("softmax", 0.6),
    "softmax-hot": RelaxationSpec("softmax", 3.0),  # dense chunks
    "entmax-1.5": RelaxationSpec("entmax", 0.6, 1.5),
    "entmax-2": RelaxationSpec("entmax", 0.6, 2.0),
    "entmax-1.25": RelaxationSpec("entmax", 0.6, 1.25),
}
# float32 distances go through a float32 GEMM (as in scikit-learn); the oracle's are float64.
RTOL = {np.float64: 1e-10, np.float32: 2e-5}


@pytest.fixture(autouse=True)
def _threads_even_for_tiny_data(monkeypatch):
    """Let these small passes use every thread, so the parallel reduction is exercised."""
    monkeypatch.setattr(numba_engine, "WORK_PER_THREAD", 1)


def _data(dtype, sparse, seed=0):
    rng = np.random.RandomState(seed)
    centers = rng.uniform(-3, 3, size=(N_CLUSTERS, 6))
    X = centers[rng.randint(N_CLUSTERS, size=N_SAMPLES)] + rng.normal(size=(N_SAMPLES, 6))
    if sparse:
        X[rng.uniform(size=X.shape) < 0.4] = 0.0
        X = sp.csr_matrix(X)
    X = X.astype(dtype)
    weights = rng.uniform(0.5, 2.0, size=N_SAMPLES)
    init = rng.normal(size=(N_CLUSTERS, 6)) * 2.0
    return X, weights, init


def _assert_stats_close(got, want, rtol):
    """Every PassStats field, with absolute slack scaled to the field's size."""
    for field in ("sums", "masses", "objective", "inertia", "gap", "margins", "dmin"):
        a = np.asarray(getattr(got, field), dtype=np.float64)
        b = np.asarray(getattr(want, field), dtype=np.float64)
        assert np.all(np.isfinite(a)), field
        scale = max(float(np.max(np.abs(b))), np.finfo(float).tiny)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * scale, err_msg=field)
    clear = want.margins > 1e-3
    np.testing.assert_array_equal(got.labels[clear], want.labels[clear])
    assert got.labels.dtype == want.labels.dtype == np.int32



def _finishes(X, centers, sigma):
    """Which finish each chunk of a softmax pass takes, from the oracle's margins: ``"in
    place"`` or ``"packed"`` (:data:`IN_PLACE_ROWS`), or ``"rows"`` (not a dense chunk)."""
    stats = NumpyEngine(X).estep(centers, RelaxationSpec("softmax", sigma))
    k, d = centers.shape
    rows = chunk_rows(k)
    exponents = stats.margins / (2.0 * sigma**2)
    kept = np.exp(-exponents) >= LEAD_IN_PRODUCT_MIN
    soft = exponents < 745.0
    finishes = set()
    for start in range(0, len(X), rows):
        n, m = min(rows, len(X) - start), int(kept[start:start + rows].sum())
        if not soft[start:start + rows].sum() * DENSE_FRACTION > n:
            finishes.add("rows")
            continue
        packing = m * (d + PACKED_ROW_COST) + (k * m if m < n else 0)
        cost = k * n + (n - m) * k * d // MULTIPLY_ADDS_PER_VALUE
        in_place = m * IN_PLACE_ROWS[1] >= n * IN_PLACE_ROWS[0] and cost <= packing
        finishes.add("in place" if in_place else "packed")
    return finishes


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(("n_clusters", "sigma", "finish"), [
    (4, 3.0, "in place"),  # every row in the products, few centroids for the features
    (4, 0.2, "in place"),  # a fifth of the rows left out of the products, their weights zeroed
    (40, 3.0, "packed"),  # many centroids for the features
    (4, 0.14, "packed"),  # many rows' lead alone
], ids=["in-place", "in-place-rows-left-out", "packed-many-centroids", "packed-few-rows"])
def test_both_dense_softmax_finishes_match_the_oracle(dtype, n_clusters, sigma, finish):
    """Weights scaled in place and multiplied by the chunk, or the rows that take part packed:
    the statistics of the oracle, on weighted data far off the origin (shifted passes)."""
    rng = np.random.RandomState(3)
    n = 3 * chunk_rows(n_clusters) + 17
    X = (rng.normal(size=(n, 5)) + 1e3).astype(dtype)
    weights = rng.uniform(0.5, 2.0, size=n)
    centers = X[rng.choice(n, n_clusters, replace=False)].astype(np.float64)
    assert _finishes(X, centers, sigma) == {finish}
    got = NumbaEngine(X, weights).estep(centers, RelaxationSpec("softmax", sigma))
    want = NumpyEngine(X, weights).estep(centers, RelaxationSpec("softmax", sigma))
    _assert_stats_close(got, want, RTOL[dtype])

@pytest.mark.parametrize("spec", SPECS.values(), ids=SPECS.keys())
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_estep_matches_oracle(dtype, sparse, spec):
    X, weights, init = _data(dtype, sparse)
    got = NumbaEngine(X, weights).estep(init, spec)
    want = NumpyEngine(X, weights).estep(init, spec)
    _assert_stats_close(got, want, RTOL[dtype])


@pytest.mark.parametrize("spec", SPECS.values(), ids=SPECS.keys())
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_full_outputs_match_oracle(dtype, sparse, spec):
    X, weights, init = _data(dtype, sparse)
    got, want = NumbaEngine(X, weights), NumpyEngine(X, weights)
    rtol = RTOL[dtype]
    resp = got.responsibilities(init, spec)
    resp_want = want.responsibilities(init, spec)
    np.testing.assert_allclose(resp, resp_want, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(resp.sum(axis=1), 1.0, rtol=1e-12)
    if spec.kind == "entmax" and dtype == np.float64:
        np.testing.assert_array_equal(resp == 0, resp_want == 0)
    assert np.all(resp_want[resp == 0] < SOFTMAX_SKIP_EPS)
    dist = want.sq_distances(init)
    np.testing.assert_allclose(got.sq_distances(init), dist, rtol=rtol, atol=rtol * dist.max())
    lse = want.log_sum_exp(init, 0.6)
    np.testing.assert_allclose(got.log_sum_exp(init, 0.6), lse, rtol=rtol,
                               atol=rtol * np.abs(lse).max())


@pytest.mark.parametrize("spec", SPECS.values(), ids=SPECS.keys())
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_many_clusters_match_oracle(dtype, spec):
    """70 centroids, most of them far from every row: long candidate scans, sorts."""
    X, weights, _ = _data(dtype, False)
    init = np.asarray(X[:: X.shape[0] // 70][:70], dtype=np.float64)
    got = NumbaEngine(X, weights).estep(init, spec)
    want = NumpyEngine(X, weights).estep(init, spec)
    _assert_stats_close(got, want, RTOL[dtype])


BLOCK_SPECS = {
    "hard": RelaxationSpec("hard"),
    "softmax-2": RelaxationSpec("softmax", 2.0),
    "softmax-8": RelaxationSpec("softmax", 8.0),
    "entmax-1.5": RelaxationSpec("entmax", 2.0, 1.5),
}


@pytest.mark.parametrize("blocked", [True, False], ids=["blocked", "whole"])
@pytest.mark.parametrize("spec", BLOCK_SPECS.values(), ids=BLOCK_SPECS.keys())
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_products_by_centroid_blocks_match_oracle(dtype, spec, blocked, monkeypatch):
    """37 features, 70 centroids: both products in 2 blocks, transposed tiles and their edges.

    37 features and the last chunk's 90 rows are not multiples of a tile (16
    float32 or 8 float64 lanes), so the transpose's edge loops run too.
    """
    monkeypatch.setattr(numba_engine, "blocked_products", lambda: blocked)
    rng = np.random.RandomState(3)
    n_clusters, n_features = 70, 37
    assert 1 < n_clusters / product_block(chunk_rows(n_clusters), n_features) <= 2
    X = rng.normal(size=(N_SAMPLES, n_features)).astype(dtype)
    weights = rng.uniform(0.5, 2.0, size=N_SAMPLES)
    init = X[::N_SAMPLES // n_clusters][:n_clusters].astype(np.float64)
    got = NumbaEngine(X, weights).estep(init, spec)
    want = NumpyEngine(X, weights).estep(init, spec)
    _assert_stats_close(got, want, RTOL[dtype])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n_features", [1, 8, 16, 37])
def test_transpose_rows_is_exact(dtype, n_features):
    X = np.random.RandomState(0).normal(size=(300, n_features)).astype(dtype)
    X.flags.writeable = False  # read-only input data is fine
    for start, rows in ((0, 256), (7, 33), (290, 10), (3, 5)):
        out = np.empty((n_features, rows), dtype)
        _transpose(X, start, out)
        np.testing.assert_array_equal(out, X[start:start + rows].T)


def test_blocked_products_follow_the_openblas_core(monkeypatch):
    info = [{"user_api": "blas", "internal_api": "openblas", "architecture": "SkylakeX"}]
    monkeypatch.setattr(blas, "_controller", SimpleNamespace(info=lambda: info))
    numba_engine.blocked_products.cache_clear()
    try:
        assert numba_engine.blocked_products()
        info[0]["architecture"] = "Haswell"
        numba_engine.blocked_products.cache_clear()
        assert not numba_engine.blocked_products()
        info[0].update(internal_api="mkl", architecture="SkylakeX")
        numba_engine.blocked_products.cache_clear()
        assert not numba_engine.blocked_products()
    finally:
        numba_engine.blocked_products.cache_clear()


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_kernels_get_read_only_inputs_whatever_the_callers_flags(sparse):
    """A read-only X or sample_weight must not compile the pass kernels a second time."""
    X, weights, init = _data(np.float32, sparse)
    arrays = (X.data, X.indices, X.indptr) if sparse else (X,)
    for writeable in (True, False):
        for a in (*arrays, weights):
            a.flags.writeable = writeable
        NumbaEngine(X, weights).estep(init, SPECS["softmax"])
    kernel, inputs = (csr_pass, (0, 1, 2, 3)) if sparse else (dense_pass, (0, 2))  # X, weights
    assert kernel.signatures
    assert not any(signature[0][i].mutable for signature in kernel.signatures for i in inputs)


@pytest.mark.parametrize("engine", [NumpyEngine, NumbaEngine])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_row_norms_are_float64_sums_of_float32_data(engine, sparse):
    """``||x||^2`` of float32 rows far from 0 to float64 precision (float32 sums err ~1e-7).

    10_000 rows of 30 features span three of the oracle's row blocks.
    """
    X = (np.random.RandomState(0).normal(size=(10_000, 30)) * 1e3 + 1e4).astype(np.float32)
    want = np.square(X, dtype=np.float64).sum(axis=1)
    got = engine(sp.csr_matrix(X) if sparse else X).x_sq
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-14)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_a_pass_holds_blas_at_one_thread_and_restores_it(monkeypatch, n_threads):
    """As scikit-learn's Lloyd loop: BLAS at one thread inside a pass's threads; a pass on
    the calling thread alone leaves BLAS as it is, as a numpy call would."""
    if numba.config.NUMBA_NUM_THREADS < n_threads:
        pytest.skip("numba runs fewer threads here")
    monkeypatch.setattr(numba_engine, "WORK_PER_THREAD", 1)  # a thread for any pass
    X, weights, init = _data(np.float32, False)
    controller = blas.blas_controller()

    def blas_threads():
        return [lib.num_threads for lib in controller.select(user_api="blas").lib_controllers]

    before = blas_threads()
    inside = []
    run_in_threads = numba_engine.run_in_threads

    def recording(kernel, *args):
        if kernel is not numba_engine.dense_row_sq_norms:  # no BLAS there
            inside.append(blas_threads())
        return run_in_threads(kernel, *args)

    monkeypatch.setattr(numba_engine, "run_in_threads", recording)
    NumbaEngine(X, weights, n_threads=n_threads).estep(init, SPECS["softmax-hot"])
    assert inside and all(counts == ([1] * len(before) if n_threads > 1 else before)
                          for counts in inside)
    assert blas_threads() == before and not blas._holders


@pytest.mark.parametrize("engine", [NumpyEngine, NumbaEngine, ArrayEngine])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_max_sq_distances_skip_rows_without_weight(engine, sparse, dtype):
    X, weights, init = _data(dtype, sparse)
    weights[::3] = 0.0
    weights[np.argmax(np.asarray(abs(X).sum(axis=1)).ravel())] = 0.0  # an outlying row
    dense = X.toarray() if sparse else X
    points = np.vstack([init, dense[:2].astype(np.float64) + 1.0])
    D = ((dense.astype(np.float64)[:, None, :] - points[None, :, :]) ** 2).sum(axis=2)
    want = D[weights > 0].max(axis=0)
    got = engine(X, weights).max_sq_distances(points)
    assert got.shape == want.shape and got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=RTOL[dtype])


def test_with_sums_false_gives_zero_sums():
    X, weights, init = _data(np.float64, False)
    stats = NumbaEngine(X, weights).estep(init, SPECS["softmax"], with_sums=False)
    assert stats.sums.shape == init.shape and not stats.sums.any()


@pytest.mark.parametrize("kind", ["softmax", "entmax"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("sigma", [SIGMA_MIN, 1e-12, 1e-3, 0.3, 3.0, 1e3, 1e12, SIGMA_MAX])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_extreme_temperatures(dtype, sigma, sparse, kind):
    """No NaN or inf anywhere, and still the oracle's numbers (both pruning regimes)."""
    X, weights, init = _data(dtype, sparse, seed=1)
    spec = RelaxationSpec(kind, sigma)
    got = NumbaEngine(X, weights).estep(init, spec)
    want = NumpyEngine(X, weights).estep(init, spec)
    _assert_stats_close(got, want, RTOL[dtype])
    if sigma <= 1e-3:  # identified: exactly Lloyd's statistics
        hard = NumpyEngine(X, weights).estep(init, SPECS["hard"])
        np.testing.assert_allclose(got.masses, hard.masses, rtol=1e-14)
    resp = NumbaEngine(X, weights).responsibilities(init, spec)
    assert np.all(np.isfinite(resp))
    np.testing.assert_allclose(resp.sum(axis=1), 1.0, rtol=1e-12)


@pytest.mark.parametrize("sigma", [1e-30, 1e-12, 1.0, 1e30])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_tied_centroids_at_any_temperature(dtype, sigma):
    """Every centroid doubled: every row is soft (a tie).

    Every chunk takes the dense softmax path, except in float32 at sigma 1e-30,
    too cold for float32 exponents (``dense_inverse``): its rows go one by one.
    """
    X, weights, init = _data(dtype, False, seed=2)
    init = np.repeat(init[:3], 2, axis=0)
    spec = RelaxationSpec("softmax", sigma)
    got = NumbaEngine(X, weights).estep(init, spec)
    want = NumpyEngine(X, weights).estep(init, spec)
    _assert_stats_close(got, want, RTOL[dtype])
    resp = NumbaEngine(X, weights).responsibilities(init, spec)
    assert np.all(np.isfinite(resp))
    np.testing.assert_allclose(resp[:, 0::2], resp[:, 1::2], rtol=RTOL[dtype])
    if sigma <= 1e-12:
        np.testing.assert_allclose(resp.max(axis=1), 0.5, rtol=1e-6)


@pytest.mark.parametrize("scale", [1e-15, 3e-16, 1e-18])
def test_tied_rows_of_tiny_float32_data_at_a_colder_temperature(scale):
    """Distance gaps near 1e-30 in float32 at sigma 1e-20: far centroids get exactly 0.

    Every row is tied between two coincident centroids, so the chunks are soft;
    the other centroids lie about 1e20 sigma away.
    """
    rng = np.random.RandomState(0)
    blobs = [rng.normal(c, 0.3, (100, 2)) for c in ([0, 0], [3, 0], [0, 3])]
    X = (np.vstack(blobs) * scale).astype(np.float32)
    centers = np.array([[0.0, 0.0], [0.0, 0.0], [3.0, 0.0], [0.0, 3.0]]) * scale
    spec = RelaxationSpec("softmax", 1e-20)
    resp = NumbaEngine(X).responsibilities(centers, spec)
    np.testing.assert_array_equal(resp, NumpyEngine(X).responsibilities(centers, spec))
    np.testing.assert_array_equal(resp[:100], np.tile([0.5, 0.5, 0.0, 0.0], (100, 1)))
    _assert_stats_close(NumbaEngine(X).estep(centers, spec), NumpyEngine(X).estep(centers, spec),
                        RTOL[np.float32])


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_centroid_only_skipped_weights_reach_moves_as_in_the_oracle(dtype, sparse, monkeypatch):
    """Weights near 1e-55 are skipped in every row, but they are that centroid's whole mass.

    The engine adds them back: the centroid moves to their weighted mean, as
    in the oracle. A centroid whose weights all underflow (the fourth, 300
    away) keeps mass 0 in both, and no extra pass runs for it.
    """
    rng = np.random.RandomState(0)
    X = np.concatenate([rng.normal(-1, 0.1, 100), rng.normal(1, 0.1, 100)])[:, None].astype(dtype)
    X = sp.csr_matrix(X) if sparse else X
    weights = rng.uniform(0.5, 2.0, 200)
    spec = RelaxationSpec("softmax", 0.3)
    centers = np.array([[-1.0], [1.0], [6.0], [300.0]])
    want = NumpyEngine(X, weights).estep(centers, spec)
    got = NumbaEngine(X, weights).estep(centers, spec)
    assert 0 < want.masses[2] < 1e-50 and want.masses[3] == 0
    rtol = RTOL[dtype] if dtype == np.float64 else 1e-4  # exponents near 120 carry float32 errors
    np.testing.assert_allclose(got.masses, want.masses, rtol=rtol)
    np.testing.assert_allclose(got.sums, want.sums, rtol=rtol)
    passes = []
    original = NumbaEngine._pass
    monkeypatch.setattr(NumbaEngine, "_pass",
                        lambda *args, **kwargs: passes.append(args) or original(*args, **kwargs))
    got = NumbaEngine(X, weights).estep(centers[[0, 1, 3]], spec)
    assert got.masses[2] == 0 and len(passes) == 1


@pytest.mark.parametrize("n_features", [6, 37])
@pytest.mark.parametrize("blocked", [True, False], ids=["blocked", "whole"])
@pytest.mark.parametrize("spec", SPECS.values(), ids=SPECS.keys())
def test_float32_data_far_from_the_origin_keep_their_precision(spec, blocked, n_features,
                                                               monkeypatch):
    """Blobs of spread 1 shifted by 1000: ``||x||^2`` is 6e6, the distances a few units.

    Uncentered, float32 products would err by about 0.4 on them. The kernels
    center each chunk for its cross term, and every output keeps float32
    precision relative to the distances.
    """
    monkeypatch.setattr(numba_engine, "blocked_products", lambda: blocked)  # 37: transposed chunks
    rng = np.random.RandomState(0)
    means = rng.uniform(-3, 3, size=(N_CLUSTERS, n_features))
    X = means[rng.randint(N_CLUSTERS, size=N_SAMPLES)] + rng.normal(size=(N_SAMPLES, n_features))
    weights = rng.uniform(0.5, 2.0, size=N_SAMPLES)
    init = rng.normal(size=(N_CLUSTERS, n_features)) * 2.0
    shift = 1000.0
    X32 = (X + shift).astype(np.float32)
    centers = init + shift
    engine, oracle = NumbaEngine(X32, weights), NumpyEngine(X32, weights)
    np.testing.assert_array_equal(engine._shift, np.float32(engine._shift))
    got, want = engine.estep(centers, spec), oracle.estep(centers, spec)
    for field in ("masses", "objective", "inertia", "gap", "margins", "dmin"):
        scale = float(np.max(np.abs(getattr(want, field))))
        np.testing.assert_allclose(getattr(got, field), getattr(want, field), rtol=2e-5,
                                   atol=2e-5 * scale, err_msg=field)
    # sums of values near 1000 with float32 weights (a light centroid's to 3e-5)
    np.testing.assert_allclose(got.sums, want.sums, rtol=1e-4)
    distances = oracle.sq_distances(centers)
    np.testing.assert_allclose(engine.sq_distances(centers), distances, rtol=2e-5,
                               atol=2e-5 * distances.min(axis=1, keepdims=True).mean())
    if spec.kind != "hard":
        np.testing.assert_allclose(engine.responsibilities(centers, spec),
                                   oracle.responsibilities(centers, spec), atol=1e-4)
    np.testing.assert_allclose(engine.max_sq_distances(centers),
                               oracle.max_sq_distances(centers), rtol=2e-5)
    sigma = spec.sigma if spec.kind != "hard" else 1.0
    log_norms = oracle.log_sum_exp(centers, sigma)
    np.testing.assert_allclose(engine.log_sum_exp(centers, sigma), log_norms, rtol=2e-5,
                               atol=2e-5 * np.abs(log_norms).max())


@pytest.mark.parametrize("Engine", [NumbaEngine, NumpyEngine, ArrayEngine])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_only_dense_data_far_from_their_spread_are_shifted(dtype, Engine):
    X, weights, _ = _data(dtype, False)
    assert Engine(X, weights)._shift is None  # centered already
    assert Engine(X + dtype(1000.0), weights)._shift is not None
    assert Engine(sp.csr_matrix(X + dtype(1000.0)), weights)._shift is None  # would fill X in


@pytest.mark.parametrize("layout", ["dense64", "dense32", "csr"])
def test_a_light_centroid_gets_its_skipped_weights_too(layout):
    """Centroid (0, 3) keeps one weight of e^-180 (second nearest of the row at (5, 0)), and
    40 rows tied between the others skip its e^-80: below LIGHT_MASS, it is summed exactly."""
    rng = np.random.RandomState(0)
    X = np.vstack([rng.normal(0, 0.01, (40, 2)), rng.normal([-1, 0], 0.05, (50, 2)),
                   rng.normal([1, 0], 0.05, (50, 2)), [[5.0, 0.0]]])
    X = {"dense64": X, "dense32": X.astype(np.float32), "csr": sp.csr_matrix(X)}[layout]
    centers = np.array([[-1.0, 0.0], [1.0, 0.0], [0.0, 3.0]])
    spec = RelaxationSpec("softmax", np.sqrt(0.05))
    want = NumpyEngine(X).estep(centers, spec)
    got = NumbaEngine(X).estep(centers, spec)
    assert 1e-40 < want.masses[2] < 1e-30
    rtol = 1e-9 if layout != "dense32" else 1e-4
    np.testing.assert_allclose(got.masses, want.masses, rtol=rtol)
    np.testing.assert_allclose(got.sums, want.sums, rtol=rtol, atol=1e-12 * np.abs(want.sums).max())
    np.testing.assert_allclose(got.sums[2] / got.masses[2], want.sums[2] / want.masses[2],
                               rtol=rtol)  # where it moves
    fits = [SoftKMeans(3, sigma=spec.sigma, init=centers, max_iter=5, backend=backend).fit(X)
            for backend in ("numpy", "numba")]
    np.testing.assert_allclose(fits[1].cluster_centers_, fits[0].cluster_centers_, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_light_centroid_tied_at_a_cold_temperature_keeps_a_bounded_mass(dtype):
    """Rows of weight 1e-9 on the bisector of centroids 0 and 1 (1e5 from the origin): 1 is
    light, and its exact sums must not take the rounding of two distance formulas for an
    exponent (weights of 1e51 or inf before)."""
    rng = np.random.RandomState(1)
    n_features = 32
    a = rng.normal(size=n_features)
    b, c = a + rng.normal(size=n_features) * 0.5, a + 10 * rng.normal(size=n_features)
    normal = (b - a) / np.linalg.norm(b - a)
    ties = rng.normal(size=(50, n_features))
    ties = (a + b) / 2 + ties - np.outer(ties @ normal, normal)
    X = np.vstack([a + 0.3 * rng.normal(size=(300, n_features)),
                   c + 0.3 * rng.normal(size=(300, n_features)), ties]) + 1e5
    weights = np.r_[np.ones(600), np.full(50, 1e-9)]
    centers = np.vstack([a, b, c]) + 1e5
    for sigma in (1e-3, 1e-4):
        spec = RelaxationSpec("softmax", sigma)
        got = NumbaEngine(X.astype(dtype), weights).estep(centers, spec)
        assert np.all(np.isfinite(got.sums)) and 0 <= got.masses[1] <= 50e-9


def test_a_light_centroid_nearest_to_its_own_rows_needs_no_exact_sum(monkeypatch):
    """A singleton far from the other clusters is light (weights 1e-7 of the total) but the
    pass skips none of its weights: no extra pass."""
    rng = np.random.RandomState(0)
    X = np.vstack([rng.normal(0, 0.3, (500, 4)), rng.normal(5, 0.3, (500, 4)), [[40.0] * 4]])
    weights = np.r_[np.ones(1000), 1e-4]
    centers = np.array([[0.0] * 4, [5.0] * 4, [40.0] * 4])
    passes = []
    original = NumbaEngine._pass
    monkeypatch.setattr(NumbaEngine, "_pass",
                        lambda *args, **kwargs: passes.append(args) or original(*args, **kwargs))
    spec = RelaxationSpec("softmax", 0.5)
    got = NumbaEngine(X, weights).estep(centers, spec)
    assert got.masses[2] < 1e-6 * weights.sum() and len(passes) == 1
    _assert_stats_close(got, NumpyEngine(X, weights).estep(centers, spec), RTOL[np.float64])


def test_softmax_gap_keeps_relative_precision_at_low_temperature():
    """Pruned terms stay below resolution: the gap agrees even when it is below eps * J."""
    X, weights, init = _data(np.float64, False, seed=2)
    margins = NumpyEngine(X, weights).estep(init, SPECS["hard"]).margins
    spec = RelaxationSpec("softmax", float(np.sqrt(margins.min() / 80)))
    got = NumbaEngine(X, weights).estep(init, spec)
    want = NumpyEngine(X, weights).estep(init, spec)
    assert 0 < want.gap < 1e-15 * want.inertia
    # The exponents (about 80) carry the distances' rounding into the gap: rtol 1e-9, not eps.
    np.testing.assert_allclose(got.gap, want.gap, rtol=1e-9)
    assert SOFTMAX_SKIP_EPS < np.finfo(np.float64).eps / 2


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_dense_softmax_chunks_with_few_or_no_rows_in_the_products(dtype):
    """Rows whose second weight is below LEAD_IN_PRODUCT_MIN add their nearest share on their
    own; the products run over the other rows of the chunk, packed, or not at all."""
    k_rows = chunk_rows(3)
    centers = np.array([[0.0, 0.0], [1.0, 0.0], [10.0, 0.0]])
    lead = np.array([0.05, 0.0])  # second weight exp(-80): below 1e-30, far above underflow
    between = np.array([0.5, 0.3])  # tied between centroids 0 and 1
    rows = [lead] * k_rows  # a chunk without a row in the products
    rows += [between if r % 7 == 0 else lead for r in range(k_rows)]  # a few rows in them
    rows += [between] * (k_rows // 2)  # every row in them
    X = (np.array(rows) + np.random.RandomState(0).normal(scale=1e-3, size=(len(rows), 2)))
    X = X.astype(dtype)
    weights = np.random.RandomState(1).uniform(0.5, 2.0, size=len(X))
    spec = RelaxationSpec("softmax", float(np.sqrt(0.9 / 80 / 2)))
    engine, oracle = NumbaEngine(X, weights), NumpyEngine(X, weights)
    got, want = engine.estep(centers, spec), oracle.estep(centers, spec)
    _assert_stats_close(got, want, RTOL[dtype])
    assert want.masses[1] > 0  # only the rows in the products reach centroid 1
    for with_sums in (False, True):
        masses = engine.estep(centers, spec, with_sums=with_sums).masses
        np.testing.assert_allclose(masses, want.masses, rtol=RTOL[dtype])
    resp = engine.responsibilities(centers, spec)
    np.testing.assert_allclose(resp, oracle.responsibilities(centers, spec), rtol=RTOL[dtype],
                               atol=RTOL[dtype])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_dense_softmax_blocks_that_keep_few_weights(dtype):
    """A block of centroids whose rows keep at most 1/SPARSE_FRACTION of its weights computes
    those only (the first block of 64 of these 70 centroids; the last 6 are dense), rows in
    the products and rows that add their nearest share on their own alike."""
    rng = np.random.RandomState(0)
    grid = np.array([[a - 4.5, b - 3.0] for a in range(10) for b in range(7)])
    X = grid[rng.randint(len(grid), size=3 * chunk_rows(len(grid)))]
    X = (X + rng.uniform(-0.4, 0.4, size=X.shape)).astype(dtype)
    weights = rng.uniform(0.5, 2.0, size=len(X))
    tau = 0.01
    spec = RelaxationSpec("softmax", float(np.sqrt(tau / 2)))
    want = NumpyEngine(X, weights).estep(grid, spec)
    kept = NumpyEngine(X).sq_distances(grid)
    kept.sort(axis=1)
    assert np.mean((kept[:, 2:] - kept[:, [1]]) <= 37 * tau) < 1 / SPARSE_FRACTION
    in_products = np.mean(want.margins <= 69 * tau)
    assert 0.2 < in_products < 0.8
    rtol = RTOL[np.float64] if dtype == np.float64 else 2e-3  # float32 exponents of d ~ 30
    _assert_stats_close(NumbaEngine(X, weights).estep(grid, spec), want, rtol)


def test_entmax_single_centroid_and_ties():
    X = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 0.0], [3.0, 0.0]])
    for centers in (np.array([[0.5, 0.0]]), np.array([[0.0, 0.0], [2.0, 0.0]])):
        for spec in (SPECS["entmax-1.5"], SPECS["softmax"], SPECS["entmax-1.25"]):
            _assert_stats_close(NumbaEngine(X).estep(centers, spec),
                                NumpyEngine(X).estep(centers, spec), 1e-12)


def test_exp_matches_numpy_down_to_underflow():
    x = np.concatenate([-np.geomspace(1e-300, 800, 4000), [0.0, -745.13, -745.2, -np.inf]])
    got = np.array([exp_nonpositive(v) for v in x])
    want = np.exp(x)
    normal = want > np.finfo(float).tiny
    np.testing.assert_allclose(got[normal], want[normal], rtol=3e-16)
    np.testing.assert_allclose(got[~normal], want[~normal], rtol=0, atol=2e-323)
    assert got[-1] == 0.0 and got[-4] == 1.0


def test_log1p_matches_numpy_from_subnormals_to_huge():
    x = np.concatenate([np.geomspace(5e-324, 1e300, 6000), np.linspace(0.0, 3.0, 3001),
                        [np.sqrt(0.5) - 1e-16, np.sqrt(2.0) - 1.0, 1.7e308]])
    got = np.array([log1p_nonnegative(v) for v in x])
    want = np.log1p(x)
    np.testing.assert_allclose(got[x > 0], want[x > 0], rtol=3e-16)
    assert got[x == 0].tolist() == [0.0]


def test_float32_exp_within_two_ulps_on_the_kept_range():
    x = np.linspace(-40.0, 0.0, 2001).astype(np.float32)
    got = np.array([exp_nonpositive32(v) for v in x], dtype=np.float32)  # exact: float32 results
    assert got[-1] == 1.0
    np.testing.assert_allclose(got, np.exp(x.astype(np.float64)), rtol=2 * 2.0**-23)


@pytest.mark.parametrize("spec", SPECS.values(), ids=SPECS.keys())
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_thread_count_does_not_change_a_bit(dtype, sparse, spec):
    """Fixed slots summed in slot order: the same bits with 1, 2 or 3 threads."""
    X, weights, init = _data(dtype, sparse, seed=3)
    one = NumbaEngine(X, weights, n_threads=1).estep(init, spec)
    for n_threads in (2, 3):
        other = NumbaEngine(X, weights, n_threads=n_threads).estep(init, spec)
        for field in ("sums", "masses", "objective", "inertia", "gap", "labels", "margins",
                      "dmin"):
            np.testing.assert_array_equal(getattr(other, field), getattr(one, field),
                                          err_msg=field)


def test_concurrent_passes_from_several_threads():
    """Fits in several Python threads at once (e.g. a threaded grid search) share the pool."""
    X, weights, init = _data(np.float64, False, seed=3)
    want = NumbaEngine(X, weights, n_threads=1).estep(init, SPECS["softmax"]).masses
    with ThreadPoolExecutor(max_workers=4) as callers:
        got = list(callers.map(
            lambda n_threads: NumbaEngine(X, weights, n_threads=n_threads)
            .estep(init, SPECS["softmax"]).masses,
            [2, 3, 2, 4, 3, 2],
        ))
    for masses in got:
        np.testing.assert_allclose(masses, want, rtol=1e-12)


def test_overlapping_fits_from_several_threads_restore_blas():
    """Each thread's limit would restore what another had set: one process-wide count does not."""
    controller = blas.blas_controller()

    def blas_threads():
        return [lib.num_threads for lib in controller.select(user_api="blas").lib_controllers]

    X, weights, init = _data(np.float64, False, seed=3)
    before = blas_threads()
    barrier = threading.Barrier(4)

    def fit(seed):
        barrier.wait()
        engine = NumbaEngine(X, weights, n_threads=2)
        return alternating(engine, init + seed, SPECS["softmax"], max_iter=10, tol=0.0).n_iter

    with ThreadPoolExecutor(max_workers=4) as callers:
        assert list(callers.map(fit, range(4))) == [10] * 4
    assert blas_threads() == before and not blas._holders


@pytest.mark.parametrize("scale", [1e-15, 1e39])
def test_weights_of_any_scale_give_the_oracles_float32_softmax(scale):
    """Dense float32 softmax chunks multiply weights into float32 products: the kernels
    take them relative to the largest, so 1e-15 does not underflow nor 1e39 overflow."""
    X, weights, init = _data(np.float32, False)
    spec = SPECS["softmax-hot"]  # dense chunks
    got = NumbaEngine(X, weights * scale).estep(init, spec)
    _assert_stats_close(got, NumpyEngine(X, weights * scale).estep(init, spec), RTOL[np.float32])
    unit = NumbaEngine(X, weights).estep(init, spec)
    means = unit.sums / unit.masses[:, None]
    np.testing.assert_allclose(got.sums / got.masses[:, None], means, rtol=1e-6,
                               atol=1e-6 * np.abs(means).max())  # float32 products


def test_first_equal_rows_links_every_twin_to_the_first():
    """Rows of equal norms are grouped, and equal ones inside a group need not be adjacent."""
    centers = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [2.0, 2.0], [1.0, 0.0]])
    first = first_equal_rows(centers, np.einsum("ij,ij->i", centers, centers))
    np.testing.assert_array_equal(first, [0, 1, 0, 1, 4, 0])


@pytest.mark.parametrize("blocked", [True, False], ids=["blocked", "whole"])
@pytest.mark.parametrize(("n_features", "n_clusters"), [(64, 33), (64, 17), (8, 14), (64, 257)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_duplicated_centroids_tie_exactly(dtype, n_features, n_clusters, blocked, monkeypatch):
    """BLAS rounds a product by the position of its rows: a lone last block of centroids or
    the short last chunk of X gave equal centroids different distances. Equal centroids
    get the first one's cross term (and no block holds a single centroid)."""
    monkeypatch.setattr(numba_engine, "blocked_products", lambda: blocked)
    chunk, step, _ = pass_layout(n_clusters, n_features, dtype, blocked)
    assert n_clusters % step != 1 or step >= n_clusters
    rng = np.random.RandomState(0)
    for n_samples in (chunk + 1, chunk + 3, 2 * chunk + 17):
        X = rng.normal(size=(n_samples, n_features)).astype(dtype)
        centers = rng.normal(size=(n_clusters, n_features))
        centers[-1] = centers[0]
        distances = NumbaEngine(X).sq_distances(centers)
        np.testing.assert_array_equal(distances[:, -1], distances[:, 0])
        labels = NumbaEngine(X).estep(centers, SPECS["hard"]).labels
        assert not np.any(labels == n_clusters - 1)  # ties go to the first centroid
        resp = NumbaEngine(X).responsibilities(centers, RelaxationSpec("softmax", 1e-6))
        np.testing.assert_array_equal(resp[:, -1], resp[:, 0])


def _masses_in_child(queue, X, weights, init):
    queue.put(NumbaEngine(X, weights, n_threads=2).estep(init, SPECS["softmax"]).masses)


@pytest.mark.skipif(sys.platform != "linux", reason="the fork start method")
def test_thread_pool_works_in_a_forked_child():
    """A child forked after a parallel pass has none of the pool's threads: it must not hang."""
    X, weights, init = _data(np.float64, False, seed=3)
    parent = NumbaEngine(X, weights, n_threads=2).estep(init, SPECS["softmax"]).masses
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_masses_in_child, args=(queue, X, weights, init))
    child.start()
    try:
        np.testing.assert_allclose(queue.get(timeout=60), parent, rtol=1e-12)
        child.join(timeout=60)
        assert child.exitcode == 0
    finally:
        child.kill()


_WITHOUT_FORK = """
import os
del os.fork, os.register_at_fork  # as on Windows (the standard library checks os.fork)
import numpy as np
from softkmeans import SoftKMeans
X = np.random.default_rng(0).normal(size=(60, 3))
print(repr(SoftKMeans(3, random_state=0).fit(X).inertia_))
"""


def test_imports_and_fits_where_os_cannot_fork():
    done = subprocess.run([sys.executable, "-c", _WITHOUT_FORK], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    X = np.random.default_rng(0).normal(size=(60, 3))
    expected = SoftKMeans(3, random_state=0).fit(X).inertia_
    assert float(done.stdout.strip()) == pytest.approx(expected, rel=1e-12)


def test_thread_count_follows_limits():
    assert effective_n_threads(1) == 1
    assert effective_n_threads(10**6) >= 1
    with threadpool_limits(limits=1, user_api="openmp"):
        assert effective_n_threads() == 1


def test_auto_backend_is_numba_on_cpu():
    X = np.zeros((3, 2))
    assert resolve_backend("auto", X) == "numba"
    assert isinstance(get_engine("auto", X), NumbaEngine)


_WITHOUT_JIT = """
import numpy as np
from softkmeans import SoftKMeans
from softkmeans.diagnostics import margins

X = np.random.default_rng(0).normal(size=(200, 3))
fits = [SoftKMeans(3, random_state=0, backend=b).fit(X) for b in ("auto", "numpy")]
print(np.array_equal(fits[0].cluster_centers_, fits[1].cluster_centers_),
      margins(X, fits[0].cluster_centers_)[1] > 0)
try:
    SoftKMeans(3, backend="numba").fit(X)
except ValueError as exc:
    print("NUMBA_DISABLE_JIT" in str(exc))
"""


def test_auto_backend_is_numpy_where_numbas_compiler_is_turned_off():
    """NUMBA_DISABLE_JIT=1 (numba's debugging switch) leaves the kernels uncompilable."""
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    done = subprocess.run([sys.executable, "-c", _WITHOUT_JIT], env=env, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True"]


def test_engine_keeps_float32_and_weights():
    X, weights, _ = _data(np.float32, False)
    engine = NumbaEngine(X, weights)
    assert engine.X.dtype == np.float32
    assert engine.sample_weight.dtype == np.float64
    np.testing.assert_allclose(engine.row(5), X[5].astype(np.float64))


def test_compile_command_compiles_every_input_kind(capsys):
    from softkmeans.__main__ import main
    from softkmeans._engines._numba.kernels import csr_pass, dense_pass

    assert main(["compile"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0].split() for line in lines[1:5]] == [
        ["dense", "float32"], ["dense", "float64"], ["CSR", "float32"], ["CSR", "float64"]]
    assert lines[5] == f"numba's cache folder: {dense_pass._cache.cache_path}"
    assert len(lines) == 6
    for kernel in (dense_pass, csr_pass):
        for dtype in ("float32", "float64"):
            assert any(sig[0][0].dtype.name == dtype for sig in kernel.signatures)


def test_compile_command_says_where_the_cache_went_when_numba_cache_dir_is_unusable():
    env = {**os.environ, "NUMBA_CACHE_DIR": "/proc/softkmeans-cannot-be-here"}
    done = subprocess.run([sys.executable, "-m", "softkmeans", "compile"], env=env,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-2].startswith("numba's cache folder: ") and "/proc" not in lines[-2]
    assert lines[-1].startswith("NUMBA_CACHE_DIR (/proc/softkmeans-cannot-be-here) is not "
                                "writable")


def test_compile_command_resolves_a_relative_cache_folder(tmp_path, capsys, monkeypatch):
    """numba keeps NUMBA_CACHE_DIR relative; comparing it with an absolute path raised."""
    import numba

    from softkmeans.__main__ import _print_cache_folder
    from softkmeans._engines._numba.kernels import dense_pass

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(numba.config, "CACHE_DIR", "relcache")
    monkeypatch.setattr(dense_pass, "_cache", SimpleNamespace(cache_path="relcache/_engines_1"))
    _print_cache_folder()
    assert capsys.readouterr().out == f"numba's cache folder: {tmp_path}/relcache/_engines_1\n"


@pytest.mark.parametrize(("state", "why"), [
    ("disabled", "the environment variable NUMBA_DISABLE_JIT turns it off"),
    ("missing", "it is not installed")])
def test_compile_command_says_why_numba_cannot_compile(state, why, capsys, monkeypatch):
    import softkmeans._engines as engines
    from softkmeans.__main__ import main

    monkeypatch.setattr(engines, "_numba_state", lambda: state)
    assert main(["compile"]) == 1
    assert capsys.readouterr().err == f"numba cannot compile the kernels here: {why}.\n"


def test_compile_command_fails_without_a_cache_directory(capsys, monkeypatch):
    from softkmeans import _jit as jit
    from softkmeans.__main__ import main

    monkeypatch.setitem(jit.JIT_OPTIONS, "cache", False)
    assert main(["compile"]) == 1
    assert "set NUMBA_CACHE_DIR" in capsys.readouterr().out


_WITHOUT_CACHE_DIRECTORY = """
import warnings
import numpy as np
import scipy.sparse as sp
from numba.core import caching
caching.CacheImpl._locator_classes = []  # as on a read-only file system: no cache directory
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from softkmeans import _jit as jit
assert jit.JIT_OPTIONS["cache"] is False
assert [w.category.__name__ for w in caught] == ["CompilationCacheWarning"], caught
from softkmeans import SoftKMeans
X = sp.csr_matrix(np.random.default_rng(0).normal(size=(60, 3)))
print(repr(SoftKMeans(3, random_state=0).fit(X).inertia_))
"""


def test_kernels_compile_without_a_writable_cache_directory():
    """numba refuses ``cache=True`` where it finds no cache directory: compile uncached."""
    done = subprocess.run([sys.executable, "-c", _WITHOUT_CACHE_DIRECTORY], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    X = sp.csr_matrix(np.random.default_rng(0).normal(size=(60, 3)))
    expected = SoftKMeans(3, random_state=0).fit(X).inertia_
    assert float(done.stdout.strip()) == pytest.approx(expected, rel=1e-12)


def test_float32_distances_of_points_near_a_centroid_keep_their_digits():
    """transform's distances come from float64 products, as scikit-learn's do: the float32
    cross term gave points 0.01 from a centroid distances off by 13%."""
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(3, 16)) + 2.0  # not far enough from the origin to be centred
    near = (centers + 2.5e-3 * rng.normal(size=centers.shape)).astype(np.float32)
    exact = np.sqrt(((near.astype(np.float64)[:, None] - centers[None]) ** 2).sum(axis=-1))
    assert NumbaEngine(near)._shift is None
    got = np.sqrt(NumbaEngine(near).sq_distances(centers))
    np.testing.assert_allclose(got, exact, rtol=1e-6)


@pytest.mark.parametrize("engine", [NumpyEngine, ArrayEngine, NumbaEngine])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_engine_ties_equal_centroids_exactly(engine, dtype):
    """BLAS products put the last of 257 equal centroids an ulp from the first in 45 of these
    300 rows for the oracle (38 for the GPU engine's code in float64): hard ties went to
    either, cold softmax rows were one-hot. The numba engine's float32 distances for
    ``transform`` are the oracle's."""
    rng = np.random.RandomState(0)
    X = rng.normal(size=(300, 64)).astype(dtype)
    centers = rng.normal(size=(257, 64))
    centers[-1] = centers[0]
    distances = engine(X).sq_distances(centers)
    np.testing.assert_array_equal(distances[:, -1], distances[:, 0])
    assert not np.any(engine(X).estep(centers, SPECS["hard"]).labels == 256)
    resp = engine(X).responsibilities(centers, RelaxationSpec("softmax", 1e-6))
    np.testing.assert_array_equal(resp[:, -1], resp[:, 0])


def test_threads_of_an_interrupted_pass_finish_and_errors_reach_the_caller():
    """A KeyboardInterrupt in the calling thread's group abandons the pass; the other groups
    end on their own threads, and the next pass runs as usual."""
    ran, done = [], threading.Event()

    def share(start, stop):
        ran.append(start)
        if start == 0:
            raise KeyboardInterrupt
        done.wait(60)

    with pytest.raises(KeyboardInterrupt):
        threads.run_in_threads(share, 3, 3)
    done.set()
    out = np.zeros(3)

    def fill(out, start, stop):
        out[start:stop] = 10 * np.arange(start, stop)

    threads.run_in_threads(fill, 3, 3, out)
    np.testing.assert_array_equal(out, [0, 10, 20])

    def failing(start, stop):
        if start == 2:
            raise ValueError("in a worker")

    with pytest.raises(ValueError, match="in a worker"):
        threads.run_in_threads(failing, 3, 3)


_INTERRUPTED_PREDICTS = """
import signal, sys, threading, time
import numpy as np
from threadpoolctl import threadpool_info
from softkmeans import SoftKMeans
from softkmeans._engines import _blas
blas = lambda: [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
before = blas()
X = np.random.default_rng(0).normal(size=(300, 4))
model = SoftKMeans(3, sigma=1.0, random_state=0, backend="numba", n_threads=2).fit(X)
expected = model.predict(X)
def interrupt(*args):
    raise KeyboardInterrupt
signal.signal(signal.SIGALRM, interrupt)
rng = np.random.default_rng(2)
end = time.time() + 3
while time.time() < end:
    try:
        signal.setitimer(signal.ITIMER_REAL, rng.uniform(1e-5, 2e-3))
        for _ in range(50):
            with _blas.one_blas_thread():  # as a pass on several threads holds it
                model.predict(X)
    except KeyboardInterrupt:
        pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
assert (model.predict(X) == expected).all()
with _blas.one_blas_thread():  # ends any hold that an interrupt cut short
    pass
assert not _blas._holders and blas() == before, (_blas._holders, blas(), before)
print("healthy")
"""


@pytest.mark.skipif(sys.platform != "linux", reason="SIGALRM interval timers")
def test_interrupted_predicts_leave_the_process_healthy():
    """Ctrl-C during a loop of small predicts could leave a lock of concurrent.futures'
    pool held: the next multi-threaded pass, and the interpreter's exit, waited forever
    (after 7 to 548 interrupted loops, measured); and holds of the BLAS limit lost to an
    interrupt kept BLAS at one thread for good (5 to 11 of them after 3 s)."""
    done = subprocess.run([sys.executable, "-c", _INTERRUPTED_PREDICTS], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "healthy" in done.stdout
