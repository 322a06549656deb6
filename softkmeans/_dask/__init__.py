"""Dask collections in the estimators, recognized without importing dask.

The modules of this package import dask, and are imported only when a dask
array or DataFrame reaches an estimator: :mod:`~softkmeans._dask.fitting`
(fit over blocks, inference block by block), :mod:`~softkmeans._dask.engine`
(the engine contract over blocks) and :mod:`~softkmeans._dask.seeding`
(k-means|| and weighted draws over blocks).
"""

import functools

__all__ = ["is_dask_collection", "over_dask_blocks"]


def is_dask_collection(X):
    """Whether ``X`` is a dask collection (array, DataFrame, ...), without importing dask."""
    return hasattr(type(X), "__dask_graph__")


def over_dask_blocks(method):
    """Run an inference ``method(self, X)`` block by block when ``X`` is a dask collection.

    The result is a lazy dask array chunked like the rows of ``X``
    (:func:`softkmeans._dask.fitting.map_rows`).
    """

    @functools.wraps(method)
    def wrapper(self, X):
        if is_dask_collection(X):
            from .fitting import map_rows

            return map_rows(self, method.__name__, X)
        return method(self, X)

    return wrapper
