"""Time per iteration and peak memory of one fit: in memory, on a memmap, through dask.

The data (a float32 Gaussian mixture of ``k`` components, written once to a
``.npy`` file) are fitted by ``SoftKMeans(k, init=<k rows>, tol=0)`` in five
ways, each in a fresh process (peak RSS is a per-process high-water mark):

``memory``        the file loaded into RAM, ``fit(X)``
``memmap``        ``fit(np.load(path, mmap_mode="r"))``: the in-memory engine reads the map
``dask-threads``  ``fit(da.from_array(X in RAM, chunks=rows))``, threaded scheduler
``dask-file``     a dask array whose tasks read their rows from the file (``np.memmap`` at
                  their offset, copied, unmapped), threaded scheduler: out of core
``dask-local``    the same array on a ``LocalCluster`` of 2 worker processes (1 thread each)

Time per iteration is ``(t(max_iter=M) - t(max_iter=2)) / (M - 2)``, in one
process after a first fit that warms it (medians of two fits each), which
leaves out what a fit costs besides its iterations (validation, seeding,
``lambda_max``, the final pass); every round runs all modes, alternating, and
the table gives medians and the ratio to ``memory`` of the same round
(``fit s``: a whole fit of ``M`` iterations). Memory:
the process's peak RSS (``VmHWM``), its peak anonymous RSS (``RssAnon`` sampled
every 5 ms: what a memory budget has to hold; file-backed pages of a map are
page cache the kernel can reclaim) and, for ``dask-local``, the workers' peak
RSS. Run from the repository root, under the heavy lock::

    python benchmarks/scaling.py --n 2000000 --d 32 --k 100
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np

MODES = ("memory", "memmap", "dask-threads", "dask-file", "dask-local")
MIB = 2.0 ** 20


def make_data(path, n, d, k, seed=0, rows=1 << 18):
    """Write ``n`` float32 rows of a ``k``-component mixture (unit deviation) to ``path``."""
    rng = np.random.default_rng(seed)
    means = rng.uniform(-10, 10, size=(k, d))
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, d))
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        out[start:stop] = means[rng.integers(k, size=stop - start)] + rng.standard_normal(
            (stop - start, d))
    out.flush()
    del out


def _read_rows(path, offset, dtype, shape):
    """Rows of the file at byte ``offset``, copied (the map is closed when the task ends)."""
    return np.array(np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape))


def file_blocks(path, rows):
    """A dask array of the ``.npy`` file ``path`` whose tasks read ``rows`` rows each.

    The header is read once, here: tasks map their rows by offset, since parsing it in
    several threads at once can fail in CPython 3.11's ``ast`` (a recursion-depth check
    that is not thread-safe).
    """
    import dask
    import dask.array as da

    mapped = np.load(path, mmap_mode="r")
    (n, d), dtype, offset = mapped.shape, mapped.dtype, mapped.offset
    row_bytes = d * dtype.itemsize
    blocks = [da.from_delayed(
        dask.delayed(_read_rows)(path, offset + a * row_bytes, dtype, (min(a + rows, n) - a, d)),
        shape=(min(a + rows, n) - a, d), dtype=dtype) for a in range(0, n, rows)]
    return da.concatenate(blocks)


def _status(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


class AnonPeak:
    """Peak ``RssAnon`` of this process, sampled by a thread every 5 ms."""

    def __init__(self):
        self.peak, self._stop = _status("RssAnon"), threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, _status("RssAnon"))

    def stop(self):
        self._stop.set()
        self._thread.join()
        return max(self.peak, _status("RssAnon"))


def _worker_peak_rss():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def child(mode, path, k, max_iter, rows):
    """Fit once; print a JSON record."""
    from sklearn.exceptions import ConvergenceWarning

    from softkmeans import SoftKMeans

    mapped = np.load(path, mmap_mode="r")
    init = np.array(mapped[:: mapped.shape[0] // k][:k])
    del mapped
    cluster = client = None
    if mode == "memory":
        X = np.load(path)
    elif mode == "memmap":
        X = np.load(path, mmap_mode="r")
    elif mode == "dask-threads":
        import dask.array as da

        X = da.from_array(np.load(path), chunks=(rows, -1))
    else:
        X = file_blocks(path, rows)
        if mode == "dask-local":
            from distributed import Client, LocalCluster

            cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                   host="127.0.0.1", dashboard_address=None)
            client = Client(cluster)
    baseline = _status("VmRSS")
    anon = AnonPeak()
    seconds = {2: [], max_iter: []}
    for iterations in (2, 2, max_iter, 2, max_iter):  # the first fit warms the kernels
        model = SoftKMeans(k, init=init, tol=0, max_iter=iterations)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X)
        seconds[iterations].append(time.perf_counter() - start)
    short, long = (statistics.median(seconds[m][-2:]) for m in (2, max_iter))
    record = {"mode": mode, "per_iter": (long - short) / (max_iter - 2), "seconds": long,
              "n_iter": model.n_iter_, "inertia": float(model.inertia_), "baseline": baseline,
              "peak_rss": _status("VmHWM"), "peak_anon": anon.stop()}
    if client is not None:
        record["workers_peak_rss"] = sum(client.run(_worker_peak_rss).values())
        client.close()
        cluster.close()
    print(json.dumps(record))


def run(mode, path, k, max_iter, rows):
    out = subprocess.run([sys.executable, __file__, "--child", mode, "--data", str(path),
                          "--k", str(k), "--max-iter", str(max_iter), "--rows", str(rows)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2_000_000)
    parser.add_argument("--d", type=int, default=32)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--rows", type=int, default=250_000, help="rows per dask chunk")
    parser.add_argument("--max-iter", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--data", type=Path, help="an existing .npy file (else one is made)")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child, args.data, args.k, args.max_iter, args.rows)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.data or Path(tmp) / "mixture.npy"
        if args.data is None:
            make_data(path, args.n, args.d, args.k)
        n, d = np.load(path, mmap_mode="r").shape
        print(f"n={n} d={d} k={args.k} float32, {n * d * 4 / MIB:.0f} MiB of data, chunks of "
              f"{args.rows} rows; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')}")
        per_iter, records = {m: [] for m in args.modes}, {m: [] for m in args.modes}
        for _ in range(args.repeats):
            for mode in args.modes:
                record = run(mode, path, args.k, args.max_iter, args.rows)
                per_iter[mode].append(record["per_iter"])
                records[mode].append(record)
        _report(args, per_iter, records)


def _report(args, per_iter, records):
    anchor = per_iter.get("memory")
    print(f"{'mode':<13}{'s/iter':>9}{'x memory':>10}{'fit s':>8}{'peak RSS':>10}"
          f"{'anon':>8}{'base':>8}{'workers':>9}  (MiB; medians of {args.repeats})")
    for mode, times in per_iter.items():
        ratio = (statistics.median(t / a for t, a in zip(times, anchor, strict=True))
                 if anchor else float("nan"))

        def med(key, mode=mode):
            return statistics.median(r.get(key, float("nan")) for r in records[mode])
        print(f"{mode:<13}{statistics.median(times):>9.3f}{ratio:>10.2f}{med('seconds'):>8.1f}"
              f"{med('peak_rss') / MIB:>10.0f}{med('peak_anon') / MIB:>8.0f}"
              f"{med('baseline') / MIB:>8.0f}{med('workers_peak_rss') / MIB:>9.0f}")


if __name__ == "__main__":
    main()
