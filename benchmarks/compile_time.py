"""First fit of a fresh Python process, with numba's on-disk cache filled and empty.

Every measurement is a new interpreter running the cases of the asv suite
``asv_bench/benchmarks/startup.py``: the untimed setup imports softkmeans and
makes 2000 x 8 data, the timed statement is the first ``SoftKMeans(5).fit``.
``cold`` gives numba an empty cache directory (the first fit after an
installation without ``python -m softkmeans compile``: the fit waits while
numba compiles every kernel it calls), ``cached`` the default cache (filled
by an untimed fit first: later processes). Rounds alternate the cases; the
table holds median seconds (and the range) over the rounds, and the time of
``import softkmeans``.

``--sizes NxDxK ...`` instead times first fits of larger dense float32 data (a
Gaussian mixture of K components, ``max_iter=50``), starting from K of its
rows or, with ``--init k-means++``, from k-means++: with the kernels cached,
and cold.

``--installed PYTHON`` adds to them the first fit of a fresh process of
``PYTHON``, the interpreter of an environment where ``pip install .`` put the
package with its kernels compiled (run outside the repository, without
``NUMBA_CACHE_DIR``): what a user's first fit costs after installing.

``--breakdown LAYOUT DTYPE`` instead runs one ``cold`` first fit with
numba's event recorder and lists what it compiled: each function's own seconds
(its callees' compilations taken out), the seconds numba held its LLVM lock
(optimization and machine code), and the rest (numba's typing and lowering
in Python).

Run from the repository root::

    python benchmarks/compile_time.py --repeats 5
    python benchmarks/compile_time.py --sizes 20000x32x20 100000x64x20 200000x64x50
    python benchmarks/compile_time.py --sizes 1000000x64x100 --init k-means++
    python benchmarks/compile_time.py --sizes 200000x64x50 --installed /path/to/venv/bin/python
    python benchmarks/compile_time.py --breakdown dense float32
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "asv_bench")]

from benchmarks.startup import CACHES, COLD_CACHE, DTYPES, LAYOUTS, first_fit_code  # noqa: E402

_LARGE_DATA = """
from sklearn.datasets import make_blobs
from softkmeans import SoftKMeans
X = make_blobs({n}, {d}, centers={k}, random_state=0)[0].astype("float32")
init = X[::{n} // {k}][:{k}]
"""
_LARGE_FIT = "SoftKMeans({k}, init={init}, n_init=1, max_iter=50, random_state=0).fit(X)"
#: ``--init`` choices: the source of the ``init`` argument of the large first fits.
_INITS = {"array": "init", "k-means++": "'k-means++'"}

_TIMED = """
import time
_start = time.perf_counter()
{statement}
print(repr(time.perf_counter() - _start))
"""


def seconds_in_fresh_process(statement, setup="", python=None):
    """Wall seconds of ``statement`` in a new interpreter, after ``setup`` (not timed).

    ``python``: another environment's interpreter, run outside the repository
    without ``NUMBA_CACHE_DIR`` or ``PYTHONPATH``, so that it imports the
    package installed there and numba's cache next to it.
    """
    return float(_last_line_of_fresh_process(
        textwrap.dedent(setup) + _TIMED.format(statement=statement), python))


def _last_line_of_fresh_process(code, python=None):
    """The last line ``code`` prints in a new interpreter (``python``'s, see above)."""
    if python is None:
        command, cwd, env = [sys.executable, "-c", code], ROOT, None
    else:
        command, cwd = [python, "-c", code], tempfile.gettempdir()
        env = {name: value for name, value in os.environ.items()
               if name not in ("NUMBA_CACHE_DIR", "PYTHONPATH")}
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the measured process failed:\n{done.stderr}")
    return done.stdout.strip().splitlines()[-1]


_BREAKDOWN = """
import json, sys
sys.path.insert(0, {here!r})
import compile_time
print(json.dumps(compile_time.compile_records({statement!r}, globals())))
"""


def _function_name(dispatcher):
    """``module.function`` of a compiled function, numba's own ones as ``numba: name``."""
    func = dispatcher.py_func
    module = func.__module__
    if module.startswith("numba"):  # ol_np_empty.<locals>.impl: the overload's name
        return f"numba: {func.__qualname__.split('.<locals>')[0]}"
    return f"{module.rsplit('.', 1)[-1]}.{func.__qualname__.replace('.<locals>', '')}"


def compile_records(statement, namespace):
    """Run ``statement`` in ``namespace`` and record what numba compiles meanwhile.

    Returns
    -------
    dict
        ``wall`` (seconds of the statement), ``llvm`` (seconds numba held its
        LLVM lock) and ``compiles``: one ``[function, own, total]`` per
        compilation, ``total`` its seconds and ``own`` those less the
        compilations it started (its callees).
    """
    from numba.core import event

    with event.install_recorder("numba:compile") as recorder, \
            event.install_timer("numba:llvm_lock", lambda seconds: None) as llvm:
        start = time.perf_counter()
        exec(statement, namespace)  # noqa: S102 - the benchmarks' own statements
        wall = time.perf_counter() - start
    open_compiles, compiles = [], []
    for stamp, ev in recorder.buffer:
        if ev.is_start:
            open_compiles.append([ev.data["dispatcher"], stamp, 0.0])
            continue
        dispatcher, begin, callees = open_compiles.pop()
        total = stamp - begin
        if open_compiles:
            open_compiles[-1][2] += total
        compiles.append([_function_name(dispatcher), total - callees, total])
    return {"wall": wall, "llvm": llvm.duration if llvm.done else 0.0, "compiles": compiles}


def breakdown_in_fresh_process(layout, dtype):
    """:func:`compile_records` of a first fit with an empty cache."""
    statement, setup = first_fit_code(layout, dtype, "cold")
    return json.loads(_last_line_of_fresh_process(
        setup + _BREAKDOWN.format(here=str(Path(__file__).resolve().parent),
                                  statement=statement)))


def print_breakdown(records, top=15):
    """Print :func:`compile_records` grouped by function, the costliest first.

    A function compiled several times (numba's own ones, once per signature)
    shows the sum of its own seconds and its longest compilation.
    """
    by_name = {}
    for name, own, total in records["compiles"]:
        count, own_sum, total_max = by_name.get(name, (0, 0.0, 0.0))
        by_name[name] = (count + 1, own_sum + own, max(total_max, total))
    compiled = sum(own for _, own, _ in records["compiles"])
    print(f"first fit {records['wall']:.2f} s; {len(records['compiles'])} compilations of "
          f"{len(by_name)} functions, {compiled:.2f} s: LLVM {records['llvm']:.2f} s, "
          f"numba's typing and lowering {compiled - records['llvm']:.2f} s")
    print(f"{'function':<48}{'compilations':>13}{'own s':>8}{'with callees s':>16}")
    rows = sorted(by_name.items(), key=lambda item: -item[1][1])
    for name, (count, own, total) in rows[:top]:
        print(f"{name:<48}{count:>13}{own:>8.2f}{total:>16.2f}")
    rest = rows[top:]
    if rest:
        print(f"{f'{len(rest)} more':<48}{sum(r[1][0] for r in rest):>13}"
              f"{sum(r[1][1] for r in rest):>8.2f}")


def large_first_fits(sizes, init="array", installed=None, file=None):
    """Print the first fit seconds of each ``(n, d, k)``: cached and cold.

    ``init`` is a key of :data:`_INITS`; ``installed``, the interpreter of an
    environment where pip installed the package, adds its first fit (see
    :func:`seconds_in_fresh_process`); ``file`` as in :func:`print`
    (standard output when None).
    """
    seconds_in_fresh_process(*first_fit_code("dense", "float32", "cached"))  # fill the cache
    cases = [("cached", None), ("cold", None)]
    header = f"{'cached s':>10}{'cold s':>10}"
    if installed:
        cases.append(("installed", installed))
        header += f"{'installed s':>13}"
    print(f"{f'first fit, dense float32, init {init}':<40}{header}", file=file)
    for n, d, k in sizes:
        data = _LARGE_DATA.format(n=n, d=d, k=k)
        seconds = [seconds_in_fresh_process(
            _LARGE_FIT.format(k=k, init=_INITS[init]),
            (COLD_CACHE if cache == "cold" else "") + data, python)
            for cache, python in cases]
        widths = (10, 10, 13)[:len(seconds)]
        print(f"{f'{n} x {d}, k = {k}':<40}"
              + "".join(f"{value:>{width}.2f}" for value, width in zip(seconds, widths,
                                                                        strict=True)),
              file=file)


def _size(text):
    try:
        n, d, k = (int(part) for part in text.split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NxDxK, got {text!r}") from None
    return n, d, k


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--layouts", nargs="+", choices=LAYOUTS, default=LAYOUTS)
    parser.add_argument("--dtypes", nargs="+", choices=DTYPES, default=DTYPES)
    parser.add_argument("--sizes", nargs="+", type=_size, metavar="NxDxK",
                        help="first fits of larger data: cached and cold")
    parser.add_argument("--init", choices=_INITS, default="array",
                        help="start of the --sizes fits: K rows of the data, or k-means++")
    parser.add_argument("--installed", metavar="PYTHON",
                        help="with --sizes: also the first fit of this interpreter's installed "
                             "package (e.g. a venv's bin/python after pip install .)")
    parser.add_argument("--breakdown", nargs=2, metavar=("LAYOUT", "DTYPE"),
                        help="list what one cold first fit compiles (e.g. dense float32)")
    args = parser.parse_args(argv)
    if args.breakdown:
        layout, dtype = args.breakdown
        if layout not in LAYOUTS or dtype not in DTYPES:
            parser.error(f"--breakdown takes a layout of {LAYOUTS} and a dtype of {DTYPES}")
        print_breakdown(breakdown_in_fresh_process(layout, dtype))
        return 0
    if args.sizes:
        large_first_fits(args.sizes, args.init, args.installed)
        return 0
    cases = [(layout, dtype, cache) for layout in args.layouts for dtype in args.dtypes
             for cache in CACHES]
    for layout, dtype, _ in cases:  # fill the default cache: "cached" means loaded, not built
        seconds_in_fresh_process(*first_fit_code(layout, dtype, "cached"))
    times = {case: [] for case in [*cases, "import"]}
    for round_ in range(args.repeats):
        times["import"].append(seconds_in_fresh_process("import softkmeans"))
        for case in cases:
            times[case].append(seconds_in_fresh_process(*first_fit_code(*case)))
        print(f"round {round_ + 1}/{args.repeats} done", file=sys.stderr)
    print(f"{'first fit of a fresh process':<40}{'median s':>10}{'range':>16}")
    for case, values in times.items():
        name = "import softkmeans" if case == "import" else " ".join(case)
        print(f"{name:<40}{statistics.median(values):>10.2f}"
              f"{f'{min(values):.2f}-{max(values):.2f}':>16}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
