"""Compiled pass of the mass-constrained annealing (:mod:`softkmeans._core.mass_constrained`).

Its responsibilities carry a prior per codevector, which the engines' passes
do not take. A row's weight for a codevector whose logit lies more than
:data:`NEGLIGIBLE_LOGIT` below the row's largest is below float64's
resolution of the row's normalizer, and is neither exponentiated nor
accumulated: at low temperatures most are, and their exps were the pass's
main cost.
"""

import numpy as np
from numba import njit

from .._jit import JIT_OPTIONS, read_only

__all__ = ["NEGLIGIBLE_LOGIT", "add_prior_weighted", "compile_prior_pass"]

#: ``exp(-40)`` is 4e-18, below half a unit roundoff of float64 (1.1e-16) relative to the
#: row's largest weight, ``exp(0) = 1``.
NEGLIGIBLE_LOGIT = 40.0


@njit(**JIT_OPTIONS)
def _add_prior_weighted(rows, weights, logits, row_offsets, sums, masses):
    """Add a block's prior-weighted softmax statistics; return its ``sum_i w_i log Z_i``.

    Parameters
    ----------
    rows : ndarray of shape (n_rows, n_features), float64
    weights : ndarray of shape (n_rows,), float64
    logits : ndarray of shape (n_rows, n_clusters), float64
        ``log p_j - ||x_i - mu_j||^2 / (2 sigma^2)`` less a term constant in
        each row, ``row_offsets[i]``; overwritten.
    row_offsets : ndarray of shape (n_rows,), float64
        What each row's logits lack: ``log Z_i`` is the log-sum-exp of the
        row's logits plus it.
    sums, masses : ndarrays of shape (n_clusters, n_features) and (n_clusters,), float64
        ``sum_i w_i r_ij x_i`` and ``sum_i w_i r_ij``; updated in place.

    Returns
    -------
    float
    """
    n, k = logits.shape
    total = 0.0
    for i in range(n):
        top = -np.inf
        for j in range(k):
            top = max(top, logits[i, j])
        norm = 0.0
        for j in range(k):
            shifted = logits[i, j] - top
            value = np.exp(shifted) if shifted > -NEGLIGIBLE_LOGIT else 0.0
            logits[i, j] = value
            norm += value
        w = weights[i]
        for j in range(k):
            if logits[i, j] > 0.0:
                share = w * logits[i, j] / norm
                masses[j] += share
                for t in range(rows.shape[1]):
                    sums[j, t] += share * rows[i, t]
        total += w * (top + np.log(norm) + row_offsets[i])
    return total


def add_prior_weighted(rows, weights, logits, row_offsets, sums, masses):
    """The compiled :func:`_add_prior_weighted` on read-only C-ordered float64 inputs.

    One compiled type for every caller: numba compiles a kernel once more for
    each new combination of layouts and write flags.
    """
    rows, weights, row_offsets = (read_only(np.ascontiguousarray(a, dtype=np.float64))
                                  for a in (rows, weights, row_offsets))
    return _add_prior_weighted(rows, weights, np.ascontiguousarray(logits), row_offsets,
                               sums, masses)


def compile_prior_pass():
    """Compile, or load from numba's cache, the prior-weighted pass."""
    rows = np.random.default_rng(0).normal(size=(8, 3))
    add_prior_weighted(rows, np.ones(8), -(rows @ rows.T)[:, :2], np.zeros(8),
                       np.zeros((2, 3)), np.zeros(2))
