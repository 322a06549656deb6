"""softkmeans.diagnostics against brute-force numpy formulas, and the fitted attributes."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from _helpers import noncanonical_csr
from scipy.special import logsumexp, softmax

from softkmeans import AnnealedKMeans, EntmaxKMeans, SoftKMeans
from softkmeans._core import bounds
from softkmeans.diagnostics import (
    BoundCheck,
    Certificate,
    balance,
    centroid_map_bound,
    certify,
    critical_sigma,
    fixed_point_constants,
    identification_sigma,
    margins,
    objective_gaps,
    radii,
    responsibilities,
    unidentified_count,
)
from softkmeans.exceptions import CriticalTemperatureWarning

NP = {"backend": "numpy"}


@pytest.fixture
def data():
    rng = np.random.RandomState(0)
    X = np.vstack([rng.normal(m, 0.8, size=(15, 2)) for m in ([0, 0], [4, 0], [2, 3])])
    centers = np.array([[0.2, 0.1], [3.8, -0.2], [2.1, 2.7]])
    return X, centers, rng.uniform(0.5, 2.0, size=len(X))


def sq_dist(X, centers):
    return ((np.asarray(X, float)[:, None, :] - centers[None]) ** 2).sum(-1)


def test_margins_balance_radii_match_brute_force(data):
    X, centers, _ = data
    D = np.sort(sq_dist(X, centers), axis=1)
    delta, delta_min = margins(X, centers, **NP)
    np.testing.assert_allclose(delta, D[:, 1] - D[:, 0], rtol=1e-10, atol=1e-10)
    assert delta_min == pytest.approx(delta.min())
    labels = sq_dist(X, centers).argmin(1)
    assert balance(X, centers, **NP) == pytest.approx(np.bincount(labels).min() / len(X))
    lloyd = np.array([X[labels == j].mean(0) for j in range(3)])
    B, R = radii(X, centers, **NP)
    np.testing.assert_allclose(B, np.sqrt(sq_dist(X, lloyd).max(0)), rtol=1e-10)
    assert R == pytest.approx(np.sqrt(sq_dist(X, centers).max()))


def test_ties_have_zero_margin_and_zero_weights_are_ignored():
    X = np.array([[0.0], [1.0], [2.0], [5.0]])
    centers = np.array([[0.0], [2.0]])
    delta, delta_min = margins(X, centers, **NP)
    assert delta[1] == 0 and delta_min == 0
    _, delta_min = margins(X, centers, sample_weight=[1, 0, 1, 1], **NP)
    assert delta_min == 4.0


def test_responsibilities_and_identification(data):
    X, centers, _ = data
    sigma = 0.7
    np.testing.assert_allclose(responsibilities(X, centers, sigma, **NP),
                               softmax(-sq_dist(X, centers) / (2 * sigma**2), axis=1),
                               rtol=1e-10, atol=1e-300)
    delta, delta_min = margins(X, centers, **NP)
    for alpha in (1.5, 2.0, 3.0):
        resp = responsibilities(X, centers, sigma, alpha, **NP)
        np.testing.assert_allclose(resp.sum(1), 1.0)
        not_one_hot = ~np.all((resp == 0) | (resp == 1), axis=1)
        assert unidentified_count(X, centers, sigma, alpha, **NP) == not_one_hot.sum()
        np.testing.assert_array_equal(not_one_hot, delta < 2 * sigma**2 / (alpha - 1))
        assert identification_sigma(X, centers, alpha, **NP) == pytest.approx(
            np.sqrt((alpha - 1) * delta_min / 2))
    np.testing.assert_allclose(identification_sigma(X, centers, per_sample=True, **NP),
                               np.sqrt(delta) / 2)


def test_critical_sigma_is_the_root_of_the_top_covariance_eigenvalue(data):
    X, _, w = data
    top = np.linalg.eigvalsh(np.cov(X.T, bias=True))[-1]
    assert critical_sigma(X) == pytest.approx(np.sqrt(top))
    counts = np.arange(len(X)) % 3 + 1
    assert critical_sigma(X, counts) == pytest.approx(critical_sigma(np.repeat(X, counts, 0)))


def test_objective_gaps_match_direct_evaluation(data):
    X, centers, _ = data
    sigma, tau = 1.5, 2 * 1.5**2
    D = sq_dist(X, centers)
    J = D.min(1).sum()
    F = -tau * logsumexp(-D / tau, axis=1).sum()
    R = responsibilities(X, centers, sigma, 1.5, **NP)
    F_ts = np.sum((R * D).sum(1) - tau * (4 / 3) * (1 - (R**1.5).sum(1)))
    gaps = objective_gaps(X, centers, sigma, **NP)
    assert gaps.constants["softmax_gap"] == pytest.approx(J - F, rel=1e-9)
    assert gaps.constants["tsallis_gap"] == pytest.approx(J - F_ts, rel=1e-9)
    assert gaps.all_hold
    assert gaps["softmax_gap_uniform"].bound == pytest.approx(2 * len(X) * sigma**2 * np.log(3))
    assert gaps["tsallis_gap_uniform"].bound == pytest.approx(
        8 / 3 * len(X) * sigma**2 * (1 - 1 / np.sqrt(3)))


def test_softmax_gap_keeps_relative_precision_at_low_temperature(data):
    X, centers, _ = data
    delta_min = margins(X, centers, **NP)[1]
    sigma = np.sqrt(delta_min / 2 / 200)  # beta = 200: J - F is far below eps * J
    gaps = objective_gaps(X, centers, sigma, **NP)
    assert 0 < gaps.constants["softmax_gap"] < 1e-80
    assert gaps["softmax_gap_margin_lower"].holds and gaps["softmax_gap_margin_upper"].holds


def test_centroid_map_bound_formula(data):
    X, centers, _ = data
    sigma = 0.6
    bound, q = centroid_map_bound(X, centers, sigma, **NP)
    delta_min = margins(X, centers, **NP)[1]
    assert q == pytest.approx(2 * np.exp(-delta_min / (2 * sigma**2)))
    B, _ = radii(X, centers, **NP)
    np.testing.assert_allclose(bound, B / balance(X, centers, **NP) * q / (1 - q))
    assert np.all(np.isinf(centroid_map_bound(X, centers, 50.0, **NP)[0]))


def test_fixed_point_constants_and_sigma_star(data):
    X, centers, _ = data
    c = fixed_point_constants(X, centers, 1.0, **NP)
    assert c["r_star"] == pytest.approx(np.sqrt(c["R"] ** 2 + c["delta"] / 4) - c["R"])
    star = c["sigma_star"]
    assert fixed_point_constants(X, centers, 0.999 * star, **NP)["hypothesis"]
    assert not fixed_point_constants(X, centers, 1.001 * star, **NP)["hypothesis"]
    at = fixed_point_constants(X, centers, 0.5 * star, **NP)
    q = 2 * np.exp(-c["delta"] / (star**2))
    assert at["eps"] == pytest.approx(c["R"] / c["rho"] * q / (1 - q))
    path = fixed_point_constants(X, np.stack([centers, centers + 0.1]), 1.0, **NP)
    assert path["delta"] == c["delta"] and path["R"] >= c["R"]


def test_the_fixed_point_hypothesis_holds_at_sigma_star_itself():
    """``sigma_star`` is the largest sigma with ``eps <= r*``: an ulp above the exact
    threshold, the computed ``eps`` exceeded ``r*`` in about half of these draws."""
    rng = np.random.default_rng(0)
    for _ in range(2000):
        delta, R, rho = rng.uniform(0.01, 10.0), rng.uniform(0.1, 10.0), rng.uniform(0.01, 0.5)
        k = int(rng.integers(2, 50))
        star = bounds.fixed_point_constants(delta, R, rho, k, 1.0)["sigma_star"]
        at = bounds.fixed_point_constants(delta, R, rho, k, star)
        assert at["hypothesis"], (delta, R, rho, k, star, at)
        above = bounds.fixed_point_constants(delta, R, rho, k, star * (1 + 1e-9))
        assert not above["hypothesis"]
    for _ in range(2000):  # R^2 << delta with k = 2: q' near 1, eps exact to far fewer digits
        delta, R = 10 ** rng.uniform(-3, 3), 10 ** rng.uniform(-4, 2)
        rho, k = rng.uniform(0.01, 0.5), int(rng.integers(2, 5))
        star = bounds.fixed_point_constants(delta, R, rho, k, 1.0)["sigma_star"]
        assert bounds.fixed_point_constants(delta, R, rho, k, star)["hypothesis"]


def test_certificate_object(data):
    X, centers, w = data
    cert = certify(X, centers, 0.8, sample_weight=w, **NP)
    assert cert.all_hold and len(cert) == 11
    text = repr(cert)
    assert "Thm 18" in text and "Prop 22(b)" in text and "all bounds hold" in text
    frame = cert.to_frame()
    assert list(frame.index) == [c.name for c in cert] and frame["holds"].all()
    broken = Certificate([*cert, BoundCheck("made_up", "-", 2.0, 1.0, 0.5)])
    assert not broken.all_hold and "SOME BOUNDS FAIL" in repr(broken)
    with pytest.raises(KeyError):
        cert["absent"]


def test_weights_equal_repeated_rows_and_sparse_equals_dense(data):
    X, centers, _ = data
    counts = np.arange(len(X)) % 3 + 1
    weighted = certify(X, centers, 0.9, sample_weight=counts, **NP).constants
    repeated = certify(np.repeat(X, counts, 0), centers, 0.9, **NP).constants
    for key in ("softmax_gap", "tsallis_gap", "margin_min", "rho", "R", "B", "eps"):
        assert weighted[key] == pytest.approx(repeated[key], rel=1e-9), key
    sparse = certify(sp.csr_matrix(X), centers, 0.9, **NP).constants
    dense = certify(X, centers, 0.9, **NP).constants
    assert sparse["softmax_gap"] == pytest.approx(dense["softmax_gap"], rel=1e-9)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"sigma": 0.0}, "sigma"), ({"sigma": np.nan}, "sigma"), ({"alpha": 1.0}, "alpha"),
    ({"sigma": 1e-200}, r"sigma must lie in \[1e-150"), ({"sigma": 1e200}, "sigma must lie in"),
    ({"centers": np.zeros((2, 3))}, "features"), ({"sample_weight": np.zeros(45)}, "zero"),
])
def test_bad_input_is_named(data, kwargs, match):
    X, centers, _ = data
    args = {"centers": centers, "sigma": 1.0, **kwargs}
    with pytest.raises(ValueError, match=match):
        certify(X, **args, **NP)


#: Every public function that runs passes, with its arguments after X and centers.
PASS_FUNCTIONS = [
    (margins, ()), (balance, ()), (radii, ()), (responsibilities, (0.9,)),
    (identification_sigma, ()), (unidentified_count, (0.9,)), (objective_gaps, (0.9,)),
    (centroid_map_bound, (0.9,)), (fixed_point_constants, (0.9,)), (certify, (0.9,)),
]


def _numbers(result):
    """The numbers of a diagnostic's result, flattened, for comparison."""
    if isinstance(result, Certificate):
        return [[check.observed, check.bound] for check in result.checks]
    if isinstance(result, dict):
        return [np.ravel(value) for value in result.values()]
    if isinstance(result, tuple):
        return [np.ravel(value) for value in result]
    return [np.ravel(result)]


@pytest.mark.parametrize(("function", "args"), PASS_FUNCTIONS,
                         ids=[f.__name__ for f, _ in PASS_FUNCTIONS])
def test_n_threads_reaches_the_engine_and_leaves_results_alone(data, function, args,
                                                               monkeypatch):
    import softkmeans.diagnostics as diagnostics

    X, centers, _ = data
    X = np.tile(X, (400, 1))  # large enough for two threads
    requested = []
    get_engine = diagnostics.get_engine

    def recording(*engine_args, **options):
        requested.append(engine_args[3])  # (backend, X, sample_weight, n_threads)
        return get_engine(*engine_args, **options)

    monkeypatch.setattr(diagnostics, "get_engine", recording)
    one, two = (function(X, centers, *args, backend="numba", n_threads=n) for n in (1, 2))
    assert set(requested) == {1, 2}
    for a, b in zip(_numbers(one), _numbers(two), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("n_threads", [0, -1, 1.5, "2", "auto"])
def test_bad_n_threads_is_named(data, n_threads):
    X, centers, _ = data
    with pytest.raises(ValueError, match="'n_threads' parameter .* must be an int in the range"):
        margins(X, centers, n_threads=n_threads)


@pytest.mark.parametrize(("scale", "match"), [(1e160, "X is too large"),
                                               (1e-160, "X and centers are too small")])
def test_data_whose_squared_distances_leave_float64_is_rejected(data, scale, match):
    X, centers, _ = data
    for call in (lambda: certify(X * scale, centers * scale, 1.0, **NP),
                 lambda: margins(X * scale, centers * scale)):
        with pytest.raises(ValueError, match=f"{match} in magnitude"):
            call()


@pytest.mark.parametrize(("dtype", "tiny"), [(np.float64, 1e-160), (np.float32, 1e-25)])
def test_points_near_the_origin_are_diagnosed_against_unit_centroids(dtype, tiny):
    """Their own squares underflow, but their distances to the centroids do not: the magnitude
    check counts the centroids' norms, as predict's does (it refused X on its own)."""
    X = np.zeros((3, 2), dtype)
    X[1, 0], X[2, 1] = tiny, -tiny
    centers = np.array([[1.0, 0.0], [-1.5, 0.0]])
    delta, delta_min = margins(X, centers)
    np.testing.assert_allclose(delta, 1.25, rtol=1e-6)  # 2.25 - 1
    assert delta_min == pytest.approx(1.25, rel=1e-6)
    assert unidentified_count(X, centers, 0.1) == 0
    np.testing.assert_allclose(responsibilities(X, centers, 0.1, alpha=1.5), [[1, 0]] * 3)
    assert certify(X, centers, 0.1).all_hold
    c = fixed_point_constants(X, np.stack([centers, centers]), 0.1)
    assert c["delta"] == pytest.approx(1.25, rel=1e-6)
    assert c["R"] == pytest.approx(1.5)  # the farthest centroid
    with pytest.raises(ValueError, match="X and centers are too small in magnitude"):
        margins(X, centers * tiny * 1e-10)  # the distances themselves underflow


def test_centers_too_large_for_the_dtype_are_named():
    X = np.ones((5, 2), np.float32)
    with pytest.raises(ValueError, match="centers are too large in magnitude for float32"):
        margins(X, [[1e19, 0.0], [-1e19, 0.0]])


def test_a_path_of_configurations_without_centroids_is_refused(data):
    with pytest.raises(ValueError, match="centers has no centroid"):
        fixed_point_constants(data[0], np.zeros((2, 0, data[0].shape[1])), 1.0)


def test_csr_with_duplicate_entries_equals_dense(data):
    X, centers, weights = data
    dense = certify(X, centers, 0.9, sample_weight=weights, **NP).constants
    sparse = certify(noncanonical_csr(X), centers, 0.9, sample_weight=weights, **NP).constants
    for key in ("softmax_gap", "tsallis_gap", "inertia", "R", "B"):
        assert sparse[key] == pytest.approx(dense[key], rel=1e-9), key
    assert critical_sigma(noncanonical_csr(X)) == pytest.approx(critical_sigma(X), rel=1e-12)


def test_unidentified_count_is_a_weight_sum_like_the_bounds(data):
    X, centers, _ = data
    counts = np.arange(len(X)) % 3  # integer weights, some 0
    weighted = unidentified_count(X, centers, 0.9, sample_weight=counts, **NP)
    assert weighted == unidentified_count(np.repeat(X, counts, 0), centers, 0.9, **NP)
    assert weighted == certify(X, centers, 0.9, sample_weight=counts, **NP).constants[
        "n_unidentified"]
    model = _fit(EntmaxKMeans, X, sigma=0.9, init=centers, max_iter=1)
    repeated = _fit(EntmaxKMeans, np.repeat(X, counts, 0), sigma=0.9, init=centers, max_iter=1)
    weighted_model = EntmaxKMeans(3, sigma=0.9, init=centers, max_iter=1, backend="numpy").fit(
        X, sample_weight=counts)
    assert weighted_model.n_unidentified_ == repeated.n_unidentified_
    assert model.n_unidentified_ == unidentified_count(X, model.cluster_centers_, 0.9, **NP)


def _fit(cls, X, n_clusters=3, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", CriticalTemperatureWarning)
        return cls(n_clusters, random_state=0, backend="numpy", certify=True, **kwargs).fit(X)


@pytest.mark.parametrize(("cls", "kwargs"), [
    (SoftKMeans, {"sigma": 0.5}), (EntmaxKMeans, {"sigma": 0.5, "alpha": 2.0}),
    (AnnealedKMeans, {}), (AnnealedKMeans, {"strategy": "paper", "n_temperatures": 5}),
    (AnnealedKMeans, {"strategy": "paper", "method": "entmax", "n_temperatures": 5}),
])
def test_fitted_diagnostics(data, cls, kwargs):
    X = data[0]
    model = _fit(cls, X, **kwargs)
    mu, sigma = model.cluster_centers_, model.sigma_
    alpha = getattr(model, "alpha", 1.5) if model._final_spec.kind == "entmax" else 1.5
    np.testing.assert_allclose(model.margins_, margins(X, mu, **NP)[0])
    assert model.margin_min_ == pytest.approx(margins(X, mu, **NP)[1])
    assert model.identification_sigma_ == pytest.approx(
        identification_sigma(X, mu, alpha, **NP))
    assert model.critical_sigma_ == pytest.approx(critical_sigma(X))
    assert model.beta_ == pytest.approx(model.margin_min_ / (2 * sigma**2))
    assert model.gap_ == pytest.approx(model.inertia_ - model.objective_, rel=1e-6, abs=1e-9)
    assert isinstance(model.bounds_, Certificate) and model.bounds_.all_hold
    assert model.bounds_.constants["sigma"] == sigma
    if model._final_spec.kind == "entmax":
        assert model.n_unidentified_ == unidentified_count(X, mu, sigma, alpha, **NP)
    else:
        assert not hasattr(model, "n_unidentified_")


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("cls", [SoftKMeans, EntmaxKMeans, AnnealedKMeans])
def test_fitted_float32_diagnostics_describe_the_stored_centroids(data, cls, backend):
    """A float32 fit keeps float32 centroids; its statistics and diagnostics are those of the
    stored centroids, not of the float64 ones the run ended at (1e-4 apart, relative, in
    identification_sigma_ far from the origin)."""
    X = (data[0] + 300.0).astype(np.float32)
    model = cls(3, random_state=0, backend=backend).fit(X)
    mu, options = model.cluster_centers_, {"backend": backend}
    assert mu.dtype == np.float32
    np.testing.assert_array_equal(model.labels_, model.predict(X))
    np.testing.assert_allclose(model.margins_, margins(X, mu, **options)[0], rtol=1e-12)
    assert model.identification_sigma_ == pytest.approx(
        identification_sigma(X, mu, **options), rel=1e-12)


@pytest.mark.filterwarnings("ignore:Number of distinct clusters")  # merged centroids
def test_warning_above_critical_temperature(data):
    X = data[0]
    sigma_c = critical_sigma(X)
    with pytest.warns(CriticalTemperatureWarning, match="sigma_ is above critical_sigma_"):
        model = SoftKMeans(3, sigma=1.1 * sigma_c, random_state=0, backend="numpy").fit(X)
    assert model.critical_sigma_ == pytest.approx(sigma_c)
    with pytest.warns(CriticalTemperatureWarning, match="within 10% of critical_sigma_"):
        SoftKMeans(3, sigma=0.95 * sigma_c, random_state=0, backend="numpy").fit(X)
    _fit(SoftKMeans, X, sigma=0.85 * sigma_c)
    _fit(EntmaxKMeans, X, sigma=1.1 * sigma_c)  # Prop. 9 is about F_sigma only
    _fit(SoftKMeans, X, n_clusters=1, sigma=1.1 * sigma_c)  # one centroid: the mean anyway


def test_bounds_tolerances_follow_appendix_c():
    u = 2.0**-53
    assert bounds.tol_value(10, 3, 2.0, 5.0) == 4 * 10 * 3 * u * 2.0 * 5.0
    assert bounds.tol_value(10, 3, 2.0, 5.0, 1.0, 2.0) == 4 * 10 * 3 * u * 2.0 * 6.0
    assert bounds.tol_centroid(10, 3, 7.0) == 4 * 10 * 3 * u * 7.0
    assert bounds.tol_relative(10, 3, -2.0) == 4 * 10 * 3 * u * 2.0
    assert bounds.tol_relative(10, 3, 0.0) == 4 * 10 * 3 * 2.0**-1074  # subnormal results
    u32 = 2.0**-24
    assert bounds.unit_roundoff(np.float32) == u32 and bounds.unit_roundoff(np.float64) == u
    assert bounds.tol_centroid(10, 3, 7.0, unit=u32) == 4 * 10 * 3 * u32 * 7.0


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("layout", ["dense", "CSR"])
def test_tolerances_follow_the_precision_of_the_engine(backend, layout):
    """The numba engine multiplies dense float32 data in float32: its certificate's unit is 2^-24.

    Three well separated blobs at their means: the softmax map equals Lloyd's
    to far below float32 rounding, and every bound holds.
    """
    rng = np.random.RandomState(0)
    X = np.vstack([rng.normal(c, 1.0, (100, 4)) for c in rng.normal(0, 3, (3, 4))])
    centers = np.array([X[:100].mean(0), X[100:200].mean(0), X[200:].mean(0)])
    X32 = X.astype(np.float32)
    X32 = sp.csr_matrix(X32) if layout == "CSR" else X32
    cert = certify(X32, centers, sigma=0.3, backend=backend)
    assert cert.all_hold, cert
    unit = 2.0**-24 if (backend, layout) == ("numba", "dense") else 2.0**-53
    row = cert["centroid_map_softmax"]
    max_norm = np.linalg.norm(X.astype(np.float32).astype(float), axis=1).max()
    assert row.tolerance == pytest.approx(bounds.tol_centroid(300, 3, max_norm, unit=unit))
    model = SoftKMeans(3, sigma=0.3, random_state=0, backend=backend, certify=True).fit(X32)
    assert model.bounds_.all_hold


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_tsallis_bounds_hold_where_they_are_attained(backend):
    """Coincident centroids split every row evenly: the uniform Tsallis bound is an equality.

    Its observed value is a sum of 1000 row gaps, whose rounding the tolerance covers.
    """
    X = np.random.RandomState(0).normal(size=(1000, 3))
    cert = certify(X, np.tile(X.mean(0), (2, 1)), sigma=10.0, backend=backend)
    row = cert["tsallis_gap_uniform"]
    assert row.observed == pytest.approx(row.bound, rel=1e-12)
    assert cert.all_hold, cert


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("alpha", [1.01, 1.5, 2.0, 3.0])
def test_rows_are_one_hot_at_the_identification_sigma_itself(backend, alpha):
    """Squaring a square root can put the width an ulp above the margin: sigma_id rounds down."""
    for seed in range(30):
        rng = np.random.RandomState(seed)
        X, centers = rng.normal(size=(200, 3)), rng.normal(size=(4, 3))
        sigma_id = identification_sigma(X, centers, alpha=alpha, backend=backend)
        margin_min = margins(X, centers, backend=backend)[1]
        assert sigma_id == pytest.approx(np.sqrt((alpha - 1) * margin_min / 2), rel=1e-15)
        assert unidentified_count(X, centers, sigma_id, alpha, backend=backend) == 0
        resp = responsibilities(X, centers, sigma_id, alpha=alpha, backend=backend)
        assert np.all((resp == 0) | (resp == 1))


def test_example_figure_runs_headless(tmp_path):
    import runpy
    from pathlib import Path

    script = Path(__file__).parents[1] / "examples" / "plot_responsibilities.py"
    out = tmp_path / "fig.png"
    runpy.run_path(str(script))["make_figure"](12).savefig(out, dpi=50)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_one_centroid_identifies_every_observation(data):
    """Margins are 0 by convention with one centroid, but every responsibility is 1."""
    X, _, weights = data
    center = X.mean(axis=0, keepdims=True)
    assert unidentified_count(X, center, sigma=10.0, sample_weight=weights) == 0
    assert identification_sigma(X, center) == np.inf
    assert np.all(identification_sigma(X, center, per_sample=True) == np.inf)
    model = EntmaxKMeans(1, sigma=10.0, certify=True).fit(X, sample_weight=weights)
    assert np.all(model.predict_proba(X) == 1.0)
    assert model.n_unidentified_ == 0 and model.identification_sigma_ == np.inf
    assert model.bounds_.all_hold


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_critical_sigma_of_zero_covariance_in_many_dimensions(sparse):
    """Above 512 features ARPACK finds the eigenvalue; a zero covariance is 0, not an error."""
    one_row = np.ones((1, 600))
    assert critical_sigma(sp.csr_matrix(one_row) if sparse else one_row) == 0.0
    X = np.random.RandomState(0).normal(size=(5, 600))
    assert critical_sigma(X, sample_weight=[1, 0, 0, 0, 0]) == 0.0
    assert SoftKMeans(1, sigma=1.0, certify=True).fit(one_row).critical_sigma_ == 0.0


@pytest.mark.parametrize(("scale", "match"), [(1e155, "too large"), (1e-170, "too small")])
def test_critical_sigma_rejects_data_outside_float64_like_the_others(data, scale, match):
    with pytest.raises(ValueError, match=match):
        critical_sigma(data[0] * scale)


def test_certificate_membership_by_name(data):
    X, centers, _ = data
    cert = certify(X, centers, sigma=0.5)
    assert "centroid_map_softmax" in cert and "no_such_bound" not in cert


def test_one_cluster_meets_the_fixed_point_hypothesis_at_every_temperature(data):
    X, _, _ = data
    for sigma in (1e-3, 0.5, 100.0):
        constants = certify(X, X.mean(axis=0, keepdims=True), sigma).constants
        assert constants["hypothesis"] and constants["sigma_star"] == np.inf


def test_certificate_objects_reject_an_unknown_relation_and_frame_when_empty():
    with pytest.raises(ValueError, match="relation must be"):
        BoundCheck("x", "Thm 0", 1.0, 2.0, 0.0, "<")
    frame = Certificate([], {}).to_frame()
    assert frame.empty and list(frame.columns) == ["meaning", "source", "observed", "relation",
                                                   "bound", "tolerance", "holds"]


@pytest.mark.parametrize("Estimator, kind", [(SoftKMeans, "softmax"), (EntmaxKMeans, "entmax")])
def test_a_fitted_certificate_holds_the_rows_of_its_relaxation_in_words(data, Estimator, kind):
    from softkmeans._core.bounds import MEANINGS

    model = Estimator(3, sigma=0.4, random_state=0, certify=True).fit(data[0])
    names = [check.name for check in model.bounds_]
    assert names and all(MEANINGS[name][0] in (kind, "both") for name in names)
    assert ("ordering_F_sigma_le_F_alpha" in names) == (kind == "entmax")
    assert ("alpha" in model.bounds_.constants) == (kind == "entmax")
    full = certify(data[0], model.cluster_centers_, model.sigma_)
    assert len(full) == len(MEANINGS) > len(names)
    for line, name in zip(repr(model.bounds_).splitlines()[2:], names, strict=True):
        assert line.startswith(name) and line.endswith(MEANINGS[name][1])


@pytest.mark.parametrize("shape", [(0, 3, 2), (3,), (1, 1, 3, 2)])
def test_fixed_point_constants_names_a_bad_path(data, shape):
    with pytest.raises(ValueError, match="centers must be one configuration"):
        fixed_point_constants(data[0], np.zeros(shape), sigma=1.0)
