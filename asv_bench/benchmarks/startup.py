"""asv benchmarks: what a fresh Python process pays before its first fit.

Each sample is a new interpreter (asv's ``timeraw_``): the untimed setup
imports softkmeans and makes a small data set (2000 x 8, 5 clusters), the
timed statement is the first ``SoftKMeans.fit``. With ``"cached"`` numba
loads the kernels from its on-disk cache (the suite's ``setup`` fills it
first). With ``"cold"`` numba gets an empty cache directory, as the first fit
after an installation finds it without ``python -m softkmeans compile``: the
fit waits while numba compiles the kernels it calls. ``timeraw_import`` times
``import softkmeans`` alone.
``benchmarks/compile_time.py`` prints the same cases as a table.
"""

import textwrap

from .common import Benchmark

__all__ = ["LAYOUTS", "DTYPES", "CACHES", "COLD_CACHE", "first_fit_code", "StartupSuite",
           "timeraw_import"]

LAYOUTS = ["dense", "CSR"]
DTYPES = ["float32", "float64"]
#: ``"cached"``: numba's cache holds the kernels; ``"cold"``: an empty cache directory.
CACHES = ["cached", "cold"]

#: Setup source that points numba at a new empty cache directory, removed at exit.
COLD_CACHE = """
import atexit, os, shutil, tempfile
_cache_dir = tempfile.mkdtemp(prefix="softkmeans-numba-")
atexit.register(shutil.rmtree, _cache_dir, True)
os.environ["NUMBA_CACHE_DIR"] = _cache_dir
"""

_DATA = """
import numpy as np
import scipy.sparse as sp
from softkmeans import SoftKMeans
X = np.random.default_rng(0).normal(size=(2000, 8)).astype("{dtype}")
X = sp.csr_matrix(X) if "{layout}" == "CSR" else X
"""

#: The timed statement: the process's first fit.
FIRST_FIT = "SoftKMeans(5, random_state=0).fit(X)"


def first_fit_code(layout, dtype, cache):
    """``(statement, setup)`` sources of a first fit in a fresh process.

    Parameters
    ----------
    layout : {"dense", "CSR"}
    dtype : {"float32", "float64"}
    cache : {"cached", "cold"}
        ``"cold"`` points numba at a new empty cache directory (removed when
        the process exits) before anything imports numba.

    Returns
    -------
    statement, setup : str
    """
    if layout not in LAYOUTS or dtype not in DTYPES or cache not in CACHES:
        raise ValueError(f"unknown case {(layout, dtype, cache)!r}")
    setup = (COLD_CACHE if cache == "cold" else "") + _DATA.format(layout=layout, dtype=dtype)
    return FIRST_FIT, textwrap.dedent(setup)


def _fill_cache(layout, dtype):
    """Run the first fit here, so that numba's default cache holds its kernels."""
    namespace = {}
    statement, setup = first_fit_code(layout, dtype, "cached")
    exec(setup, namespace)  # noqa: S102 - our own source, above
    exec(statement, namespace)  # noqa: S102


class StartupSuite(Benchmark):
    """The first fit of a fresh process, with numba's cache filled or empty."""

    params = (LAYOUTS, DTYPES, CACHES)
    param_names = ["layout", "dtype", "numba cache"]
    repeat = (1, 3, 120.0)
    warmup_time = 0

    def setup(self, layout, dtype, cache):
        if cache == "cached":
            _fill_cache(layout, dtype)

    def timeraw_first_fit(self, layout, dtype, cache):
        return first_fit_code(layout, dtype, cache)


def timeraw_import():
    return "import softkmeans"


timeraw_import.repeat = (1, 5, 60.0)
