"""What one pass of an engine over the data returns."""

from dataclasses import dataclass

import numpy as np

__all__ = ["PassStats"]


@dataclass
class PassStats:
    """Sufficient statistics of one E-step pass over the data.

    All sums are weighted by the sample weights. They are what an update needs
    (``sums``, ``masses``), what a stopping rule and a diagnostic need
    (``objective``, ``inertia``, ``gap``, ``labels``, ``margins``), and nothing of
    size ``n_samples x n_clusters``.

    Attributes
    ----------
    sums : ndarray of shape (n_clusters, n_features), float64
        ``sum_i w_i r_ij x_i``.
    masses : ndarray of shape (n_clusters,), float64
        ``sum_i w_i r_ij``.
    objective : float
        The relaxation's reduced objective (``F_sigma``, ``F^alpha_sigma`` or ``J``).
    inertia : float
        Hard distortion ``J = sum_i w_i min_j d_ij``.
    gap : float
        ``J - objective``, accumulated row by row from a stable formula.
    labels : ndarray of shape (n_samples,), int32
        Nearest centroid of each observation.
    margins : ndarray of shape (n_samples,), float64
        Second smallest minus smallest squared distance of each observation.
    dmin : ndarray of shape (n_samples,), float64
        Smallest squared distance of each observation.
    """

    sums: np.ndarray
    masses: np.ndarray
    objective: float
    inertia: float
    gap: float
    labels: np.ndarray
    margins: np.ndarray
    dmin: np.ndarray
