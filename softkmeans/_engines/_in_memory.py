"""The whole-data steps of the contract for engines whose data sit in memory.

A fit asks an engine for more than its passes: the largest eigenvalue of the
data's covariance, the distances of a start, the seeds, the rows of largest
score, and the statistics it keeps. An engine holding X in one piece (numpy,
CSR, or CuPy with host copies) computes them as here; a blockwise engine
(:class:`softkmeans._dask.engine.BlockwiseEngine`) reduces them over its blocks.
"""

import inspect

import numpy as np
from sklearn.cluster import _kmeans, kmeans_plusplus

from .._core.responsibilities import HARD
from .._core.temperature import exact_zero_distances, lambda_max
from .._core.update_loops import relative_weighted_sums

__all__ = ["InMemorySteps", "kmeans_plusplus_rows"]


#: The parameters of scikit-learn's unvalidated k-means++ that :func:`kmeans_plusplus_rows`
#: calls; another signature (another scikit-learn) falls back to the public function.
_UNVALIDATED_PARAMETERS = ("X", "n_clusters", "x_squared_norms", "sample_weight", "random_state",
                           "n_local_trials")
_unvalidated = getattr(_kmeans, "_kmeans_plusplus", None)
if _unvalidated is None or tuple(
        inspect.signature(_unvalidated).parameters) != _UNVALIDATED_PARAMETERS:
    _unvalidated = None


def kmeans_plusplus_rows(X, n_clusters, sample_weight, x_squared_norms, random_state):
    """Rows of ``X`` that scikit-learn's :func:`~sklearn.cluster.kmeans_plusplus` draws.

    ``X`` is validated (float32 or float64, C-contiguous or CSR) and
    ``x_squared_norms`` in its dtype; ``random_state`` is a ``RandomState``.
    The draws are the public function's, without its validation of the inputs
    (a fixed cost that is most of a fit's on small data), as ``KMeans`` itself
    seeds.
    """
    if _unvalidated is None:
        return kmeans_plusplus(X, n_clusters, sample_weight=sample_weight,
                               x_squared_norms=x_squared_norms, random_state=random_state)[1]
    weights = np.asarray(sample_weight, dtype=X.dtype)  # as the public function converts them
    return _unvalidated(X, n_clusters, x_squared_norms, weights, random_state)[1]


class InMemorySteps:
    """Mixin: the whole-data steps of :class:`._contract.Engine` over ``self.X`` in memory.

    The class it mixes into provides ``X``, ``sample_weight``, ``x_sq``,
    ``unit_roundoff``, ``distance_shift``, ``distance_norms``, ``row`` and
    ``estep``.
    """

    def lambda_max(self):
        """Largest eigenvalue of the weighted covariance of X (:func:`lambda_max`)."""
        return lambda_max(self.X, self.sample_weight)

    def start_distances(self, centers):
        """``(weighted mean, any positive)`` of the squared distances to the nearest of
        ``centers``: exact zeros for observations equal to a centroid
        (:func:`exact_zero_distances`), "any positive" over positive weights."""
        start = self.estep(centers, HARD, with_sums=False)
        dmin = exact_zero_distances(self.X, centers, start.labels, start.dmin, self.x_sq,
                                    self.unit_roundoff)
        _, total, weighted, positive = relative_weighted_sums(dmin, self.sample_weight)
        return weighted / total, positive

    def draw_seeds(self, init, n_clusters, rng):
        """``n_clusters`` rows of X (float64) drawn by ``init``.

        ``"random"``: without replacement, with probabilities proportional to the
        weights; ``"k-means++"``: scikit-learn's :func:`~sklearn.cluster.kmeans_plusplus`
        on the data as shifted for their distances (data far from the origin get
        the seeds of centred ones). Both see the weights over the largest, the
        same draws at any scale of the weights.
        """
        weights = self.sample_weight / self.sample_weight.max()
        if init == "random":
            rows = rng.choice(self.X.shape[0], size=n_clusters, replace=False,
                              p=weights / weights.sum())
        else:
            shift = self.distance_shift
            data = self.X if shift is None else self.X - shift.astype(self.X.dtype)
            rows = kmeans_plusplus_rows(data, n_clusters, weights,
                                        self.distance_norms().astype(self.X.dtype), rng)
        return np.vstack([self.row(i) for i in rows])

    def top_rows(self, scores, count):
        """Indices of the ``count`` largest of the per-row ``scores``, the largest first,
        ties in index order."""
        return np.argsort(-scores, kind="stable")[:count]

    def persist(self, stats):
        """The pass statistics a fitted model keeps: ``stats`` themselves, computed."""
        return stats
