"""The GPU engine: its namespace-generic code path on the CPU, CuPy itself on a GPU.

On the CPU, :class:`ArrayEngine` (the CuPy engine's code with numpy as its
namespace) and :class:`ArrayKernels` are compared with the numpy oracle. Tests
marked ``gpu`` run :class:`CupyEngine` and :class:`CupyKernels` and are skipped
unless CuPy sees a CUDA device.
"""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.externals.array_api_compat import array_namespace
from sklearn.externals.array_api_compat import numpy as np_compat

import softkmeans._base as base
from softkmeans import EntmaxKMeans, SoftKMeans
from softkmeans._core.responsibilities import RelaxationSpec
from softkmeans._engines import BACKENDS, get_engine, resolve_backend
from softkmeans._engines._array import ArrayEngine, NumpyEngine
from softkmeans._engines._array_kernels import (
    ArrayKernels,
    _threshold_sorted,
    block_responsibilities,
)

ROOT = Path(__file__).resolve().parents[1]
SPECS = [
    RelaxationSpec("hard"),
    RelaxationSpec("softmax", 0.6),
    RelaxationSpec("entmax", 0.4, 1.5),
    RelaxationSpec("entmax", 1.5, 1.5),
    RelaxationSpec("entmax", 0.5, 2.0),
    RelaxationSpec("entmax", 0.5, 1.3),
]


def _has_gpu():
    if importlib.util.find_spec("cupy") is None:
        return False
    from softkmeans._engines._cupy import gpu_available

    return gpu_available()


gpu = pytest.mark.skipif(not _has_gpu(), reason="needs CuPy and a CUDA device")


def _data(dtype, sparse, n=300, d=6, k=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if sparse:
        X[rng.random(X.shape) < 0.5] = 0.0
    centers = X[rng.choice(n, k, replace=False)] + 0.01
    w = rng.uniform(0.5, 2.0, n)
    X = X.astype(dtype)
    return (sp.csr_matrix(X) if sparse else X), centers, w


def _rtol(dtype):
    return 1e-10 if dtype == np.float64 else 2e-4


# ------------------------------------------------------------------ kernels
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s.kind}-{s.sigma}-{s.alpha}")
def test_generic_kernels_match_numpys(spec):
    rng = np.random.default_rng(1)
    D = rng.uniform(0.0, 4.0, size=(50, 45))
    D[3, 7] = D[3, 2] = D[3].min() - 0.5  # a tie
    ref = block_responsibilities(D, spec)
    kernels = ArrayKernels(np_compat, candidate_cap=8)
    labels, dmin, margins = kernels.nearest_two(D)
    assert_array_equal(labels, ref.labels)
    assert_array_equal(dmin, ref.dmin)
    assert_array_equal(margins, ref.margins)
    assert margins[3] == 0.0
    if spec.kind == "softmax":
        others = kernels.softmax_others(D, labels, dmin, spec.tau)
        assert_allclose(spec.tau * np.log1p(others), ref.row_gap, rtol=1e-14)
        assert_allclose(kernels.softmax_resp(D.copy(), dmin, others, spec.tau), ref.resp,
                        rtol=1e-14)
    elif spec.kind == "entmax":
        resp, row_gap = kernels.entmax(D, dmin, spec)
        assert_allclose(resp, ref.resp, rtol=1e-12, atol=1e-15)
        assert_array_equal(resp == 0, ref.resp == 0)
        assert_allclose(row_gap, ref.row_gap, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("power_two", [True, False])
def test_candidate_threshold_is_the_full_sort(power_two):
    """Rows with few, many (over the cap) and all candidates: same threshold as a full sort."""
    rng = np.random.default_rng(2)
    k = 60
    D = rng.uniform(0.0, 1.0, size=(90, k))
    D[:30] += np.linspace(0.0, 40.0, k)  # few candidates
    D[30:60] *= 0.05  # every centroid a candidate
    spec = RelaxationSpec("entmax", 0.5, 1.5 if power_two else 2.0)
    u = np.maximum(-(spec.alpha - 1.0) * (D - D.min(axis=1)[:, None]) / spec.tau, -2.0)
    counts = (u > -1).sum(axis=1)
    assert counts.min() <= 4 and counts.max() == k
    for cap in (4, 16, 32):
        t = ArrayKernels(np_compat, candidate_cap=cap).entmax_threshold(u, power_two)
        assert_array_equal(t, _threshold_sorted(u, power_two, np))


# ------------------------------------------------------------------- engine
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("spec", SPECS[:4], ids=lambda s: f"{s.kind}-{s.sigma}")
def test_array_engine_matches_oracle(dtype, sparse, spec):
    X, centers, w = _data(dtype, sparse)
    oracle = NumpyEngine(X, w)
    engine = ArrayEngine(X, w, block_elements=1000)  # several blocks
    ref, got = oracle.estep(centers, spec), engine.estep(centers, spec)
    rtol = _rtol(dtype)
    assert_array_equal(got.labels, ref.labels)
    for name in ("sums", "masses", "margins", "dmin"):
        assert_allclose(getattr(got, name), getattr(ref, name), rtol=rtol, atol=rtol,
                        err_msg=name)
    for name in ("objective", "inertia", "gap"):
        assert_allclose(getattr(got, name), getattr(ref, name), rtol=rtol, atol=rtol * 10,
                        err_msg=name)
    no_sums = engine.estep(centers, spec, with_sums=False)
    assert_allclose(no_sums.masses, ref.masses, rtol=rtol, atol=rtol)
    assert_allclose(engine.responsibilities(centers, spec), oracle.responsibilities(centers, spec),
                    rtol=rtol, atol=rtol)
    assert_allclose(engine.sq_distances(centers), oracle.sq_distances(centers), rtol=rtol,
                    atol=rtol)
    assert_allclose(engine.log_sum_exp(centers, 0.7), oracle.log_sum_exp(centers, 0.7),
                    rtol=rtol, atol=rtol)
    assert_allclose(engine.x_sq, oracle.x_sq, rtol=rtol)
    assert_allclose(engine.row(5), oracle.row(5))


def _device_engine(name):
    if name == "array":
        return ArrayEngine
    from softkmeans._engines._cupy import CupyEngine

    return CupyEngine


@pytest.mark.parametrize("name", ["array", pytest.param("cupy", marks=[gpu, pytest.mark.gpu])])
@pytest.mark.parametrize("spec", SPECS[:4], ids=lambda s: f"{s.kind}-{s.sigma}")
def test_float32_data_far_from_the_origin_keep_their_precision(name, spec):
    """Blobs of spread 0.1 around 100: ``||x||^2`` is 5e4, the distances about 0.05.

    Uncentred, float32 cross terms would err by about 3e-3 on them, and the
    responsibilities at sigma 0.05 by up to 0.6 (measured before the engine
    centred such data), and float32 sums of the rows themselves would move
    the centroids by 1e-5 to 3e-5 here (2e-4 in one block of 2000 rows).
    Every output now keeps float32 precision relative to the spread.
    """
    rng = np.random.default_rng(7)
    X = (100.0 + 0.1 * rng.normal(size=(2000, 5))).astype(np.float32)
    centers = X[:4].astype(np.float64) + 0.01
    w = rng.uniform(0.5, 2.0, X.shape[0])
    engine, oracle = _device_engine(name)(X, w, block_elements=1000), NumpyEngine(X, w)
    got, want = engine.estep(centers, spec), oracle.estep(centers, spec)
    assert_array_equal(got.labels, want.labels)
    assert_allclose(got.masses, want.masses, rtol=1e-5)
    assert_allclose(got.sums / got.masses[:, None], want.sums / want.masses[:, None],
                    rtol=0, atol=1e-6)
    for field in ("objective", "inertia", "gap", "margins", "dmin"):
        scale = float(np.max(np.abs(getattr(want, field))))
        assert_allclose(getattr(got, field), getattr(want, field), rtol=0, atol=2e-5 * scale,
                        err_msg=field)
    distances = oracle.sq_distances(centers)
    assert_allclose(_to_host(engine.sq_distances(centers)), distances, rtol=0,
                    atol=2e-5 * distances.mean())
    assert_allclose(_to_host(engine.responsibilities(centers, spec)),
                    oracle.responsibilities(centers, spec), rtol=0, atol=1e-5)


def _to_host(a):
    return a.get() if hasattr(a, "get") else a


@pytest.mark.parametrize("name", ["array", pytest.param("cupy", marks=[gpu, pytest.mark.gpu])])
@pytest.mark.parametrize("kind", ["softmax", "entmax"])
@pytest.mark.parametrize("sigma", [1e-150, 1e-30, 1e-3, 1e30, 1e150])
def test_float32_blocks_at_extreme_temperatures(name, kind, sigma):
    """Below ``2 sigma^2 = 2^-100`` and above ``2^100`` float32 blocks are solved in float64.

    In float32, ``1 / (2 sigma^2)`` overflows at sigma 1e-30 and 1e-150 (NaN
    responsibilities before) and the row gaps overflow at 1e150 (an infinite
    objective). The oracle computes in float64.
    """
    X, centers, w = _data(np.float32, False, n=200, k=5)
    spec = RelaxationSpec(kind, sigma, 1.5)
    engine, oracle = _device_engine(name)(X, w), NumpyEngine(X, w)
    with np.errstate(divide="raise", over="raise", invalid="raise"):
        got = engine.estep(centers, spec)
        resp = _to_host(engine.responsibilities(centers, spec))
        log_norms = _to_host(engine.log_sum_exp(centers, sigma))
    want = oracle.estep(centers, spec)
    assert_allclose(resp, oracle.responsibilities(centers, spec), rtol=0, atol=1e-5)
    assert_allclose(got.sums, want.sums, rtol=1e-5)
    for field in ("objective", "gap"):
        assert_allclose(getattr(got, field), getattr(want, field), rtol=1e-5,
                        atol=1e-5 * want.inertia, err_msg=field)
    assert log_norms.dtype == np.float64
    tau = spec.tau  # in units of squared distance: float32 distances err by 1e-7 of ||x||^2
    assert_allclose(log_norms * tau, oracle.log_sum_exp(centers, sigma) * tau, rtol=1e-5,
                    atol=1e-6 * float(np.mean(engine.x_sq)))


@pytest.mark.parametrize("name", ["array", pytest.param("cupy", marks=[gpu, pytest.mark.gpu])])
@pytest.mark.parametrize("scale", [1e-300, 1e-45, 1e39, 1e300])
def test_float32_products_take_the_weights_over_a_power_of_two(name, scale):
    """Weights of 1e39 overflowed float32 (NaN centroids), of 1e-45 underflowed."""
    X, centers, w = _data(np.float32, False, n=200, k=5)
    spec = RelaxationSpec("softmax", 0.6)
    with np.errstate(divide="raise", over="raise", invalid="raise"):
        got = _device_engine(name)(X, w * scale).estep(centers, spec)
    want = NumpyEngine(X, w * scale).estep(centers, spec)
    assert_allclose(got.masses, want.masses, rtol=1e-5)
    assert_allclose(got.sums, want.sums, rtol=1e-5, atol=1e-5 * np.abs(want.sums).max())
    assert_allclose(got.objective, want.objective, rtol=1e-5)


def test_array_engine_keeps_the_dtype():
    X, centers, _ = _data(np.float32, False)
    engine = ArrayEngine(X)
    assert engine.sq_distances(centers).dtype == np.float32
    stats = engine.estep(centers, SPECS[1])
    assert stats.labels.dtype == np.int32 and stats.margins.dtype == np.float64


@pytest.mark.parametrize("estimator", [
    SoftKMeans(4, sigma=0.5, random_state=0),
    EntmaxKMeans(4, sigma=0.5, random_state=0),
    EntmaxKMeans(4, sigma="auto", random_state=0, empty_cluster="reseed"),
], ids=["soft", "entmax", "entmax-auto-reseed"])
def test_estimators_on_the_device_code_path(estimator, monkeypatch):
    """Fit with the device engine's code (numpy namespace) = fit with the oracle."""
    rng = np.random.default_rng(3)
    X = np.vstack([rng.normal(c, 0.4, size=(60, 3)) for c in (0, 3, 6, 9)])
    ref = estimator.fit(X)
    ref_centers, ref_labels = ref.cluster_centers_.copy(), ref.labels_.copy()
    monkeypatch.setattr(base, "get_engine",
                        lambda name, X, w=None, n_threads=None, centers=None:
                        ArrayEngine(X, w, 500))
    got = estimator.fit(X)
    assert_array_equal(got.labels_, ref_labels)
    assert_allclose(got.cluster_centers_, ref_centers, rtol=1e-10)
    assert_allclose(got.predict_proba(X).sum(axis=1), 1.0)


# ------------------------------------------------------------- registry
def test_cupy_is_a_backend_choice():
    assert "cupy" in BACKENDS
    assert "cupy" in SoftKMeans._parameter_constraints["backend"][0].options


def test_auto_picks_cupy_for_cupy_arrays():
    fake = type("ndarray", (), {"__module__": "cupy._core.core"})()
    assert resolve_backend("auto", fake) == "cupy"
    assert resolve_backend("auto", np.zeros((2, 2))) in ("numba", "numpy")


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed")
def test_cupy_backend_without_cupy_says_how_to_install():
    X = np.zeros((4, 2))
    with pytest.raises(ImportError, match=r"pip install softkmeans\[gpu\]"):
        get_engine("cupy", X)
    with pytest.raises(ImportError, match=r"softkmeans\[gpu\]"):
        SoftKMeans(2, backend="cupy").fit(X)


def test_gpu_check_grid_cell_on_the_cpu_code_path():
    """The script's timing and agreement logic, with the GPU engine's code on numpy."""
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    row = gpu_check._cell(np.asarray, ArrayEngine, 3000, 10, iters=3)
    for name in ("lloyd", "soft", "entmax", "sklearn"):
        assert row[f"{name}_ms"] > 0
    for name in ("lloyd", "soft", "entmax"):  # float32 engine against the float64 oracle
        assert row[f"{name}_rel_err"] < 1e-4 and row[f"{name}_same_labels"] > 0.99
    assert row["lloyd_vs_sklearn"] < 1e-4


def test_gpu_check_exits_cleanly_without_a_gpu():
    if _has_gpu():
        pytest.skip("a GPU is present")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py")],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "no GPU" in out.stdout


# -------------------------------------------------------------------- GPU
@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s.kind}-{s.sigma}-{s.alpha}")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cupy_kernels_match_array_kernels(spec, dtype):
    """The fused kernels against the generic kernels over CuPy, on the same device data."""
    import cupy

    from softkmeans._engines._cupy import CupyKernels

    rng = np.random.default_rng(4)
    D = rng.uniform(0.0, 4.0, size=(70, 45)).astype(dtype)
    D[3, 7] = D[3, 2] = D[3].min() - 0.5
    Dd = cupy.asarray(D)
    ref, dev = ArrayKernels(array_namespace(Dd)), CupyKernels()
    rtol = _rtol(dtype)
    got = [a.get() for a in dev.nearest_two(Dd)]
    want = ref.nearest_two(Dd)
    assert_array_equal(got[0], want[0].get())
    assert_array_equal(got[1], want[1].get())
    assert_allclose(got[2], want[2].get(), rtol=rtol)
    cross = cupy.asarray(rng.normal(size=D.shape).astype(dtype))
    xs = cupy.asarray(rng.uniform(1, 2, 70).astype(dtype))
    cs = cupy.asarray(rng.uniform(1, 2, 45).astype(dtype))
    assert_allclose(dev.finish_distances(cross.copy(), xs, cs).get(),
                    ref.finish_distances(cross.copy(), xs, cs).get(), rtol=rtol, atol=rtol)
    lab, dm = want[0], want[1]
    if spec.kind == "softmax":
        others = ref.softmax_others(Dd, lab, dm, spec.tau)
        got_others = dev.softmax_others(Dd, lab, dm, spec.tau)
        assert_allclose(got_others.get(), others.get(), rtol=rtol)
        got_resp = dev.softmax_resp(Dd.copy(), dm, got_others, spec.tau)
        assert_allclose(got_resp.get(), ref.softmax_resp(Dd.copy(), dm, others, spec.tau).get(),
                        rtol=rtol, atol=1e-7)
    if spec.kind == "entmax":
        resp, gap = dev.entmax(Dd, dm, spec)
        want_resp, want_gap = ref.entmax(Dd, dm, spec)
        assert_allclose(resp.get(), want_resp.get(), rtol=rtol, atol=1e-7)
        assert_allclose(gap.get(), want_gap.get(), rtol=rtol, atol=1e-6)


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("spec", SPECS[:4], ids=lambda s: f"{s.kind}-{s.sigma}")
def test_cupy_engine_matches_oracle(dtype, sparse, spec):
    from softkmeans._engines._cupy import CupyEngine

    X, centers, w = _data(dtype, sparse)
    oracle, engine = NumpyEngine(X, w), CupyEngine(X, w, block_elements=1000)
    ref, got = oracle.estep(centers, spec), engine.estep(centers, spec)
    rtol = _rtol(dtype)
    assert_array_equal(got.labels, ref.labels)
    for name in ("sums", "masses", "margins"):
        assert_allclose(getattr(got, name), getattr(ref, name), rtol=rtol, atol=rtol)
    assert_allclose(got.objective, ref.objective, rtol=rtol)
    assert_allclose(engine.max_sq_distances(centers), oracle.max_sq_distances(centers),
                    rtol=rtol)


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("Estimator", [SoftKMeans, EntmaxKMeans])
def test_estimators_keep_cupy_inputs_on_the_gpu(Estimator):
    import cupy

    rng = np.random.default_rng(5)
    X = np.vstack([rng.normal(c, 0.4, size=(60, 3)) for c in (0, 3, 6)]).astype(np.float32)
    ref = Estimator(3, sigma=0.5, random_state=0).fit(X)
    model = Estimator(3, sigma=0.5, random_state=0).fit(cupy.asarray(X))
    assert isinstance(model.cluster_centers_, cupy.ndarray)
    assert isinstance(model.labels_, cupy.ndarray)
    assert isinstance(model.predict(cupy.asarray(X)), cupy.ndarray)
    assert isinstance(model.predict_proba(cupy.asarray(X)), cupy.ndarray)
    assert_array_equal(model.labels_.get(), ref.labels_)
    assert_allclose(model.cluster_centers_.get(), ref.cluster_centers_, rtol=1e-4, atol=1e-5)
    host = Estimator(3, sigma=0.5, random_state=0, backend="cupy").fit(X)
    assert isinstance(host.cluster_centers_, np.ndarray)
    assert isinstance(host.predict_proba(X), np.ndarray)
    assert np.isfinite(model.score(cupy.asarray(X)))


@pytest.mark.gpu
@gpu
def test_cupy_csr_with_duplicate_entries_equals_dense():
    import cupy
    import cupyx.scipy.sparse as cusparse
    from _helpers import noncanonical_csr

    rng = np.random.default_rng(6)
    X = np.vstack([rng.normal(c, 0.4, size=(60, 3)) for c in (0, 3, 6)])
    host = noncanonical_csr(X)
    X_dup = cusparse.csr_matrix((cupy.asarray(host.data), cupy.asarray(host.indices),
                                 cupy.asarray(host.indptr)), shape=host.shape)
    assert X_dup.nnz == 2 * np.count_nonzero(X)  # every entry stored twice
    ref = SoftKMeans(3, sigma=0.5, random_state=0).fit(X)
    model = SoftKMeans(3, sigma=0.5, random_state=0).fit(X_dup)
    assert_allclose(float(model.inertia_), ref.inertia_, rtol=1e-9)
