"""Every public name has a docstring whose example runs."""

import doctest
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import softkmeans

PUBLIC_MODULES = ["softkmeans._soft", "softkmeans._entmax", "softkmeans._annealed",
                  "softkmeans.diagnostics", "softkmeans.exceptions", "softkmeans.datasets",
                  "softkmeans.experiments", "softkmeans.plotting"]


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_examples_in_docstrings_run(module_name):
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    assert result.attempted > 0


@pytest.mark.parametrize("name", softkmeans.__all__)
def test_public_names_have_an_examples_section(name):
    doc = getattr(softkmeans, name).__doc__
    assert doc and "Examples\n    --------" in doc


ROOT = Path(__file__).resolve().parents[1]
DOC_PAGES = sorted((ROOT / "doc").glob("*.rst"))
#: Pages whose examples need the environment a reader sets before starting Python, and
#: the packages they import. scipy reads ``SCIPY_ARRAY_API`` when it is imported, so
#: such a page runs in a fresh interpreter unless this one has the setting.
PAGE_SETUP = {"array_api.rst": ({"SCIPY_ARRAY_API": "1"}, ["torch", "array_api_strict"])}
FLAGS = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS


@pytest.mark.parametrize("page", [p for p in DOC_PAGES if ">>>" in p.read_text()],
                         ids=lambda p: p.name)
def test_examples_in_doc_pages_run(page):
    env, packages = PAGE_SETUP.get(page.name, ({}, []))
    for package in packages:
        pytest.importorskip(package)
    if all(os.environ.get(name) == value for name, value in env.items()):
        result = doctest.testfile(str(page), module_relative=False, optionflags=FLAGS)
        assert result.failed == 0
        return
    code = (f"import doctest, sys; result = doctest.testfile({str(page)!r}, "
            f"module_relative=False, optionflags={FLAGS}); sys.exit(result.failed > 0)")
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env, "PYTHONPATH": path}, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
