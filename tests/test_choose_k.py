"""AnnealedKMeans(n_clusters="auto"): the path over k and the choice among it."""

import pickle

import numpy as np
import pytest
from scipy.special import entr
from scipy.stats import multivariate_normal
from sklearn.base import clone
from sklearn.cluster import KMeans
from sklearn.datasets import load_iris
from sklearn.mixture import GaussianMixture

from softkmeans import AnnealedKMeans
from softkmeans._core.path_mixtures import (
    Mixture,
    _log_likelihood_and_entropy,
    mixture_log_likelihood,
)


def _blobs(k=4, d=3, per_cluster=50, seed=0):
    rng = np.random.default_rng(seed)
    centres = 8.0 * np.eye(max(k, d))[:k, :d] if k <= d else rng.uniform(-20, 20, (k, d))
    labels = np.repeat(np.arange(k), per_cluster)
    return centres[labels] + rng.standard_normal((labels.size, d)), labels


def _best_of_ten(X, k):
    """The lowest ``J`` of ten single-start KMeans fits."""
    return min(KMeans(k, n_init=1, random_state=s).fit(X).inertia_ for s in range(10))


@pytest.fixture(scope="module")
def fitted():
    X, _ = _blobs()
    return X, AnnealedKMeans("auto", max_clusters=8).fit(X)


def test_auto_finds_the_blobs_and_sizes_every_output(fitted):
    X, model = fitted
    assert model.n_clusters_ == 4
    assert model.cluster_centers_.shape == (4, 3)
    assert model.predict_proba(X).shape == (150 + 50, 4)
    assert model.transform(X).shape == (200, 4)
    assert len(model.get_feature_names_out()) == 4
    assert sorted(np.bincount(model.labels_).tolist()) == [50, 50, 50, 50]


def test_path_visits_every_k_down_the_temperatures(fitted):
    _, model = fitted
    path = model.cluster_path_
    assert [p["n_clusters"] for p in path] == list(range(1, 9))
    assert path[0]["sigma_appeared"] == np.inf
    for before, after in zip(path, path[1:], strict=False):
        assert before["sigma_split"] == after["sigma_appeared"]
        assert after["sigma_appeared"] <= before["sigma_appeared"]
        assert after["inertia"] <= before["inertia"]
    assert int(np.argmin([p["icl"] for p in path])) == 3
    for point in path:
        k = point["n_clusters"]
        assert point["centers"].shape == point["codebook"].shape == (k, 3)
        assert point["weights"].sum() == pytest.approx(1.0)


def test_criteria_count_means_variances_and_weights(fitted):
    X, model = fitted
    for point in model.cluster_path_:
        k = point["n_clusters"]
        assert point["bic"] == pytest.approx(
            -2 * point["log_likelihood"] + (k * (3 + 2) - 1) * np.log(len(X)))
        assert point["icl"] == pytest.approx(point["bic"] + 2 * point["entropy"])
        assert point["entropy"] >= 0
    assert model.cluster_path_[0]["entropy"] == 0.0


def test_path_distortion_against_the_best_of_ten_kmeans(fitted):
    X, model = fitted
    for point in model.cluster_path_[1:]:
        k = point["n_clusters"]
        assert point["inertia"] <= _best_of_ten(X, k) * 1.005


def test_merges_mend_a_growth_that_does_not_nest():
    """Five separated blobs: the growth alone ends 3% above the best partition at k = 4."""
    rng = np.random.default_rng(0)
    centres = np.array([[0, 0], [10, 0], [0, 10], [10, 10], [30, 5]], dtype=float)
    X = np.vstack([c + rng.standard_normal((40, 2)) for c in centres])
    path = AnnealedKMeans("auto", max_clusters=6).fit(X).cluster_path_
    for point in path[1:]:
        k = point["n_clusters"]
        assert point["inertia"] <= _best_of_ten(X, k) * (1 + 1e-9)


def test_restarts_mend_the_largest_k_of_data_without_clusters():
    """Standardized iris: merged down from k = 11 alone, the fit at k = 10 ends 0.6% above
    the best of ten KMeans fits."""
    X = load_iris().data
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    point = AnnealedKMeans("auto", max_clusters=10).fit(X).cluster_path_[-1]
    assert point["n_clusters"] == 10
    assert point["inertia"] <= _best_of_ten(X, 10) * 1.005


def test_fitted_model_is_the_chosen_point(fitted):
    _, model = fitted
    point = model.cluster_path_[model.n_clusters_ - 1]
    assert model.inertia_ == pytest.approx(point["inertia"], rel=1e-9)


def test_icl_keeps_elongated_and_uniform_clusters_whole():
    """Where the spherical mixture's BIC splits them."""
    rng = np.random.default_rng(0)
    stretch = np.array([[2.0, 0.0], [0.0, 1.0]])
    X = np.vstack([rng.standard_normal((200, 2)) @ stretch + c for c in ([0, 0], [0, 8])])
    _check_icl_finds(X, 2)
    squares = np.random.default_rng(1).uniform(-1, 1, (600, 2)) @ [[1, 1], [-1, 1]]
    _check_icl_finds(np.vstack([squares[:300] - [2, 0], squares[300:] + [2, 0]]), 2)


def test_principal_axes_keep_long_clusters_of_any_direction_whole():
    """Three 5:1 clusters, each along its own direction in 4 dimensions: the spherical
    mixture's ICL cuts them, the principal-axis mixture's does not."""
    rng = np.random.default_rng(3)
    parts = []
    for centre in ([0, 0, 0, 0], [25, 0, 0, 0], [0, 25, 0, 0]):
        rotation = np.linalg.qr(rng.standard_normal((4, 4)))[0]
        noise = rng.standard_normal((150, 4)) * [5.0, 1.0, 1.0, 1.0]
        parts.append(noise @ rotation + centre)
    path = _check_icl_finds(np.vstack(parts), 3)
    assert np.argmin([p["icl"] for p in path]) + 1 > 3
    assert path[2]["axis_variances"] == pytest.approx([25.0] * 3, rel=0.25)
    assert path[2]["across_variances"] == pytest.approx([1.0] * 3, rel=0.25)


def _check_icl_finds(X, k):
    model = AnnealedKMeans("auto", max_clusters=8).fit(X)
    bic_k = model.cluster_path_[int(np.argmin([p["bic"] for p in model.cluster_path_]))]
    assert model.n_clusters_ == k and bic_k["n_clusters"] > k
    return model.cluster_path_


def test_log_likelihood_is_that_of_the_spherical_mixture():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((200, 3))
    centers, weights = rng.standard_normal((3, 3)), np.array([0.2, 0.3, 0.5])
    variances = np.array([0.5, 1.0, 2.0])
    gmm = GaussianMixture(3, covariance_type="spherical")
    gmm.weights_, gmm.means_, gmm.covariances_ = weights, centers, variances
    gmm.precisions_cholesky_ = 1 / np.sqrt(variances)
    sample_weight = rng.uniform(0, 2, len(X))
    [(log_likelihood, entropy)] = mixture_log_likelihood(
        X, sample_weight, centers, [Mixture(weights, variances, None, None)])
    assert log_likelihood == pytest.approx(float(sample_weight @ gmm.score_samples(X)),
                                           rel=1e-12)
    assert entropy == pytest.approx(
        float(sample_weight @ entr(gmm.predict_proba(X)).sum(axis=1)), rel=1e-9)


def test_log_likelihood_with_principal_axes_is_that_of_their_gaussians():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((100, 3))
    centers, weights = rng.standard_normal((2, 3)), np.array([0.4, 0.6])
    axes = np.linalg.qr(rng.standard_normal((3, 2)))[0].T
    across, along = np.array([0.5, 2.0]), np.array([3.0, 2.5])
    densities = [
        w * multivariate_normal(c, s * np.eye(3) + (a - s) * np.outer(v, v)).pdf(X)
        for w, c, v, s, a in zip(weights, centers, axes, across, along, strict=True)]
    sample_weight = rng.uniform(0, 2, len(X))
    [(log_likelihood, entropy)] = mixture_log_likelihood(
        X, sample_weight, centers, [Mixture(weights, across, axes, along)])
    total = np.sum(densities, axis=0)
    assert log_likelihood == pytest.approx(float(sample_weight @ np.log(total)), rel=1e-12)
    assert entropy == pytest.approx(
        float(sample_weight @ entr(np.array(densities) / total).sum(axis=0)), rel=1e-9)


def test_path_table_is_pandas_ready(fitted):
    pd = pytest.importorskip("pandas")
    _, model = fitted
    table = pd.DataFrame(model.cluster_path_)
    assert table.shape == (8, 17)
    assert table["n_clusters"].tolist() == list(range(1, 9))


def test_integer_n_clusters_has_no_path_and_refit_drops_it(fitted):
    X, model = fitted
    model = clone(model).set_params(n_clusters=3).fit(X)
    assert model.n_clusters_ == 3 and not hasattr(model, "cluster_path_")
    auto = clone(model).set_params(n_clusters="auto").fit(X)
    assert auto.get_params()["max_clusters"] == 8 and hasattr(auto, "cluster_path_")
    auto.set_params(n_clusters=2).fit(X)
    assert not hasattr(auto, "cluster_path_")


def test_pickle_keeps_the_choice(fitted):
    X, model = fitted
    loaded = pickle.loads(pickle.dumps(model))
    assert loaded.n_clusters_ == 4
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def test_max_clusters_is_capped_at_the_samples():
    X = np.array([[0.0, 0.0], [0.0, 0.1], [10.0, 0.0]])
    model = AnnealedKMeans("auto", max_clusters=50).fit(X)
    assert model.cluster_path_[-1]["n_clusters"] <= 3
    assert 1 <= model.n_clusters_ <= 3


def test_one_cluster_is_a_possible_answer():
    X = np.random.default_rng(0).standard_normal((300, 2))
    assert AnnealedKMeans("auto", max_clusters=6).fit(X).n_clusters_ == 1


@pytest.mark.parametrize(("params", "message"), [
    ({"n_clusters": "auto"}, "needs max_clusters"),
    ({"n_clusters": "auto", "max_clusters": 4, "strategy": "paper"}, "mass-constrained"),
    ({"n_clusters": "auto", "max_clusters": 0}, "max_clusters"),
    ({"n_clusters": "many", "max_clusters": 4}, "n_clusters"),
    ({"n_clusters": 2, "max_clusters": 1.5}, "max_clusters"),
])
def test_bad_parameters_are_refused(params, message):
    X, _ = _blobs()
    with pytest.raises(ValueError, match=message):
        AnnealedKMeans(**params).fit(X)


def test_plot_draws_both_panels(fitted):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from softkmeans.plotting import plot_cluster_path

    _, model = fitted
    phase, distortion = plot_cluster_path(model)
    assert phase.get_xscale() == "log" and distortion.get_xlabel() == "k"
    plt.close("all")
    with pytest.raises(Exception, match="not fitted"):
        plot_cluster_path(AnnealedKMeans(3))


def test_log_likelihood_and_entropy_match_logsumexp_and_keep_infinite_rows():
    """Rows are scored as scipy's logsumexp scores them, an empty component's -inf included;
    a row with no finite log-density keeps its -inf or inf and adds no entropy (it gave NaN
    for both sums)."""
    from scipy.special import logsumexp

    rng = np.random.default_rng(0)
    log_joint = rng.normal(size=(6, 4)) * 20.0
    log_joint[1, 2] = -np.inf
    w = rng.uniform(size=6)
    log_p = logsumexp(log_joint, axis=1)
    post = np.exp(log_joint - log_p[:, None])
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -(w @ np.where(post > 0, post * np.log(post), 0.0).sum(axis=1))
    np.testing.assert_allclose(_log_likelihood_and_entropy(log_joint.copy(), w),
                               [w @ log_p, entropy], rtol=1e-12)
    for value, expected in ((-np.inf, -np.inf), (np.inf, np.inf)):
        rows = log_joint.copy()
        rows[3] = value
        likelihood, entropy_sum = _log_likelihood_and_entropy(rows, w)
        assert likelihood == expected and np.isfinite(entropy_sum)
