"""Bad input is rejected with a ValueError/TypeError that names the problem."""

import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, cross_val_score

import softkmeans
from softkmeans import AnnealedKMeans, EntmaxKMeans, SoftKMeans

X = np.random.RandomState(0).normal(size=(30, 3))
ESTIMATORS = [SoftKMeans, EntmaxKMeans, AnnealedKMeans]


@pytest.mark.parametrize("Estimator", ESTIMATORS)
@pytest.mark.parametrize("bad, match", [
    (np.where(np.arange(90).reshape(30, 3) == 4, np.nan, X), "NaN"),
    (np.where(np.arange(90).reshape(30, 3) == 4, np.inf, X), "infinity"),
    (X[:, 0], "Expected 2D array"),
    (np.empty((0, 3)), "0 sample"),
    (X[:2], "n_samples=2 should be >= n_clusters=3"),
    (X.astype(complex), "Complex data not supported"),
    (np.array([["a", "b"], ["c", "d"], ["e", "f"]], dtype=object), "could not convert"),
])
def test_bad_X(Estimator, bad, match):
    with pytest.raises(ValueError, match=match):
        Estimator(3).fit(bad)


@pytest.mark.parametrize("Estimator", ESTIMATORS)
@pytest.mark.parametrize("weights, match", [
    (np.r_[np.nan, np.ones(29)], "NaN"),
    (np.r_[np.inf, np.ones(29)], "infinity"),
    (np.r_[-1.0, np.ones(29)], "Negative values in data passed to .sample_weight"),
    (np.zeros(30), "at least one non-zero"),
    (np.r_[1.0, 1.0, np.zeros(28)], "Only 2 samples have a positive sample_weight"),
    (np.ones(12), "sample_weight.shape == \\(12,\\), expected \\(30,\\)"),
])
def test_bad_sample_weight(Estimator, weights, match):
    with pytest.raises(ValueError, match=match):
        Estimator(3).fit(X, sample_weight=weights)


@pytest.mark.parametrize("Estimator", [SoftKMeans, EntmaxKMeans])
@pytest.mark.parametrize("sigma", [0.0, -1.0, np.inf, np.nan, "large"])
def test_bad_sigma(Estimator, sigma):
    with pytest.raises(ValueError, match="'sigma' parameter"):
        Estimator(3, sigma=sigma).fit(X)


@pytest.mark.parametrize("Estimator", [EntmaxKMeans, AnnealedKMeans])
@pytest.mark.parametrize("alpha", [1.0, 0.5, -2.0, np.inf, np.nan])
def test_bad_alpha(Estimator, alpha):
    with pytest.raises(ValueError, match="'alpha' parameter"):
        Estimator(3, alpha=alpha).fit(X)


@pytest.mark.parametrize("Estimator, params, match", [
    (SoftKMeans, {"algorithm": "newton"}, "'algorithm' parameter"),
    (SoftKMeans, {"init": "kmeans"}, "'init' parameter"),
    (SoftKMeans, {"n_init": 0}, "'n_init' parameter"),
    (SoftKMeans, {"max_iter": 0}, "'max_iter' parameter"),
    (SoftKMeans, {"tol": -1.0}, "'tol' parameter"),
    (SoftKMeans, {"backend": "fortran"}, "'backend' parameter"),
    (SoftKMeans, {"n_threads": 0}, "'n_threads' parameter"),
    (EntmaxKMeans, {"n_threads": 1.5}, "'n_threads' parameter"),
    (AnnealedKMeans, {"n_threads": "all"}, "'n_threads' parameter"),
    (SoftKMeans, {"n_clusters": 0}, "'n_clusters' parameter"),
    (SoftKMeans, {"record_path": "everything"}, "'record_path' parameter"),
    (EntmaxKMeans, {"empty_cluster": "drop"}, "'empty_cluster' parameter"),
    (AnnealedKMeans, {"method": "tsallis"}, "'method' parameter"),
    (AnnealedKMeans, {"schedule": "fast"}, "'schedule' parameter"),
    (AnnealedKMeans, {"strategy": "paper", "schedule": [1.0, -1.0]}, "schedule must lie in"),
    (AnnealedKMeans, {"strategy": "paper", "schedule": [1.0, 1e-200]}, "schedule must lie in"),
    (AnnealedKMeans, {"strategy": "paper", "schedule": [[1.0, 0.5]]}, "1-D array"),
    (AnnealedKMeans, {"strategy": "paper", "schedule": []}, "non-empty 1-D array"),
    (AnnealedKMeans, {"strategy": "paper", "schedule": np.array(1.0)}, "non-empty 1-D array"),
    (SoftKMeans, {"sigma": 1e-200}, "'sigma' parameter"),
    (EntmaxKMeans, {"sigma": 1e200}, "'sigma' parameter"),
    (AnnealedKMeans, {"schedule": [1.0, np.nan]}, "NaN"),
    (AnnealedKMeans, {"n_temperatures": 0}, "'n_temperatures' parameter"),
    (SoftKMeans, {"init": np.zeros((2, 3))}, "init has shape \\(2, 3\\)"),
    (SoftKMeans, {"init": np.zeros((3, 2))}, "init has shape \\(3, 2\\)"),
])
def test_bad_parameters(Estimator, params, match):
    with pytest.raises(ValueError, match=match):
        Estimator(**{"n_clusters": 3, **params}).fit(X)


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_wrong_number_of_features_at_predict(Estimator):
    model = Estimator(3, random_state=0).fit(X)
    for method in ("predict", "predict_proba", "transform", "score", "score_samples"):
        with pytest.raises(ValueError, match="has 2 features, but .* is expecting 3"):
            getattr(model, method)(X[:, :2])


def test_not_fitted():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        SoftKMeans(3).predict(X)


@pytest.mark.filterwarnings("ignore::softkmeans.exceptions.CriticalTemperatureWarning")
@pytest.mark.filterwarnings("ignore:Number of distinct clusters")  # merged centroids
@pytest.mark.parametrize("sigma", [1e-12, 1e12])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_extreme_sigma_gives_finite_results(sigma, dtype):
    Xd = X.astype(dtype)
    for Estimator in (SoftKMeans, EntmaxKMeans):
        model = Estimator(3, sigma=sigma, random_state=0, max_iter=20).fit(Xd)
        for value in (model.cluster_centers_, model.inertia_, model.objective_,
                      model.predict_proba(Xd), model.score_samples(Xd)):
            assert np.all(np.isfinite(value))


@pytest.mark.parametrize("dtype, big", [(np.float64, 1e160), (np.float32, 1e19)])
def test_values_whose_squares_overflow_are_rejected(dtype, big):
    Xbig = X.astype(dtype).copy()
    Xbig[0, 0] = big
    for Estimator in ESTIMATORS:
        with pytest.raises(ValueError, match="too large in magnitude"):
            Estimator(3).fit(Xbig)
        model = Estimator(3, random_state=0).fit(X.astype(dtype))
        with pytest.raises(ValueError, match="too large in magnitude"):
            model.predict(Xbig)


def test_values_whose_squares_sum_beyond_float64_are_rejected():
    """Each row's squared norm fits float64 (1e152 x 1e152 x a few), their sum over the rows
    does not: the covariance ended in LinAlgError ("Eigenvalues did not converge")."""
    rows = np.repeat(X, 1 + 2000 // len(X), axis=0) * 1e152
    for Estimator in ESTIMATORS:
        with pytest.raises(ValueError, match="squared norms sum to"):
            Estimator(3).fit(rows)
    model = SoftKMeans(3, random_state=0).fit(X)
    assert model.predict(rows).shape == (len(rows),)  # row by row: no sum over them


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("dtype, scale", [(np.float64, 1e-160), (np.float64, 1e-148),
                                          (np.float32, 1e-17)])
def test_values_whose_squares_underflow_are_rejected(dtype, scale, sparse):
    Xsmall = (X * scale).astype(dtype)
    Xsmall = sp.csr_matrix(Xsmall) if sparse else Xsmall
    for Estimator in ESTIMATORS:
        with pytest.raises(ValueError, match="too small in magnitude"):
            Estimator(3).fit(Xsmall)


@pytest.mark.parametrize("dtype, tiny", [(np.float64, 1e-160), (np.float32, 1e-25)])
def test_points_near_the_origin_are_predicted(dtype, tiny):
    """Their own squares underflow, but their distances to the fitted centroids do not: the
    magnitude check of fit refused them at inference."""
    near_origin = np.zeros((2, X.shape[1]), dtype)
    near_origin[1, 0] = tiny
    for Estimator in ESTIMATORS:
        model = Estimator(3, random_state=0).fit(X.astype(dtype))
        centers = model.cluster_centers_.astype(np.float64)
        expected = np.argmin((centers ** 2).sum(axis=1))  # the nearest centroid to 0
        np.testing.assert_array_equal(model.predict(near_origin), [expected, expected])
        lengths = np.sqrt((centers ** 2).sum(axis=1))
        np.testing.assert_allclose(model.transform(near_origin), [lengths, lengths], rtol=1e-5)
        assert np.isfinite(model.score_samples(near_origin)).all()


def test_all_zero_data_is_not_too_small():
    zeros = np.zeros((20, 3))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = SoftKMeans(3, random_state=0).fit(zeros)
    # One distinct cluster, as scikit-learn's KMeans warns; nor above a critical temperature of 0.
    assert [w.category for w in caught] == [ConvergenceWarning]
    assert model.inertia_ == 0.0
    np.testing.assert_array_equal(model.predict(zeros), model.labels_)


@pytest.mark.parametrize("method", ["fit", "fit_predict", "fit_transform"])
@pytest.mark.parametrize("Estimator", [SoftKMeans, EntmaxKMeans, AnnealedKMeans])
def test_array_init_with_several_inits_warns_at_the_callers_line_and_runs_once(Estimator,
                                                                              method):
    """AnnealedKMeans pointed into softkmeans/_base.py, fit_transform into scikit-learn."""
    model = Estimator(3, init=X[:3], n_init=4)
    with pytest.warns(RuntimeWarning, match="instead of n_init=4") as caught:
        getattr(model, method)(X)
    assert model.n_iter_ >= 1
    assert caught[0].filename == __file__


@pytest.mark.parametrize("search", ["grid", "cross_val_score"])
def test_warnings_of_fits_inside_a_search_point_at_the_callers_line(search):
    """They pointed into joblib, which scikit-learn's searches call the fits through."""
    model = SoftKMeans(3, init=X[:3], n_init=4)
    with pytest.warns(RuntimeWarning, match="instead of n_init=4") as caught:
        if search == "grid":
            GridSearchCV(model, {"sigma": [0.5]}, cv=2).fit(X)
        else:
            cross_val_score(model, X, cv=2)
    assert {w.filename for w in caught} == {__file__}


def test_n_init_auto_is_ten_for_a_callable_init_as_in_scikit_learn():
    calls = []

    def first_rows(X, n_clusters, random_state):
        calls.append(1)
        return X[random_state.choice(len(X), n_clusters, replace=False)]

    SoftKMeans(3, init=first_rows, random_state=0).fit(X)
    assert len(calls) == 10


@pytest.mark.parametrize("dtype, perturbation", [(np.float64, 1e160), (np.float32, 1e19)])
def test_a_perturbation_that_would_overflow_the_distances_is_rejected(dtype, perturbation):
    """It gave NaN objectives and infinite distances without a word."""
    with pytest.raises(ValueError, match="perturbation=.* would move centroids so far"):
        AnnealedKMeans(3, strategy="paper", perturbation=perturbation,
                       random_state=0).fit(X.astype(dtype))
    model = AnnealedKMeans(3, strategy="paper", perturbation=1e3, n_temperatures=4, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # clusters may merge: not the point
        assert np.isfinite(model.fit(X.astype(dtype)).transform(X.astype(dtype))).all()


def test_x_is_validated_at_one_entry_point():
    """``validate_X`` is the only caller of scikit-learn's validation of X; its dask branch
    (``validated_blocks``) is reached only through it."""
    package = Path(softkmeans.__file__).parent
    callers = {}
    for path in package.rglob("*.py"):
        text = path.read_text()
        for name in ("validate_data(", "_check_n_features(", "validated_blocks("):
            if name in text.replace(f"def {name}", ""):
                callers.setdefault(name, set()).add(path.relative_to(package).as_posix())
    assert callers == {"validate_data(": {"_validation.py"},
                       "_check_n_features(": {"_dask/fitting.py"},
                       "validated_blocks(": {"_validation.py"}}
