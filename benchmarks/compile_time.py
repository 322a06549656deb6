"""First fit of a fresh Python process, with numba's on-disk cache filled and empty.

Every measurement is a new interpreter running the cases of the asv suite
``asv_bench/benchmarks/startup.py``: the untimed setup imports softkmeans and
makes 2000 x 8 data, the timed statement is the first ``SoftKMeans(5).fit``.
``cold`` gives numba an empty cache directory (the fit compiles every kernel
it calls: the first fit after an installation), ``cached`` the default cache
(filled by an untimed fit first: later processes). Rounds alternate the
cases; the table holds median seconds (and the range) over the rounds, and
the time of ``import softkmeans``.

Run from the repository root::

    python benchmarks/compile_time.py --repeats 5
"""

import argparse
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "asv_bench")]

from benchmarks.startup import CACHES, DTYPES, LAYOUTS, first_fit_code  # noqa: E402

_TIMED = """
import time
_start = time.perf_counter()
{statement}
print(repr(time.perf_counter() - _start))
"""


def seconds_in_fresh_process(statement, setup=""):
    """Wall seconds of ``statement`` in a new interpreter, after ``setup`` (not timed)."""
    code = textwrap.dedent(setup) + _TIMED.format(statement=statement)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the measured process failed:\n{done.stderr}")
    return float(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--layouts", nargs="+", choices=LAYOUTS, default=LAYOUTS)
    parser.add_argument("--dtypes", nargs="+", choices=DTYPES, default=DTYPES)
    args = parser.parse_args(argv)
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
