"""What a fit costs beyond its iterations, against scikit-learn's KMeans.

On uniform data in the unit cube (Lloyd keeps moving there), from the same
initial centroids (the first ``k`` rows), the rounds alternate:
``KMeans(max_iter=1).fit``, ``KMeans(max_iter=1 + ITERATIONS).fit`` (their
difference over ``ITERATIONS`` is one Lloyd iteration of scikit-learn) and
each of our estimators at ``max_iter=1``. The table gives median
milliseconds and the budget of issue 23: KMeans' ``fit`` at ``max_iter=1``
plus one Lloyd iteration.

Run from the repository root::

    OPENBLAS_CORETYPE=SkylakeX python benchmarks/fixed_cost.py --repeats 7
    python benchmarks/fixed_cost.py --profile entmax --dtype float32
"""

import argparse
import cProfile
import pstats
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sklearn.cluster import KMeans  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402

from softkmeans import EntmaxKMeans, SoftKMeans  # noqa: E402

ITERATIONS = 5
OURS = {
    "softmax": lambda k, init: SoftKMeans(k, sigma=1e-3, init=init, max_iter=1),
    "entmax": lambda k, init: EntmaxKMeans(k, sigma=1e-6, init=init, max_iter=1),
}


def _seconds(make, X):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        make().fit(X)
    return time.perf_counter() - start


def measure(n, d, k, dtype, repeats):
    """Median seconds of each case, alternating them ``repeats`` times."""
    X = np.random.default_rng(0).uniform(size=(n, d)).astype(dtype)
    init = X[:k].copy()
    cases = {
        "KMeans max_iter=1": lambda: KMeans(k, init=init, n_init=1, max_iter=1, tol=0),
        "KMeans max_iter=1+N": lambda: KMeans(k, init=init, n_init=1, max_iter=1 + ITERATIONS,
                                              tol=0),
        **{f"{name} max_iter=1": (lambda make=make: make(k, init)) for name, make in OURS.items()},
    }
    for make in cases.values():  # compile, warm the caches
        _seconds(make, X[:2000])
    times = {name: [] for name in cases}
    for _ in range(repeats):
        for name, make in cases.items():
            times[name].append(_seconds(make, X))
    return {name: statistics.median(values) for name, values in times.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="200000x64x100", help="NxDxK")
    parser.add_argument("--dtype", nargs="+", default=["float32", "float64"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", choices=OURS, help="profile one fit instead")
    args = parser.parse_args(argv)
    n, d, k = (int(v) for v in args.size.split("x"))
    if args.profile:
        X = np.random.default_rng(0).uniform(size=(n, d)).astype(args.dtype[0])
        make = OURS[args.profile]
        make(k, X[:k]).fit(X[:2000])
        profile = cProfile.Profile()
        profile.enable()
        make(k, X[:k].copy()).fit(X)
        profile.disable()
        pstats.Stats(profile).sort_stats("cumulative").print_stats(25)
        return 0
    for dtype in args.dtype:
        ms = {name: 1e3 * s for name, s in measure(n, d, k, dtype, args.repeats).items()}
        lloyd = (ms["KMeans max_iter=1+N"] - ms["KMeans max_iter=1"]) / ITERATIONS
        budget = ms["KMeans max_iter=1"] + lloyd
        print(f"{n} x {d}, k = {k}, {dtype}: one Lloyd iteration {lloyd:.1f} ms, "
              f"budget (KMeans max_iter=1 + one iteration) {budget:.1f} ms")
        for name, value in ms.items():
            if name != "KMeans max_iter=1+N":
                print(f"  {name:<24}{value:8.1f} ms  {value / budget:5.2f} x budget")
    return 0


if __name__ == "__main__":
    sys.exit(main())
