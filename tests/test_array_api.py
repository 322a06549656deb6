"""Array API support: the generic kernels, and the estimators under ``array_api_dispatch``.

The engine suite over the namespaces is in ``tests/test_engines.py``. The
estimator tests here need ``SCIPY_ARRAY_API=1`` in the environment before
scipy is imported (scikit-learn refuses dispatch otherwise); without it they
are skipped in this process and :func:`test_dispatch_tests_pass_in_a_subprocess`
runs them, with scikit-learn's own array API checks of ``tests/test_common.py``,
in a child process that sets it.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sklearn
from _helpers import array_namespaces, make_mixture, to_namespace
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.externals.array_api_compat import array_namespace, device
from sklearn.externals.array_api_compat import numpy as np_compat

from softkmeans import AnnealedKMeans, EntmaxKMeans, SoftKMeans
from softkmeans._core.responsibilities import RelaxationSpec
from softkmeans._engines import get_engine, resolve_backend
from softkmeans._engines._array import ArrayEngine
from softkmeans._engines._array_kernels import ArrayKernels, NumpyKernels
from softkmeans._engines._namespace import to_numpy

ROOT = Path(__file__).resolve().parents[1]
NAMESPACES = array_namespaces()
DISPATCH_REASON = ("array_api_dispatch needs SCIPY_ARRAY_API=1 set before scipy is imported; "
                   "test_dispatch_tests_pass_in_a_subprocess runs these tests with it")
dispatch = pytest.mark.skipif(os.environ.get("SCIPY_ARRAY_API") != "1", reason=DISPATCH_REASON)
#: Agreement of a fit in a namespace with the numpy fit from the same start (float32 passes
#: round each distance to 2^-24 of the squared norms).
RTOL = {np.float64: 1e-9, np.float32: 2e-4}
SPECS = [RelaxationSpec("softmax", 0.6), RelaxationSpec("entmax", 0.4, 1.5),
         RelaxationSpec("entmax", 1.5, 1.5), RelaxationSpec("entmax", 0.5, 2.0),
         RelaxationSpec("entmax", 0.5, 1.3)]


def _same_place(a, X):
    """``a`` is an array of X's namespace on X's device."""
    assert array_namespace(a) is array_namespace(X)
    assert device(a) == device(X)


# ------------------------------------------------------------------ kernels
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s.kind}-{s.sigma}-{s.alpha}")
def test_numpy_kernels_equal_the_generic_kernels(spec):
    """numpy's in-place writes and scatters give the standard-only kernels' values, on numpy
    and on array-api-strict, with rows of few and of many entmax candidates."""
    strict = pytest.importorskip("array_api_strict")
    rng = np.random.default_rng(1)
    D = rng.uniform(0.0, 4.0, size=(60, 45))
    D[3, 7] = D[3, 2] = D[3].min() - 0.5  # a tie
    D[5] = D[5].min() + rng.uniform(0.0, 1e-3, 45)  # every centroid a candidate
    fast, generic = NumpyKernels(candidate_cap=8), ArrayKernels(np_compat, candidate_cap=8)
    strict_kernels = ArrayKernels(array_namespace(strict.asarray(D)), candidate_cap=8)
    Ds = strict.asarray(D)
    labels, dmin, margins = fast.nearest_two(D)
    for kernels, block in ((generic, D), (strict_kernels, Ds)):
        for got, want in zip(kernels.nearest_two(block), (labels, dmin, margins), strict=True):
            assert_array_equal(to_numpy(got), want)
    if spec.kind == "softmax":
        tau = spec.tau
        others = fast.softmax_others(D, labels, dmin, tau)
        resp = fast.softmax_resp(D.copy(), dmin, others, tau)
        assert_array_equal(generic.softmax_others(D, labels, dmin, tau), others)
        assert_array_equal(generic.softmax_resp(D.copy(), dmin, others, tau), resp)
        lab_s, dmin_s = strict.asarray(labels), strict.asarray(dmin)
        assert_array_equal(to_numpy(strict_kernels.softmax_others(Ds, lab_s, dmin_s, tau)),
                           others)
    else:
        resp, gap = fast.entmax(D, dmin, spec)
        for kernels, block in ((generic, D), (strict_kernels, Ds)):
            got_resp, got_gap = kernels.entmax(block, kernels.nearest_two(block)[1], spec)
            assert_allclose(to_numpy(got_resp), resp, rtol=1e-14, atol=1e-15)
            assert_allclose(to_numpy(got_gap), gap, rtol=1e-13, atol=1e-15)
        assert np.count_nonzero(resp == 0) > 0  # exact zeros


@pytest.mark.parametrize("namespace", NAMESPACES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_array_engine_computes_and_answers_in_the_namespace_of_X(namespace, dtype):
    X, _, means = make_mixture(n_per=50, k=4, d=3)
    Xd = to_namespace(X.astype(dtype), namespace)
    engine = ArrayEngine(Xd, block_elements=64)  # several blocks
    spec = RelaxationSpec("softmax", 0.5)
    for out in (engine.responsibilities(means, spec), engine.sq_distances(means),
                engine.log_sum_exp(means, 0.5)):
        _same_place(out, Xd)
    assert to_numpy(engine.responsibilities(means, spec)).dtype == dtype
    assert to_numpy(engine.log_sum_exp(means, 0.5)).dtype == np.float64
    stats = engine.estep(means, spec)  # the statistics are the optimizers': host numpy
    assert isinstance(stats.sums, np.ndarray) and stats.labels.dtype == np.int32
    assert engine.unit_roundoff == np.finfo(dtype).eps / 2


def test_auto_backend_is_the_array_engine_for_device_arrays():
    torch = pytest.importorskip("torch")
    X = torch.zeros((4, 2))
    assert resolve_backend("auto", X) == "array"
    assert type(get_engine("auto", X + 1.0)) is ArrayEngine
    assert resolve_backend("auto", np.zeros((4, 2))) in ("numba", "numpy")
    assert type(get_engine("numpy", X + 1.0).X) is np.ndarray  # host engines take a copy


# --------------------------------------------------------------- estimators
ESTIMATORS = [
    SoftKMeans(4, sigma=0.4, tol=1e-10, max_iter=500, random_state=0),
    SoftKMeans(4, sigma="auto", algorithm="gradient", tol=1e-10, max_iter=500, random_state=0),
    EntmaxKMeans(4, sigma=0.6, tol=1e-10, max_iter=500, random_state=0),
    AnnealedKMeans(4, strategy="paper", n_temperatures=8, tol=1e-10, random_state=0),
]


def _fit_both(estimator, Xd, X, **fit_params):
    """The estimator fitted on Xd under dispatch and on X (numpy) without, from one start."""
    with sklearn.config_context(array_api_dispatch=True):
        got = sklearn.clone(estimator).fit(Xd, **fit_params)
    return got, sklearn.clone(estimator).fit(X)


@dispatch
@pytest.mark.parametrize("namespace", NAMESPACES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: repr(e)[:40])
def test_estimator_fits_and_answers_in_the_namespace_of_X(estimator, namespace, dtype):
    X, labels, means = make_mixture(n_per=80, k=4, d=3, spread=0.5)
    X = X.astype(dtype)
    Xd = to_namespace(X, namespace)
    rng = np.random.default_rng(0)
    estimator = sklearn.clone(estimator).set_params(init=means + rng.normal(0, 0.3, means.shape))
    got, want = _fit_both(estimator, Xd, X)
    rtol = RTOL[dtype]
    for name in ("cluster_centers_", "labels_", "margins_"):
        _same_place(getattr(got, name), Xd)
        assert to_numpy(getattr(got, name)).dtype == getattr(want, name).dtype
    scale = float(np.abs(want.cluster_centers_).max())
    assert_allclose(to_numpy(got.cluster_centers_), want.cluster_centers_, rtol=rtol,
                    atol=rtol * scale)
    assert_array_equal(to_numpy(got.labels_), want.labels_)
    assert_allclose(got.inertia_, want.inertia_, rtol=rtol)
    assert_allclose(got.objective_, want.objective_, rtol=rtol)
    with sklearn.config_context(array_api_dispatch=True):
        outputs = {name: getattr(got, name)(Xd)
                   for name in ("predict", "predict_proba", "transform", "score_samples")}
        score = got.score(Xd)
    for name, value in outputs.items():
        _same_place(value, Xd)
        expected = getattr(want, name)(X)
        assert to_numpy(value).dtype == expected.dtype, name
        assert_allclose(to_numpy(value), expected, rtol=rtol, atol=rtol * np.abs(expected).max(),
                        err_msg=name)
    assert isinstance(score, float)
    assert_allclose(score, want.score(X), rtol=rtol)


@dispatch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_weights_of_another_namespace_follow_X(dtype):
    """X of array-api-strict, sample_weight of PyTorch: the weights are read on the host."""
    torch = pytest.importorskip("torch")
    strict = pytest.importorskip("array_api_strict")
    X, _, means = make_mixture(n_per=60, k=3, d=2)
    X = X.astype(dtype)
    w = np.random.default_rng(2).uniform(0.5, 2.0, X.shape[0])
    estimator = EntmaxKMeans(3, sigma=0.5, init=means + 0.1, tol=1e-10)
    with sklearn.config_context(array_api_dispatch=True):
        got = sklearn.clone(estimator).fit(strict.asarray(X), sample_weight=torch.asarray(w))
    want = sklearn.clone(estimator).fit(X, sample_weight=w)
    assert_allclose(to_numpy(got.cluster_centers_), want.cluster_centers_, rtol=RTOL[dtype],
                    atol=RTOL[dtype])


@dispatch
def test_host_backends_on_device_arrays_answer_in_their_namespace():
    torch = pytest.importorskip("torch")
    X, _, means = make_mixture(n_per=60, k=3, d=2)
    estimator = SoftKMeans(3, sigma=0.5, init=means + 0.1, backend="numpy", tol=1e-10)
    got, want = _fit_both(estimator, torch.asarray(X), X)
    assert isinstance(got.cluster_centers_, torch.Tensor)
    assert_allclose(got.cluster_centers_.numpy(), want.cluster_centers_, rtol=1e-12)
    with sklearn.config_context(array_api_dispatch=True):
        proba = got.predict_proba(torch.asarray(X))
    assert isinstance(proba, torch.Tensor)
    assert_allclose(proba.numpy(), want.predict_proba(X), rtol=1e-12, atol=1e-15)


@dispatch
def test_inference_refuses_an_input_from_another_namespace():
    torch = pytest.importorskip("torch")
    X, _, _ = make_mixture()
    with sklearn.config_context(array_api_dispatch=True):
        model = SoftKMeans(3, random_state=0).fit(torch.asarray(X))
        with pytest.raises(ValueError, match=r"SoftKMeans\.transform\(\) must use the same"):
            model.transform(X)
        numpy_model = SoftKMeans(3, random_state=0).fit(X)
        with pytest.raises(ValueError, match="fitted on numpy arrays"):
            numpy_model.predict(torch.asarray(X))


def test_without_dispatch_device_arrays_become_numpy():
    torch = pytest.importorskip("torch")
    X, _, _ = make_mixture()
    model = SoftKMeans(3, random_state=0).fit(torch.asarray(X))
    want = SoftKMeans(3, random_state=0).fit(X)
    assert isinstance(model.cluster_centers_, np.ndarray)
    assert isinstance(model.predict_proba(torch.asarray(X)), np.ndarray)
    assert_array_equal(model.cluster_centers_, want.cluster_centers_)


def test_dispatch_tests_pass_in_a_subprocess():
    """This module's dispatch tests and scikit-learn's array API checks, with SCIPY_ARRAY_API=1.

    ``tests/test_common.py`` runs ``check_array_api_input`` (and the mixed-input
    and same-namespace checks) on every estimator, whose tags declare
    ``array_api_support``; the namespaces that are not installed, and the
    devices that are absent, are skipped by scikit-learn.
    """
    if os.environ.get("SCIPY_ARRAY_API") == "1":
        pytest.skip("SCIPY_ARRAY_API=1 is set: the dispatch tests run in this process")
    pytest.importorskip("array_api_strict")
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not gpu",
         "tests/test_array_api.py", "tests/test_common.py", "-k", "dispatch or namespace or "
         "array_api or device_arrays or weights_of"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and " failed" not in out.stdout
