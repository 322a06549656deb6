"""Where a dask collection arrives: recognized without importing dask.

:mod:`softkmeans._dask` (which imports dask) is imported only when a dask
array or DataFrame is passed to an estimator.
"""

import functools

__all__ = ["is_dask_collection", "over_dask_blocks"]


def is_dask_collection(X):
    """Whether ``X`` is a dask collection (array, DataFrame, ...), without importing dask."""
    return hasattr(type(X), "__dask_graph__")


def over_dask_blocks(method):
    """Run an inference ``method(self, X)`` block by block when ``X`` is a dask collection.

    The result is a lazy dask array chunked like the rows of ``X``
    (:func:`softkmeans._dask.map_rows`).
    """

    @functools.wraps(method)
    def wrapper(self, X):
        if is_dask_collection(X):
            from ._dask import map_rows

            return map_rows(self, method.__name__, X)
        return method(self, X)

    return wrapper
