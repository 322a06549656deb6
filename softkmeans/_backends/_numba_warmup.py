"""Compiling the numba kernels in the background, so that fits need not wait for it.

numba compiles the kernels of an input kind (dense or CSR, float32 or
float64) on the first pass that needs them, unless ``pip install`` compiled
them into the package (``setup.py``): several seconds, once per installation
(later processes load them from numba's on-disk cache in a fraction of a
second). With ``backend="auto"`` the numba engine asks here for
the kernels of its input kind, which starts a background thread that makes
them ready, and runs its passes on the numpy engine (the oracle, same results
to rounding) until they are; only passes too large for that to pay wait for
them (:data:`._numba.NUMPY_WORK_MAX`).

Where numba caches the kernels on disk, the thread has them compiled by a
child interpreter and then loads them from the cache. numba's typing is
Python code that holds the GIL for seconds: compiled on a thread of the
fitting process, it slowed every numpy pass and k-means++ draw running
meanwhile, each waiting for the GIL whenever it came back from numpy (a
k-means++ draw at 2e5 x 64 with 100 centroids took 7.3-8.8 s during the
compilation, 3.2-4.1 s beside a child compiling, 2.0-2.4 s alone, on 2
cores). The process then also holds numba's compiler lock only for the load
(a fraction of a second), not while its user's own functions want to
compile. Where numba cannot cache, or no child can be started, the thread
compiles the kernels itself; so it does after a child that failed, or ran
for more than :data:`._numba.CHILD_BUILD_TIMEOUT` seconds.

A background thread that finds the kernels in numba's cache loads them
without compiling; the engine waits for that (at most
:data:`CACHE_LOAD_WAIT` seconds), so that a process whose kernels are cached
runs every pass on them. The thread tells a load from a compilation by
numba's ``numba:compile`` events (:mod:`numba.core.event`) on that thread,
which only a compilation emits. A thread that waits for numba's compiler
lock (another input kind compiling) emits none, and the engine then waits
out :data:`CACHE_LOAD_WAIT`.

The thread is not a daemon: a process that ends while the kernels compile
waits for them (a few seconds, once per installation), so that they reach
numba's cache and the next process finds them, and so that no compilation is
cut short inside LLVM while the interpreter shuts down. A thread whose child
ends after the process's main thread has (the process is exiting) does not
load the kernels; a child that fails (a Ctrl-C in the terminal interrupts it
too) leaves the compilation to the thread, unless the process is exiting.

A child made by ``os.fork`` while kernels compile does not have the thread:
they are ``orphaned`` there, as are the kernels of every other input kind the
child asks for, and the child's automatic engine runs all its passes on the
numpy engine rather than call numba, whose compiler lock the missing thread
may hold (a compilation in the child, ``backend="numba"``
included, would wait for it forever: the general hazard of forking a process
that runs threads).
"""

import os
import threading

from numba.core import event

__all__ = ["CACHE_LOAD_WAIT", "KernelWarmup", "READY", "warmup"]

#: Longest wait (seconds) for the kernels when the background thread has not started compiling:
#: loading them from numba's cache takes 0.2 to 0.5 s here.
CACHE_LOAD_WAIT = 3.0

_warmups = {}
_warmups_lock = threading.Lock()
#: In a child forked while kernels of some input kind compiled: numba's compiler lock may be
#: held by the missing thread, so the kernels of every other kind are orphaned there too.
_forked_while_compiling = False


def _after_fork_in_child():
    global _warmups_lock, _forked_while_compiling
    _warmups_lock = threading.Lock()  # another thread of the parent may have held it
    for found in _warmups.values():
        _forked_while_compiling |= not found.ready.is_set()
        found.orphan()


if hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
    os.register_at_fork(after_in_child=_after_fork_in_child)


class _CompileSignal(event.Listener):
    """Sets ``started`` when numba starts compiling something on the thread that made it.

    numba's listeners hear the events of every thread, and each event is
    announced on the thread that compiles.
    """

    def __init__(self, started):
        self.started = started
        self.thread = threading.get_ident()

    def on_start(self, numba_event):
        if threading.get_ident() == self.thread:
            self.started.set()

    def on_end(self, numba_event):
        pass


class _CompileElsewhere(Exception):
    """Raised on the warmup's thread where numba starts a compilation: a child will compile."""


class _StopAtCompile(_CompileSignal):
    """Stops the thread that made it where numba starts compiling (its cache lacks a kernel).

    numba announces the compilation inside its compiler lock and the
    dispatcher's compile context, which the exception leaves as for any
    failed compilation.
    """

    def on_start(self, numba_event):
        if threading.get_ident() == self.thread:
            raise _CompileElsewhere


class KernelWarmup:
    """The kernels of one input kind, made ready by a background thread.

    Parameters
    ----------
    name : str
        The input kind, for the thread's name.
    build : callable
        Called without arguments on the thread; it makes numba compile, or
        load from its cache, every kernel of the input kind.
    build_elsewhere : callable, default=None
        Called without arguments on the thread when ``build`` would compile:
        it has another process compile the kernels into numba's on-disk
        cache, and returns whether it succeeded; ``build`` then loads them.
        None: ``build`` compiles them on the thread.

    Attributes
    ----------
    ready : threading.Event
        Set once ``build`` has returned or raised.
    orphaned : bool
        True in a child forked before the kernels were ready: they never
        become ready there.
    error : Exception or None
        What ``build`` raised. It is not reported from the thread: a pass
        that finds the kernels ready calls them, which compiles them in its
        own thread if they are missing and raises the error there.
    """

    def __init__(self, name, build, build_elsewhere=None):
        self.ready = threading.Event()
        self.orphaned = False
        self.error = None
        self._decided = threading.Event()  # ready, or numba started compiling them
        self._build = build
        self._build_elsewhere = build_elsewhere
        self._thread = threading.Thread(target=self._run, name=f"softkmeans-compile-{name}")
        self._thread.start()

    def _run(self):
        try:
            if self._build_elsewhere is None or not self._load_or_build_elsewhere():
                with event.install_listener("numba:compile", _CompileSignal(self._decided)):
                    self._build()
        except Exception as exc:  # noqa: BLE001 - raised again by the pass, see ``error``
            self.error = exc
        finally:
            self.ready.set()
            self._decided.set()

    def _load_or_build_elsewhere(self):
        """Load the kernels, having them compiled elsewhere first if need be; whether done.

        False when the thread should compile them itself: the other process failed.
        """
        try:
            with event.install_listener("numba:compile", _StopAtCompile(self._decided)):
                self._build()
            return True
        except _CompileElsewhere:
            self._decided.set()
        built = self._build_elsewhere()
        if not threading.main_thread().is_alive():
            return True  # the process is exiting: nothing will use the kernels
        if built:
            self._build()
        return built

    def wait_unless_compiling(self, timeout=None):
        """Wait for the kernels while they are being loaded; whether they are ready.

        Returns as soon as they are ready, or numba starts compiling them, or
        after ``timeout`` seconds (:data:`CACHE_LOAD_WAIT` when None).
        """
        self._decided.wait(CACHE_LOAD_WAIT if timeout is None else timeout)
        return self.ready.is_set()

    def orphan(self):
        """Mark kernels whose thread is gone (a forked child) as never ready."""
        if not self.ready.is_set():
            self.orphaned = True
            self._decided.set()


class _Orphaned:
    """Kernels that never become ready: asked for in a child forked while others compiled.

    A thread started there to build them would wait forever for numba's
    compiler lock, which the parent's missing thread may hold.
    """

    orphaned = True
    error = None

    def __init__(self):
        self.ready = threading.Event()

    def wait_unless_compiling(self, timeout=None):
        return False

    def orphan(self):
        pass


class _Ready:
    """Kernels that a pass calls at once, compiling them itself if need be."""

    ready = threading.Event()
    ready.set()
    orphaned = False


#: What a numba engine that waits for its kernels (``backend="numba"``) holds instead of a warmup.
READY = _Ready()


def warmup(key, build, build_elsewhere=None):
    """The :class:`KernelWarmup` of input kind ``key``, started on the first request.

    Parameters
    ----------
    key : tuple
        The input kind (layout and dtypes); one warmup per key and process.
    build, build_elsewhere : callable
        As in :class:`KernelWarmup`, used on the first request only.

    Returns
    -------
    KernelWarmup
        Or, in a child forked while kernels compiled, kernels that never become
        ready (``orphaned``), built by no thread.
    """
    with _warmups_lock:
        found = _warmups.get(key)
        if found is None and _forked_while_compiling:
            found = _warmups[key] = _Orphaned()
        elif found is None:
            found = _warmups[key] = KernelWarmup("-".join(map(str, key)), build, build_elsewhere)
        return found
