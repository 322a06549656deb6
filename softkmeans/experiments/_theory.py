"""The few constants of the paper's theorems that the experiments need.

Each is a closed formula of ``../../MATH.md`` evaluated on quantities an engine
pass returns (margins, labels, cluster sizes, distances). They are kept here,
small and separate, so that they can be replaced one for one by the public
functions of :mod:`softkmeans.diagnostics`.
"""

import numpy as np

__all__ = ["beta", "sigma_for_beta", "identification_sigma", "q_factor", "map_bound",
           "softmax_ceiling", "entmax_ceiling", "margin_gap_bounds", "PathConstants",
           "path_constants", "trajectory_epsilon", "critical_trajectory_sigma",
           "balance", "radii"]


def beta(margin_min, sigma):
    """Margin-normalized inverse temperature ``Delta_min / (2 sigma^2)``."""
    return margin_min / (2.0 * sigma**2)


def sigma_for_beta(margin_min, beta_value):
    """The temperature at which :func:`beta` equals ``beta_value``."""
    return np.sqrt(margin_min / (2.0 * np.asarray(beta_value, dtype=float)))


def identification_sigma(margin_min, alpha=1.5):
    """Entmax-alpha identification threshold ``sqrt((alpha - 1) Delta_min / 2)`` (Thm 27c)."""
    return float(np.sqrt((alpha - 1.0) * margin_min / 2.0))


def q_factor(k, margin_min, sigma):
    """``q(sigma) = (k - 1) exp(-Delta_min / (2 sigma^2))`` (Lemma 17, Thm 18)."""
    return (k - 1) * np.exp(-beta(margin_min, sigma))


def balance(labels, k, n=None):
    """``rho = min_j |S_j| / n``."""
    n = labels.size if n is None else n
    return float(np.bincount(labels, minlength=k).min() / n)


def radii(X, labels, lloyd_centers):
    """``B_j = max_{i in S_j} ||x_i - T_Lloyd,j||`` (0 for an empty cluster)."""
    dist = np.linalg.norm(X - lloyd_centers[labels], axis=1)
    out = np.zeros(lloyd_centers.shape[0])
    np.maximum.at(out, labels, dist)
    return out


def map_bound(B, rho, q):
    """Thm 18: ``||T_sigma,j - T_Lloyd,j|| <= (B_j / rho) q / (1 - q)``; inf when q >= 1."""
    q = np.asarray(q, dtype=float)
    with np.errstate(divide="ignore"):
        return np.where(q < 1.0, np.max(B) / rho * q / (1.0 - q), np.inf)


def softmax_ceiling(n, k, sigma):
    """Thm 4: ``J - F_sigma <= 2 n sigma^2 log k``."""
    return 2.0 * n * sigma**2 * np.log(k)


def entmax_ceiling(n, k, sigma):
    """Prop 6 at alpha = 3/2: ``J - F^(3/2) <= (8/3) n sigma^2 (1 - 1/sqrt k)``."""
    return 8.0 / 3.0 * n * sigma**2 * (1.0 - 1.0 / np.sqrt(k))


def margin_gap_bounds(n, k, margin_min, sigma):
    """Prop 8: ``sigma^2 e^-beta <= J - F_sigma <= 2 n (k-1) sigma^2 e^-beta``."""
    e = np.exp(-beta(margin_min, sigma))
    return sigma**2 * e, 2.0 * n * (k - 1) * sigma**2 * e


class PathConstants:
    """``delta``, ``rho`` and ``R`` of Thm 25 taken along a Lloyd path.

    Attributes
    ----------
    delta : float
        Smallest margin over the iterates.
    rho : float
        Smallest balance over the iterates (0 if a cluster is ever empty).
    R : float
        Largest ``||x_i - mu_j||`` over the iterates.
    k : int
    """

    def __init__(self, delta, rho, R, k):
        self.delta, self.rho, self.R, self.k = float(delta), float(rho), float(R), int(k)

    @property
    def r_star(self):
        """``sqrt(R^2 + delta / 4) - R``, written without cancellation."""
        return (self.delta / 4.0) / (np.sqrt(self.R**2 + self.delta / 4.0) + self.R)


def path_constants(margins_min, balances, radius_max, k):
    """Collect :class:`PathConstants` from per-iterate margins, balances and radii."""
    return PathConstants(np.min(margins_min), np.min(balances), np.max(radius_max), k)


def trajectory_epsilon(pc, sigma):
    """Thm 25: ``eps(sigma) = (R / rho) q' / (1 - q')``, ``q' = (k-1) e^{-delta / (4 sigma^2)}``."""
    if pc.rho <= 0 or pc.delta <= 0:
        return np.inf
    qp = (pc.k - 1) * np.exp(-pc.delta / (4.0 * sigma**2))
    return np.inf if qp >= 1.0 else pc.R / pc.rho * qp / (1.0 - qp)


def critical_trajectory_sigma(pc):
    """``sigma*``: the hypothesis ``eps(sigma) <= r*`` of Thm 25 holds iff sigma <= sigma*.

    ``sigma*^2 = delta / (4 log((1 + a)(k - 1) / a))`` with ``a = r* rho / R``;
    0 when the path has a zero margin or an empty cluster, inf when k = 1.
    """
    if pc.rho <= 0 or pc.delta <= 0:
        return 0.0
    if pc.k == 1:
        return np.inf
    a = pc.r_star * pc.rho / pc.R
    return float(np.sqrt(pc.delta / (4.0 * np.log((1.0 + a) * (pc.k - 1) / a))))
