"""Abandoned centroids (starving or duplicated) are moved, in fits and in streams."""

import warnings

import numpy as np
import pytest
from scipy.spatial import cKDTree
from sklearn.base import clone

from softkmeans import EntmaxKMeans, SoftKMeans
from softkmeans._core.reassignment import DUPLICATE, abandoned
from softkmeans._core.responsibilities import RelaxationSpec
from softkmeans._core.update_loops import PAIR_WORK

SOFT = RelaxationSpec("softmax", 1.0)


def _components(k=6, d=4, n_per=150, seed=0):
    """``k`` well separated unit Gaussians, their means, and a start with two centroids in
    the first component, none in the last."""
    rng = np.random.default_rng(seed)
    means = rng.uniform(-20, 20, size=(k, d))
    X = np.vstack([m + rng.standard_normal((n_per, d)) for m in means])
    start = np.vstack([means[0] - 0.5, means[0] + 0.5, means[1:-1]])
    return X, means, start


def test_abandoned_finds_starving_and_duplicated_centroids_never_the_heaviest():
    centers = np.array([[0.0, 0.0], [0.0, 0.0], [5.0, 5.0], [9.0, 9.0]])
    masses = np.array([10.0, 10.0, 0.05, 30.0])
    assert abandoned(masses, centers, SOFT, 0.01).tolist() == [1, 2]
    assert abandoned(masses, centers, RelaxationSpec("hard"), 0.01).tolist() == [2]
    assert abandoned(masses, centers, SOFT, 0.0).tolist() == [1]
    near = centers.copy()
    near[1, 0] = 0.99 * np.sqrt(DUPLICATE * SOFT.tau)
    assert abandoned(masses, near, SOFT, 0.0).tolist() == [1]
    near[1, 0] = 1.01 * np.sqrt(DUPLICATE * SOFT.tau)
    assert abandoned(masses, near, SOFT, 0.0).tolist() == []
    assert abandoned(np.array([0.0, 0.0, 1.0]), centers[:3], SOFT, 1.0).tolist() == [0, 1]


@pytest.mark.parametrize("Estimator", [SoftKMeans, EntmaxKMeans])
def test_a_fit_moves_a_doubled_centroid_to_the_unserved_component(Estimator):
    X, means, start = _components()
    off = Estimator(6, sigma=1.5, init=start, reassignment_ratio=0).fit(X)
    on = Estimator(6, sigma=1.5, init=start, random_state=0, record_path=True).fit(X)
    assert off.n_reassigned_ == 0 and on.n_reassigned_ >= 1
    nearest = ((on.cluster_centers_[:, None] - means[None]) ** 2).sum(-1).argmin(1)
    assert sorted(nearest) == list(range(6))  # one centroid per component
    assert on.inertia_ < 0.5 * off.inertia_ and on.objective_ < off.objective_
    # at a fixed temperature the objective never increases, the relocation included
    objectives = np.asarray(on.path_[0]["objective"])
    assert (np.diff(objectives) <= 1e-9 * np.abs(objectives[:-1])).all()


@pytest.mark.parametrize("Estimator", [SoftKMeans, EntmaxKMeans])
def test_relocation_is_deterministic_and_thread_independent(Estimator):
    X, _, start = _components(seed=1)
    fits = [Estimator(6, init=start, random_state=3, n_threads=t).fit(X) for t in (1, 2, 1)]
    assert fits[0].n_reassigned_ >= 1
    for fit in fits[1:]:
        np.testing.assert_array_equal(fit.cluster_centers_, fits[0].cluster_centers_)
        assert fit.n_reassigned_ == fits[0].n_reassigned_


@pytest.mark.parametrize("Estimator", [SoftKMeans, EntmaxKMeans])
def test_nothing_moves_where_nothing_is_abandoned(Estimator):
    X, means, _ = _components(seed=2)
    on = Estimator(6, init=means + 0.3, random_state=0).fit(X)
    off = Estimator(6, init=means + 0.3, random_state=0, reassignment_ratio=0).fit(X)
    assert on.n_reassigned_ == 0 and on.n_iter_ == off.n_iter_
    np.testing.assert_array_equal(on.cluster_centers_, off.cluster_centers_)


def _stream(model, X, n_batches=12, seed=0):
    rng = np.random.default_rng(seed)
    for rows in np.array_split(rng.permutation(len(X)), n_batches):
        model.partial_fit(X[rows])
    return model


@pytest.mark.parametrize("Estimator", [SoftKMeans, EntmaxKMeans])
def test_a_stream_moves_abandoned_centroids(Estimator):
    X, means, start = _components(k=8, n_per=400, seed=3)
    off = _stream(Estimator(8, init=start, reassignment_ratio=0), X)
    on = _stream(Estimator(8, init=start, random_state=0), X)
    again = _stream(clone(on), X)
    assert on.n_reassigned_ >= 1
    np.testing.assert_array_equal(again.cluster_centers_, on.cluster_centers_)

    def distortion(model):
        return ((X[:, None] - model.cluster_centers_[None]) ** 2).sum(-1).min(1).sum()

    assert distortion(on) < 0.8 * distortion(off)


@pytest.mark.parametrize("Estimator", [SoftKMeans, EntmaxKMeans])
def test_a_dask_fit_moves_the_same_centroids_as_in_memory(Estimator):
    da = pytest.importorskip("dask.array")
    X, _, start = _components(k=6, n_per=300, seed=4)
    memory = Estimator(6, init=start, random_state=1).fit(X)
    blocks = Estimator(6, init=start, random_state=1).fit(da.from_array(X, chunks=500))
    assert memory.n_reassigned_ >= 1 and blocks.n_reassigned_ == memory.n_reassigned_
    np.testing.assert_allclose(blocks.cluster_centers_, memory.cluster_centers_, rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("backend", ["numba", "numpy"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("Estimator", [SoftKMeans, EntmaxKMeans])
def test_every_engine_moves_the_centroids_the_reference_moves(Estimator, dtype, sparse, backend):
    import scipy.sparse as sps

    X, _, start = _components(seed=1)
    reference = Estimator(6, init=start, random_state=3, backend="numpy").fit(X)
    data = X.astype(dtype)
    model = Estimator(6, init=start, random_state=3, backend=backend).fit(
        sps.csr_matrix(data) if sparse else data)
    assert model.n_reassigned_ == reference.n_reassigned_ >= 1
    tol = 1e-5 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(model.cluster_centers_, reference.cluster_centers_, rtol=tol,
                               atol=tol * np.abs(X).max())


@pytest.mark.parametrize("Estimator", [SoftKMeans, EntmaxKMeans])
def test_nothing_is_counted_where_nothing_can_move(Estimator):
    """Every observation on a kept centroid: no draw places anything, no round is spent."""
    for X in (np.ones((50, 2)), np.repeat([[0.0, 0.0], [5.0, 5.0]], 20, axis=0)):
        off = Estimator(3, sigma=0.5, random_state=0, reassignment_ratio=0).fit(X)
        on = Estimator(3, sigma=0.5, random_state=0).fit(X)
        assert on.n_reassigned_ == 0 and on.n_iter_ == off.n_iter_
        np.testing.assert_array_equal(on.cluster_centers_, off.cluster_centers_)


@pytest.mark.parametrize("k", [5, 40, 300])  # pairs compared at once, and by a tree
def test_duplicates_are_those_a_tree_finds(k):
    """Where every pair is compared at once, the duplicates are those of the tree: a pair
    just inside the radius is one, a pair just outside is not."""
    assert (k * k * 3 > PAIR_WORK) == (k == 300)
    radius = np.sqrt(DUPLICATE * SOFT.tau)
    rng = np.random.default_rng(k)
    centers = rng.uniform(-100, 100, size=(k, 3))
    centers[1] = centers[0] + [radius * (1 - 1e-6), 0.0, 0.0]  # inside
    centers[3] = centers[2] + [radius * (1 + 1e-6), 0.0, 0.0]  # outside
    pairs = cKDTree(centers).query_pairs(radius, output_type="ndarray")
    assert pairs.tolist() == [[0, 1]]
    assert abandoned(np.ones(k), centers, SOFT, 0.0).tolist() == [1]
    assert abandoned(np.ones(k - 1), np.delete(centers, 1, axis=0), SOFT, 0.0).size == 0


def test_the_heavier_duplicate_of_a_pair_may_come_later():
    centers = np.array([[0.0, 0.0], [0.0, 0.01], [5.0, 5.0]])
    for masses in ([10.0, 10.5, 8.0], [10.5, 10.0, 8.0]):
        assert abandoned(np.array(masses), centers, SOFT, 0.01).tolist() == [1]


def test_merged_centroids_on_a_heavy_cluster_are_split_off_after_converging():
    """Moving a duplicate off a heavy cluster first raises F_sigma (duplicates share its
    points); the run is judged once it has converged again."""
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal([0, 0], 0.3, (1000, 2)), rng.normal([4, 0], 0.3, (50, 2)),
                   rng.normal([4, 4], 0.3, (50, 2))])
    start = np.array([[0.0, 0.0], [1e-3, 0.0], [4.0, 2.0]])
    model = SoftKMeans(3, sigma=0.5, init=start, random_state=0).fit(X)
    best = SoftKMeans(3, sigma=0.5, init=[[0, 0], [4, 0], [4, 4]], reassignment_ratio=0).fit(X)
    assert model.n_reassigned_ == 1 and model.converged_
    assert model.inertia_ == pytest.approx(best.inertia_, rel=1e-6)


def test_a_relocation_without_room_to_converge_keeps_the_converged_run():
    X, _, start = _components(seed=1)
    free = SoftKMeans(6, init=start, sigma=1.5, random_state=0).fit(X)
    assert free.n_reassigned_ >= 1
    for max_iter in range(2, free.n_iter_):
        capped = SoftKMeans(6, init=start, sigma=1.5, random_state=0, max_iter=max_iter)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            capped.fit(X)
        if capped.converged_:
            assert capped.n_iter_ <= max_iter
        if capped.n_reassigned_ == 0 and capped.converged_:
            off = SoftKMeans(6, init=start, sigma=1.5, reassignment_ratio=0).fit(X)
            np.testing.assert_array_equal(capped.cluster_centers_, off.cluster_centers_)


def test_dask_top_rows_break_ties_in_index_order():
    da = pytest.importorskip("dask.array")
    from softkmeans._dask.engine import BlockwiseEngine

    scores = np.zeros(1000)
    scores[[3, 10, 500, 900, 999]] = 5.0
    scores[7] = 9.0
    engine = BlockwiseEngine(da.ones((1000, 2), chunks=100), None, "numpy", None)
    assert engine.top_rows(da.from_array(scores, chunks=100), 4).tolist() == [7, 3, 10, 500]
