"""Where an array lives: helpers shared by the estimators and the device engines.

An array of a namespace other than numpy (PyTorch, CuPy, array-api-strict, any
library that implements the array API standard) is a *device array*. The
helpers use scikit-learn's copy of ``array-api-compat``, the one that
``sklearn.set_config(array_api_dispatch=True)`` dispatches with; none of them
imports CuPy or PyTorch, so they are safe to call when those are not installed.
"""

import numpy as np
import scipy.sparse
from sklearn.externals import array_api_compat
from sklearn.utils._array_api import _convert_to_numpy

__all__ = ["host_dtype", "is_cupy_array", "is_device_array", "like_input",
           "namespace_and_device", "to_numpy"]


def is_cupy_array(X):
    """Whether ``X`` is a CuPy array or a ``cupyx.scipy.sparse`` matrix."""
    return type(X).__module__.split(".", 1)[0] in ("cupy", "cupyx")


def is_device_array(X):
    """Whether ``X`` is an array of an array API namespace other than numpy."""
    return (array_api_compat.is_array_api_obj(X) and not isinstance(X, np.ndarray)
            and not scipy.sparse.issparse(X))


def namespace_and_device(X):
    """``(xp, device)`` of ``X``: its ``array-api-compat`` namespace and its device.

    numpy arrays and SciPy sparse matrices get the compat namespace of numpy
    and the device ``"cpu"``.
    """
    if not is_device_array(X):
        return array_api_compat.array_namespace(np.empty(0)), "cpu"
    return array_api_compat.array_namespace(X), array_api_compat.device(X)


def host_dtype(dtype):
    """The numpy floating dtype of a namespace's ``float32`` or ``float64`` dtype."""
    return np.dtype(np.float32 if "float32" in str(dtype) else np.float64)


def to_numpy(a):
    """``a`` on the host as numpy: device arrays (CuPy sparse too) are copied, others returned
    as they are."""
    if is_cupy_array(a):
        return a.get()
    if is_device_array(a):
        return _convert_to_numpy(a, array_api_compat.array_namespace(a))
    return a


def like_input(a, X):
    """``a`` in the namespace and on the device of ``X``: a host array is moved there when
    ``X`` is a device array; otherwise ``a`` is returned as it is."""
    if is_device_array(X) and not is_device_array(a):
        xp, device = namespace_and_device(X)
        return xp.asarray(a, device=device)
    return a
