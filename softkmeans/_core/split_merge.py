"""Split-merge repair of a K-Means fixed point.

A Lloyd fixed point can hold two centroids in one true cluster and one
centroid across two: no single Lloyd step moves a centroid that far. This
repair compares, at a hard fixed point, the cheapest merge of two
neighbouring clusters (the exact increase of ``J`` when both go to their
common mean, ``m_a m_b / (m_a + m_b) ||mu_a - mu_b||^2``) with the largest
gain of cutting one cluster in two across its principal axis at its mean
(the exact decrease of ``J`` for that cut, by the same formula over its two
halves). When the gain exceeds the cost it makes both moves, runs Lloyd's
algorithm again, and keeps the result if ``J`` went down; it stops at the
first round in which none of the :data:`_PROPOSALS` largest cuts pays.
"""

import numpy as np
import scipy.sparse as sp

from .responsibilities import RelaxationSpec

__all__ = ["split_merge"]

HARD = RelaxationSpec("hard")

#: Up to this many features a cluster's principal axis comes from its scatter matrix,
#: beyond by power iterations.
_EIGH_MAX_FEATURES = 128
_AXIS_ITERATIONS = 30
#: Cuts tried against the cheapest merge, largest gain first, before the repair stops.
_PROPOSALS = 3


def _ward(mass_a, mass_b, mean_a, mean_b):
    """``J`` of two groups merged at their common mean less ``J`` of the two apart."""
    total = mass_a + mass_b
    if total <= 0:
        return 0.0
    return float(mass_a * mass_b / total * np.sum((mean_a - mean_b) ** 2))


def _cheapest_merge(centers, masses):
    """The pair of clusters whose merge raises ``J`` least, and by how much."""
    sq = np.sum((centers[:, None, :] - centers[None, :, :]) ** 2, axis=2)
    both = masses[:, None] * masses[None, :]
    total = masses[:, None] + masses[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        cost = np.where(total > 0, both / total * sq, 0.0)
    np.fill_diagonal(cost, np.inf)
    a, b = np.unravel_index(np.argmin(cost), cost.shape)
    return int(a), int(b), float(cost[a, b])


def _principal_axis(centred, weights, rng):
    """Unit vector along the largest eigenvalue of the weighted scatter of ``centred``."""
    if centred.shape[1] <= _EIGH_MAX_FEATURES:
        return np.linalg.eigh(centred.T @ (weights[:, None] * centred))[1][:, -1]
    axis = rng.standard_normal(centred.shape[1])
    for _ in range(_AXIS_ITERATIONS):
        axis = centred.T @ (weights * (centred @ axis))
        norm = np.linalg.norm(axis)
        if norm == 0:
            break
        axis /= norm
    return axis


def _principal_cut(block, weights, center, rng):
    """The two halves of a cluster cut across its principal axis at its mean.

    Returns their means and the decrease of ``J`` that the cut gives.
    """
    centred = block - center
    side = centred @ _principal_axis(centred, weights, rng) > 0
    halves = []
    for part in (side, ~side):
        mass = float(weights[part].sum())
        if mass <= 0:
            return None, None, 0.0
        halves.append((mass, weights[part] @ block[part] / mass))
    (m1, mu1), (m2, mu2) = halves
    return mu1, mu2, _ward(m1, m2, mu1, mu2)


def _cuts(engine, stats, centers, exclude, rng, cuts):
    """The cuts of the clusters not in ``exclude``, largest gain first.

    ``cuts`` keeps each cluster's cut by its centroid's bytes: a cluster
    whose centroid did not move kept its members.
    """
    order = np.argsort(stats.labels, kind="stable")
    bounds = np.searchsorted(stats.labels[order], np.arange(len(centers) + 1))
    found = []
    for j in range(len(centers)):
        rows = order[bounds[j]:bounds[j + 1]]
        if j in exclude or rows.size < 2:
            continue
        key = centers[j].tobytes()
        if key not in cuts:
            block = engine.X[rows]
            block = block.toarray() if sp.issparse(block) else block
            cuts[key] = _principal_cut(np.asarray(block, dtype=np.float64),
                                       engine.sample_weight[rows], centers[j], rng)
        mu1, mu2, gain = cuts[key]
        if gain > 0:
            found.append((gain, j, mu1, mu2))
    return sorted(found, key=lambda cut: -cut[0])


def split_merge(engine, run, lloyd, *, max_rounds):
    """Improve the hard fixed point ``run`` by paired merges and splits.

    Parameters
    ----------
    engine : engine object
    run : RunResult
        A Lloyd fixed point (hard statistics in ``run.stats``).
    lloyd : callable
        ``lloyd(centers)`` runs Lloyd's algorithm and returns a RunResult.
    max_rounds : int
        Cap on the accepted moves.

    Returns
    -------
    RunResult
        The last accepted fixed point (``run`` itself when no move pays), with
        the updates of every Lloyd run it tried added to ``n_iter``.
    """
    rng = np.random.RandomState(0)  # starting vectors of the power iterations only
    spent, cuts = 0, {}
    for _ in range(max_rounds):
        centers, stats = run.centers, run.stats
        a, b, cost = _cheapest_merge(centers, stats.masses)
        merged = centers[a]
        total = stats.masses[a] + stats.masses[b]
        if total > 0:
            merged = (stats.masses[a] * centers[a] + stats.masses[b] * centers[b]) / total
        accepted = None
        for gain, j, mu1, mu2 in _cuts(engine, stats, centers, {a, b}, rng, cuts)[:_PROPOSALS]:
            if not gain > cost:
                break
            proposal = centers.copy()
            proposal[a], proposal[b], proposal[j] = merged, mu1, mu2
            candidate = lloyd(proposal)
            spent += candidate.n_iter
            if candidate.stats.inertia < stats.inertia:
                accepted = candidate
                break
        if accepted is None:
            break
        run = accepted
    if spent:
        run.n_iter += spent
    return run
