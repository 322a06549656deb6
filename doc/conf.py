"""Sphinx configuration of the softkmeans documentation (builds offline)."""

import os
import sys
from importlib.util import find_spec

sys.path.insert(0, os.path.abspath(".."))

project = "softkmeans"
author = "softkmeans developers"
copyright = "2026, softkmeans developers"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]
# Maths is rendered by MathJax in the reader's browser. sphinx-mathjax-offline (in the docs
# extra) copies MathJax into the built pages, so that they render with no network; without it
# the pages load MathJax from its CDN.
if find_spec("sphinx-mathjax-offline"):
    extensions.append("sphinx-mathjax-offline")

# Cross-links to other projects need the network; opt in with SOFTKMEANS_DOCS_INTERSPHINX=1.
if os.environ.get("SOFTKMEANS_DOCS_INTERSPHINX") == "1":
    extensions.append("sphinx.ext.intersphinx")
    intersphinx_mapping = {
        "python": ("https://docs.python.org/3", None),
        "numpy": ("https://numpy.org/doc/stable", None),
        "sklearn": ("https://scikit-learn.org/stable", None),
    }

autosummary_generate = True
autodoc_default_options = {
    "members": True,
    # the estimators' methods (fit, predict, ...) are those of their base class; torch's
    # modules keep nn.Module's methods on torch's pages
    "inherited-members": "BaseEstimator,BaseException,Module",
    # scikit-learn's generated metadata-routing methods and its set_output cite labels of its
    # own docs (set_output is described on the estimators page)
    "exclude-members": "set_fit_request,set_score_request,set_predict_request,"
                       "set_partial_fit_request,"
                       "set_transform_request,get_metadata_routing,set_output",
}
numpydoc_show_inherited_class_members = False
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
}

templates_path = []
exclude_patterns = ["_build"]
html_theme = "pydata_sphinx_theme" if find_spec("pydata_sphinx_theme") else "alabaster"
html_title = "softkmeans"
