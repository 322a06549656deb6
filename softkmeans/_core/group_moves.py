"""Group transfers: a set of observations moved from one cluster to another at once.

Moving a set ``S`` (mass ``W``, mean ``mu_S``) from cluster ``a`` (mass ``m_a``,
mean ``mu_a``) to cluster ``b`` (mass ``m_b``, mean ``mu_b``) changes ``J`` by exactly

``W m_b / (m_b + W) ||mu_S - mu_b||^2 - W m_a / (m_a - W) ||mu_S - mu_a||^2``,

Hartigan's formula (:mod:`softkmeans._core.hartigan`) with the set in the place
of one observation: the scatter of ``S`` about its own mean is the same in
either cluster and cancels. On heavy tails a Lloyd fixed point can hold a
cluster of the tail's middle whose inner points belong with the bulk; moving
any one of them alone raises ``J``, moving them together lowers it.

The sets tried are the cuts of a cluster across an axis: the rows sorted by
their projection on it, each prefix and each complement of a prefix. Running
sums of the sorted rows give every cut's change in ``O(m d)`` after the sort,
with no ``m x m`` or ``n x k`` array.
"""

import numpy as np

__all__ = ["best_transfer", "transfer_changes"]


def transfer_changes(moved_mass, moved_offset, mass, target_offsets, target_masses):
    """Exact change of ``J`` when sets leave a cluster for other clusters.

    Parameters
    ----------
    moved_mass : ndarray of shape (n_sets,)
        ``W`` of each set, below the cluster's ``mass``.
    moved_offset : ndarray of shape (n_sets, n_features)
        ``mu_S - mu_a`` of each set.
    mass : float
        ``m_a``, the mass of the cluster the sets leave.
    target_offsets : ndarray of shape (n_targets, n_features)
        ``mu_a - mu_b`` of each target cluster ``b``.
    target_masses : ndarray of shape (n_targets,)
        ``m_b`` of each.

    Returns
    -------
    ndarray of shape (n_targets, n_sets)
    """
    # one target at a time: an (n_targets, n_sets, n_features) array would be large for a
    # big cluster of many features
    to_target = np.array([np.sum((moved_offset + offset) ** 2, axis=1)
                          for offset in target_offsets]).reshape(len(target_offsets), -1)
    from_own = np.einsum("ij,ij->i", moved_offset, moved_offset)
    target_masses = target_masses[:, None]
    return (moved_mass * target_masses / (target_masses + moved_mass) * to_target
            - moved_mass * mass / (mass - moved_mass) * from_own)


def best_transfer(centred, weights, axis, target_offsets, target_masses):
    """The cut of a cluster across ``axis`` whose side, moved to one of the targets, lowers
    ``J`` most.

    Parameters
    ----------
    centred : ndarray of shape (n_members, n_features)
        The cluster's rows less its mean ``mu_a`` (at least two rows).
    weights : ndarray of shape (n_members,)
        Their weights, all positive.
    axis : ndarray of shape (n_features,)
    target_offsets : ndarray of shape (n_targets, n_features)
        ``mu_a - mu_b`` of each target cluster ``b``.
    target_masses : ndarray of shape (n_targets,)

    Returns
    -------
    change : float
        The change of ``J`` (the smallest over the cuts, sides and targets).
    target : int
        Index into the targets.
    moved : ndarray of int
        Indices into ``centred`` of the side that moves.
    """
    order = np.argsort(centred @ axis, kind="stable")
    sums = np.cumsum(weights[order, None] * centred[order], axis=0)[:-1]
    heads = np.cumsum(weights[order])[:-1]
    tails = np.cumsum(weights[order][::-1])[-2::-1]
    mass = heads[-1] + weights[order[-1]]
    # a prefix sums to sums, its complement to -sums: the rows' centred sum is zero
    masses = np.concatenate([heads, tails])
    offsets = np.concatenate([sums / heads[:, None], -sums / tails[:, None]])
    changes = transfer_changes(masses, offsets, mass, target_offsets, target_masses)
    target, cut = np.unravel_index(np.argmin(changes), changes.shape)
    count = cut + 1 if cut < heads.size else order.size - (cut - heads.size + 1)
    moved = order[:count] if cut < heads.size else order[order.size - count:]
    return float(changes[target, cut]), int(target), moved
