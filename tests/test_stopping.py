"""The stopping rule of the estimators and the accelerated alternating update."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.exceptions import ConvergenceWarning

from softkmeans import EntmaxKMeans, SoftKMeans
from softkmeans._core.optimize import StoppingRule, alternating
from softkmeans._core.responsibilities import RelaxationSpec
from softkmeans._core.update_loops import NO_ORIGIN, extrapolate
from softkmeans._engines import get_engine


def _uniform(seed, n=600, d=2):
    return np.random.RandomState(seed).uniform(0, 10, size=(n, d))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_an_identified_entmax_fit_stops_where_kmeans_does(seed, backend):
    """Below its identification temperature an entmax fit is Lloyd's algorithm: the same
    labels, centroids and n_iter_ as KMeans from the same start at the same tol."""
    X = _uniform(seed)
    init, _ = kmeans_plusplus(X, 6, random_state=seed)
    ref = KMeans(6, init=init, n_init=1, algorithm="lloyd").fit(X)
    ours = EntmaxKMeans(6, sigma=1e-7, init=init, backend=backend).fit(X)
    assert ours.gap_ == 0.0  # every pass was hard
    assert ours.n_iter_ == ref.n_iter_ and ours.converged_
    np.testing.assert_array_equal(ours.labels_, ref.labels_)
    np.testing.assert_allclose(ours.cluster_centers_, ref.cluster_centers_, rtol=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_tol_is_relative_to_the_variance_of_the_data(seed):
    """Scaling X scales the threshold with it: the same number of updates."""
    X = _uniform(seed, n=400)
    init = X[:5].copy()
    fits = [SoftKMeans(5, init=init * c, random_state=0).fit(X * c) for c in (1.0, 1e-3, 1e4)]
    assert len({fit.n_iter_ for fit in fits}) == 1
    np.testing.assert_allclose(fits[1].cluster_centers_ * 1e3, fits[0].cluster_centers_,
                               rtol=1e-6)


def test_squarem_lands_on_the_fixed_point_of_a_linear_contraction():
    target = np.array([[1.0, -2.0], [3.0, 0.5]])
    first = np.array([[5.0, 4.0], [-1.0, 2.0]])
    second = target + 0.5 * (first - target)
    third = target + 0.5 * (second - target)
    point = np.empty_like(first)
    largest = extrapolate(first, second, third, 16.0, NO_ORIGIN, False, point)
    np.testing.assert_allclose(point, target, atol=1e-12)
    assert largest == pytest.approx(max(np.sum(target**2, axis=1)))
    origin = np.array([1.0, 1.0])
    assert extrapolate(first, first, first, 16.0, origin, False, point) == np.max(
        np.sum((first - origin) ** 2, axis=1))
    np.testing.assert_array_equal(point, first)  # nothing moved: the plain update
    extrapolate(first + 1e-9, second, third, 16.0, NO_ORIGIN, True, point)
    np.testing.assert_array_equal(point, point.astype(np.float32))  # rounded as stored


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), k=st.integers(2, 6),
       kind=st.sampled_from(["softmax", "entmax"]), scale=st.floats(0.05, 3.0))
def test_the_accelerated_update_never_increases_the_objective(seed, k, kind, scale):
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(200, 3)) + rng.uniform(-2, 2, size=(4, 3))[rng.randint(4, size=200)]
    engine = get_engine("numpy", X)
    run = alternating(engine, X[rng.choice(200, k, replace=False)], RelaxationSpec(kind, scale),
                      max_iter=60, tol=StoppingRule(0.0), record_path=True)
    objective = run.stages[0].as_dict()["objective"]
    rounding = 1e-12 * np.abs(objective).max()
    assert np.all(np.diff(objective) <= rounding)


def test_acceleration_takes_fewer_passes_to_the_same_fixed_point():
    X = _uniform(0, n=2000, d=3)
    engine = get_engine("numpy", X)
    spec = RelaxationSpec("softmax", 0.8)
    runs = [alternating(engine, X[:8], spec, max_iter=2000, tol=StoppingRule(1e-9, accelerate=a))
            for a in (False, True)]
    assert all(run.converged for run in runs)
    assert runs[1].n_iter < 0.7 * runs[0].n_iter
    np.testing.assert_allclose(runs[1].stats.objective, runs[0].stats.objective, rtol=1e-8)


def test_the_relative_rule_is_the_plain_update():
    """A float tol is the paper's rule, without extrapolation (the reproduction's)."""
    assert StoppingRule.of(1e-6) == StoppingRule(1e-6, "relative", accelerate=False)
    rule = StoppingRule(1e-3)
    assert StoppingRule.of(rule) is rule


@pytest.mark.parametrize("Estimator", [SoftKMeans, EntmaxKMeans])
def test_defaults_converge_on_data_without_clusters(Estimator):
    """Uniform data, where the plain update crawled to max_iter=300."""
    X = np.random.RandomState(0).uniform(size=(5000, 8))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = Estimator(20, random_state=0).fit(X)
    assert model.converged_ and model.n_iter_ < 150
    kmeans = KMeans(20, n_init=1, random_state=0).fit(X)
    assert model.inertia_ <= 1.01 * kmeans.inertia_


def test_tol_zero_runs_to_a_fixed_point_or_max_iter():
    X = _uniform(1, n=300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = SoftKMeans(4, sigma=0.5, init=X[:4], tol=0, max_iter=7).fit(X)
    assert model.n_iter_ == 7 and not model.converged_
