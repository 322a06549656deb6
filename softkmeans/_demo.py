"""The demo: the three estimators beside scikit-learn's KMeans on a bundled dataset."""

import time

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import load_iris
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler

from ._annealed import AnnealedKMeans
from ._entmax import EntmaxKMeans
from ._soft import SoftKMeans

__all__ = ["run_demo"]


def _models(n_clusters, random_state):
    return {
        "KMeans (scikit-learn)": KMeans(n_clusters, n_init=1, random_state=random_state),
        "SoftKMeans": SoftKMeans(n_clusters, random_state=random_state),
        "EntmaxKMeans": EntmaxKMeans(n_clusters, random_state=random_state),
        "AnnealedKMeans": AnnealedKMeans(n_clusters, random_state=random_state),
    }


def run_demo(random_state=0, file=None):
    """Fit every estimator on the standardized iris data and print a table.

    Parameters
    ----------
    random_state : int, default=0
        Seed shared by all estimators (the same k-means++ start; AnnealedKMeans uses none).
    file : file-like, default=None
        Where to print; standard output when None.

    Returns
    -------
    rows : list of dict
        One row per estimator: name, inertia, sigma, iterations, ARI, seconds.
    """
    data = load_iris()
    X = StandardScaler().fit_transform(data.data)
    start = time.perf_counter()
    for model in _models(3, random_state).values():
        model.fit(X[::10])
    print(f"warm-up fits (numba's kernels load from its cache, or compile where it has "
          f"none): {time.perf_counter() - start:.1f} s\n", file=file)
    rows = []
    for name, model in _models(3, random_state).items():
        start = time.perf_counter()
        model.fit(X)
        elapsed = time.perf_counter() - start
        rows.append({
            "estimator": name,
            "inertia": model.inertia_,
            "sigma": getattr(model, "sigma_", None),
            "n_iter": model.n_iter_,
            "ARI": adjusted_rand_score(data.target, model.labels_),
            "seconds": elapsed,
        })
    print("iris (150 x 4, standardized), 3 clusters, same k-means++ start\n"
          "(AnnealedKMeans grows its centroids from the data mean)", file=file)
    print(f"{'estimator':<24}{'inertia J':>12}{'sigma':>9}{'iter':>7}{'ARI':>7}{'time s':>9}",
          file=file)
    for r in rows:
        sigma = "-" if r["sigma"] is None else f"{r['sigma']:.4f}"
        print(f"{r['estimator']:<24}{r['inertia']:>12.4f}{sigma:>9}{r['n_iter']:>7d}"
              f"{r['ARI']:>7.3f}{r['seconds']:>9.3f}", file=file)
    soft = SoftKMeans(3, random_state=random_state).fit(X)
    proba = soft.predict_proba(X[[0, 70, 120]])
    print("\nSoftKMeans.predict_proba of three flowers:", file=file)
    print(np.array2string(proba, precision=3, suppress_small=True), file=file)
    return rows
