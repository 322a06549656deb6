"""The numpy engine: the readable reference every other engine is tested against.

It walks over X in row blocks, computes the block's squared distances through
the expansion ``||x||^2 - 2 x.mu + ||mu||^2`` (dense or CSR; dense data far
from the origin are shifted first, :func:`._conditioning.centering_shift`), turns them into
responsibilities with :mod:`softkmeans._core.responsibilities` and accumulates
the sufficient statistics. Nothing of size ``n_samples x n_clusters`` is
allocated unless a caller asks for it (``responsibilities``, ``sq_distances``).
"""

import numpy as np
import scipy.sparse as sp

from .._core.bounds import UNIT_ROUNDOFF
from .._core.responsibilities import block_responsibilities, log_sum_exp_block
from ._block import BlockEngine
from ._chunks import row_blocks
from ._conditioning import centering_shift
from ._stats import PassStats

__all__ = ["NumpyEngine", "first_equal_rows", "twin_columns"]

#: Up to this many centroids, :func:`first_equal_rows` looks rows up in a dictionary.
_FEW_CENTROIDS = 64


def _row_sq_norms(X, shift=None):
    """``||x_i - shift||^2`` of every row, summed in float64 whatever the dtype of X.

    Dense X is converted block by block (:func:`row_blocks`), so that no
    float64 copy of the whole of X exists; ``shift`` (dense X only) is a
    float64 point, none by default.
    """
    if sp.issparse(X):
        squares = np.square(X.data, dtype=np.float64)
        return np.asarray(sp.csr_matrix((squares, X.indices, X.indptr), shape=X.shape)
                          .sum(axis=1)).ravel()
    out = np.empty(X.shape[0])
    for rows in row_blocks(X.shape[0], X.shape[1]):
        block = np.asarray(X[rows], dtype=np.float64)  # a view of float64 X
        if shift is not None:
            block = block - shift
        np.einsum("ij,ij->i", block, block, out=out[rows])
    return out


def first_equal_rows(centers, c_sq):
    """``first[j]``: the first centroid equal to centroid ``j`` (``j`` itself if none is).

    BLAS rounds a product by the position of its rows and columns, so equal
    centroids would get distances an ulp apart; every engine gives them the
    first one's, so that they tie exactly (hard ties go to the first, cold
    softmax splits evenly). Equal centroids have equal squared norms: only
    those are compared (a dictionary of rows for a few centroids, the cheaper
    way there).

    Parameters
    ----------
    centers : ndarray of shape (n_clusters, n_features)
    c_sq : ndarray of shape (n_clusters,)
        Their squared norms.

    Returns
    -------
    ndarray of shape (n_clusters,), intp
    """
    if len(centers) <= _FEW_CENTROIDS:
        seen = {}
        return np.array([seen.setdefault(bytes(row), j)  # + 0.0: -0.0 is 0.0
                         for j, row in enumerate(centers + 0.0)], dtype=np.intp)
    first = np.arange(len(centers))
    order = np.argsort(c_sq, kind="stable")  # equal norms keep the order of the centroids
    new_norm = np.diff(c_sq[order]) != 0
    if new_norm.all():
        return first
    starts = np.flatnonzero(np.r_[True, new_norm, True])
    for start, stop in zip(starts[:-1], starts[1:], strict=True):
        if stop - start > 1:
            group = order[start:stop]
            _, index, inverse = np.unique(centers[group], axis=0, return_index=True,
                                          return_inverse=True)
            first[group] = group[index[inverse.ravel()]]
    return first


def twin_columns(centers, c_sq):
    """``(copies, originals)``: the centroids equal to an earlier one, and that first one.

    See :func:`first_equal_rows`; a block of distances (or cross terms) gets
    ``block[:, copies] = block[:, originals]``. Both are empty when no two
    centroids are equal.
    """
    first = first_equal_rows(centers, c_sq)
    copies = np.flatnonzero(first != np.arange(len(first)))
    return copies, first[copies]


class NumpyEngine(BlockEngine):
    """Chunked passes over one data set with numpy, in float64 whatever the dtype of X.

    The passes that write or reduce a value per row and centroid are
    :class:`._block.BlockEngine`'s over :meth:`_blocks`.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
        Validated data (float32 or float64).
    sample_weight : ndarray of shape (n_samples,), default=None
        Non-negative weights; ones when None.
    """

    name = "numpy"
    _compute_dtype = np.dtype(np.float64)

    def __init__(self, X, sample_weight=None):
        self.X = X
        n = X.shape[0]
        self.sample_weight = (
            np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        )
        self.x_sq = _row_sq_norms(X)
        self._shift = None if sp.issparse(X) else centering_shift(X)
        self._shifted_x_sq = None  # ||x_i - shift||^2, made on the first pass

    def _sq_norms(self, X, shift=None):
        """``||x_i - shift||^2`` of every row in float64 (:func:`_row_sq_norms`)."""
        return _row_sq_norms(X, shift)

    @property
    def distance_shift(self):
        """The point (float64) subtracted from X and the centroids before their distances,
        or None (:func:`._conditioning.centering_shift`)."""
        return self._shift

    def distance_norms(self):
        """``||x_i - shift||^2`` in float64: the squared norms the distances start from
        (``x_sq`` when X is not shifted)."""
        if self._shift is None:
            return self.x_sq
        if self._shifted_x_sq is None:
            self._shifted_x_sq = self._sq_norms(self.X, self._shift)
        return self._shifted_x_sq

    @property
    def unit_roundoff(self):
        """Unit roundoff of the arithmetic of the passes: float64 (``2^-53``), whatever X holds."""
        return UNIT_ROUNDOFF

    @property
    def n_samples(self):
        return self.X.shape[0]

    def row(self, i):
        """Observation ``i`` as a dense float64 vector."""
        x = self.X[i]
        return np.asarray(x.toarray() if sp.issparse(x) else x, dtype=np.float64).ravel()

    def _block_sq_distances(self, rows, centers, c_sq, twins=None):
        """Squared distances of the rows ``rows`` to ``centers`` (shifted like X, as
        :meth:`_blocks` gives them); ``twins`` as :func:`twin_columns` gives them
        (None: no two centroids are equal)."""
        Xb = self.X[rows]
        if sp.issparse(Xb):
            cross = np.asarray(Xb @ centers.T, dtype=np.float64)
        else:
            Xb = np.asarray(Xb, dtype=np.float64)
            if self._shift is not None:
                Xb = Xb - self._shift
            cross = Xb @ centers.T
        if twins is not None and len(twins[0]):
            copies, originals = twins
            cross[:, copies] = cross[:, originals]
        D = self.distance_norms()[rows, None] - 2.0 * cross + c_sq[None, :]
        return np.maximum(D, 0.0, out=D)

    def _shifted_centers(self, centers):
        """``(centers, c_sq)`` as :meth:`_block_sq_distances` takes them: float64, shifted
        like X, and their squared norms."""
        centers = np.asarray(centers, dtype=np.float64)
        if self._shift is not None:
            centers = centers - self._shift
        return centers, np.einsum("ij,ij->i", centers, centers)

    def _blocks(self, centers):
        centers, c_sq = self._shifted_centers(centers)
        twins = twin_columns(centers, c_sq)
        for rows in row_blocks(self.n_samples, centers.shape[0]):
            yield rows, self._block_sq_distances(rows, centers, c_sq, twins)

    def estep(self, centers, spec, with_sums=True):
        """One pass (:meth:`softkmeans._engines._contract.Engine.estep`)."""
        k, d = centers.shape
        n = self.n_samples
        sums = np.zeros((k, d))
        masses = np.zeros(k)
        labels = np.empty(n, dtype=np.int32)
        margins = np.empty(n)
        dmin = np.empty(n)
        objective = inertia = gap = 0.0
        for rows, D in self._blocks(centers):
            block = block_responsibilities(D, spec)
            w = self.sample_weight[rows]
            weighted = block.resp * w[:, None]
            masses += weighted.sum(axis=0)
            if with_sums:
                Xb = self.X[rows]
                if sp.issparse(Xb):
                    sums += np.asarray((Xb.T @ weighted).T)
                else:
                    sums += weighted.T @ np.asarray(Xb, dtype=np.float64)
            objective += float(w @ block.row_objective)
            inertia += float(w @ block.dmin)
            gap += float(w @ block.row_gap)
            labels[rows] = block.labels
            margins[rows] = block.margins
            dmin[rows] = block.dmin
        return PassStats(sums, masses, objective, inertia, gap, labels, margins, dmin)

    def _block_responsibilities(self, D, spec):
        return block_responsibilities(D, spec).resp

    def _block_log_sum_exp(self, D, sigma):
        return log_sum_exp_block(D, sigma)
