"""The contract every engine implements: what a pass over the data takes and returns.

An engine is bound to one validated data set at construction and runs passes
over it for any centroids. The estimators, the algorithms of
:mod:`softkmeans._core.optimize` and :mod:`softkmeans.diagnostics` use
engines through this contract only; ``tests/test_engines.py`` checks every
engine against the numpy reference through it. The passes beside ``estep``
are written once over row blocks of distances (:class:`._block.BlockEngine`)
for the array-namespace engines (:mod:`._array`: the numpy reference, and the
CuPy engine); the numba engine runs them in its kernels. The whole-data steps
(``lambda_max`` to ``persist``) are written once for data in memory
(:class:`._in_memory.InMemorySteps`); a new engine over data in memory mixes
that class in and writes the passes.
"""

from typing import Protocol, runtime_checkable

import numpy as np

from .._core.responsibilities import RelaxationSpec
from ._stats import PassStats

__all__ = ["Engine"]


@runtime_checkable
class Engine(Protocol):
    """Passes over one data set ``X`` (dense float32/float64 or CSR), chunk by chunk.

    Parameters of the constructor: ``(X, sample_weight=None, **options)``,
    ``X`` validated, ``sample_weight`` non-negative float64 (ones when None).

    Attributes
    ----------
    name : str
        The ``backend`` name.
    X : ndarray or CSR matrix of shape (n_samples, n_features)
        The data on the host.
    sample_weight : ndarray of shape (n_samples,), float64
    x_sq : ndarray of shape (n_samples,), float64
        ``||x_i||^2`` summed in float64.
    n_samples : int
    unit_roundoff : float
        Of the passes' arithmetic (``2^-24`` where float32 data are multiplied
        in float32, ``2^-53`` otherwise): the diagnostics' tolerances use it.
    distance_shift : ndarray of shape (n_features,) or None
        The point subtracted from X and the centroids before their distances
        (data far from the origin), or None.
    """

    name: str
    X: object
    sample_weight: np.ndarray
    x_sq: np.ndarray

    @property
    def n_samples(self) -> int: ...

    @property
    def unit_roundoff(self) -> float: ...

    @property
    def distance_shift(self) -> np.ndarray | None: ...

    def distance_norms(self) -> np.ndarray:
        """``||x_i - shift||^2`` in float64, the norms the distances start from."""

    def row(self, i: int) -> np.ndarray:
        """Observation ``i`` as a dense float64 vector."""

    def estep(self, centers: np.ndarray, spec: RelaxationSpec,
              with_sums: bool = True) -> PassStats:
        """One pass: the responsibilities at ``centers`` and their sufficient statistics.

        Nothing of size ``n_samples x n_clusters`` is allocated; ``with_sums=False``
        skips ``R^T X`` (prediction passes).
        """

    def responsibilities(self, centers: np.ndarray, spec: RelaxationSpec) -> np.ndarray:
        """Responsibilities, shape (n_samples, n_clusters); rows sum to 1."""

    def sq_distances(self, centers: np.ndarray) -> np.ndarray:
        """Squared distances to every centroid, shape (n_samples, n_clusters)."""

    def max_sq_distances(self, points: np.ndarray) -> np.ndarray:
        """``max_i ||x_i - p||^2`` over the observations with positive weight, per point."""

    def log_sum_exp(self, centers: np.ndarray, sigma: float) -> np.ndarray:
        """``log sum_j exp(-d_ij / (2 sigma^2))`` of every observation."""

    # The whole-data steps of a fit (:class:`._in_memory.InMemorySteps` for data in memory).
    def lambda_max(self) -> float:
        """Largest eigenvalue of the weighted covariance of X (the critical ``sigma^2``)."""

    def start_distances(self, centers: np.ndarray) -> tuple[float, bool]:
        """``(weighted mean, any positive)`` of the squared distances to the nearest of
        ``centers``, observations equal to a centroid at exactly 0."""

    def draw_seeds(self, init: str, n_clusters: int, rng) -> np.ndarray:
        """``n_clusters`` float64 rows of X drawn by ``init`` (``"k-means++"`` or
        ``"random"``, weighted) with ``rng``, a ``numpy.random.RandomState``."""

    def top_rows(self, scores, count: int) -> np.ndarray:
        """Indices of the ``count`` largest per-row ``scores`` (as a pass returns them),
        the largest first, ties in index order."""

    def persist(self, stats: PassStats) -> PassStats:
        """The pass statistics a fitted model keeps, computed (lazy ones evaluated)."""
