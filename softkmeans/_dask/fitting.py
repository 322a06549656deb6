"""Dask collections in the estimators: fit over blocks, inference block by block.

Imported only when a dask array or DataFrame reaches an estimator
(:mod:`softkmeans._dask`). A fit validates the collection (one pass:
finite values, and the sizes of chunks of unknown size), builds a
:class:`~softkmeans._dask.engine.BlockwiseEngine` and runs the estimator's own
fit on it (:meth:`softkmeans._base.BaseSoftKMeans._fit_engine`): the same
algorithms, the same hooks, every pass a map over the blocks and a sum of
``k x d`` statistics. Inference maps the estimator's in-memory method over the
blocks: lazy, chunked like the rows of the input.
"""

import dask
import dask.array as da
import numpy as np
from sklearn.utils.validation import _check_feature_names, _check_n_features, check_is_fitted

from .._validation import validate_X
from .engine import BlockwiseEngine, blas_held

__all__ = ["fit_blocks", "map_rows", "weighted_mean"]

#: Fitted attributes an inference task does not need (per-row results of the fit, and the
#: feature names, which are checked once on the collection).
_NOT_FOR_INFERENCE = ("labels_", "margins_", "path_", "bounds_", "_stream", "feature_names_in_")


def fit_blocks(estimator, X, sample_weight):
    """Fit ``estimator`` on the dask collection ``X``; returns the estimator.

    ``labels_`` and ``margins_`` are dask arrays kept by dask (persisted),
    ``cluster_centers_`` a numpy array.
    """
    if not estimator._fits_blocks:
        raise TypeError(
            f"{type(estimator).__name__}.fit does not take a dask collection: fit it on an "
            "in-memory sample (X[:m].compute()), or fit SoftKMeans or EntmaxKMeans on the "
            "dask array; predict, transform and score take dask arrays."
        )
    X = _surveyed(validate_X(X, estimator, reset=True))
    sample_weight = _blocks_weights(sample_weight, X)
    engine = BlockwiseEngine(X, sample_weight, estimator.backend, estimator.n_threads)
    estimator._check_params_vs_input(X, engine.sample_weight)
    estimator._fit_engine(X, engine)
    return estimator


def map_rows(estimator, method, X):
    """``estimator.method`` of every block of ``X``: a lazy dask array chunked like its rows.

    ``predict`` gives int32 labels and ``score_samples`` one value per row;
    ``predict_proba`` and ``transform`` one column per centroid, in the dtype of X.
    """
    check_is_fitted(estimator)
    X = validate_X(X, estimator, reset=False)
    # a shallow copy without the per-row results, which tasks need not carry
    model = type(estimator).__new__(type(estimator))
    model.__dict__.update((name, value) for name, value in estimator.__dict__.items()
                          if name not in _NOT_FOR_INFERENCE)
    if model.n_threads is None:
        model.n_threads = 1  # dask runs the blocks in parallel
    if method in ("predict", "score_samples"):
        dtype = np.int32 if method == "predict" else np.float64
        return X.map_blocks(_apply, dask.delayed(model), method, dtype, drop_axis=1,
                            dtype=dtype, meta=X._meta.astype(dtype).reshape(0))
    k = estimator.cluster_centers_.shape[0]
    return X.map_blocks(_apply, dask.delayed(model), method, X.dtype,
                        chunks=(X.chunks[0], (k,)), dtype=X.dtype, meta=X._meta)


@blas_held
def _apply(block, model, method, dtype):
    if not block.shape[0]:  # an in-memory method refuses empty input
        k = model.cluster_centers_.shape[0]
        shape = (0,) if method in ("predict", "score_samples") else (0, k)
        return block.astype(dtype).reshape(shape)
    return getattr(model, method)(block)


def weighted_mean(values, sample_weight):
    """The weighted mean of a dask array of values, computed (``score``)."""
    if sample_weight is not None and any(np.isnan(c) for c in values.chunks[0]):
        values = values.compute_chunk_sizes()
    weights = _blocks_weights(sample_weight, values[:, None])
    if weights is None:
        return float(values.mean().compute())
    weights = weights / weights.max()
    return float((values * weights).sum().compute() / weights.sum().compute())


def validated_blocks(X, estimator, reset):
    """A dask array of float rows with one chunk of columns; feature names and count checked
    (the dask branch of :func:`softkmeans._validation.validate_X`; lazy: no pass over X)."""
    if hasattr(X, "columns"):  # a dask DataFrame: its meta is an empty pandas one
        _check_feature_names(estimator, X._meta, reset=reset)
        X = X.to_dask_array()
    elif not isinstance(X, da.Array):
        raise TypeError(f"Expected a dask array or DataFrame; got {type(X).__name__}.")
    else:
        _check_feature_names(estimator, X, reset=reset)
    if X.ndim != 2:
        raise ValueError(f"Expected a 2D dask array; got one of {X.ndim} dimensions. Reshape "
                         "it, as X.reshape(-1, 1) for a single feature.")
    _check_n_features(estimator, X, reset=reset)
    if X.dtype.kind in "biu":
        X = X.astype(np.float64)
    elif X.dtype not in (np.float32, np.float64):
        raise TypeError(f"X has dtype {X.dtype}; expected float32, float64, or an integer or "
                        "boolean dtype (converted to float64).")
    return X.rechunk({1: -1}) if X.numblocks[1] > 1 else X


def _survey(block):
    return np.array([[block.shape[0], bool(np.isfinite(block).all())]], dtype=np.float64)


def _surveyed(X):
    """``X`` with known chunk sizes and no empty chunk, checked to hold finite values (one pass).

    Empty chunks are left out (without copying the others): dask's own reductions
    (``argmin``) fail on them.
    """
    found = X.map_blocks(_survey, chunks=(1, 2), dtype=np.float64,
                         meta=np.empty((0, 0))).compute()
    if not found[:, 1].all():
        raise ValueError("Input X contains NaN or infinity.")
    sizes = tuple(int(n) for n in found[:, 0])
    if sum(sizes) == 0:
        raise ValueError(f"Found array with 0 sample(s) (shape={(0, X.shape[1])}) while a "
                         "minimum of 1 is required.")
    if any(np.isnan(c) for c in X.chunks[0]):
        X = da.Array(X.dask, X.name, chunks=(sizes, X.chunks[1]), meta=X._meta)
    if 0 in sizes:
        X = da.concatenate([X.blocks[i] for i, size in enumerate(sizes) if size])
    return X


def _blocks_weights(sample_weight, X):
    """Validated float64 weights chunked like the rows of ``X`` (a dask array), or None."""
    if sample_weight is None:
        return None
    if hasattr(sample_weight, "to_dask_array"):  # a dask Series
        sample_weight = sample_weight.to_dask_array(lengths=True)
    if not isinstance(sample_weight, da.Array):
        sample_weight = np.asarray(sample_weight, dtype=np.float64)
    elif any(np.isnan(c) for c in sample_weight.chunks[0]):
        sample_weight = sample_weight.compute_chunk_sizes()
    if sample_weight.ndim != 1 or sample_weight.shape[0] != X.shape[0]:
        raise ValueError(f"sample_weight.shape == {sample_weight.shape}, expected "
                         f"{(X.shape[0],)}!")
    weights = da.asarray(sample_weight).astype(np.float64).rechunk((X.chunks[0],))
    smallest, finite = dask.compute(weights.min(), da.isfinite(weights).all())
    if not finite:
        raise ValueError("Input sample_weight contains NaN or infinity.")
    if smallest < 0:
        raise ValueError("Negative values in data passed to sample_weight")
    return weights
