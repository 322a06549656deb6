"""Online alternating minimization: running sufficient statistics over a stream of batches.

The alternating update only needs, per centroid, the sum of the
responsibilities ``m_j`` and of the responsibility-weighted observations
``s_j``; they add up over any split of the rows. A stream keeps their running
values with a forgetting factor ``decay`` (``gamma``), as Spark's streaming
K-Means keeps its ``decayFactor``: after batch ``t``, with ``(s_j^t, m_j^t)``
the batch's statistics at the current centroids,

``S_j <- gamma S_j + s_j^t``,  ``M_j <- gamma M_j + m_j^t``,  ``mu_j <- S_j / M_j``.

``gamma = 1`` weighs every batch seen alike (the centroid is the mean of all
the responsibility-weighted observations so far, as scikit-learn's
``MiniBatchKMeans`` keeps its per-centre counts: a step of ``1 / t``, stepwise
EM), so that on a stationary stream the centroids converge to a fixed point of
the batch update; ``gamma < 1`` forgets, with a memory of about
``1 / (1 - gamma)`` batches, to follow a drifting stream. A centroid without
running mass stays where it is.

For a fitted temperature the running weight ``W`` and spread
``Q = sum_i w_i ||x_i - c||^2`` (about a fixed point ``c``) are kept alike, and
``sigma^2`` is the shared variance of the isotropic mixture at the running
means, ``(Q - sum_j M_j ||S_j / M_j - c||^2) / (d W)``
(:func:`softkmeans._core.optimize.mixture_variance`), the EM estimate on all the
(decayed) data seen.
"""

from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from .optimize import _reseed_empty, mixture_variance
from .reassignment import abandoned, relocate
from .responsibilities import HARD, SIGMA_MAX, SIGMA_MIN
from .row_blocks import float64_blocks

__all__ = ["Stream", "start_stream", "stream_step", "weighted_spread"]



@dataclass
class Stream:
    """The state of a stream: centroids, relaxation and running statistics.

    Attributes
    ----------
    centers : ndarray of shape (n_clusters, n_features), float64
    spec : RelaxationSpec
        The relaxation at the current temperature.
    sums : ndarray of shape (n_clusters, n_features)
        Running ``S_j``.
    masses : ndarray of shape (n_clusters,)
        Running ``M_j``.
    weight, spread : float
        Running ``W`` and ``Q`` (kept only with a fitted temperature).
    origin : ndarray of shape (n_features,) or None
        The point ``c`` the spread is taken about (None: the origin).
    n_steps : int
        Batches seen.
    n_reseeded : int
        Centroids moved onto an observation because they had no running mass,
        or (:func:`stream_step`'s ``reassign``) because the data abandoned them.
    seed : int
        Seeds the draws of the relocations (with ``n_steps``).
    since_check : int
        Observations seen since abandoned centroids were last looked for.
    """

    centers: np.ndarray
    spec: object
    sums: np.ndarray
    masses: np.ndarray
    weight: float = 0.0
    spread: float = 0.0
    origin: np.ndarray | None = None
    n_steps: int = 0
    n_reseeded: int = 0
    seed: int = 0
    since_check: int = 0


def start_stream(centers, spec, origin=None, seed=0):
    """A stream at ``centers`` with no statistics yet.

    Parameters
    ----------
    centers : ndarray of shape (n_clusters, n_features)
    spec : RelaxationSpec
    origin : ndarray of shape (n_features,), default=None
        The point the spread is taken about (for dense data far from the
        origin: any point near the data, as the first batch's mean).
    seed : int, default=0
        Of the relocations' draws.

    Returns
    -------
    Stream
    """
    centers = np.array(centers, dtype=np.float64)
    k, d = centers.shape
    return Stream(centers, spec, np.zeros((k, d)), np.zeros(k), origin=origin, seed=seed)


def weighted_spread(X, sample_weight, origin=None):
    """``sum_i w_i ||x_i - c||^2`` in float64, block by block.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
    sample_weight : ndarray of shape (n_samples,)
    origin : ndarray of shape (n_features,), default=None
        ``c``; None is the origin (the only choice for CSR data, which a
        shift would fill in).

    Returns
    -------
    float
    """
    if sp.issparse(X):
        squares = X.multiply(X).sum(axis=1)
        return float(sample_weight @ np.asarray(squares, dtype=np.float64).ravel())
    total = 0.0
    for rows, block in float64_blocks(X):
        if origin is not None:
            block = block - origin
        total += float(sample_weight[rows] @ np.einsum("ij,ij->i", block, block))
    return total


def stream_step(stream, engine, *, decay, fit_sigma=None, reseed=False, reassign=0.0):
    """Add one batch (the data of ``engine``) to ``stream`` and update the centroids.

    Parameters
    ----------
    stream : Stream
    engine : engine object
        Bound to the batch (see :mod:`softkmeans._engines`).
    decay : float
        The forgetting factor ``gamma`` in ``[0, 1]``.
    fit_sigma : float, default=None
        When given, the temperature becomes ``fit_sigma`` times the deviation
        of the running shared variance.
    reseed : bool, default=False
        Move a centroid without running mass onto the batch's observation
        farthest from its nearest centroid (its statistics stay zero until a
        batch reaches it), as ``empty="reseed"`` does in a fit.
    reassign : float, default=0.0
        When positive, the ``ratio`` of :func:`~softkmeans._core.reassignment.abandoned`:
        once :data:`CHECK_EVERY` times ``n_clusters`` observations have arrived
        since the last look, abandoned centroids move onto the batch's
        observations (:func:`~softkmeans._core.reassignment.relocate`) if the
        batch's distortion ``J`` is no larger there (the soft objective of
        one batch rewards a duplicate, which shares its points; ``J`` does
        not). A moved centroid's running statistics become those of the
        smallest mass of the kept ones sitting at its new place (with a fitted
        temperature, they enter the running weight and spread alike), so that
        it is not abandoned again at once.

    Returns
    -------
    Stream
        The new state (``stream`` is not modified).
    """
    stats = engine.estep(stream.centers, stream.spec)
    sums = decay * stream.sums + stats.sums
    masses = decay * stream.masses + stats.masses
    full = masses > 0
    centers = stream.centers.copy()
    centers[full] = sums[full] / masses[full, None]
    n_reseeded, reseeded = stream.n_reseeded, np.flatnonzero(~full) if reseed else []
    if reseed and not full.all():
        centers = _reseed_empty(centers, replace(stats, masses=masses), engine, set())
        n_reseeded += int(np.count_nonzero(~full))
    new = replace(stream, centers=centers, sums=sums, masses=masses, n_steps=stream.n_steps + 1,
                  n_reseeded=n_reseeded, since_check=stream.since_check + engine.n_samples)
    new.weight = decay * stream.weight + float(engine.sample_weight.sum())
    new.spread = decay * stream.spread
    if fit_sigma is not None:
        new.spread += weighted_spread(engine.X, engine.sample_weight, stream.origin)
    if reassign > 0 and new.since_check >= CHECK_EVERY * len(centers):
        _relocate_abandoned(new, engine, reassign, reseeded)
    if fit_sigma is None:
        return new
    sums, masses, centers = new.sums, new.masses, new.centers
    variance = mixture_variance(sums, masses, new.weight, new.spread, stream.origin,
                                centers.shape[1], engine.unit_roundoff)
    if variance > 0:
        sigma = float(np.clip(fit_sigma * np.sqrt(variance), SIGMA_MIN, SIGMA_MAX))
        new.spec = replace(stream.spec, sigma=sigma)
    return new


#: A stream looks for abandoned centroids once this many times ``n_clusters``
#: observations have arrived since it last did (``MiniBatchKMeans``' interval).
CHECK_EVERY = 10


def _relocate_abandoned(stream, engine, ratio, reseeded):
    """Move ``stream``'s abandoned centroids but the ``reseeded`` ones onto the batch of
    ``engine`` (in place) where the batch's ``J`` is no larger; see :func:`stream_step`."""
    stream.since_check = 0
    moving = np.setdiff1d(abandoned(stream.masses, stream.centers, stream.spec, ratio),
                          reseeded)
    if moving.size == 0:
        return
    rng = np.random.RandomState([stream.seed, stream.n_steps])
    moved, placed = relocate(engine, stream.centers, moving, rng)
    moving = moving[:placed]
    if placed == 0 or engine.estep(moved, HARD, with_sums=False).inertia > engine.estep(
            stream.centers, HARD, with_sums=False).inertia:
        return
    kept = np.setdiff1d(np.arange(len(moved)), moving)
    virtual = float(stream.masses[kept].min())
    stream.centers = moved
    stream.masses = stream.masses.copy()
    stream.masses[moving] = virtual
    stream.sums = stream.sums.copy()
    stream.sums[moving] = virtual * moved[moving]
    offsets = moved[moving] if stream.origin is None else moved[moving] - stream.origin
    stream.weight += virtual * moving.size
    stream.spread += virtual * float(np.einsum("ij,ij->", offsets, offsets))
    stream.n_reseeded += int(moving.size)

