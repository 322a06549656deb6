"""Input preparation shared by the estimators and the diagnostics."""

from numbers import Integral

import numpy as np
from sklearn.utils._param_validation import Interval

__all__ = ["N_THREADS_CONSTRAINT", "canonical_csr"]

#: scikit-learn parameter constraint of ``n_threads``, in the estimators and the diagnostics.
N_THREADS_CONSTRAINT = [Interval(Integral, 1, None, closed="left"), None]

_INT32_MAX = np.iinfo(np.int32).max


def canonical_csr(X):
    """``X`` itself, or a copy of a CSR matrix in the form the engines read.

    scipy lets a CSR matrix store several entries for one position (the value
    is their sum), column indices out of order, and 64-bit indices for any
    size. The engines read the stored entries directly (a squared row norm is
    the sum of the squared entries) with 32-bit indices, so a matrix that is
    not in canonical format gets its duplicates summed and its indices
    sorted, and 64-bit indices become 32-bit ones where they fit. The
    caller's matrix is not modified.

    Parameters
    ----------
    X : ndarray or CSR matrix (scipy or CuPy)

    Returns
    -------
    ndarray or CSR matrix

    Raises
    ------
    ValueError
        For a matrix with more stored entries or columns than 32-bit indices reach.

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from softkmeans._validation import canonical_csr
    >>> X = sp.csr_matrix((np.array([1.0, 2.0]), np.array([0, 0]), np.array([0, 2])),
    ...                   shape=(1, 2))
    >>> X.nnz, canonical_csr(X).nnz, canonical_csr(X).toarray()
    (2, 1, array([[3., 0.]]))
    """
    if not hasattr(X, "indptr"):
        return X
    duplicates = getattr(X, "has_canonical_format", True) is False  # scipy's and CuPy's CSR
    wide = X.indices.dtype != np.int32 or X.indptr.dtype != np.int32
    if not (duplicates or wide):
        return X
    if wide and (X.nnz > _INT32_MAX or X.shape[1] > _INT32_MAX):
        raise ValueError(
            f"X has {X.nnz} stored entries and {X.shape[1]} columns; the sparse kernels "
            f"index them with 32-bit integers (at most {_INT32_MAX})."
        )
    X = X.copy()
    if duplicates:
        X.sum_duplicates()
    if wide:
        X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    return X
