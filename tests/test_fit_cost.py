"""A fit costs its iterations: what needs more passes is cheap or computed on request."""

import pickle

import numpy as np
import pytest

from softkmeans import EntmaxKMeans, SoftKMeans
from softkmeans._core.temperature import lambda_max
from softkmeans._engines._numba.engine import NumbaEngine
from softkmeans.diagnostics import Certificate, certify


@pytest.fixture
def blobs():
    rng = np.random.default_rng(0)
    centers = rng.uniform(-5, 5, size=(4, 6))
    return centers[rng.integers(0, 4, 2000)] + rng.normal(size=(2000, 6)), centers


@pytest.mark.parametrize(("dtype", "passes"), [(np.float64, 2), (np.float32, 3)])
@pytest.mark.parametrize("Estimator", [SoftKMeans, EntmaxKMeans])
def test_a_fit_at_max_iter_1_makes_its_passes_only(blobs, monkeypatch, Estimator, dtype, passes):
    """Two E-steps (start and update) and, for float32, one at the stored centroids; the
    certificate's three passes are gone from fit."""
    X, centers = blobs
    count = []
    real = NumbaEngine._pass
    monkeypatch.setattr(NumbaEngine, "_pass", lambda self, *a, **k: count.append(1)
                        or real(self, *a, **k))
    Estimator(4, sigma=0.5, init=centers + 0.3, max_iter=1, backend="numba").fit(X.astype(dtype))
    assert len(count) == passes


def test_bounds_are_computed_on_first_access_as_certify_computes_them(blobs):
    X, centers = blobs
    model = EntmaxKMeans(4, sigma=0.5, init=centers, random_state=0).fit(X)
    assert model._bounds is None
    bounds = model.bounds_
    assert isinstance(bounds, Certificate) and model.bounds_ is bounds
    assert model._bounds_source is None  # the training data are no longer referenced
    expected = certify(X, model.cluster_centers_, model.sigma_, model.alpha)
    assert [row.name for row in bounds] == [row.name for row in expected]
    for got, want in zip(bounds, expected, strict=True):
        assert got.observed == pytest.approx(want.observed, rel=1e-9, abs=1e-12), got.name
    assert bounds.all_hold == expected.all_hold


def test_a_pickled_model_keeps_no_training_data(blobs):
    X, centers = blobs
    model = SoftKMeans(4, sigma=0.5, init=centers).fit(X)
    fresh = pickle.loads(pickle.dumps(model))
    assert model._bounds_source is not None  # pickling does not drop it from the model
    with pytest.raises(AttributeError, match="certify"):
        assert fresh.bounds_ is None  # raises
    read = model.bounds_
    assert pickle.loads(pickle.dumps(model)).bounds_.all_hold == read.all_hold
    with pytest.raises(AttributeError):
        assert SoftKMeans(4).bounds_ is None  # raises


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
