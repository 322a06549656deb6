"""EntmaxKMeans: K-Means with sparse entmax-alpha responsibilities."""

from numbers import Real

from sklearn.utils._param_validation import Interval, StrOptions

from ._base import FixedTemperatureKMeans
from ._core.optimize import alternating
from ._core.responsibilities import RelaxationSpec

__all__ = ["EntmaxKMeans"]


class EntmaxKMeans(FixedTemperatureKMeans):
    """Sparse soft K-Means with entmax-alpha (Tsallis) responsibilities.

    The responsibilities ``r_i = entmax_alpha(-d_i / (2 sigma^2))`` have exact
    zeros: an observation whose margin (second smallest minus smallest squared
    distance) is at least ``2 sigma^2 / (alpha - 1)`` (``4 sigma^2`` at the
    default ``alpha=1.5``) is assigned to its nearest centroid alone. Below the
    identification temperature ``sigma_id = sqrt((alpha - 1) margin_min / 2)``
    every assignment is hard and an alternating step is exactly a Lloyd step.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of centroids.
    sigma : float or "auto", default="auto"
        Temperature; see :class:`SoftKMeans`. ``"auto"`` re-estimates it at
        every update as :class:`SoftKMeans` does, from the entmax
        responsibilities (the variance per feature of the observations around
        the centroids that share them).
    alpha : float, default=1.5
        Entmax order, ``alpha > 1``. 1.5 and 2 (sparsemax) are solved exactly
        by sorting, other values by bisection to the resolution of float64.
    empty_cluster : {"reseed", "keep"}, default="reseed"
        A centroid that receives no mass moves onto the observation farthest
        from its centroid (as scikit-learn's ``KMeans`` relocates an empty
        cluster), or stays in place (the objective still decreases), at every
        update. In :meth:`partial_fit`: a centroid without running mass moves
        onto the batch's observation farthest from its nearest centroid, or
        stays. ``reassignment_ratio`` may still move it once the run has
        converged: set it to 0 to keep every centroid where the updates leave it.
    init, n_init, max_iter, tol, random_state, backend, n_threads, verbose, record_path, \
certify, decay, reassignment_ratio
        As in :class:`SoftKMeans` (the objective is ``F^alpha_sigma``).

    Attributes
    ----------
    cluster_centers_, labels_, inertia_, sigma_, n_iter_, converged_, margins_, \
margin_min_, critical_sigma_, beta_, gap_, bounds_, n_features_in_, feature_names_in_, path_, \
n_steps_, n_reassigned_
        As in :class:`SoftKMeans`.
    identification_sigma_ : float
        ``sqrt((alpha - 1) margin_min_ / 2)``: the temperature below which the
        entmax-alpha assignments at ``cluster_centers_`` are exactly hard.
    n_unidentified_ : float
        Number of training samples whose margin is below ``2 sigma^2 / (alpha - 1)``,
        i.e. whose responsibilities are not one-hot; with ``sample_weight``, their
        weight (the ``N_sigma`` of the bounds in ``bounds_``).
    objective_ : float
        ``F^alpha_sigma = sum_i [sum_j r_ij d_ij - 2 sigma^2 H_alpha(r_i)]`` at
        ``cluster_centers_``.

    See Also
    --------
    SoftKMeans : Dense softmax responsibilities.
    AnnealedKMeans : Deterministic annealing.

    Examples
    --------
    >>> import numpy as np
    >>> from softkmeans import EntmaxKMeans
    >>> X = np.array([[0.0, 0.0], [0.2, 0.0], [4.0, 0.0], [4.2, 0.0]])
    >>> model = EntmaxKMeans(n_clusters=2, sigma=0.5, random_state=0).fit(X)
    >>> proba = model.predict_proba(X)
    >>> bool(((proba == 0) | (proba == 1)).all())
    True
    """

    _parameter_constraints: dict = {
        **FixedTemperatureKMeans._parameter_constraints,
        "alpha": [Interval(Real, 1, None, closed="neither")],
        "empty_cluster": [StrOptions({"keep", "reseed"})],
    }

    def __init__(self, n_clusters=8, *, sigma="auto", alpha=1.5, empty_cluster="reseed",
                 init="k-means++", n_init="auto", max_iter=300, tol=1e-4, random_state=None,
                 backend="auto", n_threads=None, verbose=0, record_path=False,
                 certify=False, decay=1.0, reassignment_ratio=0.01):
        super().__init__(n_clusters, sigma=sigma, init=init, n_init=n_init,
                         max_iter=max_iter, tol=tol, random_state=random_state,
                         backend=backend, n_threads=n_threads, verbose=verbose,
                         record_path=record_path, certify=certify, decay=decay,
                         reassignment_ratio=reassignment_ratio)
        self.alpha = alpha
        self.empty_cluster = empty_cluster

    _stream_defining = ("n_clusters", "sigma", "alpha")

    def _spec(self, sigma):
        return RelaxationSpec("entmax", sigma, float(self.alpha))

    def _empty_rule(self):
        return self.empty_cluster

    def _run(self, engine, centers, rng):
        return alternating(engine, centers, self._resolved_spec, max_iter=self.max_iter,
                           tol=self._stopping_rule(), empty=self.empty_cluster,
                           record_path=self.record_path, verbose=self._progress,
                           fit_sigma=self._sigma_shrink, dtype=self._stored_dtype,
                           reassign=self._reassign(rng))
