"""Build hook: the wheel carries numba's compiled kernels for the machine that builds it.

Packaging metadata lives in pyproject.toml. This file only extends
``build_py``: once the sources are in the build directory, a child interpreter
runs ``python -m softkmeans compile`` there, which compiles every input kind's
kernels into numba's cache next to those sources (``__pycache__``, about
20 s). numba stamps that cache with the sources' contents and the machine's
CPU, so a process of the installed package loads the kernels in a fraction of
a second instead of compiling them on its first fit; a process on another CPU,
with another numba or with ``NUMBA_CACHE_DIR`` set compiles them as before.

pip builds in an isolated environment with the newest numba it finds: where
the environment installed into keeps an older one, the kernels compiled here
are not used (``pip install --no-build-isolation .`` builds with the
environment's own numba, or run ``python -m softkmeans compile`` once after
installing).

Editable installs skip it, and so does a build with the environment variable
``SOFTKMEANS_PRECOMPILE=0`` (for a wheel meant for other machines). A failed
compilation leaves a warning in the build log, not a failed build.
"""

import os
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

#: numba's cache files: an index per function and one object file per compiled signature.
NUMBA_CACHE_PATTERNS = ("*.nbi", "*.nbc")
#: numba settings the build keeps: they choose the CPU the kernels are compiled for, which
#: numba's cache keys record. Every other NUMBA_* variable is dropped (NUMBA_CACHE_DIR would
#: send the kernels elsewhere, NUMBA_DISABLE_JIT or NUMBA_OPT would bake slow ones in).
NUMBA_SETTINGS_KEPT = ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES")


def remove_numba_caches(build_lib):
    """Delete the cache files of an earlier build left in a reused build directory."""
    for pattern in NUMBA_CACHE_PATTERNS:
        for stale in Path(build_lib, "softkmeans").rglob(pattern):
            stale.unlink()


def compile_kernels_in(build_lib):
    """Compile every kernel into numba's caches next to the sources under ``build_lib``.

    Returns a message saying what failed, or None when the caches were written.
    """
    env = {name: value for name, value in os.environ.items()
           if not name.startswith("NUMBA_") or name in NUMBA_SETTINGS_KEPT}
    env.pop("PYTHONSAFEPATH", None)  # it would keep build_lib off the child's sys.path
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(build_lib), env.get("PYTHONPATH")]))
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # pip compiles the installed sources itself
    done = subprocess.run([sys.executable, "-m", "softkmeans", "compile"], cwd=build_lib,
                          env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        return done.stderr[-2000:] or done.stdout[-2000:]
    if not any(Path(build_lib, "softkmeans").rglob("*.nbc")):
        return "the compilation wrote no cache file under " + str(build_lib)
    return None


class BuildPyWithKernels(build_py):
    """``build_py``, then numba's kernels compiled into the build directory's caches."""

    def run(self):
        super().run()
        remove_numba_caches(self.build_lib)
        if self.editable_mode or os.environ.get("SOFTKMEANS_PRECOMPILE", "1") == "0":
            return
        failure = compile_kernels_in(self.build_lib)
        if failure is not None:
            self.warn("softkmeans: compiling numba's kernels failed; the installed package "
                      "compiles them on its first fits instead.\n" + failure)


if __name__ == "__main__":  # as setuptools runs it; tests load the functions above without it
    setup(cmdclass={"build_py": BuildPyWithKernels})
