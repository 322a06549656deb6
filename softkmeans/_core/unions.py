"""Coarser partitions made of whole clusters of a finer one.

Grouping the clusters of a partition into unions raises ``J`` by Ward's cost of
each union: its clusters' masses times their squared distances to the union's
mean. That is the K-Means objective of the finer centroids weighted by their
masses, so the best unions of ``k'`` clusters into ``k`` are found by K-Means
on ``k'`` weighted points, and their ``J`` on the whole data is known without
a pass over it. A divisive growth reaches the best partition of
well-separated clusters into a few groups only where its splits happen to
respect the groups, and greedy merges only where every cheapest merge is one
of them; :class:`Unions` searches the groupings from Ward's, from a given
start and from greedy k-means++ draws (Arthur and Vassilvitskii, "k-means++:
the advantages of careful seeding", SODA 2007), all at once.
"""

import numpy as np

from .split_merge import cheapest_merges

__all__ = ["Unions", "merge_cheapest"]

#: Greedy k-means++ draws per number of groups, and the candidates of each of their steps
#: beyond ``log k`` (as scikit-learn's ``kmeans_plusplus``).
_DRAWS = 32
_EXTRA_TRIALS = 2
_MAX_ITER = 100


def merge_cheapest(centers, masses):
    """``(centers, masses)`` with the two clusters whose merge raises ``J`` least (Ward's
    cost ``m_a m_b / (m_a + m_b) ||mu_a - mu_b||^2``) replaced, last, by their union."""
    _, a, b = cheapest_merges(centers, masses, 1)[0]
    mass = masses[a] + masses[b]
    mean = (masses[a] * centers[a] + masses[b] * centers[b]) / max(mass, np.finfo(float).tiny)
    return (np.vstack([np.delete(centers, [a, b], axis=0), mean]),
            np.append(np.delete(masses, [a, b]), mass))


def _ward_groupings(centers, masses):
    """``{k: means}`` of the groups of Ward's agglomeration of the weighted ``centers``, for
    ``k = 1 .. len(centers) - 1``."""
    groupings = {}
    while len(centers) > 1:
        centers, masses = merge_cheapest(centers, masses)
        groupings[len(centers)] = centers
    return groupings


class Unions:
    """The unions of the clusters of one partition, searched for every number of groups.

    Parameters
    ----------
    centers : ndarray of shape (n_clusters, n_features)
        The partition's centroids.
    masses : ndarray of shape (n_clusters,)
        Its clusters' weights, positive.
    random_state : int, default=0
        Seed of the greedy k-means++ draws.
    """

    def __init__(self, centers, masses, random_state=0):
        self.centers = np.asarray(centers, dtype=np.float64)
        self.masses = np.asarray(masses, dtype=np.float64) / float(np.max(masses))
        self._scale = float(np.max(masses))
        norms = np.einsum("ij,ij->i", self.centers, self.centers)
        self._sq = np.maximum(norms[:, None] + norms[None, :]
                              - 2.0 * self.centers @ self.centers.T, 0.0)
        self._ward = _ward_groupings(self.centers, self.masses)
        self._seed = random_state
        self._streams = {}  # per candidates per step: its generator, seeds and potentials

    def _draws(self, n_groups):
        """``(_DRAWS, n_groups)`` indices of centroids: greedy k-means++ seeds, each step
        keeping of its ``2 + log k`` candidates the one that lowers the potential most.

        The draws with as many candidates per step come from one stream,
        ``RandomState(random_state)``, of which those into ``n_groups`` take the first
        ``n_groups`` steps: each stream is drawn once, as far as the most groups asked.
        """
        n_trials = _EXTRA_TRIALS + int(np.log(n_groups))
        if n_trials not in self._streams:
            rng = np.random.RandomState(self._seed)
            first = rng.choice(len(self.masses), _DRAWS, p=self.masses / self.masses.sum())
            self._streams[n_trials] = (rng, [first], self._sq[first])
        rng, seeds, nearest = self._streams[n_trials]
        draws = np.arange(_DRAWS)
        for _ in range(len(seeds), n_groups):
            cumulative = np.cumsum(nearest * self.masses, axis=1)
            targets = rng.uniform(size=(_DRAWS, n_trials)) * cumulative[:, -1:]
            candidates = np.minimum((cumulative[:, None, :] < targets[:, :, None]).sum(axis=2),
                                    len(self.masses) - 1)
            trials = np.minimum(nearest[:, None, :], self._sq[candidates])
            best = np.argmin(trials @ self.masses, axis=1)
            seeds.append(candidates[draws, best])
            nearest = trials[draws, best]
        self._streams[n_trials] = (rng, seeds, nearest)
        return np.stack(seeds[:n_groups], axis=1)

    def _lloyd(self, means):
        """Lloyd's algorithm on the weighted centroids from every start of ``means`` (of
        shape ``(n_starts, n_groups, n_features)``) at once: the final means and labels.
        A start whose labels stop changing has its means at their fixed point, and leaves
        the iterations."""
        labels = np.full((len(means), len(self.centers)), -1)
        active = np.arange(len(means))
        for _ in range(_MAX_ITER):
            current = means[active]
            sq = (np.einsum("rkd,rkd->rk", current, current)[:, :, None]
                  - 2.0 * current @ self.centers.T)  # less the centroids' norms
            new = np.argmin(sq, axis=1)
            moved = np.any(new != labels[active], axis=1)
            active, new, current = active[moved], new[moved], current[moved]
            if not active.size:
                break
            labels[active] = new
            members = (new[:, None, :] == np.arange(means.shape[1])[:, None]) * self.masses
            mass = members.sum(axis=2)
            sums = members @ self.centers
            full = mass > 0  # an empty group keeps its mean
            current[full] = sums[full] / mass[full][:, None]
            means[active] = current
        return means, labels

    def best(self, start):
        """The unions into ``len(start)`` groups of lowest cost found from those that
        Lloyd's algorithm reaches from ``start`` (means whose nearest centroids start each
        group), from Ward's grouping and from :data:`_DRAWS` greedy k-means++ draws.

        Returns
        -------
        cost : float
            ``J`` of the unions less that of the partition (in the masses' units).
        means : ndarray of shape (n_groups, n_features)
            The unions' means.
        from_start : bool
            Whether they are those reached from ``start`` (nothing cost less).
        """
        n_groups = len(start)
        starts = np.concatenate([np.asarray(start, dtype=np.float64)[None],
                                 self._ward[n_groups][None],
                                 self.centers[self._draws(n_groups)]])
        means, labels = self._lloyd(starts)
        # one start at a time: the centroids' group means of every start at once would take
        # (starts x centroids x features) floats
        costs = np.array([(np.sum((self.centers - m[lab]) ** 2, axis=1) * self.masses).sum()
                          for m, lab in zip(means, labels, strict=True)])
        best = int(np.argmin(costs))
        return float(costs[best]) * self._scale, means[best], not costs[best] < costs[0]
