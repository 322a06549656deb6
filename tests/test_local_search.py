"""Hartigan's moves and the merge-and-split search that end the default annealing."""

import itertools
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from _helpers import partition_distortion as _distortion
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits
from sklearn.preprocessing import StandardScaler

from softkmeans import AnnealedKMeans
from softkmeans._core.hartigan import hartigan_moves, nearest_labels, partition_sums
from softkmeans._core.hartigan_loops import hartigan_visits
from softkmeans._core.split_merge import (
    SELECTED_EIGH_MIN,
    Partition,
    merge_split_search,
    top_eigenpair,
)


def _lloyd_labels(X, k, seed):
    return KMeans(k, n_init=1, random_state=seed).fit(X).labels_.astype(np.int64)


@pytest.fixture
def small():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    weights = rng.uniform(0.5, 2.0, size=60)
    return X, weights


def test_each_move_lowers_j_by_the_decrease_it_reports(small):
    X, weights = small
    labels = _lloyd_labels(X, 4, 0)
    before = _distortion(X, weights, labels, 4)
    sums, masses = partition_sums(X, weights, labels, 4)
    moved = labels.copy()
    n_moves, decrease, n_sweeps = hartigan_visits(X, weights, moved, sums, masses, 100)
    after = _distortion(X, weights, moved, 4)
    assert n_moves > 0 and 1 < n_sweeps < 100
    np.testing.assert_allclose(before - after, decrease, rtol=1e-9)
    expected_sums, expected_masses = partition_sums(X, weights, moved, 4)
    np.testing.assert_allclose(sums, expected_sums, atol=1e-12)
    np.testing.assert_allclose(masses, expected_masses, rtol=1e-12)


def test_no_single_move_improves_the_result(small):
    """A brute-force check of the fixed point with unequal weights."""
    X, weights = small
    labels = _lloyd_labels(X, 4, 1)
    centers, _ = hartigan_moves(X, weights, labels, 4, max_sweeps=100)
    final = nearest_labels(X, centers)
    best = _distortion(X, weights, final, 4)
    for i, b in itertools.product(range(len(X)), range(4)):
        if b == final[i] or np.sum(final == final[i]) == 1:
            continue
        trial = final.copy()
        trial[i] = b
        assert _distortion(X, weights, trial, 4) >= best * (1 - 1e-12)


def test_moves_never_empty_a_cluster():
    X = np.array([[0.0], [0.1], [5.0], [5.1], [10.0]])
    labels = np.array([0, 0, 1, 1, 2])
    centers, _ = hartigan_moves(X, np.ones(5), labels, 3, max_sweeps=10)
    assert np.all(np.isfinite(centers))
    assert len(np.unique(nearest_labels(X, centers))) == 3


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sparse_and_dense_data_give_the_same_moves(dtype):
    X = StandardScaler().fit_transform(load_digits().data).astype(dtype)
    weights = np.ones(len(X))
    labels = _lloyd_labels(X, 10, 3)
    dense, dense_moves = hartigan_moves(X, weights, labels, 10, max_sweeps=10)
    sparse, sparse_moves = hartigan_moves(sp.csr_matrix(X), weights, labels, 10, max_sweeps=10)
    assert dense_moves == sparse_moves > 0
    np.testing.assert_allclose(dense, sparse, rtol=1e-10, atol=1e-12)


def test_moves_lower_the_distortion_of_lloyd_on_digits():
    X = StandardScaler().fit_transform(load_digits().data)
    lloyd = KMeans(10, n_init=1, random_state=0).fit(X)
    centers, n_moves = hartigan_moves(X, np.ones(len(X)), lloyd.labels_, 10, max_sweeps=20)
    refined = _distortion(X, np.ones(len(X)), nearest_labels(X, centers), 10)
    assert n_moves > 0
    assert refined < lloyd.inertia_ * (1 - 1e-4)


def test_search_merges_two_centroids_of_one_cluster_and_splits_a_shared_one():
    """Three blobs on a line; two starting centroids in the first, one between the others:
    a Lloyd fixed point that no single-observation move leaves."""
    rng = np.random.default_rng(0)
    truth = np.repeat(np.arange(3), 100)
    X = np.array([[0.0, 0.0], [10.0, 0.0], [20.0, 0.0]])[truth] + rng.normal(size=(300, 2))
    start = np.array([[0.0, -0.5], [0.0, 0.5], [15.0, 0.0]])
    stuck = Partition.of(X, np.ones(300), nearest_labels(X, start), 3)
    found = merge_split_search(X, np.ones(300), start, max_rounds=3)
    optimum = _distortion(X, np.ones(300), truth, 3)
    assert stuck.inertia > 2 * optimum
    assert found.inertia == pytest.approx(optimum, rel=1e-12)
    assert len(np.unique(found.labels)) == 3


def test_search_is_deterministic(small):
    X, weights = small
    start = X[:5].copy()
    first = merge_split_search(X, weights, start, max_rounds=5)
    second = merge_split_search(X, weights, start, max_rounds=5)
    np.testing.assert_array_equal(first.labels, second.labels)
    assert first.inertia == second.inertia
    np.testing.assert_allclose(first.inertia, _distortion(X, weights, first.labels, 5),
                               rtol=1e-12)


def test_annealing_beats_kmeans_with_ten_starts_on_digits():
    X = StandardScaler().fit_transform(load_digits().data)
    annealed = AnnealedKMeans(10).fit(X)
    restarted = KMeans(10, n_init=10, random_state=0).fit(X)
    assert annealed.inertia_ <= restarted.inertia_ * (1 + 1e-4)


@pytest.mark.parametrize("layout", [np.asarray, sp.csr_matrix])
def test_wide_data_fit_as_kmeans_does(layout):
    """More features than a block of the growth holds rows of (600 x 1800): every sampled row
    is grown on, and the principal axes come from power iterations."""
    rng = np.random.default_rng(0)
    centers = rng.normal(scale=0.3, size=(3, 1800))
    X = centers[np.arange(600) % 3] + rng.normal(scale=0.1, size=(600, 1800))
    model = AnnealedKMeans(3).fit(layout(X))
    reference = KMeans(3, n_init=10, random_state=0).fit(X)
    assert model.inertia_ == pytest.approx(reference.inertia_, rel=1e-9)
    assert len(set(zip(model.labels_, reference.labels_, strict=True))) == 3


@pytest.mark.parametrize(("n_features", "n_clusters", "size"),
                         [(3, 16, 20000), (3, 80, 24000), (20, 16, 5000), (5, 16, 12000)])
def test_the_search_takes_more_rows_of_data_in_few_dimensions(n_features, n_clusters, size):
    """A visit costs a row's features: rows enough for 60,000 values, 5000 or 300 per cluster
    at least."""
    from types import SimpleNamespace

    from softkmeans._core.mass_constrained import search_sample

    X = np.random.default_rng(0).normal(size=(30000, n_features))
    rows, weights = search_sample(SimpleNamespace(X=X, sample_weight=np.ones(30000)),
                                   n_clusters)
    assert rows.shape == (size, n_features) and weights.shape == (size,)


@pytest.mark.parametrize("d", [12, SELECTED_EIGH_MIN, 40])
def test_power_iterations_give_the_covariances_axes(monkeypatch, d):
    """The two ways to the principal axes agree (same sample, codevectors, temperature) when
    the iterations run to their tolerance, below and from SELECTED_EIGH_MIN features;
    capped, they give Rayleigh quotients, lower bounds of the eigenvalues."""
    from softkmeans._core import mass_constrained as mc

    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, d)) * np.linspace(3.0, 0.5, d)
    data = mc._Sample(X, np.ones(len(X)), 3)
    centers = rng.normal(size=(3, d))
    log_prior = np.log(np.full(3, 1 / 3))
    lam, axes = mc._principal_axes(data, centers, log_prior, 4.0)
    capped, _ = mc._power_axes(data, centers, log_prior, 4.0, None)
    assert np.all(capped <= lam * (1 + 1e-12)) and np.all(capped >= 0.9 * lam)
    monkeypatch.setattr(mc, "AXIS_ITERATIONS", 100)
    lam_power, axes_power = mc._power_axes(data, centers, log_prior, 4.0, None)
    np.testing.assert_allclose(lam_power, lam, rtol=1e-5)  # they stop at a change of 1e-6
    np.testing.assert_allclose(np.abs(np.einsum("ij,ij->i", axes, axes_power)), 1.0, atol=1e-4)


@pytest.mark.parametrize("seed", range(40))
def test_fewer_distinct_points_than_clusters(seed):
    """Once every cluster is one point its lambda_max is rounding: no transition is left, and
    the growth stops there instead of cooling until the logits overflow."""
    X = np.repeat(np.random.RandomState(seed).normal(size=(3, 2)), 5, axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        model = AnnealedKMeans(4).fit(X)
    assert model.inertia_ < 1e-12
    assert len(np.unique(model.labels_)) == 3


def test_data_spread_up_to_1e150_fit_as_unit_data():
    """The cooling tail's temperatures start at the growth's last one, which is above 1e150 for
    such data: they stay within the range a relaxation takes."""
    from sklearn.datasets import make_blobs

    X = make_blobs(600, 5, centers=6, random_state=1)[0]
    unit = AnnealedKMeans(6).fit(X)
    huge = AnnealedKMeans(6).fit(X * 1e150)
    np.testing.assert_array_equal(huge.labels_, unit.labels_)
    assert huge.inertia_ == pytest.approx(unit.inertia_ * 1e300, rel=1e-9)


@pytest.mark.parametrize("offset", [0.0, 1e8])
def test_cheapest_merges_are_those_of_every_pair_ranked_exactly(offset):
    """The screen by norms keeps the cheapest pairs, for centroids far from the origin too
    (from the raw norms, at 1e8 it kept pairs of rounding noise)."""
    from softkmeans._core.split_merge import _ward, cheapest_merges

    rng = np.random.default_rng(0)
    for _ in range(20):
        centers = rng.normal(size=(30, 3)) + offset
        masses = rng.uniform(1.0, 5.0, 30)
        every = sorted((_ward(masses[a], masses[b], centers[a], centers[b]), a, b)
                       for a, b in itertools.combinations(range(30), 2))
        assert [(a, b) for _, a, b in cheapest_merges(centers, masses, 4)] == [
            (a, b) for _, a, b in every[:4]]


@pytest.mark.parametrize("weighted", [False, True])
def test_the_growth_on_wide_sparse_rows_is_the_growth_on_their_dense_copy(weighted):
    """Beyond EIGH_MAX_FEATURES features CSR rows stay sparse in the growth: the same
    codebook as from the dense array, to rounding."""
    from softkmeans._core.mass_constrained import grow_codebook

    rng = np.random.default_rng(0)
    topics = rng.uniform(size=(4, 300)) * (rng.uniform(size=(4, 300)) < 0.05)
    X = sp.random(600, 300, density=0.03, random_state=1, format="csr")
    X = sp.csr_matrix(X + sp.csr_matrix(topics[rng.integers(0, 4, 600)]))
    weights = rng.uniform(0.5, 2.0, 600) if weighted else np.ones(600)
    sparse = grow_codebook(X, weights, 4, max_iter=15)
    dense = grow_codebook(X.toarray(), weights, 4, max_iter=15)
    assert len(sparse.centers) == len(dense.centers) == 4
    np.testing.assert_allclose(sparse.centers, dense.centers, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(sparse.sigmas, dense.sigmas, rtol=1e-8)


def test_hartigan_moves_screen_csr_rows_without_densifying_them(monkeypatch):
    """The sweeps over a CSR matrix make the moves they make over its dense copy, and no
    row of it is densified."""
    from softkmeans._core import hartigan as module

    X = sp.random(400, 200, density=0.05, random_state=2, format="csr")
    weights = np.random.default_rng(2).uniform(0.5, 2.0, 400)
    labels = np.arange(400) % 5
    dense_centers, dense_moves = hartigan_moves(X.toarray(), weights, labels, 5, max_sweeps=5)
    sizes = []
    real = module.dense_rows
    monkeypatch.setattr(module, "dense_rows", lambda X, rows: sizes.append(len(rows))
                        or real(X, rows))
    centers, moves = hartigan_moves(X, weights, labels, 5, max_sweeps=5)
    assert moves == dense_moves > 0
    np.testing.assert_allclose(centers, dense_centers, rtol=1e-10, atol=1e-12)
    assert sizes == []


@pytest.mark.parametrize("weighted", [False, True])
def test_hartigan_visits_of_csr_rows_make_the_dense_rows_moves(weighted):
    X = sp.random(300, 40, density=0.1, random_state=3, format="csr")
    weights = np.random.default_rng(3).uniform(0.5, 2.0, 300) if weighted else np.ones(300)
    results = []
    for rows in (X.toarray(), X):
        labels = np.arange(300) % 4
        sums, masses = partition_sums(X.toarray(), weights, labels, 4)
        outcome = hartigan_visits(rows, weights, labels, sums, masses, 20)
        results.append((outcome, labels, sums, masses))
    (dense, dense_labels, dense_sums, _), (sparse, labels, sums, masses) = results
    assert sparse[0] == dense[0] > 0 and sparse[2] == dense[2]
    assert sparse[1] == pytest.approx(dense[1], rel=1e-9)
    np.testing.assert_array_equal(labels, dense_labels)
    np.testing.assert_allclose(sums, dense_sums, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(sums, partition_sums(X, weights, labels, 4)[0], atol=1e-12)


def test_the_search_on_wide_csr_rows_finds_the_dense_rows_partition():
    """Beyond EIGH_MAX_FEATURES features the merge-and-split search keeps CSR rows sparse
    (principal axes by products, expanded distances): the partition found on the dense
    copy, to rounding."""
    rng = np.random.default_rng(4)
    means = rng.uniform(size=(6, 200)) * (rng.uniform(size=(6, 200)) < 0.1)
    X = sp.csr_matrix(means[rng.integers(0, 6, 900)]
                      + sp.random(900, 200, density=0.02, random_state=4).toarray())
    weights = np.ones(900)
    start = X[:6].toarray()  # a poor start: the first rows
    dense = merge_split_search(X.toarray(), weights, start, max_rounds=6)
    sparse = merge_split_search(X, weights, start, max_rounds=6)
    np.testing.assert_array_equal(sparse.labels, dense.labels)
    assert sparse.inertia == pytest.approx(dense.inertia, rel=1e-9)


@pytest.mark.parametrize("d", [3, SELECTED_EIGH_MIN - 1, SELECTED_EIGH_MIN, 100])
def test_top_eigenpair_is_numpys_largest(d):
    """LAPACK's selected eigenvalue (from SELECTED_EIGH_MIN rows) and numpy's full solver
    agree on the largest eigenvalue and its axis (up to its sign)."""
    rng = np.random.default_rng(d)
    rows = rng.normal(size=(d + 5, d)) * rng.uniform(0.5, 2.0, d)
    scatter = rows.T @ rows
    value, axis = top_eigenpair(scatter)
    values, vectors = np.linalg.eigh(scatter)
    assert value == pytest.approx(values[-1], rel=1e-13)
    assert abs(axis @ vectors[:, -1]) == pytest.approx(1.0, abs=1e-12)
    assert np.linalg.norm(axis) == pytest.approx(1.0, abs=1e-14)
