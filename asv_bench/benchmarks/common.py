"""Data, temperatures and single iterations shared by the asv suite and ``benchmarks/compare.py``.

Every contender sees the same float32 Gaussian mixture and starts from the same
centroids: one observation drawn from each component (Sec. 7 of the paper).
The temperatures are fixed by the data:

- ``"low"``: ``beta~ = Delta~ / (2 sigma^2) = 4`` as in Sec. 7.6 of the paper,
  ``Delta~`` being the smallest assignment margin of the Lloyd reference run
  from those centroids (the paper takes the median over its reference runs;
  there is one here): inside entmax's identification regime at the reference
  configuration, most entmax assignments identified from the start (98% at
  1e5 x 100), and below the critical temperature;
- ``"identified"``: ``sigma_id`` of entmax-1.5 at the starting centroids, every
  assignment identified (the engine's hard path);
- ``"high"``: ``sigma^2 = lambda_max / 4``. Which of "low" and "high" is the
  colder depends on the size: ``Delta~`` shrinks as n grows (at 1e5 x 100
  "low" is 0.73 and "high" 0.56, at 1e6 x 100 0.28 and 0.56).

Until the benchmarks of 2026-12-01 "low" took the median margin over the rows
at the starting centroids, which put it above the critical temperature.
"""

from functools import lru_cache

import numpy as np

from softkmeans._core.optimize import HARD, alternating
from softkmeans._core.responsibilities import SIGMA_MIN, RelaxationSpec
from softkmeans._core.temperature import lambda_max
from softkmeans._engines import get_engine

__all__ = ["BACKEND", "N_FEATURES", "STRUCTURES", "Benchmark", "make_data", "temperatures",
           "spec_for",
           "OursIteration", "SklearnIteration", "FaissIteration", "faiss_or_skip", "GemmBound"]

N_FEATURES = 64
#: The engine our contenders run on.
BACKEND = "numba"


class Benchmark:
    """asv settings shared by every benchmark class."""

    timeout = 600
    processes = 1
    number = 1
    repeat = (1, 5, 60.0)
    sample_time = 0.1


#: The data sets of :func:`make_data`.
STRUCTURES = ("mixture", "uniform")


@lru_cache(maxsize=4)
def make_data(n_samples, n_clusters, n_features=N_FEATURES, seed=0, structure="mixture"):
    """Float32 mixture of ``n_clusters`` Gaussians and the starting centroids.

    With ``structure="uniform"``: no structure, uniform in the unit cube, and
    the first ``n_clusters`` rows as starting centroids (Lloyd keeps moving
    there, and every row is near a boundary between two cells).

    Component means are uniform in ``[-1, 1]^d`` with a within-component
    standard deviation of 0.5: in 64 dimensions the components are well apart,
    and Lloyd's algorithm converges in 3 or 4 iterations from these
    centroids (per-iteration times do not depend on it; whole fits of the
    soft methods run more iterations than scikit-learn's).

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float32
    init : ndarray of shape (n_clusters, n_features), float64
        One observation of each component.
    """
    rng = np.random.RandomState(seed)
    if structure == "uniform":
        X = rng.uniform(size=(n_samples, n_features)).astype(np.float32)
        init = X[:n_clusters].astype(np.float64)
        X.setflags(write=False)
        init.setflags(write=False)
        return X, init
    means = rng.uniform(-1.0, 1.0, size=(n_clusters, n_features)).astype(np.float32)
    component = rng.randint(n_clusters, size=n_samples)
    component[:n_clusters] = np.arange(n_clusters)
    X = means[component] + rng.normal(0.0, 0.5, size=(n_samples, n_features)).astype(np.float32)
    init = X[:n_clusters].astype(np.float64)
    X.setflags(write=False)
    init.setflags(write=False)
    return X, init


@lru_cache(maxsize=4)
def temperatures(n_samples, n_clusters, n_features=N_FEATURES, seed=0, structure="mixture"):
    """The ``"low"``, ``"identified"`` and ``"high"`` temperatures of :func:`make_data`.

    On uniform data the Lloyd reference run stops after 20 iterations (it
    would not converge in 150), and ``Delta~`` is the median margin of its
    rows: the smallest is 0 to rounding there (every row lies near a boundary).
    """
    X, init = make_data(n_samples, n_clusters, n_features, seed, structure)
    engine = get_engine(BACKEND, X)
    start = engine.estep(init, HARD, with_sums=False).margins
    max_iter = 20 if structure == "uniform" else 150
    reference = alternating(engine, init, HARD, max_iter=max_iter, tol=1e-6).stats.margins
    margin = np.median(reference) if structure == "uniform" else reference.min()
    return {
        "low": float(np.sqrt(margin / 8.0)),
        "identified": max(float(np.sqrt(0.5 * start.min() / 2.0)), SIGMA_MIN),
        "high": float(np.sqrt(lambda_max(X) / 4.0)),
    }


def spec_for(kind, temperature, n_samples, n_clusters, structure="mixture"):
    """The :class:`RelaxationSpec` of ``kind`` ("softmax", "entmax", "hard") at a temperature."""
    if kind == "hard":
        return HARD
    sigma = temperatures(n_samples, n_clusters, structure=structure)[temperature]
    return RelaxationSpec(kind, sigma, 1.5)


class OursIteration:
    """One alternating iteration of the engine: a pass, then the weighted means."""

    def __init__(self, X, init, spec, backend=BACKEND):
        self.engine = get_engine(backend, X)
        self.centers = np.array(init, dtype=np.float64)
        self.spec = spec

    def __call__(self):
        stats = self.engine.estep(self.centers, self.spec)
        full = stats.masses > 0
        self.centers[full] = stats.sums[full] / stats.masses[full, None]
        return stats


class SklearnIteration:
    """One call of scikit-learn's chunked Lloyd kernel (labels and centers updated).

    BLAS is held to one thread around the call, as ``KMeans.fit`` does.
    """

    def __init__(self, X, init):
        from sklearn.cluster._k_means_lloyd import lloyd_iter_chunked_dense
        from sklearn.utils._openmp_helpers import _openmp_effective_n_threads
        from threadpoolctl import ThreadpoolController

        self._blas_limit = ThreadpoolController().limit

        self._kernel = lloyd_iter_chunked_dense
        self._n_threads = _openmp_effective_n_threads()
        self.X = X
        dtype = X.dtype
        self.weights = np.ones(X.shape[0], dtype=dtype)
        self.centers = np.array(init, dtype=dtype)
        self.centers_new = np.empty_like(self.centers)
        self.weight_in_clusters = np.empty(init.shape[0], dtype=dtype)
        self.labels = np.empty(X.shape[0], dtype=np.int32)
        self.shift = np.empty(init.shape[0], dtype=dtype)

    def __call__(self):
        with self._blas_limit(limits=1, user_api="blas"):
            self._kernel(self.X, self.weights, self.centers, self.centers_new,
                         self.weight_in_clusters, self.labels, self.shift, self._n_threads)
        self.centers, self.centers_new = self.centers_new, self.centers


def faiss_or_skip():
    """The faiss module, or ``NotImplementedError`` (asv's "skip") when it is missing."""
    try:
        import faiss
    except ImportError as exc:
        raise NotImplementedError("faiss is not installed") from exc
    return faiss


class FaissIteration:
    """One iteration of FAISS's k-means from given centroids (all points, no early stop)."""

    def __init__(self, X, init):
        self.faiss = faiss_or_skip()
        self.X = np.ascontiguousarray(X, dtype=np.float32)
        self.centers = np.ascontiguousarray(init, dtype=np.float32)

    def kmeans(self, niter):
        n, d = self.X.shape
        k = self.centers.shape[0]
        return self.faiss.Kmeans(d, k, niter=niter, max_points_per_centroid=n // k + 1,
                                 min_points_per_centroid=1, seed=0)

    def __call__(self):
        km = self.kmeans(1)
        km.train(self.X, init_centroids=self.centers)
        self.centers = np.ascontiguousarray(km.centroids)
        return km


class GemmBound:
    """The cross term ``X @ C^T`` alone, in the data's dtype, as numpy's BLAS computes it.

    The issue's "GEMM bound": every iteration computes this product, but not
    necessarily at this speed. The engine's blocked products, which reach
    OpenBLAS's small-matrix kernels, beat it, so an iteration can take less
    (the hard path: 0.8 of it at 1e6 x 1000). Computed by blocks of rows into
    one preallocated output, so that the figure is the product's cost and not
    the page faults of an ``n x k`` result.
    """

    block_rows = 8192

    def __init__(self, X, init):
        self.X = X
        self.centers_t = np.ascontiguousarray(np.asarray(init, dtype=X.dtype).T)
        self.out = np.empty((min(self.block_rows, X.shape[0]), init.shape[0]), dtype=X.dtype)

    def __call__(self):
        for start in range(0, self.X.shape[0], self.block_rows):
            block = self.X[start:start + self.block_rows]
            np.dot(block, self.centers_t, out=self.out[:block.shape[0]])
        return self.out
