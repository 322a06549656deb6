"""One centroid more at the row that lowers the nearest-centroid J most."""

import numpy as np
import scipy.sparse as sp

from softkmeans._core.insertion import CANDIDATES, best_insertion


def _nearest_j(X, weights, centers):
    return weights @ np.min(((X[:, None] - centers[None]) ** 2).sum(axis=2), axis=1)


def test_with_few_rows_every_row_is_a_candidate_and_the_best_is_taken():
    """Fifteen rows in three groups, two centroids: the row taken is the one of least ``J``
    over all fifteen (global k-means' choice), in the group without a centroid."""
    rng = np.random.default_rng(0)
    X = np.vstack([c + rng.standard_normal((5, 2)) for c in ([0, 0], [10, 0], [0, 10])])
    weights = rng.uniform(0.5, 2.0, len(X))
    centers = np.array([X[:5].mean(axis=0), X[5:10].mean(axis=0)])
    assert len(X) < CANDIDATES
    inserted = best_insertion(X, weights, centers, np.random.RandomState(0))
    np.testing.assert_array_equal(inserted[:2], centers)
    every = [_nearest_j(X, weights, np.vstack([centers, row])) for row in X]
    np.testing.assert_array_equal(inserted[2], X[int(np.argmin(every))])
    assert np.argmin(every) >= 10
    assert _nearest_j(X, weights, inserted) < 0.1 * _nearest_j(X, weights, centers)
    sparse = best_insertion(sp.csr_matrix(X), weights, centers, np.random.RandomState(0))
    np.testing.assert_allclose(sparse, inserted)


def test_rows_on_the_centroids_leave_nothing_to_insert():
    X = np.array([[0.0, 1.0], [0.0, 1.0], [3.0, 3.0]])
    centers = np.array([[0.0, 1.0], [3.0, 3.0]])
    assert best_insertion(X, np.ones(3), centers, np.random.RandomState(0)) is None


def test_a_potential_that_rounds_to_zero_is_not_drawn():
    """A row 1e-160 from its centroid has a subnormal potential, 0 once divided by the
    others' sum: it was counted as a candidate and the draw raised ValueError."""
    rows = np.array([[1e5], [-1e5], [1e-160]])
    inserted = best_insertion(rows, np.ones(3), np.zeros((1, 1)), np.random.RandomState(0))
    assert inserted.shape == (2, 1) and abs(inserted[1, 0]) == 1e5
