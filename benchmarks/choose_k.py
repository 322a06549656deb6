"""How many clusters: AnnealedKMeans(n_clusters="auto") beside the usual recipes.

Every dataset has a known number of clusters ``k_true``; iris, wine and digits are
standardized, the drawn ones are not (standardizing stretches isotropic clusters when their
centres spread unevenly over the features). Every recipe searches ``k = 1 .. K`` (2 .. K
where it cannot score one cluster), ``K = max(10, 2 k_true)``:

- ``AnnealedKMeans(auto)``: ``AnnealedKMeans(n_clusters="auto", max_clusters=K)``, one fit;
- ``annealed, longest k``: the same path, the ``k >= 2`` that lasts over the widest range of
  log-temperature (the rule the estimator does not use; here to compare);
- ``KMeans+silhouette``: ``KMeans(k, n_init=3)`` for every k, the largest silhouette;
- ``KMeans+elbow``: the same fits, the knee of ``J(k)`` (the point farthest from the chord
  between the first and the last, both axes scaled to [0, 1]: Kneedle's difference curve);
- ``GMM(spherical)+BIC`` and ``GMM(full)+BIC``: ``GaussianMixture`` for every k, the
  smallest BIC;
- ``gap statistic``: Tibshirani, Walther and Hastie's rule (the smallest k with ``Gap(k) >=
  Gap(k + 1) - s_(k + 1)``) with ``KMeans(k, n_init=3)`` and ``--gap-draws`` uniform
  reference draws in the data's bounding box.

The tables give, per group of datasets and over all, the fraction where each recipe finds
``k_true`` exactly, the mean ``|k - k_true|`` and the total time (per dataset the median of
``--repeats`` runs, the recipes' order rotated from one run to the next, by ``--clock``, after
one run of each on a small dataset keeps compilations out); ``J / J*`` checks the path of
``AnnealedKMeans(auto)``: its distortion at every k over the best of ``--ref-runs``
single-start ``KMeans`` fits at that k (the table per dataset lists every k where it is more
than 0.5% above). The class counts of iris, wine and digits are labels,
not the number of compact clusters that a distortion sees (iris' versicolor and virginica
touch; wine's and digits' classes are not spherical in the standardized features).

Run from the repository root::

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 NUMBA_NUM_THREADS=1 \
        python benchmarks/choose_k.py --repeats 3 --clock cpu --out choose_k

``--out DIR`` writes ``choose_k.md`` (the printed report), ``choose_k.rst`` (its tables for
the docs) and ``choose_k.json`` (every figure). ``--quick`` runs four small datasets (tests).
``--draw N`` draws the synthetic datasets with other seeds (those of the default draw plus
``10 N``; iris, wine and digits stay), to check a rule on data it was not chosen on.
"""

import argparse
import json
import re
import sys
import time
import warnings
from collections import namedtuple
from pathlib import Path

import numpy as np
from sklearn import datasets as skdata
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import silhouette_score
from sklearn.mixture import GaussianMixture
from sklearn.preprocessing import StandardScaler

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from softkmeans import AnnealedKMeans  # noqa: E402

Dataset = namedtuple("Dataset", "name group X k")

#: Minimal distance between two centres, in cluster standard deviations, per separation.
SEPARATIONS = {"overlapping": 3.0, "separated": 6.0, "well separated": 10.0}
#: (k, d) of the blobs.
BLOB_SHAPES = [(2, 2), (5, 2), (5, 10), (10, 10), (10, 50), (20, 10), (30, 50)]
#: Observations per cluster of the blobs.
PER_CLUSTER = 60


def _centres(rng, k, d, separation):
    """``k`` points in ``d`` dimensions at least ``separation`` apart (rejection sampling in a
    box that grows until they fit)."""
    side = separation * k ** (1 / d)
    while True:
        centres = []
        for _ in range(200 * k):
            point = rng.uniform(-side, side, d)
            if all(np.linalg.norm(point - c) >= separation for c in centres):
                centres.append(point)
                if len(centres) == k:
                    return np.array(centres)
        side *= 1.3


def _mixture(rng, centres, sizes, scales=None):
    """Gaussian clusters around ``centres`` of ``sizes`` points, each scaled by its matrix."""
    d = centres.shape[1]
    parts = []
    for j, (centre, size) in enumerate(zip(centres, sizes, strict=True)):
        noise = rng.standard_normal((size, d))
        parts.append(centre + (noise if scales is None else noise @ scales[j]))
    return np.vstack(parts)


def blobs(seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for (k, d) in BLOB_SHAPES:
        for label, sep in SEPARATIONS.items():
            X = _mixture(rng, _centres(rng, k, d, sep), [PER_CLUSTER] * k)
            out.append(Dataset(f"blobs k={k} d={d} {label}", f"blobs, {label}", X, k))
    return out


def unequal_and_anisotropic(seed=1):
    rng = np.random.default_rng(seed)
    out = []
    for k, d in [(3, 2), (6, 5), (10, 10)]:
        sizes = rng.integers(15, 200, k)
        out.append(Dataset(f"unequal sizes k={k} d={d}", "unequal sizes (separated)",
                           _mixture(rng, _centres(rng, k, d, 8.0), sizes), k))
    for k, d in [(3, 2), (5, 5), (8, 10)]:
        scales = [np.diag(rng.uniform(0.3, 1.0, d)) @ np.linalg.qr(rng.standard_normal((d, d)))[0]
                  for _ in range(k)]
        for s in scales:
            s[:, 0] *= 3.0  # one long axis: an elongated cluster
        out.append(Dataset(f"anisotropic k={k} d={d}", "anisotropic",
                           _mixture(rng, _centres(rng, k, d, 12.0), [PER_CLUSTER] * k, scales),
                           k))
    return out


def fcps_like(seed=2):
    """Shapes after Ultsch's FCPS suite (drawn, not its files): Hepta, Tetra, TwoDiamonds,
    Lsun, and two that no distortion separates, Atom and Chainlink."""
    rng = np.random.default_rng(seed)
    hepta = np.vstack([np.zeros(3), np.eye(3) * 3, -np.eye(3) * 3])
    tetra = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]]) * 1.0
    diamonds = np.vstack([rng.uniform(-1, 1, (300, 2)) @ [[1, 1], [-1, 1]] + [c, 0]
                          for c in (-2.0, 2.0)])
    lsun = np.vstack([np.c_[rng.uniform(0, 4, 100), rng.uniform(0, 0.6, 100)],
                      np.c_[rng.uniform(0, 0.6, 100), rng.uniform(1.2, 5, 100)],
                      rng.normal([3, 3], 0.3, (50, 2))])
    sphere = rng.standard_normal((400, 3))
    sphere /= np.linalg.norm(sphere, axis=1, keepdims=True)
    atom = np.vstack([rng.normal(0, 0.3, (400, 3)), sphere * 4])
    angle = rng.uniform(0, 2 * np.pi, (2, 400))
    rings = [np.c_[np.cos(angle[0]), np.sin(angle[0]), np.zeros(400)],
             np.c_[1 + np.cos(angle[1]), np.zeros(400), np.sin(angle[1])]]
    chain = np.vstack(rings) + rng.normal(0, 0.05, (800, 3))
    return [
        Dataset("Hepta", "FCPS-like", _mixture(rng, hepta, [30] * 7, [np.eye(3) * 0.4] * 7), 7),
        Dataset("Tetra", "FCPS-like", _mixture(rng, tetra, [100] * 4, [np.eye(3) * 0.35] * 4),
                4),
        Dataset("TwoDiamonds", "FCPS-like", diamonds, 2),
        Dataset("Lsun", "FCPS-like", lsun, 3),
        Dataset("Atom (not convex)", "FCPS-like", atom, 2),
        Dataset("Chainlink (not convex)", "FCPS-like", chain, 2),
    ]


REAL = "classes (iris, wine, digits)"


def real():
    return [Dataset(name, REAL, loader().data.astype(float), k)
            for name, loader, k in [("iris", skdata.load_iris, 3), ("wine", skdata.load_wine, 3),
                                    ("digits", skdata.load_digits, 10)]]


def quick_datasets():
    rng = np.random.default_rng(0)
    return [Dataset("blobs k=3 d=2", "blobs, separated",
                    _mixture(rng, _centres(rng, 3, 2, 8.0), [40] * 3), 3),
            Dataset("blobs k=4 d=5", "blobs, separated",
                    _mixture(rng, _centres(rng, 4, 5, 8.0), [40] * 4), 4),
            fcps_like()[0], real()[0]]


# ------------------------------------------------------------------ recipes
def annealed(X, K):
    return AnnealedKMeans("auto", max_clusters=K).fit(X).n_clusters_


def annealed_stability(X, K):
    """The other rule the path offers: the ``k >= 2`` that lasts longest in log-temperature."""
    path = AnnealedKMeans("auto", max_clusters=K).fit(X).cluster_path_[1:]
    spans = [np.log(p["sigma_appeared"] / p["sigma_split"]) for p in path]
    return path[int(np.argmax(spans))]["n_clusters"]


def _kmeans_fits(X, K):
    return [KMeans(k, n_init=3, random_state=0).fit(X) for k in range(1, K + 1)]


def silhouette(X, K):
    fits = _kmeans_fits(X, K)[1:]
    scores = [silhouette_score(X, fit.labels_) for fit in fits]
    return 2 + int(np.argmax(scores))


def knee(values):
    """Index of the knee of a decreasing curve: the point farthest below the chord between
    its ends, both axes scaled to [0, 1]."""
    values = np.asarray(values, dtype=float)
    x = np.linspace(0.0, 1.0, len(values))
    span = values[0] - values[-1]
    y = (values - values[-1]) / span if span > 0 else np.zeros_like(values)
    return int(np.argmax((1.0 - x) - y))


def elbow(X, K):
    return 1 + knee([fit.inertia_ for fit in _kmeans_fits(X, K)])


def _gmm_bic(X, K, covariance_type):
    bics = [GaussianMixture(k, covariance_type=covariance_type, random_state=0).fit(X).bic(X)
            for k in range(1, K + 1)]
    return 1 + int(np.argmin(bics))


def gmm_spherical(X, K):
    return _gmm_bic(X, K, "spherical")


def gmm_full(X, K):
    return _gmm_bic(X, K, "full")


def gap_statistic(X, K, draws=5):
    rng = np.random.default_rng(0)
    low, high = X.min(axis=0), X.max(axis=0)
    references = [rng.uniform(low, high, X.shape) for _ in range(draws)]

    def log_j(data, k):
        return np.log(KMeans(k, n_init=3, random_state=0).fit(data).inertia_)

    gap, spread = np.zeros(K), np.zeros(K)
    for k in range(1, K + 1):
        ref = np.array([log_j(r, k) for r in references])
        gap[k - 1] = ref.mean() - log_j(X, k)
        spread[k - 1] = ref.std() * np.sqrt(1 + 1 / draws)
    for k in range(1, K):
        if gap[k - 1] >= gap[k] - spread[k]:
            return k
    return K


RECIPES = {"AnnealedKMeans(auto)": annealed, "annealed, longest k": annealed_stability,
           "KMeans+silhouette": silhouette,
           "KMeans+elbow": elbow, "GMM(spherical)+BIC": gmm_spherical,
           "GMM(full)+BIC": gmm_full, "gap statistic": gap_statistic}


def path_ratios(X, K, ref_runs):
    """``J / J*`` of the annealing's path at every k >= 2 (``J*`` the best of ``ref_runs``
    single-start KMeans fits), and that of the fitted model at its ``n_clusters_``."""
    model = AnnealedKMeans("auto", max_clusters=K).fit(X)
    ratios, fitted = {}, None
    for point in model.cluster_path_[1:]:
        k = point["n_clusters"]
        best = min(KMeans(k, n_init=1, random_state=s).fit(X).inertia_ for s in range(ref_runs))
        ratios[k] = point["inertia"] / best
        if k == model.n_clusters_:
            fitted = model.inertia_ / best
    return ratios, fitted


# ------------------------------------------------------------------- report
#: ``--clock``: wall time, or the process's CPU time (steadier on a shared machine, with one
#: thread everywhere).
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def time_recipes(X, K, gap_draws, repeats, clock):
    """``({recipe: k found}, {recipe: median seconds})`` over ``repeats`` runs of every
    recipe, their order rotated from one repeat to the next (alternating contenders)."""
    names = list(RECIPES)
    found, seconds = {}, {name: [] for name in names}
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            recipe = RECIPES[name]
            extra = {"draws": gap_draws} if recipe is gap_statistic else {}
            start = clock()
            found[name] = int(recipe(X, K, **extra))
            seconds[name].append(clock() - start)
    return found, {name: float(np.median(values)) for name, values in seconds.items()}


def warm_up(gap_draws):
    """Every recipe once on a small dataset: compilations and first calls out of the
    timings."""
    small = quick_datasets()[0]
    time_recipes(small.X, small.k + 1, gap_draws, 1, time.perf_counter)


def run_dataset(data, ref_runs, gap_draws, repeats=1, clock=time.perf_counter):
    # Standardizing would stretch isotropic clusters where the centres spread unevenly over
    # the features: only the real data, whose features have units of their own, are.
    X = StandardScaler().fit_transform(data.X) if data.group == REAL else data.X
    K = max(10, 2 * data.k)
    row = {"name": data.name, "group": data.group, "k_true": data.k, "K": K,
           "n": X.shape[0], "d": X.shape[1]}
    row["found"], row["seconds"] = time_recipes(X, K, gap_draws, repeats, clock)
    row["path_J_ratios"], row["fitted_J_ratio"] = (path_ratios(X, K, ref_runs) if ref_runs
                                                   else ({}, None))
    return row


def summary(rows):
    """``{recipe: (exact fraction, mean |k - k_true|, seconds)}`` over ``rows``."""
    out = {}
    for name in RECIPES:
        errors = np.array([abs(r["found"][name] - r["k_true"]) for r in rows])
        out[name] = (float(np.mean(errors == 0)), float(errors.mean()),
                     float(sum(r["seconds"][name] for r in rows)))
    return out


def tables(rows):
    """``[(title, header, lines)]``: the summary per group and overall, then every dataset."""
    groups = list(dict.fromkeys(r["group"] for r in rows))
    head = ["datasets", *RECIPES]
    summaries = []
    for group in [*groups, "all"]:
        chosen = rows if group == "all" else [r for r in rows if r["group"] == group]
        stats = summary(chosen)
        summaries.append((f"{group} ({len(chosen)})", stats))
    exact = [[label, *(f"{s[name][0]:.0%}" for name in RECIPES)] for label, s in summaries]
    error = [[label, *(f"{s[name][1]:.2f}" for name in RECIPES)] for label, s in summaries]
    seconds = [[label, *(f"{s[name][2]:.1f}" for name in RECIPES)] for label, s in summaries]
    each = [[r["name"], str(r["k_true"]), *(str(r["found"][n]) for n in RECIPES),
             _ratio(max(r["path_J_ratios"].values(), default=None)),
             _misses(r["path_J_ratios"]), _ratio(r["fitted_J_ratio"])] for r in rows]
    ratios = [v for r in rows for v in r["path_J_ratios"].values()]
    fitted = [r["fitted_J_ratio"] for r in rows if r["fitted_J_ratio"] is not None]
    path_j = [["(dataset, k) pairs of the path", str(len(ratios)),
               f"{np.mean(np.array(ratios) <= 1.005):.0%}" if ratios else "-",
               _ratio(max(ratios, default=None))],
              ["fitted models at n_clusters_", str(len(fitted)),
               f"{np.mean(np.array(fitted) <= 1.005):.0%}" if fitted else "-",
               _ratio(max(fitted, default=None))]]
    return [("Fraction of datasets where k = k_true", head, exact),
            ("Mean |k - k_true|", head, error),
            ("Total time (s)", head, seconds),
            ("AnnealedKMeans(auto)'s J / J* (J* = best of the reference KMeans starts)",
             ["", "count", "within 0.5%", "worst"], path_j),
            ("k found per dataset (path J / J*: the worst over k = 2..K, and every k above"
             " 0.5%; fitted: at n_clusters_)",
             ["dataset", "k_true", *RECIPES, "path J / J*", "path k above 0.5%",
              "fitted J / J*"], each)]


def _misses(ratios):
    """The k of ``ratios`` (``{k: J / J*}``) above 1.005, with their ratios."""
    above = [f"{k}: {ratio:.4f}" for k, ratio in ratios.items() if ratio > 1.005]
    return ", ".join(above) if above else "-"


def _ratio(value):
    return "-" if value is None else f"{value:.4f}"


def markdown(sections):
    lines = []
    for title, head, body in sections:
        lines += [f"## {title}", "", "| " + " | ".join(head) + " |",
                  "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(row) + " |" for row in body]
        lines.append("")
    return "\n".join(lines)


def _rst_text(text):
    """``text`` with the characters that reStructuredText reads as markup escaped."""
    text = re.sub(r"[|*]", lambda match: "\\" + match.group(0), text)
    return re.sub(r"\b(\w+_)(?=\W|$)", r"``\1``", text)


def rst(sections):
    lines = []
    for title, head, body in sections:
        lines += [f".. list-table:: {_rst_text(title)}", "   :header-rows: 1", ""]
        for row in [head, *body]:
            cells = [_rst_text(cell) for cell in row]
            lines.append(f"   * - {cells[0]}")
            lines += [f"     - {cell}" for cell in cells[1:]]
        lines.append("")
    return "\n".join(lines)


def _positive(text):
    """An integer of at least 1, for argparse."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer of at least 1, got {text}")
    return value


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="four small datasets (tests)")
    parser.add_argument("--ref-runs", type=int, default=10,
                        help="KMeans starts of J* for the path's J / J* (0: skip)")
    parser.add_argument("--gap-draws", type=int, default=5, help="reference draws of the gap")
    parser.add_argument("--draw", type=int, default=0,
                        help="draw the synthetic datasets with their seeds plus 10 * DRAW")
    parser.add_argument("--repeats", type=_positive, default=1,
                        help="timed runs of every recipe per dataset, alternated (median)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall time, or the process's CPU time")
    parser.add_argument("--out", type=Path, help="folder for choose_k.md, .rst and .json")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    shift = 10 * args.draw
    data = quick_datasets() if args.quick else [
        *blobs(shift), *unequal_and_anisotropic(1 + shift), *fcps_like(2 + shift), *real()]
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warm_up(args.gap_draws)
        for dataset in data:
            rows.append(run_dataset(dataset, args.ref_runs, args.gap_draws, args.repeats,
                                    CLOCKS[args.clock]))
            print(f"{dataset.name}: k_true {dataset.k}, found {rows[-1]['found']}",
                  file=sys.stderr, flush=True)
    sections = tables(rows)
    text = markdown(sections)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "choose_k.md").write_text(text + "\n")
        (args.out / "choose_k.rst").write_text(rst(sections))
        (args.out / "choose_k.json").write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
