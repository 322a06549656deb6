"""Every public name has a docstring whose example runs."""

import doctest
import importlib
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


DOC_PAGES = sorted((Path(__file__).resolve().parents[1] / "doc").glob("*.rst"))


@pytest.mark.parametrize("page", [p for p in DOC_PAGES if ">>>" in p.read_text()],
                         ids=lambda p: p.name)
def test_examples_in_doc_pages_run(page):
    result = doctest.testfile(str(page), module_relative=False,
                              optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert result.failed == 0
