"""Engine registry: each engine runs the same passes over one data set.

An engine is a class constructed from validated data ``(X, sample_weight)``
that provides ``estep``, ``responsibilities``, ``sq_distances``,
``max_sq_distances`` and ``log_sum_exp`` (the contract:
:class:`softkmeans._engines._contract.Engine`). :mod:`._array` holds the
array-namespace engine (``"array"``), written against the array API standard,
which computes in the namespace and on the device of its data, and whose numpy
form in float64 is the reference (:class:`softkmeans._engines._array.NumpyEngine`);
:mod:`._cupy` runs it on a GPU with fused kernels; :mod:`._numba` is the
compiled CPU engine. The host engines (``"numpy"``, ``"numba"``) take a host
copy of a device array. Engines are
imported lazily so that an optional dependency that is missing only fails
when its engine is asked for.
"""

import importlib
from functools import lru_cache

import numpy as np

from ._conditioning import squared_norm_limit
from ._namespace import host_dtype, is_cupy_array, is_device_array, namespace_and_device, to_numpy

__all__ = ["BACKENDS", "check_magnitude", "get_engine", "resolve_backend"]

#: name -> (module, class, what it needs)
BACKENDS = {
    "numpy": ("._array", "NumpyEngine", "numpy"),
    "array": ("._array", "ArrayEngine", "numpy"),
    "numba": ("._numba.engine", "NumbaEngine", "numba"),
    "cupy": ("._cupy", "CupyEngine", "cupy (pip install softkmeans[gpu])"),
}


@lru_cache(maxsize=1)
def _numba_state():
    """numba's state: "missing", "disabled" (NUMBA_DISABLE_JIT=1 set) or "ok"."""
    try:
        import numba
    except ImportError:
        return "missing"
    return "disabled" if numba.config.DISABLE_JIT else "ok"


def resolve_backend(name, X=None):
    """Turn ``"auto"`` into a concrete engine name.

    Parameters
    ----------
    name : str
        ``"auto"`` or one of :data:`BACKENDS`.
    X : array-like, default=None
        The data the engine will see (a device array selects its engine).

    Returns
    -------
    str
        For ``"auto"``: ``"cupy"`` for a CuPy array, ``"array"`` for an array
        of another array API namespace (PyTorch, array-api-strict, ...), else
        ``"numba"`` when numba imports and compiles (not under
        ``NUMBA_DISABLE_JIT=1``), ``"numpy"`` otherwise.
    """
    if name != "auto":
        if name not in BACKENDS:
            raise ValueError(
                f"Unknown backend {name!r}; expected 'auto' or one of {sorted(BACKENDS)}."
            )
        if name == "numba" and _numba_state() == "disabled":
            raise ValueError("backend='numba' needs numba's compiler, which the environment "
                             "variable NUMBA_DISABLE_JIT turns off; use backend='auto' or "
                             "'numpy'.")
        return name
    if is_cupy_array(X):
        return "cupy"
    if is_device_array(X):
        return "array"
    return "numba" if _numba_state() == "ok" else "numpy"


def check_magnitude(X, x_sq, centers=None):
    """``ValueError`` unless the squared distances of ``X`` are normal numbers of its dtype.

    Above ``max / 16`` of the dtype squared distances would overflow; below
    ``tiny / eps`` (about ``1e-31`` in float32, ``1e-292`` in float64) they
    would be subnormal or 0 and lose their digits. A largest squared norm of
    0 is only legitimate for an all-zero X. Without ``centers`` (the data of a
    fit), the squared norms must also sum to at most ``max / 16`` of float64.

    Parameters
    ----------
    X : array or CSR matrix of shape (n_samples, n_features)
    x_sq : ndarray of shape (n_samples,)
        Squared row norms of X in float64 (an engine's ``x_sq``).
    centers : ndarray of shape (n_clusters, n_features), default=None
        Centroids (float64) that X's distances are taken to: their norms
        count too, so that points near the origin can be predicted. The
        message names whichever of X and centers holds the largest norm.
    """
    dtype = host_dtype(X.dtype)
    x_largest = float(x_sq.max(initial=0.0))
    c_largest = 0.0 if centers is None else float(
        np.einsum("ij,ij->i", centers, centers).max(initial=0.0))
    largest = max(x_largest, c_largest)
    info = np.finfo(dtype)
    high, low = squared_norm_limit(dtype), float(info.tiny / info.eps)
    if not largest <= high:
        size, fate, limit = "large", "overflow", high
        culprit = "X is" if x_largest >= c_largest else "centers are"
    elif largest < low and (largest > 0 or _any_nonzero(X)):
        size, fate, limit = "small", "underflow", low
        culprit = "X is" if centers is None else "X and centers are"
    else:
        _check_sums(x_sq if centers is None else None)
        return
    raise ValueError(
        f"{culprit} too {size} in magnitude for {dtype.name}: squared distances "
        f"would {fate} (largest squared norm {largest:.3g}, limit {limit:.3g}). Rescale the "
        "data, for example with StandardScaler."
    )


def _any_nonzero(X):
    """Whether dense or CSR ``X``, of any namespace, has a nonzero entry."""
    if hasattr(X, "indptr"):
        return bool(X.data.any())
    xp, _ = namespace_and_device(X)
    return bool(xp.any(X != 0))


def _check_sums(x_sq):
    """``ValueError`` unless the squared norms ``x_sq`` of the data a fit sums over (None:
    none) add up to a number that float64 sums hold."""
    if x_sq is None:
        return
    limit = squared_norm_limit(np.float64)
    with np.errstate(over="ignore"):
        total = float(x_sq.sum())
    if not total <= limit:
        raise ValueError(
            f"X is too large in magnitude: its squared norms sum to {total:.3g}, beyond "
            f"{limit:.3g}, so the objective and the covariance would overflow float64. Rescale "
            "the data, for example with StandardScaler."
        )


def get_engine(name, X, sample_weight=None, n_threads=None, centers=None):
    """Construct the engine ``name`` (after :func:`resolve_backend`) on ``X``.

    ``n_threads`` is the numba engine's thread count (None: the OpenMP limit
    in effect); the other engines do not take it. The host engines get a host
    copy of a device array. ``ValueError`` if X's squared distances (to
    ``centers`` when given, fitted centroids) do not fit its dtype
    (:func:`check_magnitude`).
    """
    resolved = resolve_backend(name, X)
    if resolved in ("numpy", "numba"):
        X = to_numpy(X)
    module_name, class_name, requirement = BACKENDS[resolved]
    try:
        module = importlib.import_module(module_name, __name__)
    except ImportError as exc:
        raise ImportError(
            f"backend={name!r} needs {requirement}, which could not be imported: {exc}"
        ) from exc
    options = {"n_threads": n_threads} if resolved == "numba" else {}
    engine = getattr(module, class_name)(X, sample_weight, **options)
    check_magnitude(X, engine.x_sq, centers)
    return engine
