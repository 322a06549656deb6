"""Where an array lives: helpers shared by the estimators and the device engines.

None of them imports CuPy, so they are safe to call when it is not installed.
"""

__all__ = ["is_cupy_array", "to_numpy", "like_input"]


def is_cupy_array(X):
    """Whether ``X`` is a CuPy array or a ``cupyx.scipy.sparse`` matrix."""
    return type(X).__module__.split(".", 1)[0] in ("cupy", "cupyx")


def to_numpy(a):
    """``a`` on the host: CuPy arrays (dense or sparse) are copied, others returned as they are."""
    return a.get() if is_cupy_array(a) else a


def like_input(a, X):
    """``a`` in the namespace of ``X``: moved to the GPU when ``X`` is a CuPy array."""
    if is_cupy_array(X) and not is_cupy_array(a):
        import cupy

        return cupy.asarray(a)
    return a
