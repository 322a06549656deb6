"""Per-iteration time of softkmeans' engine beside scikit-learn, FAISS and the GEMM bound.

Same data, same starting centroids, same process; every contender runs once per
round, rounds alternate, and the table reports medians and ratios to
scikit-learn's Lloyd iteration and to the GEMM bound ``X @ C^T``.

Run from the repository root, with the fast BLAS kernel for this command only::

    OPENBLAS_CORETYPE=SkylakeX python benchmarks/compare.py --sizes 100000x100 --repeats 7

``--memory`` adds the peak resident memory of ``SoftKMeans(max_iter=2).fit``
(measured in a fresh process) beside the size of X.
"""

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_info

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "asv_bench")]

from benchmarks.common import (  # noqa: E402
    FaissIteration,
    GemmBound,
    OursIteration,
    SklearnIteration,
    make_data,
    spec_for,
)

#: (column, what runs): ours are (kind, temperature) of :func:`spec_for`.
OURS = [
    ("hard (Lloyd)", ("hard", None)),
    ("entmax sigma_id", ("entmax", "identified")),
    ("entmax beta~4", ("entmax", "low")),
    ("softmax beta~4", ("softmax", "low")),
    ("softmax lam/4", ("softmax", "high")),
]


def contenders(n, k, with_faiss, with_numpy):
    X, init = make_data(n, k)
    out = {"GEMM X@C.T": GemmBound(X, init), "sklearn Lloyd": SklearnIteration(X, init)}
    if with_faiss:
        try:
            out["FAISS"] = FaissIteration(X, init)
        except NotImplementedError:
            pass
    for name, (kind, temperature) in OURS:
        out[name] = OursIteration(X, init, spec_for(kind, temperature, n, k))
    if with_numpy:
        out["numpy softmax"] = OursIteration(X, init, spec_for("softmax", "low", n, k), "numpy")
    return out


def measure(runs, repeats, clock=time.perf_counter):
    """Median seconds per call of every runner; rounds alternate between runners."""
    for run in runs.values():
        run()
    times = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = clock()
            run()
            times[name].append(clock() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def peak_memory(n, k):
    """(size of X, peak RSS of a 2-iteration SoftKMeans fit in a fresh process), in MB."""
    code = (
        "import resource, numpy as np\n"
        "from benchmarks.common import make_data, temperatures\n"
        "from softkmeans import SoftKMeans\n"
        f"X, init = make_data({n}, {k}); sigma = temperatures({n}, {k})['low']\n"
        "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        f"SoftKMeans({k}, sigma=sigma, init=init, max_iter=2).fit(X)\n"
        "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print(X.nbytes / 1e6, base / 1e3, peak / 1e3)\n"
    )
    env_path = f"{ROOT}:{ROOT / 'asv_bench'}"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, env={"PYTHONPATH": env_path, **_env()})
    return [float(v) for v in result.stdout.split()]


def _env():
    import os

    return {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}


def blas_report():
    rows = []
    for lib in threadpool_info():
        rows.append(f"{lib.get('internal_api')} {lib.get('version')} "
                    f"{lib.get('architecture', '')} threads={lib.get('num_threads')} "
                    f"({Path(lib.get('filepath', '')).name})")
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["100000x100"],
                        help="n_samples x n_clusters, e.g. 100000x100 1000000x1000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-faiss", action="store_true")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                        help="cpu: process CPU time, steadier on a shared machine with one "
                             "thread (OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1)")
    parser.add_argument("--memory", action="store_true", help="also measure peak memory of fit")
    args = parser.parse_args(argv)
    print("threadpools:", *blas_report(), sep="\n  ")
    for size in args.sizes:
        n, k = (int(float(v)) for v in size.split("x"))
        runs = contenders(n, k, not args.no_faiss, n * k <= 10**7)
        clock = time.process_time if args.clock == "cpu" else time.perf_counter
        med = measure(runs, args.repeats, clock)
        ref, gemm = med["sklearn Lloyd"], med["GEMM X@C.T"]
        print(f"\nn={n:.0e} k={k} d=64 float32, median of {args.repeats} per-iteration "
              f"{args.clock} times")
        print("| contender | ms / iter | x sklearn Lloyd | x GEMM |")
        print("|---|---|---|---|")
        for name, seconds in med.items():
            print(f"| {name} | {1e3 * seconds:.2f} | {seconds / ref:.2f} | {seconds / gemm:.2f} |")
        if args.memory:
            x_mb, base_mb, peak_mb = peak_memory(n, k)
            print(f"peak RSS of fit: {peak_mb:.0f} MB (before fit {base_mb:.0f} MB); "
                  f"X = {x_mb:.0f} MB; budget 1.5 X + 100 MB = {1.5 * x_mb + 100:.0f} MB")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
