"""setup.py's build hook: the wheel carries numba's kernels, compiled for the building machine."""

import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import numba
import pytest

import softkmeans

REPO = Path(__file__).resolve().parents[1]
SETUP = runpy.run_path(str(REPO / "setup.py"), run_name="setup_under_test")
BuildPyWithKernels = SETUP["BuildPyWithKernels"]

#: Fits and inference of every estimator on every input kind, counting numba's compilations.
_FIRST_FITS = """
import numpy as np
import scipy.sparse as sp
from numba.core import event
import softkmeans
from softkmeans import AnnealedKMeans, EntmaxKMeans, SoftKMeans

compiled = []

class Count(event.Listener):
    def on_start(self, numba_event):
        compiled.append(numba_event.data["dispatcher"])

    def on_end(self, numba_event):
        pass

event.register("numba:compile", Count())
rng = np.random.default_rng(0)
for dtype in (np.float32, np.float64):
    for layout in (np.asarray, sp.csr_matrix):
        X = layout(rng.normal(size=(400, 6)).astype(dtype))
        for estimator in (SoftKMeans(4), EntmaxKMeans(4), AnnealedKMeans(4, n_temperatures=3)):
            estimator.set_params(backend="numba", random_state=0)
            estimator.fit(X, sample_weight=rng.random(400))
            estimator.predict(X), estimator.predict_proba(X), estimator.transform(X)
            estimator.score(X)
print(softkmeans.__file__)
print(len(compiled))
"""


@pytest.mark.skipif(tuple(map(int, numba.__version__.split(".")[:2])) < (0, 68),
                    reason="numba stamps its caches with the sources' contents since 0.68; "
                           "before, with their modification times, which installing changes")
def test_kernels_compiled_at_build_time_load_where_the_package_is_installed(tmp_path,
                                                                            monkeypatch):
    """The build directory's caches, copied elsewhere with new file times, spare every
    compilation of the first fits (as pip installs a wheel). The builder's settings that
    would send them elsewhere, compile none, or import another copy are ignored."""
    source = Path(softkmeans.__file__).parent
    build_lib, site = tmp_path / "build", tmp_path / "site"
    shutil.copytree(source, build_lib / "softkmeans",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name, value in [("NUMBA_CACHE_DIR", str(tmp_path / "elsewhere")),
                        ("NUMBA_DISABLE_JIT", "1"), ("PYTHONSAFEPATH", "1")]:
        monkeypatch.setenv(name, value)
    assert SETUP["compile_kernels_in"](build_lib) is None
    assert list((build_lib / "softkmeans").rglob("*.nbc"))
    assert not (tmp_path / "elsewhere").exists()
    assert not list((build_lib / "softkmeans").rglob("*.pyc"))  # pip compiles the sources
    shutil.copytree(build_lib, site, copy_function=shutil.copy)  # new modification times

    env = {name: value for name, value in os.environ.items() if not name.startswith(
        ("NUMBA_", "PYTHONSAFEPATH"))}
    ran = subprocess.run([sys.executable, "-c", _FIRST_FITS], cwd=site, env=env,
                         capture_output=True, text=True, check=False)
    assert ran.returncode == 0, ran.stderr
    location, n_compiled = ran.stdout.split()
    assert Path(location).is_relative_to(site)
    assert n_compiled == "0"


def _hook(monkeypatch, editable=False, build_lib="build-lib"):
    """A BuildPyWithKernels whose standard build does nothing, and its warnings."""
    calls = []
    monkeypatch.setattr(SETUP["build_py"], "run", lambda self: None)
    hook = object.__new__(BuildPyWithKernels)
    hook.editable_mode, hook.build_lib = editable, build_lib
    hook.warn = calls.append
    return hook, calls


def test_the_hook_compiles_into_the_build_directory_and_warns_if_that_fails(monkeypatch):
    hook, warnings = _hook(monkeypatch)
    compiled_in = []

    def compile_kernels_in(build_lib):
        compiled_in.append(build_lib)
        return "numba failed"

    monkeypatch.setitem(BuildPyWithKernels.run.__globals__, "compile_kernels_in",
                        compile_kernels_in)
    hook.run()
    assert compiled_in == ["build-lib"]
    assert len(warnings) == 1 and "numba failed" in warnings[0]


@pytest.mark.parametrize(("editable", "precompile"), [(True, "1"), (False, "0")])
def test_editable_installs_and_the_opt_out_skip_the_compilation(tmp_path, monkeypatch, editable,
                                                                 precompile):
    """They skip it, and a reused build directory loses the caches of an earlier build."""
    stale = tmp_path / "softkmeans" / "_engines" / "_numba" / "__pycache__" / "dense_pass.nbc"
    stale.parent.mkdir(parents=True)
    stale.touch()
    hook, _ = _hook(monkeypatch, editable, tmp_path)
    monkeypatch.setenv("SOFTKMEANS_PRECOMPILE", precompile)
    monkeypatch.setitem(BuildPyWithKernels.run.__globals__, "compile_kernels_in",
                        lambda build_lib: pytest.fail("compiled"))
    hook.run()
    assert not stale.exists()
