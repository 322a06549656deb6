"""Input preparation shared by the estimators and the diagnostics."""

__all__ = ["canonical_csr"]


def canonical_csr(X):
    """``X`` itself, or a canonical copy of a CSR matrix that is not in canonical format.

    scipy lets a CSR matrix store several entries for one position (the value
    is their sum) and column indices out of order. The engines read the
    stored entries directly (a squared row norm is the sum of the squared
    entries), so they need one entry per position. The caller's matrix is not
    modified.

    Parameters
    ----------
    X : ndarray or CSR matrix (scipy or CuPy)

    Returns
    -------
    ndarray or CSR matrix
        ``X``, or a copy with duplicate entries summed and indices sorted.

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
    if getattr(X, "has_canonical_format", True) is False:  # scipy's and CuPy's CSR
        X = X.copy()
        X.sum_duplicates()
    return X
