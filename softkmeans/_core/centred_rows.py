"""Rows of a CSR matrix minus a dense point, kept sparse.

The annealing's growth and the merge-and-split search centre rows on a point
(the sample's mean, a cluster's mean) and then only multiply them: by a few
vectors, or transposed by a few columns of weights. :class:`CentredRows`
gives those products from the sparse rows, without the ``n x d`` dense
centred copy.
"""

import numpy as np

__all__ = ["CentredRows", "transposed_times"]


class CentredRows:
    """CSR rows minus a dense point, kept sparse.

    ``centred @ matrix`` (a matrix or a vector), :meth:`transposed_times` and
    :attr:`sq_norms` equal those of the dense centred rows, without their
    ``n x d`` entries.
    """

    def __init__(self, rows, point):
        self._rows, self._point = rows, point
        self._transposed = None  # the rows' CSC-as-CSR transpose, made on first use

    @property
    def sq_norms(self):
        """``||x_i - point||^2`` of every row (expanded from the stored entries)."""
        squares = np.asarray(self._rows.multiply(self._rows).sum(axis=1)).ravel()
        point = self._point
        return np.maximum(squares - 2.0 * (self._rows @ point) + point @ point, 0.0)

    def __matmul__(self, matrix):
        return np.asarray(self._rows @ matrix) - self._point @ matrix

    def transposed_times(self, weights):
        """``weights^T (rows - point)``, shape ``(weights.shape[1], n_features)``."""
        if self._transposed is None:
            self._transposed = self._rows.T.tocsr()
        return (np.asarray(self._transposed @ weights).T
                - np.outer(weights.sum(axis=0), self._point))


def transposed_times(block, weights):
    """``weights^T block`` for a dense block or :class:`CentredRows`."""
    if isinstance(block, CentredRows):
        return block.transposed_times(weights)
    return weights.T @ block
