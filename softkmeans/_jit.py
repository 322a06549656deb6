"""How softkmeans' numba kernels are compiled: the options every kernel shares.

The numba engine's passes (:mod:`softkmeans._engines._numba`) and the compiled
loops of :mod:`softkmeans._core` (the local search, the prior pass) use them.

Kernels are compiled on their first call in the process and kept in numba's
on-disk cache where numba has a writable directory for it (:func:`_can_cache`).
"""

import warnings

from numba import njit

from .exceptions import CompilationCacheWarning

__all__ = ["JIT_OPTIONS", "INNER_JIT_OPTIONS", "read_only"]


def _cache_probe():
    """A function numba is asked to cache, to learn whether it can (:func:`_can_cache`)."""


def _can_cache():
    """Whether numba has a writable cache directory for the kernels of this package.

    numba looks for one next to the source files, then in the user's cache
    directory (``NUMBA_CACHE_DIR`` takes precedence over both). Where none is
    writable (a read-only installation and home directory, as in some
    containers and serverless runtimes) a function defined with
    ``cache=True`` fails to be defined at all; the kernels are then compiled
    without the cache, in every process, and a
    :class:`~softkmeans.exceptions.CompilationCacheWarning` says so once.
    """
    try:
        njit(cache=True)(_cache_probe)
    except RuntimeError as exc:
        warnings.warn(
            f"numba cannot cache softkmeans' kernels ({exc}): every process compiles them "
            "again, for several seconds on its first fit. Set the environment variable "
            "NUMBA_CACHE_DIR to a writable directory to keep them.",
            CompilationCacheWarning, stacklevel=2,
        )
        return False
    return True


#: numba options of every kernel: cached on disk where numba can (:func:`_can_cache`);
#: ``contract`` lets LLVM fuse multiply-adds (it changes results by rounding only; no other
#: fast-math flag is set, so inf, nan and underflow keep their IEEE behaviour); no wrapper
#: for calls from C, which numba would otherwise generate (and compile) for every function.
JIT_OPTIONS = {"cache": _can_cache(), "nogil": True, "fastmath": {"contract"},
               "no_cfunc_wrapper": True}
#: Options of a kernel that only other kernels call: no wrapper for calls from Python either.
INNER_JIT_OPTIONS = {**JIT_OPTIONS, "no_cpython_wrapper": True}


def read_only(array):
    """A read-only view of ``array``.

    numba types a read-only array apart from a writable one and would compile
    a kernel (seconds) once more for it; kernels that only read an input get
    read-only views of it, so that one compilation serves both.
    """
    view = array.view()
    view.flags.writeable = False
    return view
