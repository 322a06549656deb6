"""Compilation of the numba engine's kernels ahead of a fit.

The kernels are compiled by numba on their first call in the process
(seconds, once per input kind) and kept in numba's on-disk cache, from which
later processes load them (:mod:`softkmeans._jit`); ``python -m softkmeans compile``
fills that cache ahead of time (:func:`compile_kernels`).
"""

import time

import numpy as np
import scipy.sparse as sp

from ..._core.hartigan_loops import compile_local_search
from ..._core.prior_loops import compile_prior_pass
from ..._core.responsibilities import RelaxationSpec
from ..._core.update_loops import compile_update_loops
from .engine import NumbaEngine

__all__ = ["compile_kernels", "input_kind"]


def input_kind(X):
    """The input kind of ``X``, which decides the kernels a pass over it runs.

    Parameters
    ----------
    X : ndarray or CSR matrix
        As the engine holds it (C-contiguous, or CSR).

    Returns
    -------
    tuple of str
        ``("dense", dtype)`` or ``("CSR", dtype, index dtype)``.
    """
    if sp.issparse(X):
        return ("CSR", X.dtype.name, X.indices.dtype.name)
    return ("dense", X.dtype.name)


def _build_kernels(kind):
    """Compile, or load from numba's cache, every kernel of a pass over input of ``kind``.

    One pass over a tiny data set of that kind compiles them all: every
    estimator, relaxation and output of the engine goes through the same pass
    kernel.
    """
    points = np.random.default_rng(0).normal(size=(64, 3))
    data = points.astype(kind[1])
    if kind[0] == "CSR":
        data = sp.csr_matrix(data)
        data.indices, data.indptr = (a.astype(kind[2]) for a in (data.indices, data.indptr))
    NumbaEngine(data)._pass(points[:4], RelaxationSpec("softmax", 1.0), True)


def compile_kernels(file=None):
    """Compile every kernel a fit can call, or load it from numba's on-disk cache.

    Every input kind (dense and CSR, float32 and float64) in turn; with dense
    float64, those that every kind shares (the update's arithmetic) and the
    annealing's own kernels (they see dense float64 rows of any input). A fit
    compiles the kernels of its input kind on its first pass anyway (seconds,
    once per installation: later processes load them from the cache in a
    fraction of a second); running this (``python -m softkmeans compile``)
    beforehand, for example when building a container image or a CI cache,
    spares that wait to the first fit of every kind. numba reads a cache only
    from a directory it can write to: run this as the user the processes will
    run as, or point ``NUMBA_CACHE_DIR`` at the same writable directory both
    here and there.

    Parameters
    ----------
    file : file-like, default=None
        Where to print one line per input kind; nothing is printed when None.

    Returns
    -------
    dict
        Seconds taken per input kind, keyed by ``(layout, dtype name)``.

    Examples
    --------
    >>> from softkmeans._engines._numba.compile import compile_kernels
    >>> sorted(compile_kernels())
    [('CSR', 'float32'), ('CSR', 'float64'), ('dense', 'float32'), ('dense', 'float64')]
    """
    seconds = {}
    for layout in ("dense", "CSR"):
        for dtype in ("float32", "float64"):
            start = time.perf_counter()
            _build_kernels((layout, dtype, "int32"))
            if (layout, dtype) == ("dense", "float64"):  # the kernels of every input kind
                compile_update_loops()
                compile_local_search()  # and the annealing's own
                compile_prior_pass()
            seconds[layout, dtype] = time.perf_counter() - start
            if file is not None:
                print(f"{layout:>5} {dtype}: {seconds[layout, dtype]:5.1f} s", file=file)
    return seconds
