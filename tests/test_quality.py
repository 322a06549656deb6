"""The defaults against scikit-learn's KMeans on data a user would try (issue: quality)."""

import warnings

import numpy as np
import pytest
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import adjusted_rand_score
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.preprocessing import StandardScaler

from softkmeans import AnnealedKMeans, EntmaxKMeans, SoftKMeans
from softkmeans._core.temperature import lambda_max
from softkmeans.exceptions import CriticalTemperatureWarning


def _grid_of_tight_clusters(per_cluster=20, seed=0):
    rng = np.random.default_rng(seed)
    corners = np.array([(i, j) for i in range(10) for j in range(10)], dtype=float)
    labels = np.repeat(np.arange(100), per_cluster)
    return corners[labels] + 0.03 * rng.standard_normal((labels.size, 2)), labels


@pytest.mark.parametrize("seed", range(5))
def test_annealing_recovers_a_grid_of_100_tight_clusters_from_any_seed(seed):
    X, labels = _grid_of_tight_clusters()
    model = AnnealedKMeans(100, random_state=seed).fit(X)
    assert adjusted_rand_score(labels, model.labels_) == 1.0
    best = min(KMeans(100, n_init=1, random_state=s).fit(X).inertia_ for s in range(10))
    assert model.inertia_ <= best * (1 + 1e-9)


def test_annealing_does_not_depend_on_the_seed():
    X, _ = _grid_of_tight_clusters(per_cluster=5, seed=1)
    X = X[: 300]
    first, second = (AnnealedKMeans(30, random_state=s).fit(X) for s in (0, 123))
    np.testing.assert_array_equal(first.cluster_centers_, second.cluster_centers_)


def test_paper_strategy_keeps_its_schedule():
    X, _ = _grid_of_tight_clusters(per_cluster=5)
    model = AnnealedKMeans(4, strategy="paper", n_temperatures=6, random_state=0).fit(X)
    assert model.temperatures_.shape == (6,)


def test_sigma_auto_on_digits_is_within_1_5x_of_the_grid_search():
    X = StandardScaler().fit_transform(load_digits().data)
    scale = np.sqrt(lambda_max(X))
    grid = {"sigma": list(scale * np.geomspace(0.05, 1.0, 12))}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CriticalTemperatureWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)
        search = GridSearchCV(SoftKMeans(10, random_state=0), grid,
                              cv=KFold(3, shuffle=True, random_state=0)).fit(X)
    chosen = search.best_params_["sigma"]
    fitted = SoftKMeans(10, random_state=0).fit(X).sigma_
    assert chosen / 1.5 <= fitted <= 1.5 * chosen


@pytest.mark.parametrize("Estimator", [SoftKMeans, EntmaxKMeans])
def test_sigma_auto_keeps_the_distortion_of_lloyd_from_the_same_start(Estimator):
    X = StandardScaler().fit_transform(load_digits().data)
    init, _ = kmeans_plusplus(X, 10, random_state=0)
    lloyd = KMeans(10, init=init, n_init=1).fit(X)
    model = Estimator(10, init=init, certify=True).fit(X)
    assert model.inertia_ <= 1.01 * lloyd.inertia_
    assert model.sigma_ < 0.9 * model.critical_sigma_


@pytest.mark.parametrize("make", [lambda: SoftKMeans(3, sigma=0.5),
                                  lambda: EntmaxKMeans(3, sigma=0.5),
                                  lambda: AnnealedKMeans(3, max_iter=1)])
def test_a_fit_stopped_at_max_iter_warns(make):
    X, _ = _grid_of_tight_clusters(per_cluster=3)
    model = make().set_params(random_state=0, max_iter=1, tol=0)
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        model.fit(X)
    assert not model.converged_


def test_entmax_relocates_an_empty_cluster_by_default():
    """scikit-learn's test_kmeans_empty_cluster_relocated: one far centroid without points."""
    X = np.array([[-1.0], [1.0]])
    init = np.array([[-1.0], [10.0]])
    model = EntmaxKMeans(2, sigma=0.1, init=init).fit(X)
    assert len(set(model.labels_)) == 2
    np.testing.assert_allclose(np.sort(model.cluster_centers_.ravel()), [-1.0, 1.0])


def test_paper_only_parameters_warn_under_the_default_strategy():
    X, _ = _grid_of_tight_clusters(per_cluster=3)
    with pytest.warns(UserWarning, match="n_temperatures, init only apply to strategy='paper'"):
        AnnealedKMeans(4, n_temperatures=5, init="random").fit(X)
    with pytest.warns(UserWarning, match="n_init only applies to strategy='paper'"):
        AnnealedKMeans(4, n_init=10).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        AnnealedKMeans(4).fit(X)
        AnnealedKMeans(4, random_state=0).fit(X)
        AnnealedKMeans(4, strategy="paper", n_temperatures=5).fit(X)
