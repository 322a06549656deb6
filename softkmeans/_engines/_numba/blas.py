"""BLAS held to one thread during a pass (``threadpoolctl``), as in scikit-learn's Lloyd loop.

The passes run their own threads (:mod:`.threads`) and call BLAS from each:
a BLAS that ran threads of its own meanwhile would oversubscribe the cores.
"""

import threading
from contextlib import contextmanager

__all__ = ["blas_at_one_thread", "blas_controller"]

_controller = None  # threadpoolctl's controller, made on first use
_libraries = None  # its BLAS libraries' controllers, listed on first use
_blas_lock = threading.Lock()
_blas_owner = None  # the thread whose pass holds the limit
_blas_found = None  # the thread counts to restore, until a restore has completed


def blas_controller():
    """``threadpoolctl``'s controller of the libraries loaded, numba's BLAS among them."""
    global _controller
    if _controller is None:
        import scipy.linalg.cython_blas  # noqa: F401  (numba's BLAS: loaded before the listing)
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    return _controller


def _blas_libraries():
    """The BLAS libraries of :func:`blas_controller` (listed once, as the controller is)."""
    global _libraries
    if _libraries is None:
        _libraries = blas_controller().select(user_api="blas").lib_controllers
    return _libraries


@contextmanager
def blas_at_one_thread():
    """Hold every BLAS library at one thread during a pass (process-wide).

    The first thread to ask sets the limit and restores the counts it found;
    a thread asking meanwhile runs inside that limit. A hold of the calling
    thread that is still registered was lost to an interrupt (passes do not
    nest): the thread takes it over. The counts found are kept until a
    restore completes, so that an interrupted limit or restore is undone by
    the next pass.
    """
    global _blas_owner, _blas_found
    me = threading.get_ident()
    with _blas_lock:
        owned = _blas_owner in (None, me)
        if owned:
            libraries = _blas_libraries()
            if _blas_found is None:
                _blas_found = [lib.num_threads for lib in libraries]
            _blas_owner = me
            for lib, count in zip(libraries, _blas_found, strict=True):
                if count != 1:
                    lib.set_num_threads(1)
    try:
        yield
    finally:
        if owned:
            with _blas_lock:
                for lib, count in zip(_blas_libraries(), _blas_found, strict=True):
                    if count != 1:
                        lib.set_num_threads(count)
                _blas_owner, _blas_found = None, None
