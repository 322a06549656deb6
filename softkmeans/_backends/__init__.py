"""Engine registry: one module per engine, each implementing the same passes.

An engine is a class constructed from validated data ``(X, sample_weight)``
that provides ``estep``, ``responsibilities``, ``sq_distances``,
``max_sq_distances`` and ``log_sum_exp`` (see :class:`softkmeans._backends._numpy.NumpyEngine`, the
reference). Engines are imported lazily so that an optional dependency that is
missing only fails when its engine is asked for.
"""

import importlib
from functools import lru_cache

from ._namespace import is_cupy_array

__all__ = ["BACKENDS", "get_engine", "resolve_backend"]

#: name -> (module, class, what it needs)
BACKENDS = {
    "numpy": ("._numpy", "NumpyEngine", "numpy"),
    "numba": ("._numba", "NumbaEngine", "numba"),
    "cupy": ("._cupy", "CupyEngine", "cupy (pip install softkmeans[gpu])"),
}


@lru_cache(maxsize=1)
def _numba_available():
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def resolve_backend(name, X=None):
    """Turn ``"auto"`` into a concrete engine name.

    Parameters
    ----------
    name : str
        ``"auto"`` or one of :data:`BACKENDS`.
    X : array-like, default=None
        The data the engine will see (an array on a GPU selects its engine).

    Returns
    -------
    str
        For ``"auto"``: ``"cupy"`` for a CuPy array, else ``"numba"`` when numba
        imports, ``"numpy"`` otherwise.
    """
    if name != "auto":
        if name not in BACKENDS:
            raise ValueError(
                f"Unknown backend {name!r}; expected 'auto' or one of {sorted(BACKENDS)}."
            )
        return name
    if is_cupy_array(X):
        return "cupy"
    return "numba" if _numba_available() else "numpy"


def get_engine(name, X, sample_weight=None):
    """Construct the engine ``name`` (after :func:`resolve_backend`) on ``X``."""
    module_name, class_name, requirement = BACKENDS[resolve_backend(name, X)]
    try:
        module = importlib.import_module(module_name, __name__)
    except ImportError as exc:
        raise ImportError(
            f"backend={name!r} needs {requirement}, which could not be imported: {exc}"
        ) from exc
    return getattr(module, class_name)(X, sample_weight)
