"""Per-iteration time of softkmeans' engine beside scikit-learn, FAISS and the GEMM bound.

Same data, same starting centroids, same process; every contender runs once per
round, rounds alternate, and the table reports median times, the median (and
quartiles) of each round's ratio to scikit-learn's Lloyd iteration, and the
median ratio to numpy's product ``X @ C^T`` (the issue's "GEMM bound", which
the engine's blocked products can beat: see ``GemmBound``). The temperatures
are those of ``asv_bench/benchmarks/common.py``.

Run from the repository root, with the fast BLAS kernel for this command only::

    OPENBLAS_CORETYPE=SkylakeX python benchmarks/compare.py --sizes 100000x100 --repeats 7

``--data uniform`` runs on data without structure (uniform in the unit cube,
the first ``k`` rows as starting centroids) instead of the Gaussian mixture.
``--side-by-side OLD_ROOT`` compares this checkout with another one (e.g. a
``git archive`` of an earlier commit): rounds of the same measurement run
alternately in fresh processes importing one or the other checkout's
``softkmeans`` (the data and the other contenders are this checkout's), and
the table gives each contender's ratio to scikit-learn's Lloyd iteration
(median over the rounds of the per-process medians) for both, and their
quotient::

    git archive b482aa5 | tar -x -C /tmp/old
    OPENBLAS_CORETYPE=SkylakeX python benchmarks/compare.py --sizes 1000000x100 \
        --data mixture uniform --side-by-side /tmp/old --rounds 3 --repeats 3

``--memory`` adds the peak resident memory of ``SoftKMeans(max_iter=2).fit``
(measured in a fresh process) beside the size of X. ``--clock cpu`` times
process CPU instead of wall time: with one thread everywhere
(``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1``) it is steadier on a shared machine.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_info

ROOT = Path(__file__).resolve().parents[1]
#: The checkout whose softkmeans is measured (``--side-by-side`` sets it for its processes).
CODE_ROOT = os.environ.get("SOFTKMEANS_COMPARE_CODE", str(ROOT))
sys.path[:0] = [CODE_ROOT, str(ROOT), str(ROOT / "asv_bench")]

from benchmarks.common import (  # noqa: E402
    BACKEND,
    STRUCTURES,
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


def contenders(n, k, with_faiss, with_numpy, structure="mixture"):
    X, init = make_data(n, k, structure=structure)
    out = {"GEMM X@C.T": GemmBound(X, init), "sklearn Lloyd": SklearnIteration(X, init)}
    if with_faiss:
        try:
            out["FAISS"] = FaissIteration(X, init)
        except NotImplementedError:
            pass
    for name, (kind, temperature) in OURS:
        out[name] = OursIteration(X, init, spec_for(kind, temperature, n, k, structure))
    if with_numpy:
        spec = spec_for("softmax", "low", n, k, structure)
        out["numpy softmax"] = OursIteration(X, init, spec, "numpy")
    return out


#: Seconds of rest before each contender's turn: BLAS and OpenMP worker threads spin for
#: a while after a parallel call, and would otherwise slow whichever contender runs next.
#: The turn is then one untimed call (warm caches and threads, as between the iterations of
#: a fit) and one timed call.
SETTLE = 0.3


def measure(runs, repeats, clock=time.perf_counter):
    """Seconds of every runner's timed call, one per round; rounds alternate between runners."""
    for run in runs.values():
        run()
    times = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            time.sleep(SETTLE)
            run()
            start = clock()
            run()
            times[name].append(clock() - start)
    return {name: np.array(values) for name, values in times.items()}


def ratio_summary(times, reference):
    """Median and quartiles of the per-round ratios ``times / reference``.

    Dividing by the reference's time in the same round cancels the slow drifts
    of a shared machine, which a ratio of two medians keeps.
    """
    return np.percentile(times / reference, [50, 25, 75])


_PEAK_SCRIPT = """
import os, sys, threading, time
from benchmarks.common import BACKEND, make_data, temperatures
from softkmeans import SoftKMeans

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

n, k = int(sys.argv[1]), int(sys.argv[2])
X, init = make_data(n, k)
sigma = temperatures(n, k)["low"]
model = SoftKMeans(k, sigma=sigma, init=init, max_iter=1, backend=BACKEND)
model.fit(X[:max(1000, k)])  # load the compiled kernels
base = peak = rss()
done = False

def watch():
    global peak
    while not done:
        peak = max(peak, rss())
        time.sleep(0.002)

watcher = threading.Thread(target=watch)
watcher.start()
SoftKMeans(k, sigma=sigma, init=init, max_iter=2, backend=BACKEND).fit(X)
done = True
watcher.join()
print(X.nbytes / 1e6, base / 1e6, peak / 1e6)
"""


def peak_memory(n, k):
    """(size of X, RSS before fit, peak RSS during a 2-iteration SoftKMeans fit), in MB.

    Measured in a fresh process by sampling ``/proc/self/statm`` every 2 ms, so
    that the memory of generating the data does not count.
    """
    env = {**_env(), "PYTHONPATH": f"{ROOT}:{ROOT / 'asv_bench'}"}
    result = subprocess.run([sys.executable, "-c", _PEAK_SCRIPT, str(n), str(k)],
                            capture_output=True, text=True, check=True, env=env)
    return [float(v) for v in result.stdout.split()]


def annealed_report(n, k):
    """AnnealedKMeans' fit time as a multiple of one scikit-learn KMeans fit from the same start."""
    from sklearn.cluster import KMeans

    from softkmeans import AnnealedKMeans

    X, init = make_data(n, k)
    warm_up = AnnealedKMeans(k, strategy="paper", init=init, n_temperatures=2, max_iter=2,
                             backend=BACKEND)
    warm_up.fit(X[:max(1000, k)])
    start = time.perf_counter()
    sk = KMeans(k, init=init, n_init=1, algorithm="lloyd").fit(X)
    sk_seconds = time.perf_counter() - start
    start = time.perf_counter()
    model = AnnealedKMeans(k, strategy="paper", init=init, backend=BACKEND).fit(X)
    seconds = time.perf_counter() - start
    stages = model.temperature_n_iter_
    polish = model.n_iter_ - int(stages.sum())
    print(f"\nAnnealedKMeans n={n:.0e} k={k}: {seconds:.2f} s = {seconds / sk_seconds:.1f} x one "
          f"KMeans fit ({sk_seconds:.2f} s, {sk.n_iter_} iterations); "
          f"{model.n_iter_} updates = {stages.sum()} over {len(stages)} temperatures "
          f"(min {stages.min()}, median {int(np.median(stages))}, max {stages.max()}) "
          f"+ {polish} in the Lloyd polish (each stage adds one starting pass); "
          f"inertia {model.inertia_:.6g} vs KMeans "
          f"{sk.inertia_:.6g}")


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


def _ratios_of_one_process(code_root, size, structure, repeats):
    """``{contender: median ratio to sklearn Lloyd}`` of a fresh process measuring ``code_root``."""
    env = {**_env(), "SOFTKMEANS_COMPARE_CODE": str(code_root)}
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--sizes", size,
                           "--data", structure, "--repeats", str(repeats), "--no-faiss",
                           "--json"], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the measuring process failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def side_by_side(old_root, sizes, structures, rounds, repeats):
    """Print the ratios to scikit-learn of ``old_root``'s softkmeans and of this checkout's."""
    sides = {"old": old_root, "new": ROOT}
    for size in sizes:
        for structure in structures:
            ratios = {side: [] for side in sides}
            for _ in range(rounds):
                for side, root in sides.items():  # alternate: drifts of the machine cancel
                    ratios[side].append(_ratios_of_one_process(root, size, structure, repeats))
            print(f"\n{size} d=64 float32, {structure}: x sklearn Lloyd iteration, median over "
                  f"{rounds} alternating processes of {repeats} rounds each")
            print("| contender | old | new | new / old |")
            print("|---|---|---|---|")
            for name, _ in OURS:
                old, new = (float(np.median([r[name] for r in ratios[side]]))
                            for side in sides)
                print(f"| {name} | {old:.2f} | {new:.2f} | {new / old:.2f} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["100000x100"],
                        help="n_samples x n_clusters, e.g. 100000x100 1000000x1000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-faiss", action="store_true")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                        help="cpu: process CPU time, steadier on a shared machine with one "
                             "thread (OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1)")
    parser.add_argument("--annealed", action="store_true",
                        help="also time AnnealedKMeans against one KMeans fit")
    parser.add_argument("--memory", action="store_true", help="also measure peak memory of fit")
    parser.add_argument("--data", nargs="+", choices=STRUCTURES, default=["mixture"],
                        help="Gaussian mixture (default) or uniform in the unit cube")
    parser.add_argument("--side-by-side", metavar="OLD_ROOT",
                        help="compare with the softkmeans of another checkout")
    parser.add_argument("--rounds", type=int, default=3,
                        help="with --side-by-side: processes per checkout (default 3)")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.side_by_side:
        print("threadpools:", *blas_report(), sep="\n  ")
        side_by_side(args.side_by_side, args.sizes, args.data, args.rounds, args.repeats)
        return 0
    if args.json:  # one process of --side-by-side: the median ratios, as one line
        n, k = (int(float(v)) for v in args.sizes[0].split("x"))
        times = measure(contenders(n, k, False, False, args.data[0]), args.repeats)
        print(json.dumps({name: float(np.median(seconds / times["sklearn Lloyd"]))
                          for name, seconds in times.items()}))
        return 0
    print("threadpools:", *blas_report(), sep="\n  ")
    for size in args.sizes:
        for structure in args.data:
            n, k = (int(float(v)) for v in size.split("x"))
            runs = contenders(n, k, not args.no_faiss, n * k <= 10**7, structure)
            clock = time.process_time if args.clock == "cpu" else time.perf_counter
            times = measure(runs, args.repeats, clock)
            ref, gemm = times["sklearn Lloyd"], times["GEMM X@C.T"]
            print(f"\nn={n:.0e} k={k} d=64 float32 {structure}, {args.repeats} rounds, "
                  f"{args.clock} time per iteration: median, and ratios to the reference in "
                  f"the same round: median (quartiles)")
            print("| contender | ms / iter | x sklearn Lloyd | x GEMM |")
            print("|---|---|---|---|")
            for name, seconds in times.items():
                sk_mid, sk_lo, sk_hi = ratio_summary(seconds, ref)
                gemm_mid = ratio_summary(seconds, gemm)[0]
                print(f"| {name} | {1e3 * np.median(seconds):.2f} | {sk_mid:.2f} "
                      f"({sk_lo:.2f}-{sk_hi:.2f}) | {gemm_mid:.2f} |")
            if args.memory:
                x_mb, base_mb, peak_mb = peak_memory(n, k)
                print(f"fit memory: peak RSS {peak_mb:.0f} MB, {peak_mb - base_mb:.0f} MB above "
                      f"the RSS before fit ({base_mb:.0f} MB, X included); X = {x_mb:.0f} MB")
            if args.annealed:
                annealed_report(n, k)
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
