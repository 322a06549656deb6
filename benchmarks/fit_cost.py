"""Whole-fit cost of the soft estimators' defaults beside scikit-learn's KMeans.

For every dataset of ``benchmarks/quality.py`` and five more drawn here, each contender is
fitted at its defaults with ``n_clusters=k`` and ``random_state=SEED``, as a new user would:

- ``KMeans(n_init=1)``: the anchor. Its k-means++ seeds are the ones ``SoftKMeans()`` and
  ``EntmaxKMeans()`` draw for the same ``random_state``, so the three start alike;
- ``GaussianMixture(covariance_type="spherical")``;
- ``SoftKMeans()`` and ``EntmaxKMeans()``.

The table gives each contender's median fit time over that of ``KMeans(n_init=1)``
(every contender once in each repeat, in a seeded random order, all in one process), its
``n_iter_``, any ``ConvergenceWarning``, and its distortion ``J`` over KMeans'. ``--dask``
adds the fit of a dask array (2e6 x 16 standardized blobs in chunks of 2e5, k = 20, at each of
:data:`DASK_SPREADS`) beside dask-ml's ``KMeans`` (a benchmark-only dependency:
``pip install dask-ml``): time, iterations and J over dask-ml's, each from its own k-means||
seeds, then the soft fits from dask-ml's seeds, which separates the update from the seeding.

Run from the repository root::

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 NUMBA_NUM_THREADS=1 \
        python benchmarks/fit_cost.py --out fit_cost

One thread everywhere keeps the ratios meaningful on a shared machine; the header records the
threads and BLAS kernel that ran; ``--clock cpu`` times the process's CPU instead of the wall
clock, steadier still where other jobs share the machine. ``--out DIR`` writes
``fit_cost.md``, ``fit_cost.rst`` (the same for the docs' performance page) and
``fit_cost.json``; ``--quick`` shrinks the data (for tests); ``--datasets`` picks some.
"""

import argparse
import functools
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn import datasets as skdata
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture
from sklearn.preprocessing import StandardScaler

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import quality  # noqa: E402

from softkmeans import EntmaxKMeans, SoftKMeans  # noqa: E402

#: name -> function(quick) -> quality.Dataset: the quality battery, then the five of this page.
DATASETS = dict(quality.DATASETS)


def dataset(func):
    DATASETS[func.__name__] = func
    return func


@dataset
def blobs30(quick):
    X, y = skdata.make_blobs(10000 if quick else 100000, n_features=16, centers=30,
                             cluster_std=1.0, random_state=0)
    return quality.Dataset(X, y, 30, "make_blobs(100000, 16, centers=30, std 1)")


@dataset
def blobs10_wide(quick):
    X, y = skdata.make_blobs(2000 if quick else 20000, n_features=32, centers=10,
                             cluster_std=6.0, random_state=0)
    return quality.Dataset(X, y, 10, "make_blobs(20000, 32, centers=10, std 6)")


@dataset
def china(quick):
    image = skdata.load_sample_image("china.jpg")
    pixels = image.reshape(-1, 3).astype(np.float64) / 255.0
    rows = np.random.RandomState(0).choice(pixels.shape[0], 5000 if quick else 50000,
                                           replace=False)
    return quality.Dataset(pixels[rows], None, 64, "china.jpg, 50,000 pixels / 255")


@dataset
def uniform8(quick):
    X = np.random.RandomState(0).uniform(size=(5000 if quick else 50000, 8))
    return quality.Dataset(X, None, 20, "uniform in [0, 1]^8")


@dataset
def overlap100(quick):
    """float32 draws from 100 unit Gaussians whose means are uniform in [-1.5, 1.5]^32."""
    rng = np.random.RandomState(0)
    means = rng.uniform(-1.5, 1.5, size=(100, 32))
    y = rng.randint(100, size=2000 if quick else 20000)
    X = (means[y] + rng.normal(size=(y.size, 32))).astype(np.float32)
    return quality.Dataset(X, None, 10, "100 overlapping unit Gaussians in d = 32, float32")


CONTENDERS = {
    "KMeans(n_init=1)": lambda k, seed: KMeans(k, n_init=1, random_state=seed),
    "GMM spherical": lambda k, seed: GaussianMixture(k, covariance_type="spherical",
                                                     random_state=seed),
    "SoftKMeans()": lambda k, seed: SoftKMeans(k, random_state=seed),
    "EntmaxKMeans()": lambda k, seed: EntmaxKMeans(k, random_state=seed),
}
ANCHOR = "KMeans(n_init=1)"
#: ``--clock``: wall time, or the process's CPU time (steadier on a shared machine, with one
#: thread everywhere; the dask comparison keeps wall time).
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def fit_once(make, X, clock=time.perf_counter):
    """(fitted model, seconds by ``clock``, whether a ConvergenceWarning was raised)."""
    model = make()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = clock()
        model.fit(X)
        seconds = clock() - start
    return model, seconds, any(issubclass(w.category, ConvergenceWarning) for w in caught)


def run_dataset(name, data, args):
    X, k = data.X, data.k
    times = {label: [] for label in CONTENDERS}
    first = {}
    repeats = 0
    while repeats < args.repeats and (repeats == 0 or sum(times[ANCHOR]) * 4 < args.budget):
        # every contender in every repeat, in an order drawn anew (seeded) each time: no
        # contender always follows the same one (a fit right after GaussianMixture's large
        # temporaries starts with colder caches)
        for label in np.random.RandomState(repeats).permutation(list(CONTENDERS)):
            make = CONTENDERS[label]
            model, seconds, warned = fit_once(lambda make=make: make(k, args.seed), X,
                                              CLOCKS[args.clock])
            times[label].append(seconds)
            first.setdefault(label, (model, warned))
        repeats += 1
    anchor_j = quality.distortion(X, first[ANCHOR][0].cluster_centers_)
    anchor_time = float(np.median(times[ANCHOR]))
    result = {"name": name, "n": X.shape[0], "d": X.shape[1], "k": k, "dtype": str(X.dtype),
              "description": data.description, "repeats": repeats, "contenders": {}}
    for label, (model, warned) in first.items():
        seconds = float(np.median(times[label]))
        result["contenders"][label] = {
            "seconds": seconds, "time_ratio": seconds / anchor_time,
            "n_iter": int(np.max(model.n_iter_)), "convergence_warning": warned,
            "J_ratio": quality.distortion(X, quality.centers_of(model)) / anchor_j}
    return result


#: ``cluster_std`` of the blobs of the dask comparison: apart, overlapping, and merged.
DASK_SPREADS = (3.0, 6.0, 10.0)


def dask_comparison(args):
    """SoftKMeans and EntmaxKMeans on a dask array beside dask-ml's KMeans, by spread: each
    from its own k-means|| seeds, then the soft fits from dask-ml's seeds (its ``n_iter_``
    from them is that of its own fit)."""
    import dask.array as da
    from dask_ml.cluster import KMeans as DaskKMeans
    from dask_ml.cluster.k_means import k_init

    with warnings.catch_warnings():  # dask-ml compiles its numba kernel at a first fit
        warnings.simplefilter("ignore")
        for Estimator in (DaskKMeans, SoftKMeans, EntmaxKMeans):
            Estimator(2, random_state=0).fit(da.from_array(np.arange(40.0).reshape(20, 2),
                                                           chunks=10))
    n, chunk = (20_000, 5_000) if args.quick else (2_000_000, 200_000)
    rows = []
    for spread in DASK_SPREADS:
        X, _ = skdata.make_blobs(n, n_features=16, centers=20, cluster_std=spread,
                                 random_state=0)
        X = StandardScaler().fit_transform(X)
        Xd = da.from_array(X, chunks=(chunk, 16)).persist()
        seeds = np.asarray(k_init(Xd, 20, random_state=args.seed))
        own, theirs = {"random_state": args.seed}, {"init": seeds}
        group = []
        for label, start, Estimator, options in (
                ("dask-ml KMeans", "own", DaskKMeans, own),
                ("SoftKMeans()", "own", SoftKMeans, own),
                ("EntmaxKMeans()", "own", EntmaxKMeans, own),
                ("SoftKMeans()", "dask-ml's", SoftKMeans, theirs),
                ("EntmaxKMeans()", "dask-ml's", EntmaxKMeans, theirs)):
            model, seconds, warned = fit_once(functools.partial(Estimator, 20, **options), Xd)
            group.append({"cluster_std": spread, "contender": label, "start": start,
                          "seconds": seconds, "n_iter": int(model.n_iter_),
                          "convergence_warning": warned,
                          "J": quality.distortion(X, np.asarray(model.cluster_centers_))})
        for row in group:
            row["time_ratio"] = row["seconds"] / group[0]["seconds"]
            row["iter_ratio"] = row["n_iter"] / group[0]["n_iter"]
            row["J_ratio"] = row["J"] / group[0]["J"]
        rows += group
    return {"n": n, "chunk": chunk, "rows": rows}


def report(results, dask_rows, header):
    names = [c for c in CONTENDERS if c != ANCHOR]
    lines = ["# Whole-fit cost of the defaults", "", *header, "",
             f"Time over `{ANCHOR}` (median over repeats), `n_iter_`, and J over KMeans' "
             "(`!` marks a ConvergenceWarning).", ""]
    head = ["dataset", "KMeans s, n_iter_", *names]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        anchor = r["contenders"][ANCHOR]
        cells = [f"{r['name']} ({r['n']} x {r['d']}, k={r['k']})",
                 f"{anchor['seconds']:.4f}, {anchor['n_iter']}"]
        for c in names:
            e = r["contenders"][c]
            mark = "!" if e["convergence_warning"] else ""
            cells.append(f"{e['time_ratio']:.2f}x, {e['n_iter']}{mark}, J {e['J_ratio']:.4f}")
        lines.append("| " + " | ".join(cells) + " |")
    ratios = {c: [r["contenders"][c]["time_ratio"] for r in results] for c in names}
    lines.append("| **median / max** | | " + " | ".join(
        f"{np.median(ratios[c]):.2f}x / {np.max(ratios[c]):.2f}x" for c in names) + " |")
    if dask_rows:
        lines += ["", f"## Dask array ({dask_rows['n']} x 16 standardized blobs of 20 centres, "
                  f"chunks of {dask_rows['chunk']}, k = 20, wall time)", "",
                  "| cluster_std | contender | seeds | seconds | time / dask-ml | n_iter_ | "
                  "iterations / dask-ml | J / dask-ml's |", "|---|---|---|---|---|---|---|---|"]
        for row in dask_rows["rows"]:
            mark = "!" if row["convergence_warning"] else ""
            lines.append(f"| {row['cluster_std']:g} | {row['contender']} | {row['start']} "
                         f"| {row['seconds']:.2f} "
                         f"| {row['time_ratio']:.2f} | {row['n_iter']}{mark} | "
                         f"{row['iter_ratio']:.2f} | {row['J_ratio']:.4f} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small data (for tests)")
    parser.add_argument("--datasets", nargs="+", choices=list(DATASETS), default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=5, help="fits per contender, at most")
    parser.add_argument("--budget", type=float, default=10.0,
                        help="seconds of anchor fits after which repeats stop")
    parser.add_argument("--clock", choices=list(CLOCKS), default="wall")
    parser.add_argument("--dask", action="store_true", help="add the dask-ml comparison")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)
    header = quality.provenance(args)
    header[0] = f"- command: `python benchmarks/fit_cost.py {' '.join(args.argv)}`"
    quality.warm_up()
    results = []
    for name in args.datasets or DATASETS:
        results.append(run_dataset(name, DATASETS[name](args.quick), args))
        print(report(results[-1:], None, []).splitlines()[-2], flush=True)
    dask_rows = dask_comparison(args) if args.dask else None
    text = report(results, dask_rows, header)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "fit_cost.md").write_text(text)
        (args.out / "fit_cost.rst").write_text(quality.to_rst(text))
        (args.out / "fit_cost.json").write_text(json.dumps(
            {"results": results, "dask": dask_rows, "header": header}, indent=1))
    return results, dask_rows


if __name__ == "__main__":
    main()
