import numpy as np
import pytest

from softkmeans.datasets import (
    DATASETS,
    PLANAR,
    SEPARATIONS,
    load,
    make_high_dim_blobs,
    make_separation,
    make_spiral,
)

EXPECTED = {"blobs": (300, 2, 4), "moons": (300, 2, 2), "spiral": (300, 2, 3),
            "circles": (300, 2, 2), "blobs_5d": (300, 5, 3), "blobs_10d": (300, 10, 3),
            "blobs_50d": (300, 50, 3), "iris": (150, 4, 3), "wine": (178, 13, 3),
            "breast_cancer": (569, 30, 2), "digits": (1797, 64, 10),
            **{f"separation_{d:g}": (300, 2, 3) for d in SEPARATIONS}}


def test_sixteen_datasets_in_table_order():
    assert len(DATASETS) == 16
    assert list(DATASETS)[:4] == list(PLANAR)
    assert set(DATASETS) == set(EXPECTED)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_shapes_labels_and_scaling(name):
    X, k, y = load(name, return_labels=True)
    n, d, expected_k = EXPECTED[name]
    assert X.shape == (n, d) and X.dtype == np.float64 and k == expected_k
    assert y.shape == (n,) and len(np.unique(y)) == k
    std = X.std(axis=0)
    if DATASETS[name].standardize:
        np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=1e-12)
        # constant pixels of digits stay constant (0) after scaling
        np.testing.assert_allclose(std[std > 0], 1.0, rtol=1e-12)
    else:
        assert name.startswith("separation_")


def test_deterministic_and_seeded():
    a, _ = load("spiral", random_state=3)
    load("moons", random_state=3)
    b, _ = load("spiral", random_state=3)
    c, _ = load("spiral", random_state=4)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_separation_gap_is_distance_between_centers():
    X, y = make_separation(30000, delta=4.0, random_state=0)
    centers = np.array([X[y == j].mean(axis=0) for j in range(3)])
    dist = np.linalg.norm(centers[:, None] - centers[None], axis=2)[np.triu_indices(3, 1)]
    np.testing.assert_allclose(dist, 4.0, atol=0.02)
    np.testing.assert_allclose(X[y == 0].std(axis=0), 0.35, atol=0.01)


def test_unknown_name():
    with pytest.raises(ValueError, match="The 'name' parameter of load must be a str among"):
        load("mnist")


@pytest.mark.parametrize(("call", "match"), [
    (lambda: make_spiral(0), "'n_samples' parameter of make_spiral"),
    (lambda: make_spiral(30, n_arms=0), "'n_arms' parameter of make_spiral"),
    (lambda: make_separation(2.5), "'n_samples' parameter of make_separation"),
    (lambda: make_separation(30, delta=-1.0), "'delta' parameter of make_separation"),
    (lambda: make_high_dim_blobs(30, n_features=0), "'n_features' parameter"),
    (lambda: load("iris", random_state="x"), "'random_state' parameter of load"),
])
def test_bad_generator_parameters_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()
