"""Streaming: does a mini-batch fit pay off, and are abandoned centroids moved?

``minibatch``: on a float32 mixture (``k`` components of unit deviation), from
the same starting centroids (``k`` evenly spaced rows), the time and the final
distortion ``J`` on all the data of scikit-learn's ``KMeans`` (the anchor),
``SoftKMeans.fit`` (full batch, ``sigma="auto"``), ``SoftKMeans.partial_fit``
over shuffled batches for 1 and 3 epochs, and ``MiniBatchKMeans`` (same batch
size, 1 and 3 epochs, no early stop).

``dead``: on a mixture whose component sizes follow Zipf's law (many small
clusters), a stream of batches from k-means++ (or uniformly drawn) seeds on the
first batch: how many centres ``MiniBatchKMeans.partial_fit`` reassigns (its
rule: a centre whose count is below 1% of the largest), how many centroids of
``SoftKMeans.partial_fit`` end below that same 1% of running mass, in how many
batches some softmax centroid got exactly no mass, how many centroids our
estimators moved (``n_reassigned_``), and ``J`` against ``MiniBatchKMeans``'.

``drift``: a stream in which half of the component means jump elsewhere after
half of the rows; ``J`` on the second half's distribution at the end of the
stream, against ``MiniBatchKMeans``', for ``decay`` 1 and 0.9.

``--reassignment-ratio 0`` turns the relocation of abandoned centroids off in
our estimators (the behaviour before it existed). Run from the repository root::

    python benchmarks/streaming.py minibatch --n 300000
    python benchmarks/streaming.py dead --n 200000 --init random
    python benchmarks/streaming.py drift --n 200000
"""

import argparse
import contextlib
import io
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sklearn.cluster import KMeans, MiniBatchKMeans, kmeans_plusplus  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.metrics import pairwise_distances_argmin_min  # noqa: E402

from softkmeans import EntmaxKMeans, SoftKMeans  # noqa: E402
from softkmeans._engines import get_engine  # noqa: E402


def mixture(n, d, k, sizes="equal", seed=0):
    """Float32 rows of a ``k``-component mixture of unit deviation, shuffled."""
    rng = np.random.default_rng(seed)
    means = rng.uniform(-10, 10, size=(k, d))
    p = np.ones(k) if sizes == "equal" else 1.0 / np.arange(1, k + 1)
    labels = rng.choice(k, size=n, p=p / p.sum())
    return (means[labels] + rng.standard_normal((n, d))).astype(np.float32)


def distortion(X, centers, rows=1 << 16):
    """``J``: the sum of squared distances to the nearest centre, in float64."""
    return sum(float(np.square(pairwise_distances_argmin_min(
        X[a:a + rows], centers.astype(X.dtype))[1], dtype=np.float64).sum())
        for a in range(0, len(X), rows))


def _batches(n, batch_size, epochs, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(epochs):
        order = rng.permutation(n)
        yield from (order[a:a + batch_size] for a in range(0, n, batch_size))


def minibatch(args):
    X = mixture(args.n, args.d, args.k)
    init = X[:: len(X) // args.k][: args.k].copy()
    ours = {"reassignment_ratio": args.reassignment_ratio, "random_state": args.seed}
    cases = {
        "KMeans": lambda: KMeans(args.k, init=init, n_init=1).fit(X),
        "SoftKMeans.fit": lambda: SoftKMeans(args.k, init=init, **ours).fit(X),
    }
    for epochs in (1, 3):
        cases[f"SoftKMeans.partial_fit x{epochs}"] = lambda e=epochs: _stream(
            SoftKMeans(args.k, init=init, **ours), X, _batches(len(X), args.batch_size, e))
        cases[f"MiniBatchKMeans x{epochs}"] = lambda e=epochs: MiniBatchKMeans(
            args.k, init=init, n_init=1, batch_size=args.batch_size, max_iter=e,
            max_no_improvement=None, tol=0).fit(X)
    SoftKMeans(args.k, init=init, max_iter=1).fit(X[:1000])  # load the kernels
    results = {}
    for name, fit in cases.items():
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model = fit()
        results[name] = (time.perf_counter() - start, distortion(X, model.cluster_centers_))
    seconds, anchor = results["KMeans"]
    print(f"n={args.n} d={args.d} k={args.k} float32, batches of {args.batch_size}")
    print(f"{'':<30}{'seconds':>9}{'x KMeans':>10}{'J / J_KMeans':>14}")
    for name, (time_, J) in results.items():
        print(f"{name:<30}{time_:>9.2f}{time_ / seconds:>10.2f}{J / anchor:>14.4f}")


def _stream(model, X, batches):
    for rows in batches:
        model.partial_fit(X[rows])
    return model


def dead(args):
    X = mixture(args.n, args.d, args.k, sizes="zipf", seed=args.seed)
    batches = list(_batches(len(X), args.batch_size, args.epochs, seed=args.seed))
    first = X[batches[0]]
    if args.init == "k-means++":
        seeds, _ = kmeans_plusplus(first, args.k, random_state=args.seed)
    else:
        seeds = first[np.random.default_rng(args.seed).choice(len(first), args.k, replace=False)]
    mbk = MiniBatchKMeans(args.k, init=seeds, n_init=1, batch_size=args.batch_size, verbose=1)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for rows in batches:
            mbk.partial_fit(X[rows])
    reassigned = sum(int(line.split()[2]) for line in printed.getvalue().splitlines()
                     if "Reassigning" in line)
    ours = {"reassignment_ratio": args.reassignment_ratio, "random_state": args.seed}
    soft, starved_batches = SoftKMeans(args.k, init=seeds, **ours), 0
    for rows in batches:
        if hasattr(soft, "_stream"):  # the batch's own masses at the centroids it meets
            masses = get_engine("auto", X[rows]).estep(soft._stream.centers,
                                                        soft._stream.spec).masses
            starved_batches += bool(np.any(masses == 0))
        soft.partial_fit(X[rows])
    masses = soft._stream.masses
    entmax = _stream(EntmaxKMeans(args.k, init=seeds, **ours), X, batches)
    print(f"n={args.n} d={args.d} k={args.k}, Zipf sizes, {len(batches)} batches of "
          f"{args.batch_size}, init={args.init} on the first batch")
    print(f"MiniBatchKMeans centres reassigned:                 {reassigned}")
    print(f"SoftKMeans centroids below 1% of the largest mass:  "
          f"{int(np.count_nonzero(masses < 0.01 * masses.max()))}")
    print(f"SoftKMeans batches giving a centroid exactly 0 mass: {starved_batches}")
    print(f"SoftKMeans centroids moved:                         {soft.n_reassigned_}")
    print(f"EntmaxKMeans centroids reseeded or moved:           {entmax.n_reassigned_}")
    print(f"J / J_MiniBatchKMeans: SoftKMeans "
          f"{distortion(X, soft.cluster_centers_) / distortion(X, mbk.cluster_centers_):.4f}, "
          f"EntmaxKMeans "
          f"{distortion(X, entmax.cluster_centers_) / distortion(X, mbk.cluster_centers_):.4f}")


def drift(args):
    """A stream whose components move: after half of it, half of the means jump elsewhere."""
    rng = np.random.default_rng(args.seed)
    k, d, half = args.k, args.d, args.n // 2
    means = rng.uniform(-10, 10, size=(k, d))
    moved = means.copy()
    moved[: k // 2] = rng.uniform(-10, 10, size=(k // 2, d))
    labels = rng.choice(k, size=args.n)
    noise = rng.standard_normal((args.n, d))
    X = np.where(np.arange(args.n)[:, None] < half, means[labels], moved[labels]) + noise
    X = X.astype(np.float32)
    late = X[half:]  # the distribution at the end of the stream
    seeds, _ = kmeans_plusplus(X[: args.batch_size], k, random_state=args.seed)
    order = [np.arange(a, min(a + args.batch_size, args.n))
             for a in range(0, args.n, args.batch_size)]
    mbk = MiniBatchKMeans(k, init=seeds, n_init=1, batch_size=args.batch_size)
    contenders = {"MiniBatchKMeans": mbk}
    for decay in (1.0, 0.9):
        ours = {"decay": decay, "reassignment_ratio": args.reassignment_ratio,
                "random_state": args.seed}
        contenders[f"SoftKMeans decay={decay}"] = SoftKMeans(k, init=seeds, **ours)
        contenders[f"EntmaxKMeans decay={decay}"] = EntmaxKMeans(k, init=seeds, **ours)
    for rows in order:
        for model in contenders.values():
            model.partial_fit(X[rows])
    anchor = distortion(late, mbk.cluster_centers_)
    print(f"n={args.n} d={d} k={k}, {k // 2} of the means move after {half} rows, "
          f"batches of {args.batch_size}; J on the second half's distribution")
    print(f"{'':<28}{'J / J_MiniBatchKMeans':>22}{'moved':>7}")
    for name, model in contenders.items():
        moves = getattr(model, "n_reassigned_", "")
        print(f"{name:<28}{distortion(late, model.cluster_centers_) / anchor:>22.4f}{moves:>7}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", choices=["minibatch", "dead", "drift"])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--d", type=int, default=32)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=4096)
    parser.add_argument("--epochs", type=int, default=2, help="dead: passes over the data")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--init", choices=["k-means++", "random"], default="k-means++",
                        help="dead: the seeds, drawn from the first batch")
    parser.add_argument("--reassignment-ratio", type=float, default=0.01,
                        help="of SoftKMeans and EntmaxKMeans (0: no relocation)")
    args = parser.parse_args(argv)
    {"minibatch": minibatch, "dead": dead, "drift": drift}[args.case](args)


if __name__ == "__main__":
    main()
