"""partial_fit: running sufficient statistics with a forgetting factor."""

import numpy as np
import pytest
import scipy.sparse as sp
from _helpers import make_mixture

from softkmeans import AnnealedKMeans, EntmaxKMeans, SoftKMeans
from softkmeans.diagnostics import responsibilities

ESTIMATORS = [SoftKMeans, EntmaxKMeans]


def _stream(model, X, n_epochs, n_batches=8, seed=0):
    """Feed ``n_epochs`` shuffled passes over X in ``n_batches`` batches each."""
    rng = np.random.RandomState(seed)
    for _ in range(n_epochs):
        for rows in np.array_split(rng.permutation(X.shape[0]), n_batches):
            model.partial_fit(X[rows])
    return model


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_a_stationary_stream_converges_to_the_batch_solution(Estimator):
    X, _, means = make_mixture(n_per=400, k=4, spread=0.5, scale=3.0, seed=1)
    init = means + 0.8
    batch = Estimator(4, sigma=0.5, init=init).fit(X).cluster_centers_
    errors = []
    model = Estimator(4, sigma=0.5, init=init)
    for n_epochs in (1, 4, 25):  # 1, 5, then 30 epochs in all
        _stream(model, X, n_epochs, seed=n_epochs)
        errors.append(float(np.abs(model.cluster_centers_ - batch).max()))
    # the first batches' statistics keep a weight 1/t: the error falls about as 1/epochs
    assert errors[2] < errors[1] / 3 < errors[0] / 3
    assert errors[2] < 0.02  # the clusters' deviation is 0.5
    assert model.n_steps_ == 30 * 8


def test_sigma_auto_follows_the_running_shared_variance():
    X, _, means = make_mixture(n_per=400, k=4, spread=0.5, scale=3.0, seed=1)
    fitted = SoftKMeans(4, init=means).fit(X)
    model = _stream(SoftKMeans(4, init=means), X, n_epochs=20)
    assert model.sigma_ == pytest.approx(fitted.sigma_, rel=0.05)
    assert np.abs(model.cluster_centers_ - fitted.cluster_centers_).max() < 0.02


@pytest.mark.parametrize("decay", [0.0, 0.5, 1.0])
def test_the_update_is_the_decayed_running_mean(decay):
    X, _, means = make_mixture(n_per=50, k=3, seed=2)
    first, second = X[:70], X[70:]
    w1, w2 = np.linspace(0.5, 2.0, len(first)), np.linspace(2.0, 0.1, len(second))
    model = SoftKMeans(3, sigma=0.8, init=means, decay=decay)
    model.partial_fit(first, sample_weight=w1)
    r1 = responsibilities(first, means, 0.8) * w1[:, None]
    middle = (r1.T @ first) / r1.sum(axis=0)[:, None]
    np.testing.assert_allclose(model.cluster_centers_, middle, rtol=1e-12)
    model.partial_fit(second, sample_weight=w2)
    r2 = responsibilities(second, middle, 0.8) * w2[:, None]
    sums = decay * (r1.T @ first) + r2.T @ second
    masses = decay * r1.sum(axis=0) + r2.sum(axis=0)
    np.testing.assert_allclose(model.cluster_centers_, sums / masses[:, None], rtol=1e-12)


def test_a_centroid_no_batch_reaches_is_kept_or_reseeded():
    X, _, means = make_mixture(n_per=50, k=3, seed=3)
    far = np.vstack([means, [[1e3, 1e3]]])
    kept = EntmaxKMeans(4, sigma=0.3, init=far, empty_cluster="keep",
                        reassignment_ratio=0).partial_fit(X)
    np.testing.assert_array_equal(kept.cluster_centers_[3], far[3])
    reseeded = EntmaxKMeans(4, sigma=0.3, init=far).partial_fit(X)
    assert (reseeded.cluster_centers_[3] == X).all(axis=1).any()  # onto an observation
    assert reseeded._stream.n_reseeded == 1
    # softmax mass never vanishes: the far centroid moves onto the data's weighted mean
    soft = SoftKMeans(4, sigma=400.0, init=far).partial_fit(X)
    assert np.abs(soft.cluster_centers_[3]).max() < 10


def test_weights_are_repetitions():
    X, _, means = make_mixture(n_per=40, k=3, seed=4)
    twice = np.vstack([X, X[:10]])
    weights = np.r_[np.full(10, 2.0), np.ones(len(X) - 10)]
    a = SoftKMeans(3, sigma=0.5, init=means).partial_fit(X, sample_weight=weights)
    b = SoftKMeans(3, sigma=0.5, init=means).partial_fit(twice)
    np.testing.assert_allclose(a.cluster_centers_, b.cluster_centers_, rtol=1e-12)


def test_sparse_batches_match_dense_ones():
    X, _, means = make_mixture(n_per=40, k=3, seed=5)
    dense = _stream(SoftKMeans(3, init=means), X, n_epochs=2)
    sparse = _stream(SoftKMeans(3, init=means), sp.csr_matrix(X), n_epochs=2)
    np.testing.assert_allclose(dense.cluster_centers_, sparse.cluster_centers_, rtol=1e-10)
    assert dense.sigma_ == pytest.approx(sparse.sigma_, rel=1e-10)


def test_partial_fit_after_fit_continues_and_drops_the_fit_attributes():
    X, _, means = make_mixture(n_per=40, k=3, seed=6)
    model = SoftKMeans(3, sigma=0.5, init=means).fit(X)
    centers = model.cluster_centers_.copy()
    model.partial_fit(X)
    np.testing.assert_allclose(model.cluster_centers_, centers, atol=1e-6)
    for name in ("labels_", "margins_", "inertia_", "n_iter_"):
        assert not hasattr(model, name)
    with pytest.raises(AttributeError, match="partial_fit"):
        model.bounds_  # noqa: B018
    assert not hasattr(model, "critical_sigma_")
    assert model.predict(X).shape == (len(X),)


def test_float32_batches_keep_their_dtype():
    X, _, means = make_mixture(n_per=40, k=3, seed=7)
    model = _stream(SoftKMeans(3, init=means), X.astype(np.float32), n_epochs=1)
    assert model.cluster_centers_.dtype == np.float32
    model.partial_fit(X)  # a later float64 batch keeps the first batch's dtype
    assert model.cluster_centers_.dtype == np.float32


def test_bad_batches_are_refused():
    X, _, _ = make_mixture(n_per=5, k=3, seed=8)
    with pytest.raises(ValueError, match="n_samples=2 should be >= n_clusters=3"):
        SoftKMeans(3).partial_fit(X[:2])
    model = SoftKMeans(3, random_state=0).partial_fit(X)
    with pytest.raises(ValueError, match="features"):
        model.partial_fit(np.ones((4, 3)))
    with pytest.raises(ValueError, match="decay"):
        SoftKMeans(3, decay=1.5).partial_fit(X)


def test_annealing_has_no_partial_fit():
    assert not hasattr(AnnealedKMeans(), "partial_fit")


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_a_failed_call_leaves_the_estimator_as_it_was(Estimator):
    from sklearn.exceptions import NotFittedError

    X, _, _ = make_mixture(n_per=5, k=3, seed=8)
    model = Estimator(3)
    for bad in (X[:2], np.vstack([X, [[np.nan, 0.0]]])):
        with pytest.raises(ValueError):
            model.partial_fit(bad)
        assert vars(model) == vars(Estimator(3))
        with pytest.raises(NotFittedError):
            model.predict(X)
        with pytest.raises(ValueError):
            model.fit(bad)
        assert vars(model) == vars(Estimator(3))
    model.partial_fit(X)
    centers, steps = model.cluster_centers_, model.n_steps_
    with pytest.raises(ValueError, match="features"):
        model.partial_fit(np.ones((4, 3)))
    assert model.cluster_centers_ is centers and model.n_steps_ == steps


@pytest.mark.parametrize("name, value", [("n_clusters", 5), ("sigma", 0.3), ("alpha", 2.0)])
@pytest.mark.parametrize("start", ["partial_fit", "fit"])
def test_set_params_between_calls_cannot_change_the_model(name, value, start):
    X, _, _ = make_mixture(n_per=20, k=3, seed=9)
    model = EntmaxKMeans(3, sigma=0.5, random_state=0)
    getattr(model, start)(X)
    centers = model.cluster_centers_
    model.set_params(**{name: value})
    with pytest.raises(ValueError, match=f"{name}={value!r} was set after the model was fitted"):
        model.partial_fit(X)
    assert model.cluster_centers_ is centers
    model.fit(X)  # a fit starts again with the new value
    assert model.cluster_centers_.shape[0] == model.n_clusters
    model.partial_fit(X)


def test_decay_changes_between_calls_apply_to_the_next_batch():
    X, _, means = make_mixture(n_per=20, k=3, seed=10)
    a = SoftKMeans(3, sigma=0.5, init=means).partial_fit(X[:30])
    b = SoftKMeans(3, sigma=0.5, init=means, decay=0.5).partial_fit(X[:30])
    a.set_params(decay=0.5).partial_fit(X[30:])
    b.partial_fit(X[30:])
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    centers = a.cluster_centers_.copy()
    for setting in ({"decay": 1.5}, {"reassignment_ratio": -1.0}, {"n_threads": 0}):
        with pytest.raises(ValueError, match=next(iter(setting))):  # checked at every batch
            a.set_params(**setting).partial_fit(X[30:])
        a.set_params(decay=0.5, reassignment_ratio=0.01, n_threads=None)
    np.testing.assert_array_equal(a.cluster_centers_, centers)


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_a_first_batch_needs_n_clusters_rows_even_with_an_array_init(Estimator):
    """Its update puts every centroid at its weighted mean of that batch: one row would
    put all of them on it."""
    X, _, means = make_mixture(n_per=20, k=3, seed=11)
    for init in (means, "k-means++"):
        with pytest.raises(ValueError, match="n_samples=1 should be >= n_clusters=3"):
            Estimator(3, sigma=0.5, init=init).partial_fit(X[:1])
    model = Estimator(3, sigma=0.5, init=means).partial_fit(X[:3])
    assert model.n_steps_ == 1 and np.isfinite(model.cluster_centers_).all()
    # the docstring says so (it once said the limit held for a drawn init only)
    doc = " ".join(Estimator.partial_fit.__doc__.split())
    assert "at least ``n_clusters`` samples of positive weight, an array ``init`` too" in doc


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_fit_after_partial_fit_drops_the_stream(Estimator):
    X, _, means = make_mixture(n_per=20, k=3, seed=12)
    model = Estimator(3, sigma=0.5, init=means).partial_fit(X).partial_fit(X)
    assert model.n_steps_ == 2
    model.fit(X)
    assert not hasattr(model, "n_steps_")
    assert Estimator(3, sigma=0.5, init=means).fit(X).cluster_centers_.tolist() == \
        model.cluster_centers_.tolist()
    model.partial_fit(X)
    assert model.n_steps_ == 1
