"""The estimators in Pipelines and under GridSearchCV over sigma."""

import numpy as np
import pytest
from _helpers import make_mixture
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from softkmeans import AnnealedKMeans, EntmaxKMeans, SoftKMeans

# The grids reach past the critical temperature on purpose: those fits warn and score low.
pytestmark = pytest.mark.filterwarnings(
    "ignore::softkmeans.exceptions.CriticalTemperatureWarning"
)

GRID_FACTORS = np.array([0.25, 0.4, 0.6, 0.8, 1.0, 1.25, 1.6, 2.5, 4.0])


@pytest.mark.parametrize("spread", [0.2, 1.0, 3.0])
@pytest.mark.parametrize("d", [2, 6])
def test_grid_search_recovers_the_mixture_spread(spread, d):
    X, _, _ = make_mixture(n_per=80, k=4, d=d, spread=spread, scale=8 * spread, seed=1)
    search = GridSearchCV(SoftKMeans(4, n_init=3, random_state=0),
                          {"sigma": spread * GRID_FACTORS},
                          cv=KFold(3, shuffle=True, random_state=0)).fit(X)
    ratio = search.best_params_["sigma"] / spread
    assert 1 / 1.5 <= ratio <= 1.5
    scores = search.cv_results_["mean_test_score"]
    assert scores.argmax() not in (0, len(scores) - 1)  # an interior optimum, not monotone


@pytest.mark.parametrize("Estimator", [SoftKMeans, EntmaxKMeans, AnnealedKMeans])
def test_pipeline(Estimator):
    X, y, _ = make_mixture(n_per=40, k=3, d=3, spread=0.5, seed=2)
    params = {"n_temperatures": 8} if Estimator is AnnealedKMeans else {}
    pipe = make_pipeline(StandardScaler(), Estimator(3, random_state=0, **params)).fit(X)
    assert pipe.predict(X).shape == (len(X),)
    proba = pipe.predict_proba(X)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    assert pipe.transform(X).shape == (len(X), 3)
    assert np.isfinite(pipe.score(X))


def test_grid_search_over_a_pipeline_step():
    X, _, _ = make_mixture(n_per=50, k=3, d=2, spread=0.5, seed=4)
    pipe = make_pipeline(StandardScaler(), EntmaxKMeans(3, random_state=0))
    search = GridSearchCV(pipe, {"entmaxkmeans__sigma": [0.05, 0.1, 0.2, 0.4]},
                          cv=KFold(3, shuffle=True, random_state=0)).fit(X)
    assert search.best_params_["entmaxkmeans__sigma"] in (0.05, 0.1, 0.2, 0.4)
