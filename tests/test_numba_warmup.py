"""backend="auto": numpy passes while the numba kernels compile in the background."""

import multiprocessing
import os
import subprocess
import sys
import threading
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp
from numba import njit

from softkmeans._backends import _numba, get_engine
from softkmeans._backends._numba import NumbaEngine, input_kind
from softkmeans._backends._numba_warmup import KernelWarmup, warmup
from softkmeans._backends._numpy import NumpyEngine
from softkmeans._core.responsibilities import RelaxationSpec

SPEC = RelaxationSpec("entmax", 0.8)
METHODS = {
    "estep": lambda engine, centers: engine.estep(centers, SPEC),
    "responsibilities": lambda engine, centers: engine.responsibilities(centers, SPEC),
    "sq_distances": lambda engine, centers: engine.sq_distances(centers),
    "max_sq_distances": lambda engine, centers: engine.max_sq_distances(centers),
    "log_sum_exp": lambda engine, centers: engine.log_sum_exp(centers, 0.8),
}


def _data(dtype, sparse, n_samples=3000):
    rng = np.random.RandomState(0)
    centers = rng.uniform(-3, 3, size=(4, 5))
    X = centers[rng.randint(4, size=n_samples)] + rng.normal(size=(n_samples, 5))
    X = X.astype(dtype)
    return (sp.csr_matrix(X) if sparse else X), centers + 0.1


def _fields(result):
    """The arrays and numbers of an engine method's result, for exact comparison."""
    if isinstance(result, np.ndarray):
        return [result]
    return [np.asarray(getattr(result, name)) for name in
            ("sums", "masses", "objective", "inertia", "gap", "labels", "margins", "dmin")]


def _assert_same(result, expected):
    for got, want in zip(_fields(result), _fields(expected), strict=True):
        np.testing.assert_array_equal(got, want)


def _numba_engine_like(engine):
    """A numba engine on the same data with the same row norms (numpy's, from the start)."""
    reference = NumbaEngine(engine.X, engine.sample_weight)
    reference.x_sq = engine.x_sq
    return reference


@pytest.fixture
def compiling(monkeypatch):
    """Kernels that stay "compiling" until the test sets the returned event."""
    kernels = SimpleNamespace(ready=threading.Event(), orphaned=False)
    monkeypatch.setattr(_numba, "_kernels_in_background", lambda X: kernels)
    return kernels.ready


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_auto_engine_runs_numpy_passes_until_the_kernels_are_ready(compiling, dtype, sparse,
                                                                   method):
    X, centers = _data(dtype, sparse)
    call = METHODS[method]
    engine = get_engine("auto", X)
    assert isinstance(engine, NumbaEngine)
    np.testing.assert_array_equal(engine.x_sq, NumpyEngine(X).x_sq)
    _assert_same(call(engine, centers), call(NumpyEngine(X), centers))
    compiling.set()
    _assert_same(call(engine, centers), call(_numba_engine_like(engine), centers))


def test_explicit_numba_backend_waits_for_its_kernels(compiling):
    X, centers = _data(np.float64, False)
    engine = get_engine("numba", X)
    _assert_same(engine.estep(centers, SPEC), NumbaEngine(X).estep(centers, SPEC))
    assert not compiling.is_set()


def test_a_numpy_pass_stops_when_the_kernels_become_ready(compiling, monkeypatch):
    X, centers = _data(np.float64, False, n_samples=200_000)  # several blocks of rows
    blocks = []
    numpy_block = NumpyEngine._block_sq_distances

    def first_block_then_ready(self, rows, *args):
        blocks.append(rows)
        compiling.set()
        return numpy_block(self, rows, *args)

    monkeypatch.setattr(NumpyEngine, "_block_sq_distances", first_block_then_ready)
    engine = get_engine("auto", X)
    _assert_same(engine.estep(centers, SPEC), _numba_engine_like(engine).estep(centers, SPEC))
    assert len(blocks) == 1


def test_large_passes_wait_for_the_kernels(compiling, monkeypatch):
    X, centers = _data(np.float32, True)
    monkeypatch.setattr(_numba, "NUMPY_WORK_MAX", X.nnz * len(centers) - 1)
    blocks = []
    monkeypatch.setattr(NumpyEngine, "_block_sq_distances",
                        lambda self, rows, *args: blocks.append(rows))
    engine = get_engine("auto", X)
    threading.Timer(0.05, compiling.set).start()
    _assert_same(engine.estep(centers, SPEC), _numba_engine_like(engine).estep(centers, SPEC))
    assert blocks == []


def test_float32_distances_do_not_wait_for_kernels_they_do_not_use(compiling, monkeypatch):
    """Dense float32 distances (transform's) are the numpy engine's float64 ones: a large
    transform waited for the compilation, then ran on numpy anyway."""
    X, centers = _data(np.float32, False)
    monkeypatch.setattr(_numba, "NUMPY_WORK_MAX", 0)
    engine = get_engine("auto", X)
    done = []
    worker = threading.Thread(target=lambda: done.append(engine.sq_distances(centers)))
    worker.start()
    worker.join(30)
    compiling.set()
    assert done, "sq_distances waited for the kernels"
    _assert_same(done[0], NumpyEngine(X).sq_distances(centers))


def _fit_in_forked_child(kernels):
    assert kernels.orphaned and not kernels.wait_unless_compiling(timeout=60)
    X, centers = _data(np.float64, False)
    engine = get_engine("auto", X)  # a pass above NUMPY_WORK_MAX, which would wait
    _assert_same(engine.estep(centers, SPEC), NumpyEngine(X).estep(centers, SPEC))


def _exit_code_of_forked_child(target, args, release, timeout):
    """Run ``target(*args)`` in a forked child; then let the parent's build end (``release``)."""
    child = multiprocessing.get_context("fork").Process(target=target, args=args)
    child.start()
    child.join(timeout)
    release.set()
    if child.exitcode is None:
        child.kill()
    return child.exitcode


def test_a_forked_child_runs_numpy_passes_instead_of_waiting(monkeypatch):
    release = threading.Event()
    kernels = warmup(("test-fork", os.getpid()), lambda: release.wait(60))
    monkeypatch.setattr(_numba, "_kernels_in_background", lambda X: kernels)
    monkeypatch.setattr(_numba, "NUMPY_WORK_MAX", 0)
    assert _exit_code_of_forked_child(_fit_in_forked_child, (kernels,), release, 120) == 0
    assert not kernels.orphaned  # only in the child


def _ask_for_another_kind_in_forked_child():
    other = warmup(("test-fork-other-kind", os.getpid()), lambda: None)
    assert other.orphaned and not other.wait_unless_compiling(timeout=60)
    assert threading.active_count() == 1  # no thread waits there for numba's compiler lock


def test_a_child_forked_while_kernels_compile_orphans_every_other_kind():
    """A child asking for the kernels of another input kind started a thread there that
    waited forever for numba's compiler lock, and the child never exited."""
    release = threading.Event()
    warmup(("test-fork-compiling", os.getpid()), lambda: release.wait(60))
    assert _exit_code_of_forked_child(_ask_for_another_kind_in_forked_child, (), release,
                                      60) == 0


def test_input_kind_names_layout_and_dtypes():
    X = np.zeros((3, 2), dtype=np.float32)
    assert input_kind(X) == ("dense", "float32")
    assert input_kind(sp.csr_matrix(X.astype(np.float64))) == ("CSR", "float64", "int32")


def test_warmup_waits_for_a_load_but_not_for_a_compilation():
    release = threading.Event()

    def compiles():
        njit(cache=False)(lambda x: x + 1.0)(1.0)  # a numba compilation starts...
        release.wait(60)  # ...and lasts until the test says so

    started = KernelWarmup("test-compiles", compiles)
    assert started.wait_unless_compiling(timeout=60) is False  # returns at once, not in 60 s
    release.set()
    assert started.ready.wait(60)
    loads = KernelWarmup("test-loads", lambda: release.wait(0.2))  # no compilation
    assert loads.wait_unless_compiling(timeout=60) is True


def test_compilations_on_other_threads_do_not_count():
    release = threading.Event()
    waits = KernelWarmup("test-waits", lambda: release.wait(60))
    njit(cache=False)(lambda x: x - 1.0)(1.0)  # compiled here, not on the warmup's thread
    assert waits.wait_unless_compiling(timeout=0.5) is False  # the timeout ran out
    assert not waits._decided.is_set()
    release.set()
    assert waits.ready.wait(60)


def test_warmup_of_a_failing_build_is_ready_for_the_pass_to_raise():
    def fails():
        raise RuntimeError("no compiler")

    broken = KernelWarmup("test-fails", fails)
    assert broken.wait_unless_compiling(timeout=60) is True
    assert isinstance(broken.error, RuntimeError)


def _compiles_until(built):
    """A build that makes numba compile until ``built`` is set, then loads (does nothing)."""
    calls = []

    def build():
        calls.append("build")
        if not built.is_set():
            njit(cache=False)(lambda x: x * 2.0)(1.0)
            calls.append("compiled here")

    return build, calls


def test_a_warmup_has_another_process_compile_and_then_loads():
    built, release = threading.Event(), threading.Event()
    build, calls = _compiles_until(built)

    def elsewhere():
        calls.append("elsewhere")
        release.wait(60)  # the other process compiles until the test says so
        built.set()
        return True

    kernels = KernelWarmup("test-elsewhere", build, elsewhere)
    assert kernels.wait_unless_compiling(timeout=60) is False  # at once: they compile elsewhere
    assert not kernels.ready.is_set()
    release.set()
    assert kernels.ready.wait(60) and kernels.error is None
    assert calls == ["build", "elsewhere", "build"]  # stopped at numba's compilation, then loaded


def test_a_warmup_that_finds_its_kernels_loads_them_without_another_process():
    calls = []
    kernels = KernelWarmup("test-cached", lambda: calls.append("build"),
                           lambda: calls.append("elsewhere"))
    assert kernels.wait_unless_compiling(timeout=60) is True
    assert calls == ["build"]


def test_when_the_other_process_fails_the_thread_compiles():
    build, calls = _compiles_until(threading.Event())
    kernels = KernelWarmup("test-failed-elsewhere", build,
                           lambda: calls.append("elsewhere") or False)
    assert kernels.ready.wait(60) and kernels.error is None
    assert calls == ["build", "elsewhere", "build", "compiled here"]


def test_an_exiting_process_does_not_load_what_another_compiled(monkeypatch):
    """Its main thread has ended: nothing will call the kernels, and no load should run in
    LLVM while the interpreter shuts down."""
    ended = threading.Thread(target=lambda: None)
    ended.start()
    ended.join()
    built = threading.Event()
    build, calls = _compiles_until(built)
    monkeypatch.setattr(threading, "main_thread", lambda: ended)
    kernels = KernelWarmup("test-exiting", build, lambda: built.set() or True)
    assert kernels.ready.wait(60)
    assert calls == ["build"]


def test_one_warmup_per_input_kind():
    calls = []
    key = ("test-kind", os.getpid())
    first = warmup(key, lambda: calls.append(1))
    assert warmup(key, lambda: calls.append(2)) is first
    assert first.ready.wait(60)
    assert calls == [1]


_COLD_PROCESS = """
import threading
import numpy as np
import scipy.sparse as sp
from softkmeans import SoftKMeans
from softkmeans._backends import _numba, _numba_warmup
from softkmeans._backends._numba_kernels import csr_pass

held = threading.Event()
in_child = _numba._build_kernels_in_child
# the child interpreter compiles the kernels (the fit stops waiting) once the test says so
_numba._build_kernels_in_child = lambda kind: held.wait(60) and in_child(kind)
X = sp.csr_matrix(np.random.default_rng(0).normal(size=(300, 4)))
first = SoftKMeans(3, random_state=0).fit(X)
numpy_fit = SoftKMeans(3, random_state=0, backend="numpy").fit(X)
kernels = _numba_warmup._warmups[("CSR", "float64", "int32")]
print(not kernels.ready.is_set(), np.array_equal(first.cluster_centers_,
                                                 numpy_fit.cluster_centers_))
held.set()
kernels.ready.wait(120)
# this process loaded what the child compiled
print(sum(csr_pass.stats.cache_hits.values()) >= 1 and kernels.error is None)
"""

_WARM_PROCESS = """
import numpy as np
import scipy.sparse as sp
from softkmeans import SoftKMeans
from softkmeans._backends import _numba_warmup
from softkmeans._backends._numba_kernels import csr_pass

_numba_warmup.CACHE_LOAD_WAIT = 120.0  # however slow the machine, the fit waits for the load

X = sp.csr_matrix(np.random.default_rng(0).normal(size=(300, 4)))
first = SoftKMeans(3, random_state=0).fit(X)
hits = sum(csr_pass.stats.cache_hits.values())
numba_fit = SoftKMeans(3, random_state=0, backend="numba").fit(X)
print(hits, np.array_equal(first.cluster_centers_, numba_fit.cluster_centers_))
"""


def test_a_cold_process_fits_at_once_and_leaves_the_kernels_cached(tmp_path):
    """The first fit runs on numpy while a child interpreter compiles the kernels into the
    cache; the process loads them from there, and the next one finds them."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}

    def run(code):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=env, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert run(_COLD_PROCESS) == ["True", "True", "True"]
    hits, same = run(_WARM_PROCESS)
    assert int(hits) >= 1 and same == "True"  # loaded from the cache, used by the first fit


@pytest.mark.parametrize(("code", "timeout", "built"), [
    ("import sys; sys.exit(0)  # {path} {kind}", 60, True),
    ("import sys; sys.exit(3)  # {path} {kind}", 60, False),  # failed: the thread compiles
    ("import time; time.sleep(60)  # {path} {kind}", 0.5, False),  # stopped after its time
])
def test_a_child_build_says_whether_it_succeeded(monkeypatch, code, timeout, built):
    monkeypatch.setattr(_numba, "_CHILD_BUILD", code)
    monkeypatch.setattr(_numba, "CHILD_BUILD_TIMEOUT", timeout)
    assert _numba._build_kernels_in_child(("dense", "float64")) is built


def test_without_an_interpreter_to_start_the_thread_compiles(monkeypatch):
    """Embedded and frozen applications have no Python to run a child with."""
    assert _numba._can_build_in_child() is _numba.JIT_OPTIONS["cache"]
    for program in ("", "/usr/bin/uwsgi"):
        monkeypatch.setattr(sys, "executable", program)
        assert not _numba._can_build_in_child()
    monkeypatch.setattr(sys, "executable", "python")
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert not _numba._can_build_in_child()
