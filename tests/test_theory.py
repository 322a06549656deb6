"""Property tests: the paper's statements hold on random configurations.

Every test runs the numpy engine (``backend="numpy"``), so it does not depend
on the compiled engines. Sizes are small and the number of examples is capped
so that the file runs in seconds.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from softkmeans import SoftKMeans
from softkmeans._core.optimize import HARD, alternating
from softkmeans._core.responsibilities import RelaxationSpec
from softkmeans._engines import get_engine
from softkmeans.diagnostics import (
    certify,
    critical_sigma,
    fixed_point_constants,
    identification_sigma,
    margins,
    responsibilities,
)
from softkmeans.exceptions import CriticalTemperatureWarning

# Derandomized: the same examples in every run, so that a CI result does not depend on the
# draw (a random draw found the subnormal gaps that tol_relative's second term covers).
FAST = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@st.composite
def configurations(draw, max_clusters=4, grid=None):
    """Data, centroids and weights; a coarse grid gives ties and duplicated points."""
    n = draw(st.integers(2, 24))
    d = draw(st.integers(1, 3))
    k = draw(st.integers(1, max_clusters))
    on_grid = draw(st.booleans()) if grid is None else grid
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.RandomState(seed)
    X = rng.randint(-3, 4, size=(n, d)) * 0.5 if on_grid else rng.normal(0, 3, size=(n, d))
    X = X + draw(st.sampled_from([0.0, 100.0]))
    X = X.astype(draw(st.sampled_from([np.float32, np.float64])))
    if draw(st.booleans()):
        centers = X[rng.randint(n, size=k)].astype(np.float64)
    else:
        centers = X.mean(axis=0) + rng.normal(0, 2, size=(k, d))
        if on_grid:
            centers = np.round(centers * 2) / 2
    weights = None
    if draw(st.booleans()):
        weights = rng.randint(0, 4, size=n).astype(float)
        weights[rng.randint(n)] = 1.0
    return X, centers, weights


sigmas = st.floats(1e-2, 30.0)
alphas = st.one_of(st.sampled_from([1.5, 2.0]), st.floats(1.1, 4.0))


@FAST
@given(configurations(), sigmas, alphas)
def test_every_bound_holds(config, sigma, alpha):
    X, centers, weights = config
    cert = certify(X, centers, sigma, alpha, sample_weight=weights, backend="numpy")
    assert cert.all_hold, repr(cert)


@FAST
@given(configurations(grid=False), st.sampled_from([1.25, 1.5, 2.0, 3.0]))
def test_entmax_identification_is_sharp(config, alpha):
    X, centers, _ = config
    delta, delta_min = margins(X, centers, backend="numpy")
    scale = float(np.max(np.abs(X)) + np.max(np.abs(centers))) ** 2
    assume(centers.shape[0] > 1 and delta_min > 1e-6 * scale)
    sigma_id = identification_sigma(X, centers, alpha, backend="numpy")
    below = responsibilities(X, centers, 0.999 * sigma_id, alpha, backend="numpy")
    above = responsibilities(X, centers, 1.001 * sigma_id, alpha, backend="numpy")
    assert np.all((below == 0) | (below == 1))
    assert not np.all((above == 0) | (above == 1))


def _lloyd_path(engine, start, max_iter=30):
    run = alternating(engine, start, HARD, max_iter=max_iter, tol=0.0, record_path="centers")
    return np.asarray(run.stages[0].centers)


def _soft_path(engine, start, spec, n_updates):
    run = alternating(engine, start, spec, max_iter=n_updates, tol=0.0, record_path="centers")
    path = np.asarray(run.stages[0].centers)
    pad = np.repeat(path[-1:], n_updates + 1 - len(path), axis=0)
    return np.concatenate([path, pad])


def _path_start(config):
    X, centers, weights = config
    assume(centers.shape[0] > 1)
    X = np.asarray(X, dtype=np.float64)
    return X, get_engine("numpy", X, weights), centers, weights


@FAST
@given(configurations(grid=False), st.floats(0.05, 0.999), st.sampled_from([1.5, 2.0, 3.0]))
def test_alternating_entmax_follows_lloyd_exactly(config, fraction, alpha):
    """Cor. 26: margins >= 2 sigma^2 / (alpha - 1) along Lloyd's path give equal iterates."""
    X, engine, start, weights = _path_start(config)
    lloyd = _lloyd_path(engine, start)
    consts = fixed_point_constants(X, lloyd, 1.0, sample_weight=weights, backend="numpy")
    assume(consts["delta"] > 0 and consts["rho"] > 0)
    sigma = fraction * np.sqrt((alpha - 1) * consts["delta"] / 2)
    entmax = _soft_path(engine, start, RelaxationSpec("entmax", sigma, alpha), len(lloyd) - 1)
    np.testing.assert_array_equal(entmax, lloyd)


@FAST
@given(configurations(grid=False), st.floats(0.2, 0.999))
def test_alternating_softmax_tracks_lloyd(config, fraction):
    """Thm 25: below sigma*, same partitions and distance <= eps(sigma) at every iteration."""
    X, engine, start, weights = _path_start(config)
    lloyd = _lloyd_path(engine, start)
    path_consts = fixed_point_constants(X, lloyd, 1.0, sample_weight=weights, backend="numpy")
    assume(path_consts["delta"] > 0 and path_consts["rho"] > 0)
    sigma = fraction * path_consts["sigma_star"]
    consts = fixed_point_constants(X, lloyd, sigma, sample_weight=weights, backend="numpy")
    assert consts["hypothesis"]
    soft = _soft_path(engine, start, RelaxationSpec("softmax", sigma), len(lloyd) - 1)
    tol = 16 * len(X) * np.finfo(float).eps * np.sqrt(engine.x_sq.max())
    for mu_s, mu_l in zip(soft, lloyd, strict=True):
        labels_s = engine.estep(mu_s, HARD, with_sums=False).labels
        labels_l = engine.estep(mu_l, HARD, with_sums=False).labels
        np.testing.assert_array_equal(labels_s, labels_l)
        assert np.linalg.norm(mu_s - mu_l, axis=1).max() <= consts["eps"] + tol


def _blobs(seed):
    rng = np.random.RandomState(seed)
    means = np.array([[0.0, 0.0], [4.0, 0.0], [2.0, 3.5]])
    return np.vstack([rng.normal(m, 0.6, size=(30, 2)) for m in means]), rng


@pytest.mark.filterwarnings("ignore:Number of distinct clusters")  # merged centroids
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_softmax_collapses_above_critical_temperature(seed):
    """Prop. 9: at sigma^2 = 1.2 lambda_max the centroids meet at the mean; at 0.5 they do not."""
    X, rng = _blobs(seed)
    start = X[rng.choice(len(X), 3, replace=False)]
    sigma_c = critical_sigma(X)
    model = SoftKMeans(3, sigma=np.sqrt(1.2) * sigma_c, init=start, max_iter=2000,
                       tol=1e-12, backend="numpy")
    with pytest.warns(CriticalTemperatureWarning, match="critical temperature"):
        model.fit(X)
    spread = np.linalg.norm(model.cluster_centers_ - X.mean(axis=0), axis=1).max()
    assert spread <= 1e-3 * sigma_c
    model.set_params(sigma=np.sqrt(0.5) * sigma_c).fit(X)
    spread = np.linalg.norm(model.cluster_centers_ - X.mean(axis=0), axis=1).max()
    assert spread >= 0.1 * sigma_c
