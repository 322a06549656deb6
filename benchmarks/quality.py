"""Quality of the estimators' defaults beside scikit-learn's, on a battery of datasets.

Every contender is fitted as a new user would fit it: defaults, ``n_clusters=k`` and
``random_state=SEED``, on standardized data. For each dataset and contender the tables give

- ``J / J*``: the hard distortion ``J = sum_i min_j ||x_i - mu_j||^2`` of the contender's
  centroids (its means for ``GaussianMixture``), computed the same way for all, over
  ``J*``, the best ``J`` of ``--ref-runs`` single-start ``KMeans(n_init=1,
  random_state=s)`` fits (``s = 0, 1, ...``). Below 1 means the contender beat them all;
- ``ARI`` of the contender's ``predict(X)`` against the true labels, where there are some;
- fit time over that of ``KMeans(n_init=10)`` on the same data (median of up to
  ``--repeats`` fits for cheap ones), and the battery's total per contender.

``SoftKMeans()``'s temperature gets its own table: ``sigma_`` against the critical
temperature and, with ``--sigma-grid``, against the sigma that ``GridSearchCV`` picks with the
estimator's own ``score`` over a log grid; and its ``J`` over that of ``KMeans(n_init=1)``
started from the same k-means++ centroids. ``--seeds 0 1 2 3 4`` adds the spread of
``AnnealedKMeans()``'s ``J / J*`` over those random states.

Run from the repository root::

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 NUMBA_NUM_THREADS=1 \
        python benchmarks/quality.py --seeds 0 1 2 3 4 --sigma-grid --out quality

One thread everywhere keeps the time ratios meaningful on a machine shared with other work
(KMeans' OpenMP threads wait for each other when another process holds a core). On a CPU
with AVX-512, ``OPENBLAS_CORETYPE=SkylakeX`` for this command alone gives numpy OpenBLAS's
faster kernels; on one without, that setting ends the process with SIGILL.

Then the workloads of scikit-learn's own KMeans examples (``workloads.py``: TF-IDF text,
colour quantization, heavy tails), where ``AnnealedKMeans()`` is set against
``KMeans(n_init=10)`` alone, on the data as they come (not standardized): its ``J`` over
``KMeans(n_init=10)``'s, case by case and in total, and the time ratio.

``--out DIR`` writes ``quality.md`` (the printed report), ``quality.rst`` (the same for the
docs' quality page), ``quality.json`` (every figure) and ``quality.png`` (J / J* per dataset
and contender). ``--quick`` shrinks every dataset, workload and the reference (for tests);
``--datasets`` and ``--workloads`` pick some of them (none with the bare option), and
``--colour-k`` the colour cases' k (the whole images at k = 256 take most of the time).
"""

import argparse
import json
import re
import subprocess
import sys
import time
import warnings
from collections import namedtuple
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn import datasets as skdata
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.metrics import adjusted_rand_score
from sklearn.mixture import GaussianMixture
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_info

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "benchmarks"))

from workloads import COLOUR_K, SUMMED_ONLY, WORKLOADS  # noqa: E402

from softkmeans import AnnealedKMeans, EntmaxKMeans, SoftKMeans  # noqa: E402
from softkmeans.diagnostics import critical_sigma  # noqa: E402

Dataset = namedtuple("Dataset", "X y k description")

#: name -> function(quick) -> Dataset; filled by ``@dataset`` in the order of the tables.
DATASETS = {}


def dataset(func):
    DATASETS[func.__name__] = func
    return func


def _standardized(X, y, k, description):
    return Dataset(StandardScaler().fit_transform(np.asarray(X, dtype=np.float64)), y, k,
                   description)


def _blobs(quick, n, **kwargs):
    X, y = skdata.make_blobs(n_samples=n // 10 if quick else n, **kwargs)
    return X, y


@dataset
def iris(quick):
    data = skdata.load_iris()
    return _standardized(data.data, data.target, 3, "bundled, 3 species")


@dataset
def wine(quick):
    data = skdata.load_wine()
    return _standardized(data.data, data.target, 3, "bundled, 3 cultivars")


@dataset
def breast_cancer(quick):
    data = skdata.load_breast_cancer()
    return _standardized(data.data, data.target, 2, "bundled, 2 diagnoses")


@dataset
def digits(quick):
    data = skdata.load_digits()
    return _standardized(data.data, data.target, 10, "bundled, 8x8 images of 10 digits")


@dataset
def grid(quick):
    """100 tight clusters on a 10 x 10 grid (spacing 1, std 0.05)."""
    rng = np.random.RandomState(0)
    per = 5 if quick else 50
    centers = np.array([(i, j) for i in range(10) for j in range(10)], dtype=np.float64)
    y = np.repeat(np.arange(100), per)
    X = centers[y] + rng.normal(scale=0.05, size=(y.size, 2))
    order = rng.permutation(y.size)
    return _standardized(X[order], y[order], 100, "10 x 10 grid, std 0.05 x spacing")


@dataset
def blobs50(quick):
    X, y = _blobs(quick, 20000, n_features=16, centers=50, cluster_std=1.5, random_state=1)
    return _standardized(X, y, 50, "make_blobs, 50 random centers, std 1.5 (issue 22)")


@dataset
def blobs20(quick):
    X, y = _blobs(quick, 30000, n_features=32, centers=20, cluster_std=2.0, random_state=0)
    return _standardized(X, y, 20, "make_blobs, 20 random centers, std 2")


@dataset
def overlap(quick):
    X, y = _blobs(quick, 5000, n_features=4, centers=6, cluster_std=2.5,
                  center_box=(-6.0, 6.0), random_state=2)
    return _standardized(X, y, 6, "make_blobs, 6 overlapping clusters")


@dataset
def varied(quick):
    X, y = _blobs(quick, 3000, n_features=2, centers=3, cluster_std=[1.0, 2.5, 0.5],
                  random_state=170)
    return _standardized(X, y, 3, "make_blobs, stds 1, 2.5 and 0.5")


@dataset
def imbalanced(quick):
    """Six clusters of 5000 down to 500 points (geometric sizes, 10x apart)."""
    sizes = np.geomspace(5000, 500, 6).round().astype(int)
    X, y = skdata.make_blobs(n_samples=sizes // 10 if quick else sizes, n_features=5,
                             cluster_std=1.0, center_box=(-8.0, 8.0), random_state=3)
    return _standardized(X, y, 6, "make_blobs, sizes 5000 to 500")


@dataset
def highdim(quick):
    X, y = _blobs(quick, 5000, n_features=100, centers=10, cluster_std=8.0, random_state=4)
    return _standardized(X, y, 10, "make_blobs, d = 100, std 8 (0.8 x box)")


@dataset
def uniform(quick):
    X = np.random.RandomState(5).uniform(size=(500 if quick else 5000, 3))
    return _standardized(X, None, 20, "uniform in a cube: no clusters")


#: column name -> function(k, seed) -> unfitted estimator, at its defaults.
CONTENDERS = {
    "KMeans(n_init=1)": lambda k, seed: KMeans(k, n_init=1, random_state=seed),
    "KMeans(n_init=10)": lambda k, seed: KMeans(k, n_init=10, random_state=seed),
    "GMM spherical": lambda k, seed: GaussianMixture(k, covariance_type="spherical",
                                                     random_state=seed),
    "SoftKMeans()": lambda k, seed: SoftKMeans(k, random_state=seed),
    "EntmaxKMeans()": lambda k, seed: EntmaxKMeans(k, random_state=seed),
    "AnnealedKMeans()": lambda k, seed: AnnealedKMeans(k, random_state=seed),
}
BASELINE = "KMeans(n_init=10)"


def centers_of(model):
    return model.means_ if isinstance(model, GaussianMixture) else model.cluster_centers_


def distortion(X, centers, chunk=4096):
    """``sum_i min_j ||x_i - c_j||^2`` in float64; the nearest centroid is found from the
    expanded product, its distance is then computed by subtraction (no cancellation), or
    for sparse ``X`` expanded (no dense copy of the rows)."""
    C = np.asarray(centers, dtype=np.float64)
    c2 = np.einsum("ij,ij->i", C, C)
    total = 0.0
    for start in range(0, X.shape[0], chunk):
        rows = X[start:start + chunk]
        expanded = c2 - 2.0 * np.asarray(rows @ C.T)
        if sp.issparse(rows):
            total += float(rows.multiply(rows).sum() + expanded.min(axis=1).sum())
        else:
            total += float(np.sum((rows - C[np.argmin(expanded, axis=1)]) ** 2))
    return total


def reference_distortion(X, k, runs):
    """``J*``: the best distortion of ``runs`` single-start KMeans fits, seeds 0 .. runs-1."""
    return min(distortion(X, KMeans(k, n_init=1, random_state=s).fit(X).cluster_centers_)
               for s in range(runs))


def timed_fit(make, X, repeats, budget):
    """The first fitted model, the warnings of its fit, and the median fit time of up to
    ``repeats`` fits (fewer once their total passes ``budget`` seconds)."""
    times, model, caught = [], None, []
    while len(times) < repeats and (not times or sum(times) < budget):
        estimator = make()
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            start = time.perf_counter()
            estimator.fit(X)
            times.append(time.perf_counter() - start)
        if model is None:
            model = estimator
            caught = sorted({w.category.__name__ for w in record})
    return model, float(np.median(times)), caught


def sigma_check(X, k, seed, grid_size=None):
    """SoftKMeans()'s temperature against the critical one and (``grid_size``) the grid
    search's choice; its J over that of KMeans(n_init=1) from the same k-means++ start."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auto = SoftKMeans(k, random_state=seed).fit(X)
        init, _ = kmeans_plusplus(X, k, random_state=seed)
        soft = SoftKMeans(k, init=init, random_state=seed).fit(X)
        hard = KMeans(k, init=init, n_init=1, random_state=seed).fit(X)
        out = {"sigma_auto": auto.sigma_, "sigma_critical": critical_sigma(X),
               "same_start_ratio": distortion(X, soft.cluster_centers_)
               / distortion(X, hard.cluster_centers_)}
        if grid_size:
            # Shuffled folds: the bundled datasets are sorted by class, and KFold's
            # default (cv=3) would hold out whole classes.
            top = np.sqrt(np.linalg.eigvalsh(np.cov(X, rowvar=False, bias=True))[-1])
            grid = top * np.geomspace(0.005, 2.0, grid_size)
            search = GridSearchCV(SoftKMeans(k, random_state=seed), {"sigma": grid},
                                  cv=KFold(3, shuffle=True, random_state=seed)).fit(X)
            best = search.best_params_["sigma"]
            out.update(sigma_grid=float(best), auto_over_grid=auto.sigma_ / best,
                       grid_edge=bool(best in (grid[0], grid[-1])))
    return out


def run_dataset(name, data, args):
    X, y, k = data.X, data.y, data.k
    start = time.perf_counter()
    reference = reference_distortion(X, k, args.ref_runs)
    result = {"name": name, "n": X.shape[0], "d": X.shape[1], "k": k,
              "description": data.description, "J_ref": reference, "contenders": {}}
    for label, make in CONTENDERS.items():
        model, seconds, caught = timed_fit(lambda make=make: make(k, args.seed), X,
                                           args.repeats, args.budget)
        result["contenders"][label] = {
            "J_ratio": distortion(X, centers_of(model)) / reference,
            "ARI": None if y is None else adjusted_rand_score(y, model.predict(X)),
            "seconds": seconds, "warnings": caught}
    base = result["contenders"][BASELINE]["seconds"]
    for entry in result["contenders"].values():
        entry["time_ratio"] = entry["seconds"] / base
    result["sigma"] = sigma_check(X, k, args.seed, args.grid_size if args.sigma_grid else None)
    if args.seeds:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result["annealed_seeds"] = [
                result["contenders"]["AnnealedKMeans()"]["J_ratio"] if s == args.seed
                else distortion(X, AnnealedKMeans(k, random_state=s).fit(X).cluster_centers_)
                / reference for s in args.seeds]
    result["wall_seconds"] = time.perf_counter() - start
    return result


def run_workload(name, cases, args):
    """``AnnealedKMeans()`` against ``KMeans(n_init=10)`` on every case of a workload."""
    results = []
    for case in cases:
        entry = {"workload": name, "name": case.name, "n": case.X.shape[0],
                 "d": case.X.shape[1], "k": case.k}
        for label in (BASELINE, "AnnealedKMeans()"):
            model, seconds, _ = timed_fit(
                lambda label=label, k=case.k: CONTENDERS[label](k, args.seed), case.X,
                args.repeats, args.budget)
            entry[label] = {"J": distortion(case.X, centers_of(model)), "seconds": seconds}
        entry["J_ratio"] = entry["AnnealedKMeans()"]["J"] / entry[BASELINE]["J"]
        entry["time_ratio"] = entry["AnnealedKMeans()"]["seconds"] / entry[BASELINE]["seconds"]
        results.append(entry)
    return results


def warm_up():
    """Small fits of every contender, dense and sparse, so that no timing holds numba's
    compilation."""
    X, _ = skdata.make_blobs(300, n_features=4, centers=3, random_state=0)
    wide = sp.random(300, 200, density=0.05, format="csr", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for make in CONTENDERS.values():
            make(3, 0).fit(X).predict(X)
        AnnealedKMeans(3, random_state=0).fit(wide).predict(wide)


# --- the report -------------------------------------------------------------------------

def _table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines


def _label(result):
    return f"{result['name']} ({result['n']} x {result['d']}, k={result['k']})"


def report(results, workloads, args, header, seconds):
    lines = [f"# Quality of the defaults ({'quick' if args.quick else 'full'} battery)", "",
             *header, f"- run time {seconds:.0f} s", ""]
    if results:
        lines += battery_report(results, args)
    if workloads:
        lines += workload_report(workloads)
    return "\n".join(lines) + "\n"


def workload_report(entries):
    """The workloads' tables: case by case (but for those summed only), then in total."""
    lines = [f"## AnnealedKMeans() over {BASELINE} on the workloads", ""]
    lines += _table(["workload", "case", "n x d", "k", f"{BASELINE} J", "J ratio",
                     f"{BASELINE} s", "time ratio"],
                    [[e["workload"], e["name"], f"{e['n']} x {e['d']}", e["k"],
                      f"{e[BASELINE]['J']:.6g}", f"{e['J_ratio']:.4f}",
                      f"{e[BASELINE]['seconds']:.3f}", f"{e['time_ratio']:.2f}"]
                     for e in entries if e["workload"] not in SUMMED_ONLY])
    lines += ["", "## The workloads in total", ""]
    rows = []
    for name in dict.fromkeys(e["workload"] for e in entries):
        group = [e for e in entries if e["workload"] == name]
        ratios = [e["J_ratio"] for e in group]
        seconds = [sum(e[c]["seconds"] for e in group) for c in (BASELINE, "AnnealedKMeans()")]
        rows.append([name, len(group), sum(r > 1.0 for r in ratios),
                     sum(r > 1.005 for r in ratios), f"{min(ratios):.4f}", f"{max(ratios):.4f}",
                     f"{seconds[0]:.1f}", f"{seconds[1] / seconds[0]:.2f}"])
    lines += _table(["workload", "cases", "J ratio > 1", "J ratio > 1.005", "best J ratio",
                     "worst J ratio", f"{BASELINE} s", "time ratio"], rows)
    return lines + [""]


def battery_report(results, args):
    names = list(CONTENDERS)
    lines = [f"## J / J* (J* = best of {args.ref_runs} single-start KMeans runs)", ""]
    lines += _table(["dataset", "J*", *names],
                    [[_label(r), f"{r['J_ref']:.6g}",
                      *(f"{r['contenders'][c]['J_ratio']:.4f}" for c in names)]
                     for r in results])
    lines += ["", "## ARI against the true labels", ""]
    lines += _table(["dataset", *names],
                    [[_label(r), *(f"{r['contenders'][c]['ARI']:.3f}" for c in names)]
                     for r in results if r["contenders"][BASELINE]["ARI"] is not None])
    lines += ["", f"## Fit time / {BASELINE}", ""]
    rows = [[_label(r), f"{r['contenders'][BASELINE]['seconds']:.3f}",
             *(f"{r['contenders'][c]['time_ratio']:.2f}" for c in names)] for r in results]
    totals = {c: sum(r["contenders"][c]["seconds"] for r in results) for c in names}
    rows.append(["**total**", f"{totals[BASELINE]:.3f}",
                 *(f"{totals[c] / totals[BASELINE]:.2f}" for c in names)])
    lines += _table(["dataset", f"{BASELINE} s", *names], rows)
    lines += ["", "## SoftKMeans(): its temperature, and J from the same start as KMeans", ""]
    header = ["dataset", "sigma_", "sigma_ / critical"]
    if args.sigma_grid:
        header += ["grid sigma", "sigma_ / grid"]
    header += ["J / J(KMeans(n_init=1)), same start"]
    rows = []
    for r in results:
        s = r["sigma"]
        row = [_label(r), f"{s['sigma_auto']:.4g}", f"{s['sigma_auto'] / s['sigma_critical']:.3f}"]
        if args.sigma_grid:
            edge = " (grid edge)" if s["grid_edge"] else ""
            row += [f"{s['sigma_grid']:.4g}{edge}", f"{s['auto_over_grid']:.2f}"]
        rows.append(row + [f"{s['same_start_ratio']:.4f}"])
    lines += _table(header, rows)
    if args.seeds:
        lines += ["", "## AnnealedKMeans(): J / J* over random_state in "
                  + " ".join(map(str, args.seeds)), ""]
        lines += _table(["dataset", "min", "max", "spread (max - min)"],
                        [[_label(r), f"{min(r['annealed_seeds']):.4f}",
                          f"{max(r['annealed_seeds']):.4f}",
                          f"{max(r['annealed_seeds']) - min(r['annealed_seeds']):.4f}"]
                         for r in results])
    warned = [f"- {r['name']}, {c}: {', '.join(e['warnings'])}" for r in results
              for c, e in r["contenders"].items() if e["warnings"]]
    if warned:
        lines += ["", "## Warnings raised by the timed fits", "", *warned]
    return lines + [""]


def to_rst(text, level="~"):
    """The Markdown report as reStructuredText for the docs' quality page: ``##`` titles
    become sections underlined with ``level``, pipe tables become list-tables."""
    out, table = [], []

    def flush():
        if table:
            out.extend([".. list-table::", "   :header-rows: 1", ""])
            for row in table:
                out.extend(f"   {'*' if i == 0 else ' '} - {cell}" for i, cell in enumerate(row))
            out.append("")
            table.clear()

    for line in text.splitlines():
        line = re.sub(r"(?<!`)`([^`]+)`(?!`)", r"``\1``", line)
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if not all(set(cell) <= {"-"} for cell in cells):
                cells = [re.sub(r"(\w)_(?!\w)", r"\1\\_", cell) for cell in cells]  # sigma_
                table.append([cell.replace("*", "\\*") if "**" not in cell else cell
                              for cell in cells])
            continue
        flush()
        if line.startswith("# "):
            continue
        if line.startswith("## "):
            title = line[3:].replace("*", "\\*")
            out.extend([title, level * len(title)])
        else:
            out.append(line)
    flush()
    return "\n".join(out).strip() + "\n"


def provenance(args):
    """Where and how the run was made, taken at its start (the commit may move meanwhile)."""
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True).stdout
        commit += " (with uncommitted changes)" if dirty.strip() else ""
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    pools = ", ".join(dict.fromkeys(  # numpy's and scipy's BLAS may be the same kind
        " ".join(str(i[key]) for key in ("internal_api", "architecture", "num_threads")
                 if i.get(key)) for i in threadpool_info()))
    import numba
    import sklearn

    import softkmeans
    return [f"- command: `python benchmarks/quality.py {' '.join(args.argv)}`",
            f"- commit {commit}; softkmeans {softkmeans.__version__}, "
            f"scikit-learn {sklearn.__version__}, numpy {np.__version__}",
            f"- threads: {pools}, numba {numba.get_num_threads()}",
            f"- started {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; contenders at "
            f"their defaults, random_state={args.seed}"]


def figure(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(CONTENDERS)
    fig, ax = plt.subplots(figsize=(max(8, 0.9 * len(results) + 3), 4.5))
    x = np.arange(len(results))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        excess = [r["contenders"][name]["J_ratio"] - 1.0 for r in results]
        ax.scatter(x - 0.4 + (i + 0.5) * width, excess, label=name, s=24, zorder=3)
    ax.set_yscale("symlog", linthresh=1e-4)
    ax.axhline(0.0, color="k", lw=0.8)
    ax.set_xticks(x, [r["name"] for r in results], rotation=30, ha="right")
    ax.set_ylabel("J / J* - 1 (symlog)")
    ax.set_title("Distortion over the best of the single-start KMeans runs")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="*", choices=list(DATASETS), default=list(DATASETS),
                        help="datasets of the battery: all without the option, none when it "
                             "names none")
    parser.add_argument("--workloads", nargs="*", choices=list(WORKLOADS),
                        default=list(WORKLOADS),
                        help="workloads (text, colour, heavy tails), as --datasets: all "
                             "without the option, none when it names none")
    parser.add_argument("--colour-k", type=int, nargs="+", choices=COLOUR_K,
                        default=list(COLOUR_K), help="k of the colour cases")
    parser.add_argument("--quick", action="store_true",
                        help="datasets 10x smaller (bundled ones whole), 10 reference runs")
    parser.add_argument("--seed", type=int, default=0, help="random_state of every contender")
    parser.add_argument("--seeds", type=int, nargs="+", default=[],
                        help="random states of AnnealedKMeans() for the spread table")
    parser.add_argument("--sigma-grid", action="store_true",
                        help="grid-search SoftKMeans' sigma with its score (expensive)")
    parser.add_argument("--grid-size", type=int, default=24,
                        help="sigmas in the log grid from 0.005 to 2 sqrt(lambda_max)")
    parser.add_argument("--ref-runs", type=int, default=None,
                        help="single-start KMeans runs for J* (default 50, --quick 10)")
    parser.add_argument("--repeats", type=int, default=3, help="timed fits of cheap contenders")
    parser.add_argument("--budget", type=float, default=1.0,
                        help="no more repeats once a contender's fits took this many seconds")
    parser.add_argument("--out", type=Path, help="folder for quality.md, .json and .png")
    args = parser.parse_args(argv)
    if args.ref_runs is None:
        args.ref_runs = 10 if args.quick else 50
    if args.ref_runs <= args.seed:
        parser.error("--seed must be below --ref-runs (KMeans(n_init=1) is one of the runs)")
    args.argv = list(argv)
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    header = provenance(args)
    start = time.perf_counter()
    warm_up()
    results = []
    for name in args.datasets:
        results.append(run_dataset(name, DATASETS[name](args.quick), args))
        print(f"{name}: {results[-1]['wall_seconds']:.1f} s", file=sys.stderr, flush=True)
    workloads = []
    for name in args.workloads:
        cases = [case for case in WORKLOADS[name](args.quick)
                 if name != "colour" or case.k in args.colour_k]
        workloads += run_workload(name, cases, args)
        print(f"{name}: {len(cases)} cases", file=sys.stderr, flush=True)
    text = report(results, workloads, args, header, time.perf_counter() - start)
    print(text, end="")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "quality.md").write_text(text)
        (args.out / "quality.rst").write_text(to_rst(text))
        (args.out / "quality.json").write_text(
            json.dumps({"datasets": results, "workloads": workloads}, indent=1))
        if results:
            figure(results, args.out / "quality.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
