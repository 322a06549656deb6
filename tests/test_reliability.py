"""Malformed, hostile and degenerate inputs: errors that name the problem, or correct fits."""

import functools
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from _helpers import make_mixture

from softkmeans import AnnealedKMeans, EntmaxKMeans, SoftKMeans

ROOT = Path(__file__).resolve().parents[1]
ESTIMATORS = [SoftKMeans, EntmaxKMeans, AnnealedKMeans]
#: With the paper's annealing, which starts from ``init`` too.
INIT_ESTIMATORS = [*ESTIMATORS, functools.partial(AnnealedKMeans, strategy="paper")]

_MALFORMED_CSR = textwrap.dedent("""
    import json
    import numpy as np
    import scipy.sparse as sp
    from softkmeans import AnnealedKMeans, EntmaxKMeans, SoftKMeans, diagnostics

    good = sp.random(40, 5, density=0.5, format="csr", random_state=0, dtype=np.float64)
    centers = good[:3].toarray()

    def malformed(kind):
        X = good.copy()
        if kind == "column too large":
            X.indices[3] = 10**6
        elif kind == "column = n_features":
            X.indices[3] = X.shape[1]
        elif kind == "negative column":
            X.indices[3] = -5
        elif kind == "decreasing indptr":
            X.indptr[10] = X.indptr[12] + 3
        elif kind == "indptr[0] != 0":
            X.indptr[0] = 1
        elif kind == "indptr[-1] != nnz":
            X.indptr[-1] -= 1
        elif kind == "csc row too large":
            X = X.tocsc()
            X.indices[2] = 10**6
        elif kind == "coo row too large":
            X = X.tocoo()
            X.row[2] = 10**6
        return X

    def calls(X):
        for Estimator in (SoftKMeans, EntmaxKMeans, AnnealedKMeans):
            name = Estimator.__name__
            params = {"n_temperatures": 3} if name == "AnnealedKMeans" else {"sigma": 0.3}
            model = Estimator(3, random_state=0, **params)
            fitted = Estimator(3, random_state=0, **params).fit(good)
            yield f"{name}.fit", lambda: model.fit(X)
            yield f"{name}.fit_predict", lambda: model.fit_predict(X)
            yield f"{name}.fit_transform", lambda: model.fit_transform(X)
            for method in ("predict", "predict_proba", "transform", "score", "score_samples"):
                yield f"{name}.{method}", lambda m=method: getattr(fitted, m)(X)
        yield "margins", lambda: diagnostics.margins(X, centers)
        yield "balance", lambda: diagnostics.balance(X, centers)
        yield "radii", lambda: diagnostics.radii(X, centers)
        yield "responsibilities", lambda: diagnostics.responsibilities(X, centers, 0.5)
        yield "identification_sigma", lambda: diagnostics.identification_sigma(X, centers)
        yield "unidentified_count", lambda: diagnostics.unidentified_count(X, centers, 0.5)
        yield "critical_sigma", lambda: diagnostics.critical_sigma(X)
        yield "objective_gaps", lambda: diagnostics.objective_gaps(X, centers, 0.5)
        yield "centroid_map_bound", lambda: diagnostics.centroid_map_bound(X, centers, 0.5)
        yield "fixed_point_constants", lambda: diagnostics.fixed_point_constants(X, centers, 0.5)
        yield "certify", lambda: diagnostics.certify(X, centers, 0.5)

    for kind in KINDS:
        for name, call in calls(malformed(kind)):
            try:
                call()
                outcome = "no error"
            except ValueError as exc:
                outcome = "ValueError: " + str(exc)
            except Exception as exc:
                outcome = f"{type(exc).__name__}: {exc}"
            print(json.dumps([kind, name, outcome]), flush=True)
""")

MALFORMATIONS = {
    "column too large": "column index 1000000 out of range",
    "column = n_features": "column index 5 out of range",
    "negative column": "column index -5 out of range",
    "decreasing indptr": "indptr decreases",
    "indptr[0] != 0": "indptr starts at 1",
    "indptr[-1] != nnz": "indptr ends at",
    "csc row too large": "row index 1000000 out of range",
    "coo row too large": "row index 1000000 out of range",
}


def test_malformed_sparse_matrices_are_refused_by_every_entry_point():
    """Out-of-range indices and inconsistent ``indptr`` are a ValueError at fit, every
    inference method and every diagnostic, before a kernel or scipy reads out of bounds
    (in a child process: the unchecked kernels crash the interpreter)."""
    script = f"KINDS = {list(MALFORMATIONS)!r}\n" + _MALFORMED_CSR
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=900)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("[")]
    assert done.returncode == 0, (done.returncode, rows[-1:], done.stderr[-2000:])
    assert len(rows) == len(MALFORMATIONS) * 35
    wrong = [row for row in rows if not (row[2].startswith("ValueError")
                                         and "malformed" in row[2]
                                         and MALFORMATIONS[row[0]] in row[2])]
    assert not wrong, wrong[:10]


#: Other values of every model parameter: inference must not read any of them.
_OTHER_PARAMS = {
    SoftKMeans: {"sigma": 3.0, "algorithm": "gradient"},
    EntmaxKMeans: {"sigma": 3.0, "alpha": 2.0, "empty_cluster": "reseed"},
    AnnealedKMeans: {"method": "entmax", "alpha": 2.0, "schedule": [2.0, 1.0],
                     "n_temperatures": 7, "perturbation": 0.5},
}


def _inference(model, X):
    return {
        "predict": model.predict(X),
        "predict_proba": model.predict_proba(X),
        "transform": model.transform(X),
        "score_samples": model.score_samples(X),
        "score": model.score(X),
        "get_feature_names_out": model.get_feature_names_out(),
    }


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_inference_reads_only_fitted_state(Estimator):
    """After ``set_params`` of every model parameter, every inference method gives the same
    bits: ``score`` and ``score_samples`` used to read the constructor's ``n_clusters``."""
    X = make_mixture(n_per=30)[0]
    params = {"sigma": 0.5} if Estimator is not AnnealedKMeans else {}
    model = Estimator(3, random_state=0, **params).fit(X)
    before = _inference(model, X)
    model.set_params(n_clusters=5, init="random", n_init=2, max_iter=3, tol=0.5,
                     random_state=7, **_OTHER_PARAMS[Estimator])
    after = _inference(model, X)
    for name, value in before.items():
        np.testing.assert_array_equal(after[name], value, err_msg=name)


@pytest.mark.parametrize("name", ["margins", "balance", "radii", "responsibilities",
                                  "identification_sigma", "unidentified_count", "objective_gaps",
                                  "centroid_map_bound", "fixed_point_constants", "certify"])
def test_sparse_centers_are_refused_by_every_diagnostic_alike(name):
    """``fixed_point_constants`` said "setting an array element with a sequence."."""
    from softkmeans import diagnostics

    X = make_mixture(n_per=10)[0]
    sigma = () if name in ("margins", "balance", "radii", "identification_sigma") else (0.5,)
    with pytest.raises(TypeError, match="Sparse data was passed for centers, but dense data"):
        getattr(diagnostics, name)(X, sp.csr_matrix(X[:3]), *sigma)


def test_the_command_line_ends_quietly_when_its_reader_goes_away():
    """``python -m softkmeans demo | head -1`` ended with a BrokenPipeError traceback and
    status 1; it now ends as a tool that SIGPIPE ended (status 141) without a message."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-m", "softkmeans", "demo"], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    child.stdout.close()  # the reader is gone before the first line
    stderr = child.stderr.read()
    assert child.wait(timeout=600) == (141 if hasattr(signal, "SIGPIPE") else 1)
    assert "Error" not in stderr and "Traceback" not in stderr, stderr


def _assert_every_centroid_on_the_data(model, X):
    """Each centroid is the mean of its observations, or an observation if it has none."""
    for j, center in enumerate(model.cluster_centers_):
        members = X[model.labels_ == j]
        if len(members):
            np.testing.assert_allclose(center, members.mean(axis=0), rtol=1e-12, atol=1e-12)
        else:
            assert (X == center).all(axis=1).any(), (j, center)


@pytest.mark.parametrize("X, k", [
    (np.ones((20, 2)), 3),
    (np.repeat([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]], 5, axis=0), 5),
    (np.random.RandomState(0).normal(size=(30, 2)), 30),
], ids=["equal rows", "3 points k=5", "k=n"])
@pytest.mark.parametrize("method", ["softmax", "entmax"])
def test_annealing_polish_leaves_every_centroid_on_the_data(X, k, method):
    """The Lloyd polish kept centroids without mass where the perturbations left them:
    9e-3 from the only point, 0.016 from any of 3 points, and at k = n inertia 0.14 with 29
    non-empty clusters where KMeans gets 0."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fewer distinct clusters than asked on duplicates
        model = AnnealedKMeans(k, method=method, random_state=0).fit(X)
    _assert_every_centroid_on_the_data(model, X)
    if k == len(X):
        assert np.unique(model.labels_).size == k
        assert model.inertia_ < 1e-12  # rounding of the expanded squared distances


@pytest.mark.parametrize("make", [lambda k: AnnealedKMeans(k),
                                  lambda k: EntmaxKMeans(k, sigma=0.1, random_state=0)],
                         ids=["annealed", "entmax"])
def test_fewer_distinct_rows_than_clusters_converge(make):
    """An empty centroid was moved onto a duplicate of a row already taken at every iteration
    (it stayed empty): 309 iterations and a ConvergenceWarning at J = 0. It now moves onto
    such a row once, and the fit converges with only scikit-learn's warning about distinct
    clusters."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    X = np.random.RandomState(0).randint(1, 6, (1000, 2)).astype(float)  # 25 distinct rows
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = make(30).fit(X)
    assert model.converged_ and model.inertia_ < 1e-9
    messages = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert messages and all("distinct clusters" in m for m in messages), messages


def _three_blobs():
    from sklearn.datasets import make_blobs

    return make_blobs(120, centers=3, random_state=0)[0]


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("Estimator, params", [
    (SoftKMeans, {}), (SoftKMeans, {"sigma": 0.05}), (SoftKMeans, {"sigma": 1.0}),
    (SoftKMeans, {"algorithm": "gradient", "sigma": 0.3}), (EntmaxKMeans, {}),
    (EntmaxKMeans, {"sigma": 1.0}), (EntmaxKMeans, {"empty_cluster": "reseed"}),
    (AnnealedKMeans, {"strategy": "paper", "n_temperatures": 8}),
])
def test_coinciding_starting_centroids_are_separated(Estimator, params, sparse):
    """``init=np.repeat(X[:1], 3, 0)`` on three blobs ended at inertia 654 (KMeans: 195) with
    a centroid that never moved: equal centroids get equal responsibilities at every
    temperature. The copies now start on far observations, as KMeans relocates them."""
    from sklearn.cluster import KMeans

    X = _three_blobs()
    init = np.repeat(X[:1], 3, axis=0)
    kmeans = KMeans(3, init=init, n_init=1).fit(X).inertia_
    model = Estimator(3, init=init, **params).fit(sp.csr_matrix(X) if sparse else X)
    assert np.bincount(model.labels_, minlength=3).min() > 30
    assert model.inertia_ < 1.01 * kmeans
    assert np.array_equal(init, np.repeat(X[:1], 3, axis=0))  # the caller's array is kept


@pytest.mark.parametrize("init", ["random", "k-means++"])
@pytest.mark.parametrize("Estimator", INIT_ESTIMATORS)
def test_draws_on_duplicate_rows_start_from_distinct_positions(Estimator, init):
    """With 4 distinct points x 100 copies, ``init="random"`` found the 4 clusters for 4 of 10
    seeds (KMeans: 10 of 10): drawn rows that coincide now start apart."""
    X = np.repeat(np.random.RandomState(0).normal(size=(4, 2)) * 10, 100, axis=0)
    params = {"n_temperatures": 5} if Estimator is AnnealedKMeans else {}
    for seed in range(10):
        model = Estimator(4, init=init, n_init=1, random_state=seed, **params).fit(X)
        groups = {(g, label) for g, label in zip(np.arange(400) // 100, model.labels_, strict=True)}
        assert len(groups) == 4 and np.unique(model.labels_).size == 4, seed


def test_zero_weight_rows_do_not_receive_separated_centroids():
    X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [50.0, 50.0]])
    weights = np.array([1.0, 1.0, 1.0, 0.0])
    model = EntmaxKMeans(2, sigma=0.1, init=np.zeros((2, 2))).fit(X, sample_weight=weights)
    assert np.abs(model.cluster_centers_).max() <= 1.0


@pytest.mark.parametrize("dtype, far", [(np.float64, 1e200), (np.float32, 1e200),
                                        (np.float32, 1e20)])
@pytest.mark.parametrize("rows", ["one row", "every row"])
@pytest.mark.parametrize("Estimator", INIT_ESTIMATORS)
def test_an_init_whose_squared_distances_overflow_is_refused(Estimator, rows, dtype, far):
    """One row of ``init`` moved by 1e200: the fit succeeded (inertia 743) and ``predict``
    then refused the model ("centers are too large in magnitude"); every row at 1e200 made
    AnnealedKMeans raise "sigma must lie in [1e-150, 1e+150] ...; got nan"."""
    X = _three_blobs().astype(dtype)
    init = X[:3].astype(np.float64)
    init[: 1 if rows == "one row" else 3, 0] += far
    with pytest.raises(ValueError, match=r"^init has a centroid of squared norm .* "
                                         f"{np.dtype(dtype).name} do not overflow"):
        Estimator(3, init=init).fit(X)

    def far_start(X, n_clusters, random_state):
        return init

    if getattr(Estimator(3), "strategy", "paper") != "paper":
        return  # the mass-constrained annealing draws no start: it calls no init
    with pytest.raises(ValueError, match="^The init callable's result has a centroid"):
        Estimator(3, init=far_start, n_init=1).fit(X)


@pytest.mark.filterwarnings("ignore:Number of distinct clusters")  # the far one stays empty
@pytest.mark.parametrize("Estimator", INIT_ESTIMATORS)
def test_an_init_at_the_largest_magnitude_predict_accepts_is_fitted(Estimator):
    X = _three_blobs()
    init = X[:3].copy()
    init[0, 0] = 1e150  # squared norm 1e300: within float64's range for distances
    model = Estimator(3, init=init).fit(X)
    assert model.predict(X).shape == (len(X),)


@pytest.mark.filterwarnings("ignore:Number of distinct clusters")  # max_iter=1: not the point
@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("method", ["transform", "predict_proba"])
@pytest.mark.parametrize("Estimator", [SoftKMeans, EntmaxKMeans])
def test_transform_and_predict_proba_allocate_their_output_only(Estimator, method, dtype,
                                                                sparse, backend, monkeypatch):
    """``transform`` allocated three n x k float64 arrays beyond its float32 output (+977 MB
    for 244 MB at 250,000 x 256), ``predict_proba`` two; each block is now written into the
    output as it is computed."""
    import tracemalloc

    from softkmeans._engines._numba import engine as numba_engine

    monkeypatch.setattr(numba_engine, "OUTPUT_BLOCK_ELEMENTS", 1 << 15, raising=False)
    rng = np.random.RandomState(0)
    X = rng.normal(size=(100_000, 4)).astype(dtype)
    X = sp.csr_matrix(np.where(X > 0, X, 0)) if sparse else X
    start = X[:64].toarray() if sparse else X[:64]
    model = Estimator(64, sigma=0.5, init=start, max_iter=1, backend=backend).fit(X[:2000])
    getattr(model, method)(X[:10])  # kernels compiled outside the measurement
    tracemalloc.start()
    try:
        out = getattr(model, method)(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.dtype == dtype and out.shape == (100_000, 64)
    # the output, O(n) per-row values (squared norms, labels, margins, nearest distances) and
    # a few blocks of rows (8 MB); before, two or three more arrays of the output's size
    assert peak < out.nbytes + 64 * X.shape[0] + (8 << 20), (peak, out.nbytes)
    dense = np.asarray(X[:50].toarray() if sparse else X[:50], dtype=np.float64)
    centers = model.cluster_centers_.astype(np.float64)
    distances = np.sqrt(((dense[:, None] - centers[None]) ** 2).sum(axis=-1))
    if method == "transform":
        np.testing.assert_allclose(out[:50], distances, rtol=1e-5 if dtype == np.float32 else 1e-9)
    else:
        np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("Estimator", INIT_ESTIMATORS)
def test_a_fit_that_fails_leaves_the_previous_fit(Estimator):
    X, _, _ = make_mixture(n_per=10, k=3, seed=4)
    model = Estimator(3, random_state=0)
    with pytest.raises(ValueError, match="n_samples=2"):
        model.fit(X[:2])
    assert vars(model) == vars(Estimator(3, random_state=0))
    centers = model.fit(X).cluster_centers_
    with pytest.raises(ValueError, match="n_samples=2"):
        model.fit(X[:2])
    assert model.cluster_centers_ is centers and model.n_features_in_ == X.shape[1]
