"""The rows of X in bounded float64 blocks: how ``_core``'s loops over the data walk it.

The algorithms read X (dense or CSR, float32 or float64) through float64
copies of a block of rows at a time, so that no float64 copy of the whole of
X exists; :data:`BLOCK_ELEMENTS` bounds the entries a block's computation
holds (its rows times their width: features, or centroids for distances).
The engines split their passes themselves (:mod:`softkmeans._engines`).
"""

import numpy as np
import scipy.sparse as sp

__all__ = ["BLOCK_ELEMENTS", "dense_rows", "float64_blocks", "row_slices"]

#: Entries (rows x width) of one float64 block: 8 MiB.
BLOCK_ELEMENTS = 1 << 20


def row_slices(n_rows, width, min_rows=1):
    """``slice`` objects covering ``range(n_rows)``, of ``BLOCK_ELEMENTS // width`` rows each
    (at least ``min_rows``)."""
    step = max(min_rows, BLOCK_ELEMENTS // max(1, width))
    for start in range(0, n_rows, step):
        yield slice(start, min(start + step, n_rows))


def dense_rows(X, rows):
    """The rows ``rows`` (indices or a slice) of X as a dense float64 array."""
    block = X[rows]
    block = block.toarray() if sp.issparse(block) else block
    return np.ascontiguousarray(block, dtype=np.float64)


def float64_blocks(X, rows=None, width=None):
    """Blocks of the rows of X as dense float64 arrays, with their rows.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n_samples, n_features)
    rows : ndarray of int, default=None
        The rows to walk (each block's as an index array); all rows in order
        (each block's as a slice) when None.
    width : int, default=None
        Entries per row that a block's computation holds (``n_features`` when None).

    Yields
    ------
    index : slice or ndarray
    block : ndarray of shape (len(index), n_features), float64
    """
    count = X.shape[0] if rows is None else len(rows)
    for part in row_slices(count, X.shape[1] if width is None else width):
        index = part if rows is None else rows[part]
        yield index, dense_rows(X, index)
