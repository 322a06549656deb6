"""Seeding on a dask array: k-means|| and a weighted draw, each a few passes over the blocks.

``init="k-means++"`` needs ``k`` sequential passes over all the data, one per
seed; on a dask array it is replaced by k-means|| (Bahmani et al., "Scalable
K-Means++", VLDB 2012), as dask-ml does, with the two steps dask-ml leaves out:

1. the first candidate is an observation drawn with probability proportional
   to its weight (not row 0);
2. for :data:`ROUNDS` rounds, every observation becomes a candidate
   independently with probability ``min(1, l w_i D_i / sum_j w_j D_j)``,
   ``l = OVERSAMPLING * k``, ``D_i`` its squared distance to the nearest
   candidate so far (one pass to draw, one to update ``D``);
3. each candidate is weighted by the weight of the observations nearest to it
   (one pass), and the weighted candidates are reclustered into ``k`` seeds
   (Bahmani et al.'s last step): scikit-learn's :class:`~sklearn.cluster.KMeans`,
   weighted, best of :data:`RECLUSTER_INITS` k-means++ starts by weighted
   inertia, on one thread. The candidates are ``O(k log n)`` rows, so this
   reads no data.

The k-means|| seeds are centroids of candidates. ``init="random"`` draws ``k``
observations without replacement with probabilities proportional to their
weights (exponential keys, Efraimidis and Spirakis 2006: one pass). Every
block draws from its own seed, taken from the estimator's ``random_state``, so
the draw does not depend on the scheduler.
"""

import warnings

import dask
import numpy as np
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from .._core.responsibilities import HARD
from .._engines._namespace import to_numpy

__all__ = ["OVERSAMPLING", "RECLUSTER_INITS", "RECLUSTER_MAX_ITER", "RECLUSTER_MIN_ITER",
           "RECLUSTER_MIN_WORK", "ROUNDS", "draw_seeds", "kmeans_parallel",
           "recluster", "weighted_candidates", "weighted_draw"]

#: Candidates drawn per round, as a multiple of ``n_clusters`` (Bahmani et al.: 2).
OVERSAMPLING = 2.0
#: Rounds of drawing (Bahmani et al.: 5 suffice for ``l = 2k``).
ROUNDS = 5
#: k-means++ starts of the candidates' reclustering, the best kept, at most.
RECLUSTER_INITS = 10
#: Lloyd iterations of each start, at most (scikit-learn's default).
RECLUSTER_MAX_ITER = 300
#: The reclustering's distance computations (candidate, centroid and iteration) are held to
#: those of one pass over the data, or to this many where that is fewer (a few milliseconds).
RECLUSTER_MIN_WORK = 10_000_000
#: Lloyd iterations of a start that a tight budget still allows.
RECLUSTER_MIN_ITER = 10


def draw_seeds(engine, init, n_clusters, rng):
    """``n_clusters`` starting centroids (float64) of a blockwise engine's data.

    Parameters
    ----------
    engine : BlockwiseEngine
    init : {"k-means++", "random"}
    n_clusters : int
    rng : numpy.random.RandomState

    Returns
    -------
    ndarray of shape (n_clusters, n_features)
    """
    if init == "random":
        return weighted_draw(engine, n_clusters, rng)
    return kmeans_parallel(engine, n_clusters, rng)


def _block_seeds(engine, rng):
    return rng.randint(np.iinfo(np.int32).max, size=engine.X.numblocks[0])


def _keyed_rows(block, weights, count, seeds, block_id=None):
    """The ``count`` rows of largest key ``log(u) / w`` of one block, key first (padded)."""
    n, d = block.shape
    out = np.full((count, d + 1), -np.inf)
    if not n:
        return out
    u = np.random.RandomState(seeds[block_id[0]]).random_sample(n)
    w = np.ones(n) if weights is None else to_numpy(weights)[:, 0]
    with np.errstate(divide="ignore"):
        keys = np.where(w > 0, np.log(u) / np.where(w > 0, w, 1.0), -np.inf)
    top = np.argsort(-keys, kind="stable")[:count]
    out[:len(top), 0] = keys[top]
    out[:len(top), 1:] = np.asarray(to_numpy(block[top]), dtype=np.float64)
    return out


def weighted_draw(engine, count, rng):
    """``count`` observations drawn without replacement, with probabilities proportional
    to their weights (one pass)."""
    d = engine.X.shape[1]
    parts = engine.map_blocks(_keyed_rows, count, _block_seeds(engine, rng),
                        chunks=(count, d + 1), dtype=np.float64).compute()
    best = np.argsort(-parts[:, 0], kind="stable")[:count]
    return parts[best, 1:]


def _drawn_rows(block, weights, dmin, factor, seeds, block_id=None):
    """The rows of one block drawn with probability ``min(1, factor w_i D_i)``."""
    n = block.shape[0]
    if not n:
        return np.empty((0, block.shape[1]))
    u = np.random.RandomState(seeds[block_id[0]]).random_sample(n)
    w = np.ones(n) if weights is None else to_numpy(weights)[:, 0]
    chosen = u < np.minimum(1.0, factor * w * to_numpy(dmin)[:, 0])
    return np.asarray(to_numpy(block[chosen]), dtype=np.float64)


def kmeans_parallel(engine, n_clusters, rng):
    """k-means|| seeds (see the module docstring)."""
    return recluster(*weighted_candidates(engine, n_clusters, rng), n_clusters, rng,
                     engine.n_samples)


def weighted_candidates(engine, n_clusters, rng):
    """k-means||'s candidates (distinct observations) and their masses, all positive
    (steps 1 to 3 of the module docstring)."""
    X = engine.X
    weights = engine.relative_weights()
    candidates = weighted_draw(engine, 1, rng)
    dmin = dask.persist(engine.min_sq_distances(candidates))[0]
    for _ in range(ROUNDS):
        cost = float((dmin if weights is None else dmin * weights[:, 0]).sum().compute())
        if not cost > 0:
            break
        factor = OVERSAMPLING * n_clusters / cost
        drawn = engine.map_blocks(_drawn_rows, dmin[:, None], factor, _block_seeds(engine, rng),
                            chunks=((np.nan,) * X.numblocks[0], (X.shape[1],)),
                            dtype=np.float64).compute()
        if len(drawn):
            candidates = np.vstack([candidates, drawn])
            nearer = engine.min_sq_distances(drawn)
            dmin = dask.persist(np.minimum(dmin, nearer))[0]
    candidates = np.unique(candidates, axis=0)
    masses = engine.estep(candidates, HARD, with_sums=False).masses
    return candidates[masses > 0], masses[masses > 0]


def recluster(candidates, masses, n_clusters, rng, n_samples):
    """``n_clusters`` seeds of weighted candidates: their best weighted k-means of a few
    k-means++ starts, or all of them, copies added, when they are too few.

    The starts (at most :data:`RECLUSTER_INITS`) and their Lloyd iterations (at most
    :data:`RECLUSTER_MAX_ITER`, at least :data:`RECLUSTER_MIN_ITER`) are as many as keep
    the distances they compute within those of one pass over the ``n_samples`` rows of the
    data (or :data:`RECLUSTER_MIN_WORK`): with many clusters the candidates are many too,
    and a full reclustering would cost more than the fit.
    """
    n_candidates = len(candidates)
    if n_candidates <= n_clusters:  # copies: the estimator moves them apart
        extra = rng.choice(n_candidates, n_clusters - n_candidates)
        return np.vstack([candidates, candidates[extra]])
    per_iteration = n_candidates * n_clusters
    budget = max(n_samples * n_clusters, RECLUSTER_MIN_WORK)
    n_init = int(np.clip(budget // (RECLUSTER_MAX_ITER * per_iteration), 1, RECLUSTER_INITS))
    max_iter = int(np.clip(budget // (n_init * per_iteration), RECLUSTER_MIN_ITER,
                           RECLUSTER_MAX_ITER))
    # the same sums whatever the thread count; a start cut short is still a start
    with threadpool_limits(1, user_api="openmp"), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = KMeans(n_clusters, n_init=n_init, max_iter=max_iter, random_state=rng).fit(
            candidates, sample_weight=masses)
    return model.cluster_centers_
