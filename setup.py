"""Build hook: the wheel carries numba's compiled kernels for the machine that builds it.

Packaging metadata lives in pyproject.toml. This file only extends
``build_py``: once the sources are in the build directory, a child interpreter
runs ``python -m softkmeans compile`` there, which compiles every input kind's
kernels into numba's cache next to those sources (``__pycache__``, about
20 s). numba stamps that cache with the sources' contents and the machine's
CPU, so a process of the installed package loads the kernels in a fraction of
a second instead of compiling them on its first fit; a process on another CPU,
with another numba or with ``NUMBA_CACHE_DIR`` set compiles them as before.

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


def compile_kernels_in(build_lib):
    """Compile every kernel into numba's caches next to the sources under ``build_lib``.

    Returns the child interpreter's :class:`subprocess.CompletedProcess`.
    """
    package = Path(build_lib, "softkmeans")
    for pattern in NUMBA_CACHE_PATTERNS:  # a reused build directory: entries of old sources
        for stale in package.rglob(pattern):
            stale.unlink()
    env = {name: value for name, value in os.environ.items() if name != "NUMBA_CACHE_DIR"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # pip compiles the installed sources itself
    # build_lib is the current directory, so it comes first on the child's sys.path.
    return subprocess.run([sys.executable, "-m", "softkmeans", "compile"], cwd=build_lib,
                          env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          check=False)


class BuildPyWithKernels(build_py):
    """``build_py``, then numba's kernels compiled into the build directory's caches."""

    def run(self):
        super().run()
        if self.editable_mode or os.environ.get("SOFTKMEANS_PRECOMPILE", "1") == "0":
            return
        done = compile_kernels_in(self.build_lib)
        if done.returncode != 0:
            self.warn("softkmeans: compiling numba's kernels failed; the installed package "
                      "compiles them on its first fits instead.\n" + done.stderr[-2000:])


if __name__ == "__main__":  # as setuptools runs it; tests load the functions above without it
    setup(cmdclass={"build_py": BuildPyWithKernels})
