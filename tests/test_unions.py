"""Unions of a finer partition's clusters: exact costs and the best grouping."""

import numpy as np
import pytest
from sklearn.cluster import KMeans

from softkmeans._core.unions import Unions, merge_cheapest


def _set_partitions(items, n_groups):
    """Every partition of ``items`` into ``n_groups`` non-empty groups (lists of lists)."""
    if not items:
        if n_groups == 0:
            yield []
        return
    first, rest = items[0], items[1:]
    for partition in _set_partitions(rest, n_groups - 1):
        yield [[first], *partition]
    for partition in _set_partitions(rest, n_groups):
        for i in range(len(partition)):
            yield [*partition[:i], [first, *partition[i]], *partition[i + 1:]]


def _grouping_cost(centers, masses, groups):
    cost = 0.0
    for group in groups:
        mean = masses[group] @ centers[group] / masses[group].sum()
        cost += masses[group] @ np.sum((centers[group] - mean) ** 2, axis=1)
    return cost


def test_cost_is_the_rise_of_J_on_the_whole_data():
    rng = np.random.default_rng(0)
    X = np.vstack([c + rng.standard_normal((40, 3)) for c in rng.uniform(-9, 9, (6, 3))])
    weights = rng.uniform(0.5, 2.0, len(X))
    fine = KMeans(12, n_init=1, random_state=0).fit(X, sample_weight=weights)
    labels = fine.labels_
    masses = np.bincount(labels, weights=weights)
    centers = (np.eye(12)[labels] * weights[:, None]).T @ X / masses[:, None]
    far = np.full((4, 3), 1e6)  # Lloyd's algorithm from there keeps a single group
    cost, means, _ = Unions(centers, masses).best(far)
    group = np.argmin(((centers[:, None] - means[None]) ** 2).sum(axis=2), axis=1)[labels]
    assert np.unique(group).size == 4
    union_means = np.array([weights[group == g] @ X[group == g] / weights[group == g].sum()
                            for g in range(4)])
    np.testing.assert_allclose(means, union_means, rtol=1e-10)
    j_union = weights @ np.sum((X - union_means[group]) ** 2, axis=1)
    j_fine = weights @ np.sum((X - centers[labels]) ** 2, axis=1)
    assert cost == pytest.approx(j_union - j_fine, rel=1e-9)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("n_groups", [2, 3, 4])
def test_best_is_the_best_of_every_grouping(seed, n_groups):
    """Eight weighted centroids: the search finds the lowest of all the groupings (966
    into three, 1701 into four)."""
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-10, 10, (8, 2))
    masses = rng.uniform(1.0, 30.0, 8)
    unions = Unions(centers, masses)
    cost, means, _ = unions.best(np.full((n_groups, 2), 1e6))
    every = min(_grouping_cost(centers, masses, groups)
                for groups in _set_partitions(list(range(8)), n_groups))
    assert cost == pytest.approx(every, rel=1e-9)
    assert unions.best(means)[2]  # nothing beats the best


def test_merge_cheapest_joins_the_pair_of_least_ward_cost():
    centers = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 2.0]])
    masses = np.array([1.0, 10.0, 10.0])
    # Ward's costs: (0, 1) 10/11 * 9, (0, 2) 10/11 * 4, (1, 2) 5 * 13
    merged, merged_masses = merge_cheapest(centers, masses)
    np.testing.assert_allclose(merged, [[3.0, 0.0], [0.0, 20.0 / 11.0]])
    np.testing.assert_allclose(merged_masses, [10.0, 11.0])
