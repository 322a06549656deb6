"""The workloads of scikit-learn's own KMeans examples, as cases for ``quality.py``.

- ``text``: TF-IDF rows (CSR) of the docstrings of the installed numpy, scipy and
  scikit-learn, one document per public function, class and public method, its words of
  letters only, k = 20; the corpus depends on the installed versions of those packages.
  Then a synthetic TF-IDF corpus of 2,000 documents over 20,000 terms drawn from 5
  topics, k = 5.
- ``colour``: colour quantization of scikit-learn's two sample images (pixels / 255) at
  k = 16, 64 and 256, the whole image and 5 fixed samples of 50,000 pixels.
- ``lognormal``: heavy tails, lognormal(0, 3) data of 3000 x 4, k = 3, 4, 5, data seeds
  0 to 29 (90 fits), unscaled.

Nothing is downloaded. ``quick`` shrinks every case (for tests) and leaves out the whole
images.
"""

import importlib
import inspect
import pkgutil
import warnings
from collections import namedtuple

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_sample_image
from sklearn.feature_extraction.text import TfidfTransformer, TfidfVectorizer

Case = namedtuple("Case", "name X k")

#: name -> function(quick) -> list of ``Case``; filled by ``@workload`` in report order.
WORKLOADS = {}

#: workloads reported by their totals only (a row per case would be 90 rows).
SUMMED_ONLY = {"lognormal"}

#: the values of k of the colour cases.
COLOUR_K = (16, 64, 256)

#: package names whose modules hold no user-facing docstrings.
_SKIPPED_MODULES = {"tests", "testing", "conftest", "setup", "f2py", "distutils", "externals"}


def workload(func):
    WORKLOADS[func.__name__] = func
    return func


def _public_modules(package):
    """The importable public modules of ``package``, in sorted order."""
    root = importlib.import_module(package)
    names = sorted(info.name for info in pkgutil.walk_packages(root.__path__, package + "."))
    for name in [package, *names]:
        if any(part.startswith("_") or part in _SKIPPED_MODULES for part in name.split(".")):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                yield importlib.import_module(name)
        except Exception:  # optional dependencies of a module: leave the module out
            continue


def _documented(obj, package):
    """``(qualified name, docstring)`` of ``obj`` and of its public methods if it is a
    class of ``package``; nothing for anything else."""
    if not (inspect.isclass(obj) or inspect.isroutine(obj) or isinstance(obj, np.ufunc)):
        return
    owner = getattr(obj, "__module__", None) or ""
    if not owner.startswith(package):
        return
    name = f"{owner}.{getattr(obj, '__qualname__', obj.__name__)}"
    yield name, inspect.getdoc(obj)
    if inspect.isclass(obj):
        for attr, method in sorted(vars(obj).items()):
            if not attr.startswith("_") and inspect.isfunction(method):
                yield f"{name}.{attr}", inspect.getdoc(method)


def docstrings(packages=("numpy", "scipy", "sklearn")):
    """The distinct docstrings of the public functions, classes and methods of ``packages``,
    in the order of their qualified names."""
    found = {}
    for package in packages:
        for module in _public_modules(package):
            for attr, obj in sorted(vars(module).items()):
                if not attr.startswith("_"):
                    for name, doc in _documented(obj, package):
                        found.setdefault(name, doc)
    return list(dict.fromkeys(doc for _, doc in sorted(found.items()) if doc))


def topic_corpus(n_documents, n_terms, n_topics, seed=1):
    """TF-IDF rows of documents drawn from ``n_topics`` sparse topics over ``n_terms``:
    each document ~100 words, 60% from its topic and 40% uniform."""
    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.full(n_terms, 0.02), size=n_topics)
    lengths = rng.poisson(100, n_documents) + 5
    rows = [np.unique(rng.choice(n_terms, size, p=0.6 * topics[topic] + 0.4 / n_terms),
                      return_counts=True)
            for size, topic in zip(lengths, rng.integers(0, n_topics, n_documents),
                                   strict=True)]
    indptr = np.cumsum([0, *(terms.size for terms, _ in rows)])
    counts = sp.csr_matrix((np.concatenate([c for _, c in rows]).astype(np.float64),
                            np.concatenate([t for t, _ in rows]), indptr),
                           shape=(n_documents, n_terms))
    return TfidfTransformer().fit_transform(counts)


@workload
def text(quick):
    documents = docstrings(("numpy",) if quick else ("numpy", "scipy", "sklearn"))
    # Words of letters only: some docstrings hold random numbers or sets drawn at import,
    # which change their numbers and word order but not their words.
    X = TfidfVectorizer(stop_words="english", min_df=5, max_df=0.5,
                        token_pattern=r"(?u)\b[^\W\d_]{2,}\b").fit_transform(documents)
    synthetic = topic_corpus(200, 2000, 5) if quick else topic_corpus(2000, 20000, 5)
    return [Case("docstrings", X.astype(np.float64), 20), Case("topics", synthetic, 5)]


@workload
def colour(quick):
    cases = []
    for image in ("china", "flower"):
        pixels = load_sample_image(f"{image}.jpg").reshape(-1, 3) / 255.0
        samples = [] if quick else [(image, pixels)]
        samples += [(f"{image} sample {s}",
                     pixels[np.random.default_rng(s).choice(len(pixels),
                                                            5000 if quick else 50000,
                                                            replace=False)])
                    for s in range(2 if quick else 5)]
        cases += [Case(name, X, k) for k in COLOUR_K for name, X in samples]
    return cases


@workload
def lognormal(quick):
    rows, seeds = (300, 3) if quick else (3000, 30)
    return [Case(f"seed {s}", np.random.default_rng(s).lognormal(0.0, 3.0, size=(rows, 4)), k)
            for s in range(seeds) for k in (3, 4, 5)]
