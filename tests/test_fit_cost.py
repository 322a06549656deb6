"""A fit costs its iterations: what needs more passes is cheap or computed on request."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp

from softkmeans import AnnealedKMeans, EntmaxKMeans, SoftKMeans
from softkmeans._core.temperature import lambda_max, lambda_max_floor, weighted_mean
from softkmeans._engines._numba.engine import NumbaEngine
from softkmeans.diagnostics import certify, critical_sigma
from softkmeans.exceptions import CriticalTemperatureWarning


@pytest.fixture
def blobs():
    rng = np.random.default_rng(0)
    centers = rng.uniform(-5, 5, size=(4, 6))
    return centers[rng.integers(0, 4, 2000)] + rng.normal(size=(2000, 6)), centers


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("Estimator", [SoftKMeans, EntmaxKMeans])
def test_a_fit_at_max_iter_1_makes_its_passes_only(blobs, monkeypatch, Estimator, dtype):
    """Two E-steps (start and update, at the update rounded as it is stored); neither the
    certificate's passes nor lambda_max."""
    X, centers = blobs
    count = []
    real = NumbaEngine._pass
    monkeypatch.setattr(NumbaEngine, "_pass", lambda self, *a, **k: count.append(1)
                        or real(self, *a, **k))
    monkeypatch.setattr(NumbaEngine, "lambda_max", lambda self: count.append("lambda"))
    Estimator(4, sigma=0.5, init=centers + 0.3, max_iter=1, backend="numba").fit(X.astype(dtype))
    assert count == [1, 1]


@pytest.mark.parametrize("Estimator", [SoftKMeans, EntmaxKMeans])
def test_float32_statistics_are_those_of_the_stored_centroids(blobs, Estimator):
    """The last update is rounded to float32 before its pass: labels_, inertia_,
    objective_ and margins_ are what the stored centroids give."""
    X, centers = blobs
    X32 = X.astype(np.float32)
    model = Estimator(4, sigma=0.5, init=centers + 0.3, max_iter=3, tol=0).fit(X32)
    assert model.cluster_centers_.dtype == np.float32
    np.testing.assert_array_equal(model.labels_, model.predict(X32))
    engine = NumbaEngine(X32)
    stats = engine.estep(model.cluster_centers_.astype(np.float64), model._final_spec)
    assert model.objective_ == stats.objective
    assert model.inertia_ == stats.inertia
    np.testing.assert_array_equal(model.margins_, stats.margins)


def test_critical_sigma_is_set_by_certify_or_by_the_fits_that_read_it(blobs):
    X, centers = blobs
    plain = SoftKMeans(4, sigma=0.5, init=centers).fit(X)
    with pytest.raises(AttributeError, match=r"certify=True.*critical_sigma\(X\)"):
        plain.critical_sigma_  # noqa: B018
    certified = SoftKMeans(4, sigma=0.5, init=centers, certify=True).fit(X)
    assert certified.critical_sigma_ == critical_sigma(X)
    with pytest.warns(CriticalTemperatureWarning):  # the warning's check reads it
        hot = SoftKMeans(4, sigma=2 * critical_sigma(X), init=centers).fit(X)
    assert hot.critical_sigma_ == critical_sigma(X)
    assert AnnealedKMeans(4, random_state=0).fit(X).critical_sigma_ == critical_sigma(X)
    with pytest.raises(AttributeError, match="critical_sigma_") as raised:
        SoftKMeans(4).critical_sigma_  # noqa: B018
    assert "certify" not in str(raised.value)  # not fitted: the plain message


@pytest.mark.parametrize("seed", range(5))
def test_the_floor_of_lambda_max_from_a_pass_lies_below_it(seed):
    """Any soft partition's between-cluster scatter is dominated by the covariance."""
    rng = np.random.default_rng(seed)
    d = int(rng.integers(1, 6))
    X = rng.normal(size=(300, d)) * rng.uniform(0.1, 3.0, d) + rng.uniform(-10, 10, d)
    w = rng.uniform(0.1, 2.0, 300)
    for k in (1, 2, 5, 12):
        R = rng.dirichlet(np.full(k, 0.3), size=300)
        R[rng.uniform(size=300) < 0.3] = np.eye(k)[0]
        sums, masses = (R * w[:, None]).T @ X, R.T @ w
        floor = lambda_max_floor(sums, masses)
        assert 0.0 <= floor <= lambda_max(X, w) * (1 + 1e-12)
        if k == 1:
            assert floor == 0.0
    labels = rng.integers(0, 2, 300)
    labels[:2] = [0, 1]
    R = np.eye(2)[labels]
    B = lambda_max_floor((R * w[:, None]).T @ X, R.T @ w)
    assert B > 0.0


def test_bounds_with_certify_are_what_certify_computes(blobs):
    X, centers = blobs
    model = EntmaxKMeans(4, sigma=0.5, init=centers, random_state=0, certify=True).fit(X)
    bounds = model.bounds_
    expected = certify(X, model.cluster_centers_, model.sigma_, model.alpha)
    expected = expected.for_relaxation("entmax")
    assert [row.name for row in bounds] == [row.name for row in expected]
    for got, want in zip(bounds, expected, strict=True):
        assert got.observed == pytest.approx(want.observed, rel=1e-9, abs=1e-12), got.name
    assert bounds.all_hold == expected.all_hold
    with pytest.raises(AttributeError, match=r"certify=True.*certify\(X, model"):
        EntmaxKMeans(4, sigma=0.5, init=centers).fit(X).bounds_  # noqa: B018
    refit = model.set_params(certify=False).fit(X)
    assert not hasattr(refit, "bounds_") and not hasattr(refit, "critical_sigma_")


def _arrays_reachable_from(root):
    """Every numpy array and scipy sparse matrix in ``root``'s object graph."""
    import gc

    seen, stack, found = set(), [root], []
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (type, str, bytes, int, float)):
            continue
        seen.add(id(obj))
        if isinstance(obj, np.ndarray) or sp.issparse(obj):
            found.append(obj)
        stack.extend(gc.get_referents(obj))
    return found


@pytest.mark.parametrize("Estimator", [SoftKMeans, EntmaxKMeans, AnnealedKMeans])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("certified", [False, True])
def test_a_fitted_model_holds_no_training_data(blobs, Estimator, sparse, certified):
    """Nothing of X's size is reachable from the model or in its pickle, per-sample results
    (``labels_``, ``margins_``) aside."""
    X, _ = blobs
    X = np.hstack([X, X[:, ::-1]])  # 4 features: X's size is 4 per-sample results
    X = sp.csr_matrix(X) if sparse else X
    model = Estimator(4, random_state=0, certify=certified).fit(X)
    per_sample = X.shape[0]
    for array in _arrays_reachable_from(model):
        size = array.nnz if sp.issparse(array) else array.size
        assert size <= per_sample, (type(array), array.shape)
    assert len(pickle.dumps(model)) < 3 * 8 * per_sample + 20_000


@pytest.mark.parametrize("weighted", [False, True])
def test_lambda_max_in_float32_is_within_its_stated_error(weighted):
    """Products in float32, summed in float64, of rows less a pivot: far from the origin too."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30_000, 20)) * np.linspace(0.5, 3, 20) + 1e3
    w = rng.uniform(0.5, 2.0, len(X)) if weighted else None
    X32 = X.astype(np.float32)
    exact = lambda_max(X32.astype(np.float64), w)
    assert lambda_max(X32, w) == pytest.approx(exact, rel=1e-5)
    assert exact == pytest.approx(9.0, rel=0.05)


def test_lambda_max_of_wide_sparse_data_is_that_of_the_dense_array():
    """Many features: products with the sparse matrix itself, no dense blocks."""
    import scipy.sparse as sp

    X = sp.random(600, 700, density=0.05, random_state=1, format="csr")
    w = np.random.default_rng(2).uniform(0.5, 2.0, 600)
    assert lambda_max(X, w) == pytest.approx(lambda_max(X.toarray(), w), rel=1e-12)


def test_the_weighted_mean_of_sparse_rows_makes_no_dense_copy_and_keeps_equal_rows():
    """Only the pivot's columns are made dense; equal rows have exactly their value as mean."""
    import scipy.sparse as sp

    X = sp.random(600, 700, density=0.05, random_state=1, format="csr")
    w = np.random.default_rng(2).uniform(0.5, 2.0, 600)
    np.testing.assert_allclose(weighted_mean(X, w), weighted_mean(X.toarray(), w),
                               rtol=1e-12, atol=1e-15)
    row = sp.csr_matrix(np.where(np.arange(700) % 7 == 0, 0.1, 0.0))
    equal = sp.vstack([row] * 5, format="csr")
    np.testing.assert_array_equal(weighted_mean(equal, w[:5]), row.toarray()[0])


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_the_warning_near_the_critical_temperature_survives_float32_far_from_the_origin(
        backend):
    """The free lower bound of lambda_max allows for the float32 sums' rounding, which
    grows with the data's distance from the origin."""
    from softkmeans.exceptions import CriticalTemperatureWarning

    rng = np.random.default_rng(3)
    X = (1e4 + 0.01 * np.where(rng.uniform(size=20000) < 0.5, -1.0, 1.0))[:, None]
    X = X.astype(np.float32)
    sigma = 0.95 * critical_sigma(X)
    with pytest.warns(CriticalTemperatureWarning, match="within 10%"):
        SoftKMeans(2, sigma=sigma, random_state=3, backend=backend).fit(X)


def test_a_failed_refit_keeps_the_critical_temperature_of_the_fitted_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    calls = []

    def init(data, k, random_state):
        calls.append(1)
        if len(calls) > 3:
            raise RuntimeError("no start")
        return data[:k]

    model = SoftKMeans(2, sigma=0.5, init=init, n_init=2, certify=True).fit(X)
    with pytest.raises(RuntimeError, match="no start"):
        model.fit(10 * X)
    assert model.critical_sigma_ == critical_sigma(X)


def test_entmax_entries_below_the_rounding_of_one_keep_their_mass():
    """A row whose nearest centroid holds 1 to rounding but not exactly is spread: the
    reference gives the far centroid the tiny mass numba gives it."""
    X = np.random.default_rng(0).normal(size=(1000, 1)) * 1e-12
    start = np.array([[0.0], [np.sqrt(4 * (1 - 3e-9))]])
    centers = [EntmaxKMeans(2, sigma=1.0, init=start, max_iter=1, backend=backend)
               .fit(X).cluster_centers_ for backend in ("numpy", "numba")]
    np.testing.assert_allclose(centers[0], centers[1], rtol=1e-6)
    assert abs(centers[0][1, 0]) < 1e-12  # moved to its rows' weighted mean, not reseeded


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_seeding_draws_the_rows_of_the_public_kmeans_plusplus(dtype, sparse):
    from sklearn.cluster import kmeans_plusplus

    from softkmeans._engines import _in_memory

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 5)).astype(dtype)
    X[rng.uniform(size=X.shape) < 0.5] = 0
    X = sp.csr_matrix(X) if sparse else X
    weights = rng.uniform(0.1, 1.0, 400)
    norms = np.asarray(X.multiply(X).sum(axis=1)).ravel() if sparse else (X**2).sum(axis=1)
    norms = norms.astype(dtype)
    expected = kmeans_plusplus(X, 7, sample_weight=weights, x_squared_norms=norms,
                               random_state=np.random.RandomState(3))[1]
    assert _in_memory._unvalidated is not None  # this scikit-learn's unvalidated seeding
    rows = _in_memory.kmeans_plusplus_rows(X, 7, weights, norms, np.random.RandomState(3))
    np.testing.assert_array_equal(rows, expected)
