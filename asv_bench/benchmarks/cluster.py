"""asv benchmarks: softkmeans' estimators beside scikit-learn's KMeans and FAISS.

Each class defines ``make_estimator`` (a fit-able object with ``inertia_``
after ``fit``) and ``make_iteration`` (a callable running one iteration); the
mixins turn them into ``time_fit``, ``peakmem_fit``, ``track_inertia`` and
``time_iteration``. Data: float32, d = 64, same starting centroids for all.
"""

import numpy as np

from .common import (
    BACKEND,
    Benchmark,
    FaissIteration,
    OursIteration,
    SklearnIteration,
    faiss_or_skip,
    make_data,
    spec_for,
    temperatures,
)

MAX_ITER = 30


class _Estimators(Benchmark):
    """Fit and iteration benchmarks over ``n_samples`` x ``n_clusters``."""

    params = ([10_000, 100_000], [10, 100])
    param_names = ["n_samples", "n_clusters"]

    def setup(self, n_samples, n_clusters):
        self.X, self.init = make_data(n_samples, n_clusters)
        self.shape = (n_samples, n_clusters)
        self.iteration = self.make_iteration()
        self.iteration()  # compile, warm caches
        self.fitted = self.make_estimator().fit(self.X)

    def time_fit(self, *params):
        self.make_estimator().fit(self.X)

    def peakmem_fit(self, *params):
        self.make_estimator().fit(self.X)

    def track_inertia(self, *params):
        return float(self.fitted.inertia_)

    def time_iteration(self, *params):
        self.iteration()


class _Ours(_Estimators):
    kind = "softmax"
    temperature = "low"

    def sigma(self):
        return temperatures(*self.shape)[self.temperature]

    def make_iteration(self):
        return OursIteration(self.X, self.init, spec_for(self.kind, self.temperature, *self.shape))


class SoftKMeansSuite(_Ours):
    def make_estimator(self):
        from softkmeans import SoftKMeans

        return SoftKMeans(self.shape[1], sigma=self.sigma(), init=self.init, max_iter=MAX_ITER,
                          backend=BACKEND)


class SoftKMeansHighTemperatureSuite(_Ours):
    temperature = "high"

    def make_estimator(self):
        from softkmeans import SoftKMeans

        return SoftKMeans(self.shape[1], sigma=self.sigma(), init=self.init, max_iter=MAX_ITER,
                          backend=BACKEND)


class EntmaxKMeansSuite(_Ours):
    kind = "entmax"

    def make_estimator(self):
        from softkmeans import EntmaxKMeans

        return EntmaxKMeans(self.shape[1], sigma=self.sigma(), init=self.init,
                            max_iter=MAX_ITER, backend=BACKEND)


class AnnealedKMeansSuite(_Ours):
    def make_estimator(self):
        from softkmeans import AnnealedKMeans

        return AnnealedKMeans(self.shape[1], strategy="paper", init=self.init, n_temperatures=10,
                              max_iter=MAX_ITER, backend=BACKEND)


class SklearnKMeansSuite(_Estimators):
    def make_estimator(self):
        from sklearn.cluster import KMeans

        return KMeans(self.shape[1], init=self.init, n_init=1, max_iter=MAX_ITER, tol=0.0,
                      algorithm="lloyd")

    def make_iteration(self):
        return SklearnIteration(self.X, self.init)


class FaissKMeansSuite(_Estimators):
    def make_iteration(self):
        return FaissIteration(self.X, self.init)

    def make_estimator(self):
        return _FaissEstimator(self.init)


class _FaissEstimator:
    """``fit`` / ``inertia_`` around ``faiss.Kmeans`` (all points, MAX_ITER iterations)."""

    def __init__(self, init):
        self.init = np.ascontiguousarray(init, dtype=np.float32)

    def fit(self, X):
        faiss = faiss_or_skip()
        n, d = X.shape
        k = self.init.shape[0]
        km = faiss.Kmeans(d, k, niter=MAX_ITER, max_points_per_centroid=n // k + 1,
                          min_points_per_centroid=1, seed=0)
        km.train(np.ascontiguousarray(X, dtype=np.float32), init_centroids=self.init)
        distances, _ = km.index.search(np.ascontiguousarray(X, dtype=np.float32), 1)
        self.inertia_ = float(distances.sum())
        return self
