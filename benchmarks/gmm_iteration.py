"""Time per iteration: SoftKMeans' alternating update against GaussianMixture's EM step.

Both fit the same data (``make_blobs``, ``--cluster-std``; SoftKMeans at ``sigma`` equal to
it) from the same initial means; an iteration's time is the difference
between a fit of ``1 + ITERS`` iterations and a fit of one, over ``ITERS`` (so that
validation, the initialization and the last pass cancel). Contenders alternate within each
repeat, in one process; the script prints the medians and their ratio. Run from the
repository root, with one thread everywhere for a stable ratio::

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 NUMBA_NUM_THREADS=1 \\
        python benchmarks/gmm_iteration.py --size 200000x32 --k 100
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from softkmeans import SoftKMeans  # noqa: E402

ITERS = 5


def soft(X, means, sigma, max_iter):
    """A SoftKMeans fit at a fixed sigma that runs exactly ``max_iter`` updates."""
    return SoftKMeans(len(means), sigma=sigma, init=means, max_iter=max_iter, tol=0.0).fit(X)


def gmm(X, means, sigma, max_iter):
    """A spherical GaussianMixture fit that runs exactly ``max_iter`` EM steps."""
    return GaussianMixture(len(means), covariance_type="spherical", means_init=means,
                           max_iter=max_iter, tol=0.0, init_params="random_from_data",
                           random_state=0).fit(X)


def seconds(fit, X, means, sigma, max_iter):
    start = time.perf_counter()
    fit(X, means, sigma, max_iter)
    return time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="200000x32", help="n x d (default 200000x32)")
    parser.add_argument("--k", type=int, default=100, help="components (default 100)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cluster-std", type=float, default=1.0,
                        help="spread of make_blobs' clusters (default 1; sigma is set to it)")
    args = parser.parse_args(argv)
    n, d = (int(v) for v in args.size.split("x"))
    X, _ = make_blobs(n, d, centers=args.k, cluster_std=args.cluster_std, random_state=0)
    means = X[np.random.default_rng(0).choice(n, args.k, replace=False)]
    sigma = args.cluster_std
    per_iter = {"SoftKMeans": [], "GaussianMixture": []}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # max_iter stops them on purpose
        for fit in (soft, gmm):  # warm-up: numba's kernels, BLAS threads
            fit(X[:2000], means, sigma, 2)
        for _ in range(args.repeats):
            for name, fit in (("SoftKMeans", soft), ("GaussianMixture", gmm)):
                long = seconds(fit, X, means, sigma, 1 + ITERS)
                short = seconds(fit, X, means, sigma, 1)
                per_iter[name].append((long - short) / ITERS)
        top = soft(X, means, sigma, 1 + ITERS).predict_proba(X[:10000]).max(axis=1)
    soft_s = float(np.median(per_iter["SoftKMeans"]))
    gmm_s = float(np.median(per_iter["GaussianMixture"]))
    print(f"{n} x {d}, k = {args.k}, float64, cluster_std = sigma = {sigma}; "
          f"median of {args.repeats} repeats")
    print(f"rows one-hot (within 1e-6) after the SoftKMeans fit: {np.mean(top > 1 - 1e-6):.0%}")
    print(f"SoftKMeans alternating update   {soft_s:8.4f} s per iteration")
    print(f"GaussianMixture spherical EM    {gmm_s:8.4f} s per iteration")
    print(f"ratio GaussianMixture / SoftKMeans: {gmm_s / soft_s:.1f}")
    return soft_s, gmm_s


if __name__ == "__main__":
    main()
