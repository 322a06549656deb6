"""BLAS held at one thread while threads of ours call it, as scikit-learn's Lloyd loop holds it.

A numba pass on several threads and the tasks of a dask fit each call BLAS
from their own thread: a BLAS running threads of its own meanwhile would
oversubscribe the cores. :func:`one_blas_thread` is one process-wide hold,
counted over the threads that hold it: the first to enter sets every BLAS
library that ``threadpoolctl`` finds to one thread, the last to leave
restores the counts found, whichever threads they are.
"""

import threading
import weakref

__all__ = ["blas_controller", "one_blas_thread"]

_controller = None  # threadpoolctl's controller, made on first use
_libraries = None  # its BLAS libraries' controllers, listed on first use
_lock = threading.Lock()
_holders = weakref.WeakSet()  # the holds entered and not left (a hold lost to an interrupt
# is collected with its frame, and leaves)
_found = None  # the thread counts to restore, until a restore has completed


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


def _set_threads(library, count):
    """Set ``library``'s thread count from the calling thread, whichever thread set it before.

    ``threadpoolctl`` lets only the thread that last took control of an OpenBLAS
    with its own thread pool set it; the hold takes control for the call and
    gives it up, so that the thread that restores the counts is heard too.
    """
    library.set_num_threads(count)
    release = getattr(type(library), "clear_controlling_thread", None)
    if release is not None:
        release()


class _OneBlasThread:
    """The context manager of :func:`one_blas_thread`."""

    __slots__ = ("__weakref__",)

    def __enter__(self):
        global _found
        with _lock:
            if not _holders:
                libraries = _blas_libraries()
                if _found is None:
                    _found = [library.num_threads for library in libraries]
                for library, count in zip(libraries, _found, strict=True):
                    if count != 1:
                        _set_threads(library, 1)
            _holders.add(self)

    def __exit__(self, *exc_info):
        global _found
        with _lock:
            _holders.discard(self)
            if not _holders:
                for library, count in zip(_blas_libraries(), _found, strict=True):
                    if count != 1:
                        _set_threads(library, count)
                _found = None


def one_blas_thread():
    """A context in which every BLAS library runs one thread (process-wide, counted).

    Holds nest and overlap across threads: the counts found by the first hold
    are restored when the last one ends. The counts are kept until a restore
    has completed, and a hold that an interrupt cut short between its start and
    its ``with`` block is dropped with its frame, so that the next hold's end
    restores them.
    """
    return _OneBlasThread()
