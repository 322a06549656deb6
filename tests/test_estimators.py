"""Behaviour of the three estimators: attributes, inputs, descent, recovery of Lloyd."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from _helpers import make_mixture, noncanonical_csr
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import adjusted_rand_score

from softkmeans import AnnealedKMeans, EntmaxKMeans, SoftKMeans
from softkmeans._core.optimize import alternating
from softkmeans._core.responsibilities import HARD, SIGMA_MAX, SIGMA_MIN
from softkmeans._core.temperature import auto_sigma, exact_zero_distances
from softkmeans._engines import get_engine
from softkmeans.exceptions import CriticalTemperatureWarning

ALL = [
    lambda **kw: SoftKMeans(3, **kw),
    lambda **kw: SoftKMeans(3, algorithm="gradient", **kw),
    lambda **kw: EntmaxKMeans(3, **kw),
    lambda **kw: EntmaxKMeans(3, alpha=2.0, **kw),
    lambda **kw: AnnealedKMeans(3, **kw),
    lambda **kw: AnnealedKMeans(3, strategy="paper", method="entmax", n_temperatures=10,
                                **kw),
]
IDS = ["soft", "soft-gradient", "entmax", "sparsemax", "annealed", "annealed-entmax"]


@pytest.mark.parametrize("make", ALL, ids=IDS)
def test_fitted_attributes_and_methods(make, blobs):
    X, y, _ = blobs
    model = make(random_state=0).fit(X)
    k, n = 3, len(X)
    assert model.cluster_centers_.shape == (k, 2)
    assert model.labels_.shape == (n,)
    assert adjusted_rand_score(y, model.labels_) == 1.0
    d2 = ((X[:, None, :] - model.cluster_centers_[None]) ** 2).sum(-1)
    np.testing.assert_allclose(model.inertia_, d2.min(1).sum(), rtol=1e-10)
    np.testing.assert_array_equal(model.labels_, d2.argmin(1))
    assert model.objective_ <= model.inertia_ + 1e-9
    assert model.n_iter_ >= 1 and model.converged_ in (True, False)
    assert model.sigma_ > 0 and model.n_features_in_ == 2
    np.testing.assert_allclose(model.margins_, np.sort(d2, 1)[:, 1] - d2.min(1), atol=1e-9)
    assert model.margin_min_ == model.margins_.min()
    np.testing.assert_array_equal(model.predict(X), model.labels_)
    np.testing.assert_allclose(model.transform(X), np.sqrt(d2), rtol=1e-10)
    proba = model.predict_proba(X)
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(proba.argmax(1), model.labels_)
    np.testing.assert_array_equal(model.fit_predict(X), model.labels_)
    np.testing.assert_allclose(model.fit_transform(X), np.sqrt(d2), rtol=1e-10)
    assert list(model.get_feature_names_out()) == [
        f"{type(model).__name__.lower()}{j}" for j in range(k)
    ]
    assert np.isfinite(model.score(X))


def test_score_samples_is_gaussian_mixture_log_density(blobs):
    X, _, _ = blobs
    model = SoftKMeans(3, sigma=0.4, random_state=0).fit(X)
    d2 = ((X[:, None, :] - model.cluster_centers_[None]) ** 2).sum(-1)
    sigma2 = 0.4**2
    density = np.mean(np.exp(-d2 / (2 * sigma2)) / (2 * np.pi * sigma2), axis=1)
    np.testing.assert_allclose(model.score_samples(X), np.log(density), rtol=1e-10)
    np.testing.assert_allclose(model.score(X), np.log(density).mean(), rtol=1e-10)
    w = np.arange(len(X), dtype=float)
    np.testing.assert_allclose(model.score(X, sample_weight=w), np.average(np.log(density),
                               weights=w), rtol=1e-10)


def test_entmax_proba_has_exact_zeros(blobs):
    X, _, _ = blobs
    model = EntmaxKMeans(3, sigma=1.0, random_state=0).fit(X)
    between = np.linspace(model.cluster_centers_[0], model.cluster_centers_[1], 50)
    proba = model.predict_proba(between)
    assert np.any(proba == 0.0) and np.any((proba > 0) & (proba < 1))
    zero = proba == 0
    d2 = model.transform(between) ** 2
    gaps = d2 - d2.min(1, keepdims=True)
    assert np.all(gaps[zero] >= 4 * model.sigma_**2 * (1 - 1e-12))


@pytest.mark.parametrize("make", ALL, ids=IDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_preserved_and_sparse_equals_dense(make, dtype, blobs):
    X = blobs[0].astype(dtype)
    dense = make(random_state=1).fit(X)
    sparse = make(random_state=1).fit(sp.csr_matrix(X))
    assert dense.cluster_centers_.dtype == dtype
    assert dense.transform(X).dtype == dtype and dense.predict_proba(X).dtype == dtype
    rtol = 1e-4 if dtype == np.float32 else 1e-9
    np.testing.assert_allclose(sparse.cluster_centers_, dense.cluster_centers_, rtol=rtol,
                               atol=rtol)
    np.testing.assert_array_equal(sparse.labels_, dense.labels_)
    np.testing.assert_array_equal(dense.predict(sp.csr_matrix(X)), dense.labels_)
    np.testing.assert_allclose(dense.predict_proba(sp.csr_matrix(X)), dense.predict_proba(X),
                               rtol=rtol, atol=1e-6)


@pytest.mark.parametrize("make", ALL[:3], ids=IDS[:3])
def test_csr_with_64_bit_indices_equals_32_bit(make, blobs):
    X = sp.csr_matrix(blobs[0])
    X64 = X.copy()
    X64.indices, X64.indptr = X.indices.astype(np.int64), X.indptr.astype(np.int64)
    dense = make(random_state=1).fit(X)
    wide = make(random_state=1).fit(X64)
    assert X64.indices.dtype == np.int64  # the input is left alone
    np.testing.assert_allclose(wide.cluster_centers_, dense.cluster_centers_, rtol=1e-12)
    np.testing.assert_array_equal(wide.predict(X64), dense.labels_)


@pytest.mark.parametrize("make", ALL, ids=IDS)
def test_csr_with_duplicate_entries_equals_dense(make, blobs):
    X = blobs[0]
    X_dup = noncanonical_csr(X)
    assert not X_dup.has_canonical_format and np.allclose(X_dup.toarray(), X)
    stored = X_dup.nnz
    dense = make(random_state=1).fit(X)
    sparse = make(random_state=1).fit(X_dup)
    assert X_dup.nnz == stored and not X_dup.has_canonical_format  # the input is left alone
    np.testing.assert_allclose(sparse.inertia_, dense.inertia_, rtol=1e-9)
    np.testing.assert_allclose(sparse.cluster_centers_, dense.cluster_centers_, rtol=1e-9,
                               atol=1e-9)
    np.testing.assert_allclose(dense.transform(X_dup), dense.transform(X), rtol=1e-9)


def test_pandas_frames_and_set_output(blobs):
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame(blobs[0], columns=["height", "width"])
    model = SoftKMeans(3, random_state=0).set_output(transform="pandas").fit(X)
    np.testing.assert_array_equal(model.feature_names_in_, ["height", "width"])
    out = model.transform(X)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == ["softkmeans0", "softkmeans1", "softkmeans2"]


@pytest.mark.parametrize("make", ALL, ids=IDS)
def test_same_random_state_same_result(make, blobs):
    X = blobs[0]
    a = make(random_state=7, n_init=2).fit(X)
    b = make(random_state=7, n_init=2).fit(X)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    np.testing.assert_array_equal(a.labels_, b.labels_)


@pytest.mark.parametrize("make", ALL, ids=IDS)
def test_weights_equal_repetition_from_same_start(make, blobs):
    X = blobs[0][:60]
    counts = np.random.RandomState(0).randint(1, 4, size=len(X))
    init = X[[0, 1, 2]] + 0.01
    weighted = make(init=init, random_state=0).fit(X, sample_weight=counts)
    repeated = make(init=init, random_state=0).fit(np.repeat(X, counts, axis=0))
    np.testing.assert_allclose(weighted.cluster_centers_, repeated.cluster_centers_,
                               rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(weighted.inertia_, repeated.inertia_, rtol=1e-9)


@pytest.mark.parametrize("Estimator", [SoftKMeans, EntmaxKMeans])
def test_sigma_auto_is_the_shrunk_shared_variance(blobs, Estimator):
    """At the fit, sigma_ is 0.85 x the deviation of the mixture's M-step variance."""
    X = blobs[0]
    model = Estimator(3, init=X[[0, 5, 9]], tol=1e-10, max_iter=1000).fit(X)
    assert model.converged_
    proba = model.predict_proba(X)
    sq = ((X[:, None, :] - model.cluster_centers_[None]) ** 2).sum(-1)
    variance = (proba * sq).sum() / X.size
    np.testing.assert_allclose(model.sigma_, 0.85 * np.sqrt(variance), rtol=1e-6)


def test_sigma_auto_rule(blobs):
    X = blobs[0]
    init = X[[0, 5, 9]]
    model = SoftKMeans(3, init=init).fit(X)
    X2 = 10 * X
    np.testing.assert_allclose(SoftKMeans(3, init=10 * init).fit(X2).sigma_, 10 * model.sigma_)
    assert SoftKMeans(3, sigma=0.25, random_state=0).fit(X).sigma_ == 0.25


@pytest.mark.parametrize("estimator", [
    SoftKMeans(4, sigma=1.5, record_path=True),
    EntmaxKMeans(4, sigma=1.5, record_path=True),
    EntmaxKMeans(4, sigma=1.5, alpha=1.25, record_path=True),
    EntmaxKMeans(4, sigma=1.5, alpha=3.0, record_path=True),
], ids=["softmax", "entmax15", "entmax125", "entmax3"])
def test_alternating_sufficient_decrease(estimator):
    X = np.random.RandomState(3).uniform(0, 10, size=(300, 2))
    estimator.set_params(random_state=0, tol=0, max_iter=40).fit(X)
    path = estimator.path_[0]
    drops = -np.diff(path["objective"])
    scale = np.abs(path["objective"]).max()
    assert np.all(drops >= path["decrease_bound"][1:] - 1e-12 * scale)
    assert np.all(path["decrease_bound"][1:] >= 0)
    assert path["decrease_bound"][1] > 0


def test_gradient_descent_decreases_and_reaches_stationary_point(blobs):
    X = blobs[0]
    model = SoftKMeans(3, sigma=0.5, algorithm="gradient", random_state=0, record_path=True,
                       max_iter=500).fit(X)
    assert np.all(np.diff(model.path_[0]["objective"]) <= 1e-12 * abs(model.objective_))
    alt = SoftKMeans(3, sigma=0.5, random_state=0).fit(X)
    np.testing.assert_allclose(model.objective_, alt.objective_, rtol=1e-8)
    np.testing.assert_allclose(model.cluster_centers_, alt.cluster_centers_, atol=1e-4)


def _grad_f_sigma(X, centers, sigma):
    """Gradient of F_sigma in float64, from the definition."""
    D = ((X[:, None, :] - centers[None]) ** 2).sum(axis=2)
    z = -D / (2 * sigma**2)
    r = np.exp(z - z.max(axis=1, keepdims=True))
    r /= r.sum(axis=1, keepdims=True)
    return 2 * (r.sum(axis=0)[:, None] * centers - r.T @ X)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("dtype, tol, atol", [(np.float32, 1e-15, 1e-6),
                                               (np.float64, 1e-23, 1e-10)])
def test_gradient_descent_goes_on_where_its_objective_differences_are_rounding(backend, dtype,
                                                                             tol, atol):
    """Its line search compared whole objectives, and stopped as converged 5e-4 short of the
    fixed point in float32 (7e-8 in float64) once their differences were below rounding."""
    rng = np.random.RandomState(2)
    X = np.vstack([rng.normal(c, 0.5, size=(n, 3))
                   for c, n in (([0, 0, 0], 30), ([4, 0, 0], 20), ([0, 4, 0], 10))])
    init = X[[0, 35, 55]] + 0.3
    reference = SoftKMeans(3, sigma=1.0, init=init, tol=0, max_iter=5000,
                           backend="numpy").fit(X)
    model = SoftKMeans(3, sigma=1.0, init=init, algorithm="gradient", tol=tol, max_iter=5000,
                       backend=backend).fit(X.astype(dtype))
    assert model.converged_
    np.testing.assert_allclose(model.cluster_centers_, reference.cluster_centers_, atol=atol)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_gradient_descent_reaches_the_mean_above_the_critical_temperature(backend):
    """At sigma = 1e8, F is about -1e18 and its rounding as large as the decreases tested: the
    run stopped 0.47 away from the mean, with a gradient of 33, as converged."""
    rng = np.random.RandomState(0)
    X = np.vstack([rng.normal(c, 0.3, size=(15, 3)) for c in (0, 3, 6)])
    with pytest.warns(CriticalTemperatureWarning), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # centroids merged: no news here
        model = SoftKMeans(3, sigma=1e8, algorithm="gradient", random_state=0,
                           backend=backend).fit(X)
    assert model.converged_
    np.testing.assert_allclose(model.cluster_centers_, np.tile(X.mean(axis=0), (3, 1)),
                               atol=1e-9)
    assert np.abs(_grad_f_sigma(X, model.cluster_centers_, 1e8)).max() < 1e-6


def _lloyd_path_margin(X, init):
    engine = get_engine("numpy", X)
    run = alternating(engine, init, HARD, max_iter=300, tol=0, record_path="centers")
    return min(engine.estep(c, HARD).margins.min() for c in run.stages[0].centers)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_entmax_below_identification_reproduces_sklearn_lloyd(seed):
    X = np.random.RandomState(seed).uniform(0, 10, size=(400, 2))
    init = X[:5].copy()
    sigma = 0.9 * np.sqrt(_lloyd_path_margin(X, init)) / 2  # margin >= 4 sigma^2 on the path
    ours = EntmaxKMeans(5, sigma=sigma, init=init, tol=0, max_iter=300).fit(X)
    ref = KMeans(5, init=init, n_init=1, algorithm="lloyd", tol=0, max_iter=300).fit(X)
    np.testing.assert_array_equal(ours.labels_, ref.labels_)
    np.testing.assert_allclose(ours.cluster_centers_, ref.cluster_centers_, rtol=1e-12)
    np.testing.assert_allclose(ours.objective_, ref.inertia_, rtol=1e-12)
    soft = SoftKMeans(5, sigma=sigma / 4, init=init, tol=0, max_iter=300).fit(X)
    np.testing.assert_array_equal(soft.labels_, ref.labels_)


def test_annealed_schedule_attributes_and_polish(blobs):
    X = blobs[0]
    model = AnnealedKMeans(3, strategy="paper", n_temperatures=12, random_state=0).fit(X)
    t = model.temperatures_
    assert t.shape == (12,) and np.all(np.diff(t) < 0)
    np.testing.assert_allclose(t[0] ** 2, 1.2 * model.lambda_max_, rtol=1e-12)
    assert model.sigma_ == t[-1]
    assert model.temperature_objectives_.shape == (12,)
    assert model.n_iter_ >= model.temperature_n_iter_.sum()
    # a K-Means fixed point: one Lloyd step does not move it
    means = np.vstack([X[model.labels_ == j].mean(0) for j in range(3)])
    np.testing.assert_allclose(model.cluster_centers_, means, rtol=1e-12)
    custom = AnnealedKMeans(3, strategy="paper", schedule=[2.0, 1.0, 0.5],
                            random_state=0).fit(X)
    np.testing.assert_array_equal(custom.temperatures_, [2.0, 1.0, 0.5])


def test_annealing_escapes_a_poor_lloyd_start():
    X, y, _ = make_mixture(n_per=80, k=4, spread=0.4, seed=3)
    bad = X[np.flatnonzero(y == 0)[:4]]  # every centroid starts in one cluster
    lloyd = KMeans(4, init=bad, n_init=1).fit(X)
    annealed = AnnealedKMeans(4, strategy="paper", init=bad, random_state=0).fit(X)
    assert annealed.inertia_ < 0.5 * lloyd.inertia_
    assert adjusted_rand_score(y, annealed.labels_) == 1.0


def test_empty_cluster_kept_or_reseeded():
    X = np.array([[0.0], [0.1], [0.2], [10.0], [10.1]])
    init = np.array([[0.1], [10.0], [100.0]])  # the third centroid gets no mass
    with pytest.warns(ConvergenceWarning, match=r"distinct clusters \(2\) found smaller"):
        kept = EntmaxKMeans(3, sigma=0.5, init=init, empty_cluster="keep",
                            reassignment_ratio=0).fit(X)
    assert kept.cluster_centers_[2, 0] == 100.0
    relocated = EntmaxKMeans(3, sigma=0.5, init=init, empty_cluster="keep").fit(X)
    assert relocated.cluster_centers_[2, 0] < 11 and relocated.n_reassigned_ >= 1
    assert relocated.objective_ < kept.objective_
    reseeded = EntmaxKMeans(3, sigma=0.05, init=init).fit(X)  # the default, as KMeans
    assert reseeded.cluster_centers_[2, 0] < 11
    assert len(np.unique(reseeded.labels_)) == 3


@pytest.mark.parametrize("make", ALL, ids=IDS)
def test_fewer_distinct_clusters_than_asked_warns_as_sklearn(make, blobs):
    on_three_points = np.repeat([[0.0, 0.0], [5.0, 0.0], [0.0, 5.0]], 10, axis=0)
    with pytest.warns(ConvergenceWarning, match=r"distinct clusters \(3\) found smaller than "
                                                r"n_clusters \(5\)"):
        model = make(random_state=0).set_params(n_clusters=5).fit(on_three_points)
    assert np.unique(model.labels_).size == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        make(random_state=0).fit(blobs[0])


@pytest.mark.parametrize("Estimator", [SoftKMeans, EntmaxKMeans, AnnealedKMeans])
def test_n_threads_sets_the_threads_of_every_pass(Estimator, monkeypatch):
    from softkmeans._engines._numba import engine as numba_engine

    # Four clusters; 20000 x 64 x 4 multiply-adds a pass: work for two threads (WORK_PER_THREAD)
    rng = np.random.default_rng(0)
    X = (rng.normal(size=(20000, 64)) + 6 * rng.normal(size=(4, 64))[rng.integers(0, 4, 20000)])
    X = X.astype(np.float32)
    counts = []
    run_in_threads = numba_engine.run_in_threads

    def counting_run_in_threads(kernel, n_parts, n_threads, *args):
        if kernel is not numba_engine.dense_row_sq_norms:  # the row norms get threads by their size
            counts.append(min(n_threads, n_parts))
        return run_in_threads(kernel, n_parts, n_threads, *args)

    monkeypatch.setattr(numba_engine, "run_in_threads", counting_run_in_threads)
    fits = []
    for n_threads in (1, 2):
        counts.clear()
        model = Estimator(4, n_threads=n_threads, max_iter=5, random_state=0, backend="numba")
        fits.append(model.fit(X))
        model.predict(X)
        assert set(counts) == {numba_engine.effective_n_threads(n_threads)}
    np.testing.assert_array_equal(fits[0].labels_, fits[1].labels_)
    np.testing.assert_array_equal(fits[0].cluster_centers_, fits[1].cluster_centers_)
    assert fits[0].objective_ == fits[1].objective_


def test_verbose_prints_what_a_kmeans_user_reads(blobs, capsys):
    """Initialization, then per iteration the inertia, the objective and the temperature,
    then why the run stopped, every line with the seconds since the fit began."""
    X = np.random.RandomState(0).uniform(size=(200, 2))
    model = SoftKMeans(3, verbose=1, random_state=0, max_iter=3, tol=0).fit(X)
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == [line for line in out if line.startswith("Initialization")]
    assert out[0].startswith("Initialization: k-means++ on 200 rows")
    iterations = [line for line in out if line.startswith("Iteration ")]
    assert model.n_iter_ == 3 and len(iterations) == 3
    last = iterations[-1]
    assert f"inertia {model.inertia_:.6g}" in last and f"sigma {model.sigma_:.4g}" in last
    assert out[-1].startswith("Stopped at max_iter=3 before converging")
    seconds = [float(line.rsplit("(", 1)[1].split()[0]) for line in out]
    assert seconds == sorted(seconds)
    EntmaxKMeans(3, sigma=0.05, verbose=1, random_state=0).fit(X)
    assert capsys.readouterr().out.splitlines()[-1].startswith("Converged at iteration")


def test_verbose_marks_the_starts_and_the_temperatures(capsys):
    X = np.random.RandomState(0).uniform(size=(200, 2))
    SoftKMeans(3, verbose=1, n_init=2, random_state=0, max_iter=2).fit(X)
    out = capsys.readouterr().out.splitlines()
    starts = [line for line in out if line.startswith("Initialization ") and "/" in line]
    assert [line.split(":")[0] for line in starts] == ["Initialization 1/2",
                                                       "Initialization 2/2"]
    model = AnnealedKMeans(3, strategy="paper", verbose=1, n_temperatures=3,
                           random_state=0).fit(X)
    out = capsys.readouterr().out.splitlines()
    sigmas = [float(line.split()[3]) for line in out if line.startswith("Temperature ")]
    np.testing.assert_allclose(sigmas, model.temperatures_, rtol=1e-3)
    assert not any(line.startswith("Iteration") and "sigma" in line for line in out)
    assert sum(line.startswith("Lloyd's algorithm") for line in out) == 1
    AnnealedKMeans(3, strategy="paper", verbose=2, n_temperatures=3, random_state=0).fit(X)
    assert any(line.startswith("Iteration") and "sigma" in line
               for line in capsys.readouterr().out.splitlines())  # verbose=2: each stage


def test_verbose_reports_the_final_stages_of_the_default_annealing(capsys):
    """The growth, the tail, then the inertia of each final stage; the fit keeps the best."""
    X = np.random.RandomState(0).normal(size=(500, 3))
    model = AnnealedKMeans(5, verbose=1).fit(X)
    out = capsys.readouterr().out.splitlines()
    stages = {line.split(":")[0]: float(line.split("inertia ")[1].split()[0]) for line in out
              if line.split(":")[0] in ("Lloyd polish", "Hartigan's moves", "merge-split search")}
    assert list(stages) == ["Lloyd polish", "merge-split search", "Hartigan's moves"]
    assert any(line.startswith("Growth: sigma") for line in out)
    seconds = [float(line.rsplit("(", 1)[1].split()[0]) for line in out]
    assert seconds == sorted(seconds)  # one clock, from the start of the fit
    assert model.inertia_ == pytest.approx(min(stages.values()), rel=1e-9)


@pytest.mark.parametrize("backend", ["numba", "numpy"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sigma", [SIGMA_MIN, SIGMA_MAX])
@pytest.mark.parametrize("Estimator", [SoftKMeans, EntmaxKMeans])
def test_every_output_is_finite_at_the_ends_of_the_temperature_range(Estimator, sigma, dtype,
                                                                    sparse, backend):
    X = np.random.default_rng(0).normal(size=(200, 3)).astype(dtype)
    X[:20] = X[0]  # tied observations
    X = sp.csr_matrix(X) if sparse else X
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no overflow, no 0 / 0 anywhere
        warnings.simplefilter("ignore", CriticalTemperatureWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)  # the centroids merge there
        model = Estimator(3, sigma=sigma, random_state=0, backend=backend).fit(X)
        proba = model.predict_proba(X)
        outputs = [model.cluster_centers_, model.objective_, model.inertia_, model.margins_,
                   proba, model.transform(X), model.score_samples(X), model.score(X)]
    assert all(np.all(np.isfinite(value)) for value in outputs)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-6)
    if sigma == SIGMA_MIN:  # the zero-temperature limit: Lloyd's objective
        np.testing.assert_allclose(model.objective_, model.inertia_, rtol=1e-12)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(("offset", "n_features"), [(0.0, 3), (1000.0, 3), (0.0, 3000)])
def test_sigma_auto_falls_back_when_every_point_is_a_starting_centroid(backend, dtype, offset,
                                                                       n_features):
    """With as many clusters as distinct points every distance to the start is 0, which the
    engines' ``||x||^2 - 2 x.mu + ||mu||^2`` left as rounding noise (growing with the number
    of features): sigma was 3e-9 to 6e-5 (by engine and dtype) instead of the documented
    ``sqrt(0.1 lambda_max)``."""
    rng = np.random.default_rng(0)
    points = (rng.normal(size=(5, n_features)) + offset).astype(dtype)
    centered = points.astype(np.float64) - points.astype(np.float64).mean(axis=0)
    lam = np.linalg.eigvalsh(centered @ centered.T / len(points))[-1]  # the covariance's
    for X in (points, np.repeat(points, 3, axis=0), sp.csr_matrix(np.repeat(points, 2, axis=0))):
        model = SoftKMeans(5, random_state=0, backend=backend).fit(X)
        assert model.sigma_ == pytest.approx(np.sqrt(0.1 * lam), rel=1e-6)
    same = np.repeat(points[:1], 6, axis=0)  # a zero covariance: the fallback is 1
    with pytest.warns(ConvergenceWarning, match=r"distinct clusters \(1\)"):
        model = SoftKMeans(3, random_state=0, backend=backend).fit(same)
    assert model.sigma_ == pytest.approx(np.sqrt(0.1))


def test_exact_zero_distances_compare_the_rows_within_their_own_noise():
    """Only rows whose distance lies within their own rounding noise of their centroid are
    compared with it: rows on a centroid get 0, others keep their distance, whatever the
    spread of the norms (the rows are first screened by the largest noise)."""
    rng = np.random.default_rng(0)
    for offset in (0.0, 1e3):
        X = rng.normal(size=(400, 5)) * rng.uniform(0.1, 100.0, size=(400, 1)) + offset
        centers = X[[0, 7, 99]].copy()
        engine = get_engine("numpy", X)
        start = engine.estep(centers, HARD, with_sums=False)
        dmin = start.dmin.copy()
        dmin[[0, 7, 99]] = 1e-300  # noise where a row sits on its centroid
        dmin[5] = 1e-300  # a tiny distance of a row that is not on one
        out = exact_zero_distances(X, centers, start.labels, dmin, engine.x_sq,
                                   engine.unit_roundoff)
        expected = dmin.copy()
        expected[[0, 7, 99]] = 0.0
        np.testing.assert_array_equal(out, expected)


def test_score_takes_the_weights_relative_to_the_largest(blobs):
    """Uniform weights of 1e306 (which fit accepts) overflowed their sum: score was -inf."""
    X = blobs[0]
    model = SoftKMeans(3, sigma=0.5, random_state=0).fit(X)
    for weights in (np.full(len(X), 1e306), np.full(len(X), 1e-320)):
        assert model.score(X, sample_weight=weights) == pytest.approx(model.score(X), rel=1e-12)


def test_sigma_auto_stays_in_the_temperature_range():
    weights = np.ones(2)
    assert auto_sigma(np.array([1e-320, 0.0]), weights, 1) == SIGMA_MIN
    assert auto_sigma(np.array([1e307, 1e307]), weights, 1) == SIGMA_MAX
    assert auto_sigma(np.array([10.0, 30.0]), weights, 10) == pytest.approx(0.85 * np.sqrt(2.0))


@pytest.mark.parametrize("make", ALL, ids=IDS)
def test_the_scale_of_the_weights_changes_only_the_sums(make, blobs):
    """Weights summing to 1e306 give the fit of unit weights (the random draws included).

    Gradient descent squared its gradient, which grows with the weights, and overflowed
    above sums of about 1e150; it now takes it over the heaviest mass. A sum that
    overflows float64 is refused with a message that says what to do.
    """
    X, _, _ = blobs
    ones = np.ones(len(X))
    unit = make(random_state=0).fit(X, sample_weight=ones)
    big = 1e306 / len(X)
    huge = make(random_state=0).fit(X, sample_weight=big * ones)
    np.testing.assert_allclose(huge.cluster_centers_, unit.cluster_centers_, rtol=1e-9, atol=1e-12)
    assert huge.sigma_ == pytest.approx(unit.sigma_, rel=1e-12)
    assert huge.inertia_ == pytest.approx(big * unit.inertia_, rel=1e-9)
    with pytest.raises(ValueError, match="sample_weight sums to more than the largest float64"):
        make(random_state=0).fit(X, sample_weight=1e307 * ones)


@pytest.mark.parametrize("cls", [SoftKMeans, EntmaxKMeans])
def test_diagnostics_of_extreme_weight_ratios_and_temperatures(cls, blobs):
    """One weight 1e30 times the others at sigma 1e-150: rho sigma^2 underflows, no error."""
    X, _, _ = blobs
    weights = np.ones(len(X))
    weights[0] = 1e30
    model = cls(3, sigma=1e-150, random_state=0, backend="numpy", certify=True).fit(
        X, sample_weight=weights)
    constants = model.bounds_.constants
    assert not any(np.isnan(value) for value in constants.values() if np.isscalar(value))
    assert constants["L"] == 0.0 and constants["eps"] == 0.0  # q' underflows to 0


def test_annealed_schedule_is_copied_into_the_fitted_temperatures(blobs):
    X, _, _ = blobs
    schedule = np.array([1.0, 0.5, 0.2])
    model = AnnealedKMeans(3, strategy="paper", schedule=schedule, random_state=0).fit(X)
    schedule[:] = 9.0
    np.testing.assert_array_equal(model.temperatures_, [1.0, 0.5, 0.2])
    model.temperatures_[0] = 3.0
    np.testing.assert_array_equal(model.get_params()["schedule"], 9.0)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("Estimator", [SoftKMeans, EntmaxKMeans])
def test_float64_data_far_from_the_origin_fit_as_centred_data(Estimator, backend):
    """Only float32 data were centred: at an offset of 1e8 the float64 distances lost their
    digits (inertia 288-388 against 249, responsibilities off by 1), where scikit-learn's KMeans,
    which centres its data, is unaffected."""
    rng = np.random.RandomState(0)
    X = np.vstack([rng.normal(c, 1.0, size=(30, 3)) for c in (0, 4, 8)])
    init, offset = X[[0, 30, 60]], 1e8
    centred = Estimator(3, sigma=0.5, init=init, backend=backend, tol=0, max_iter=100).fit(X)
    X_far = X + offset
    far = Estimator(3, sigma=0.5, init=init + offset, backend=backend, tol=0,
                    max_iter=100).fit(X_far)
    np.testing.assert_array_equal(X_far, X + offset)  # centred block by block, not in place
    np.testing.assert_allclose(far.predict_proba(X_far), centred.predict_proba(X), atol=1e-6)
    np.testing.assert_allclose(far.inertia_, centred.inertia_, rtol=1e-6)
    np.testing.assert_allclose(far.cluster_centers_ - offset, centred.cluster_centers_, atol=1e-6)


def test_k_means_plus_plus_seeds_data_far_from_the_origin_as_centred_data():
    """It ran on the unshifted data, whose float64 distances at an offset of 1e8 are rounding:
    only the first seed matched, and the fits ended 25% above the centred ones' inertia."""
    rng = np.random.RandomState(0)
    X = np.vstack([rng.normal(c, 1.0, size=(60, 2))
                   for c in ([0, 0], [6, 0], [0, 6], [6, 6], [3, 3])])
    offset = 1e8
    starts = [SoftKMeans(5, n_init=1, random_state=3, max_iter=1, record_path="centers")
              .fit(data).path_[0]["centers"][0] for data in (X, X + offset)]
    np.testing.assert_allclose(starts[1] - offset, starts[0], atol=1e-7)
    assert {tuple(row) for row in starts[1]} <= {tuple(row) for row in X + offset}  # X's rows


@pytest.mark.filterwarnings("ignore:Number of distinct clusters")  # 4 of 5: not the point
def test_gradient_descent_never_climbs_on_data_far_from_the_origin():
    """Its rounding allowance was sized from the unshifted norms, 10 times |F| at an offset of
    1e8, and it accepted a step that took F from 1976 to 20571."""
    rng = np.random.RandomState(12)
    k, d = rng.randint(2, 6), rng.randint(1, 3)
    sizes = rng.randint(3, 60, size=k + 2)
    X = np.vstack([rng.normal(rng.uniform(-10, 10, d), 0.5, size=(n, d)) for n in sizes])
    init, offset = rng.uniform(-15, 15, (k, d)), 1e8
    model = SoftKMeans(k, sigma=1.0, init=init + offset, algorithm="gradient", tol=1e-12,
                       max_iter=300, record_path=True).fit(X + offset)
    objective = np.asarray(model.path_[0]["objective"])
    assert np.diff(objective).max() <= 1e-9 * abs(objective[-1])
    centred = SoftKMeans(k, sigma=1.0, init=init, algorithm="gradient", tol=1e-12,
                         max_iter=300).fit(X)
    np.testing.assert_allclose(model.objective_, centred.objective_, rtol=1e-6)
