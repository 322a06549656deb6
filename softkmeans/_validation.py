"""Input preparation shared by the estimators and the diagnostics."""

from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn import get_config
from sklearn.utils import check_array
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import validate_data

from ._dask import is_dask_collection
from ._engines._conditioning import squared_norm_limit
from ._engines._namespace import is_cupy_array, is_device_array, namespace_and_device

__all__ = ["N_THREADS_CONSTRAINT", "canonical_csr", "check_fitted_namespace",
           "check_init_magnitude", "check_sparse_structure", "validate_X"]

#: scikit-learn parameter constraint of ``n_threads``, in the estimators and the diagnostics.
N_THREADS_CONSTRAINT = [Interval(Integral, 1, None, closed="left"), None]

_INT32_MAX = np.iinfo(np.int32).max


def validate_X(X, estimator=None, reset=True):
    """X as the engines read it: the one validation of the data of a fit, an inference or a
    diagnostic.

    X is validated where it lives: a CuPy array on its GPU, an array of
    another array API namespace in that namespace under
    ``array_api_dispatch=True``, numpy otherwise (which converts such arrays,
    as scikit-learn does without dispatch). Dense X comes back float32 or
    float64 (others become float64), C-ordered on the host; sparse X as a
    checked, canonical CSR matrix (:func:`check_sparse_structure`,
    :func:`canonical_csr`).

    Parameters
    ----------
    X : array-like, sparse matrix, or array of an array API namespace
    estimator : estimator, default=None
        Whose ``n_features_in_`` and feature names are set (``reset``) or
        checked, as scikit-learn's ``validate_data`` does; None for a function.
    reset : bool, default=True
        Set them (``fit``) or check them (afterwards).

    Returns
    -------
    X : ndarray, CSR matrix or array of X's namespace
        Or, for a dask array or DataFrame given with an estimator, a dask array of
        float32 or float64 rows in one chunk of columns, checked lazily (its values
        are checked by the fit's first pass over it).
    """
    if estimator is not None and is_dask_collection(X):
        from ._dask.fitting import validated_blocks

        return validated_blocks(X, estimator, reset)
    if is_cupy_array(X):
        from ._engines._cupy import check_cupy_array

        return canonical_csr(check_cupy_array(X, estimator, reset))
    if get_config()["array_api_dispatch"] and is_device_array(X):
        xp, _ = namespace_and_device(X)
        options = {"dtype": [xp.float64, xp.float32]}
    else:
        check_sparse_structure(X)  # before scipy or a kernel reads its indices
        options = {"accept_sparse": "csr", "dtype": [np.float64, np.float32], "order": "C"}
    X = (check_array(X, input_name="X", **options) if estimator is None
         else validate_data(estimator, X, reset=reset, **options))
    return canonical_csr(X)


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


def check_sparse_structure(X, input_name="X"):
    """``ValueError`` unless the index arrays of a scipy sparse matrix fit its shape.

    scipy builds a CSR, CSC or BSR matrix from ``(data, indices, indptr)``
    without checking that the indices lie within the shape or that
    ``indptr`` never decreases (nor a COO matrix its coordinates), and
    arrays changed in place after construction are never checked. The
    compiled kernels, and scipy's own conversions, would then read and write
    out of bounds. One pass over the index arrays (``O(nnz)``) turns such a
    matrix into an error that names the problem, before anything else reads
    it. CuPy's sparse matrices (``cupyx.scipy.sparse``) are checked alike, on
    the GPU. Other inputs are returned unchecked.

    Parameters
    ----------
    X : object
        Any input; only scipy (and CuPy) sparse matrices and arrays are checked.
    input_name : str, default="X"
        Name of the input in the error message.

    Returns
    -------
    X : object
        ``X`` itself.

    Raises
    ------
    ValueError
        For index arrays that do not describe a matrix of ``X.shape``.

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from softkmeans._validation import check_sparse_structure
    >>> X = sp.csr_matrix((np.ones(2), np.array([0, 5]), np.array([0, 1, 2])), shape=(2, 3))
    >>> check_sparse_structure(X)
    Traceback (most recent call last):
    ...
    ValueError: X is a malformed csr matrix: column index 5 out of range [0, 3).
    """
    if not (sp.issparse(X) or type(X).__module__.startswith("cupyx.")):
        return X
    fmt, (n_rows, n_cols) = X.format, X.shape
    if fmt == "coo":
        coords = getattr(X, "coords", None) or (X.row, X.col)
        for axis, (index, size) in enumerate(zip(coords, X.shape, strict=True)):
            _check_index_range(index, size, "row" if axis == 0 else "column", X, input_name)
        return X
    if fmt not in ("csr", "csc", "bsr"):
        return X  # built by scipy's own methods, which keep them consistent
    block_rows, block_cols = X.blocksize if fmt == "bsr" else (1, 1)
    n_major, n_minor = n_rows // block_rows, n_cols // block_cols
    major, minor = ("row", "column") if fmt != "csc" else ("column", "row")
    if fmt == "csc":
        n_major, n_minor = n_cols, n_rows
    indptr, indices = X.indptr, X.indices  # numpy or CuPy arrays: their methods only

    def fail(problem):
        raise ValueError(f"{input_name} is a malformed {fmt} matrix: {problem}.")

    if indptr.ndim != 1 or indptr.shape[0] != n_major + 1:
        fail(f"indptr has shape {indptr.shape}; {n_major} {major}s need {n_major + 1} entries")
    if indices.ndim != 1 or not np.issubdtype(indices.dtype, np.integer) or not np.issubdtype(
            indptr.dtype, np.integer):
        fail("indices and indptr must be 1-D integer arrays")
    n_stored = indices.shape[0]
    first, last = int(indptr[0]), int(indptr[-1])
    if first != 0:
        fail(f"indptr starts at {first}, not 0")
    if last != n_stored:
        fail(f"indptr ends at {last}, but {n_stored} entries are stored")
    if len(X.data) != n_stored:
        fail(f"data holds {len(X.data)} entries and indices {n_stored}")
    decreases = indptr[1:] < indptr[:-1]
    if n_major and bool(decreases.any()):
        at = int(decreases.argmax())
        fail(f"indptr decreases from {int(indptr[at])} to {int(indptr[at + 1])} at {major} {at}")
    _check_index_range(indices, n_minor, minor, X, input_name)
    return X


def _check_index_range(index, size, axis, X, input_name):
    """``ValueError`` unless every entry of ``index`` lies in ``[0, size)``."""
    if index.size == 0:
        return
    low, high = int(index.min()), int(index.max())
    if low < 0 or high >= size:
        bad = low if low < 0 else high
        raise ValueError(f"{input_name} is a malformed {X.format} matrix: {axis} index {bad} out "
                         f"of range [0, {size}).")


def check_init_magnitude(centers, dtype, source="init"):
    """``ValueError`` if starting centroids are too large for squared distances in ``dtype``.

    The passes take squared distances in the dtype of X, which overflow for
    a centroid whose squared norm exceeds ``max / 16`` of it; ``predict``
    refuses a model with such a centroid (see
    :func:`softkmeans._engines.check_magnitude`). A fit from one would
    keep it, out of reach of every observation, or fail on infinite
    distances, so it is refused at the start, naming its source.

    Parameters
    ----------
    centers : ndarray of shape (n_clusters, n_features)
        Finite starting centroids.
    dtype : dtype
        The dtype of X.
    source : str, default="init"
        Where they come from, for the message.

    Examples
    --------
    >>> import numpy as np
    >>> from softkmeans._validation import check_init_magnitude
    >>> check_init_magnitude(np.array([[1e200, 0.0]]), np.float64)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: init has a centroid of squared norm inf, above 1.12e+307, the largest at ...
    """
    limit = squared_norm_limit(dtype)
    with np.errstate(over="ignore"):
        largest = float(np.einsum("ij,ij->i", centers, centers).max(initial=0.0))
    if not largest <= limit:
        raise ValueError(
            f"{source} has a centroid of squared norm {largest:.3g}, above {limit:.3g}, the "
            f"largest at which squared distances in {np.dtype(dtype).name} do not overflow: "
            "start from centroids within the range of the data."
        )


def check_fitted_namespace(estimator, X, method):
    """``ValueError`` unless X lives where the fitted ``cluster_centers_`` do.

    Under ``array_api_dispatch=True`` an inference method computes in the
    namespace and on the device of its input, and returns its results there;
    a model fitted elsewhere must be moved first (scikit-learn's
    ``move_estimator_to``), as scikit-learn's array API estimators require.
    Without dispatch every input is converted to numpy and nothing is checked.

    Parameters
    ----------
    estimator : fitted estimator
    X : array-like or sparse matrix
        The input of ``method``.
    method : str
        The name of the inference method, for the message.
    """
    if not get_config()["array_api_dispatch"]:
        return
    fitted, given = (_where(a) for a in (estimator.cluster_centers_, X))
    if fitted != given:
        raise ValueError(
            f"Inputs passed to {type(estimator).__name__}.{method}() must use the same "
            f"namespace and the same device as those passed to fit(): the model was fitted "
            f"on {fitted[0]} arrays on device {fitted[1]!r}, X is of {given[0]} on device "
            f"{given[1]!r}. Move X, or move the model with "
            "sklearn.utils._array_api.move_estimator_to."
        )


def _where(a):
    """``(namespace name, device)`` of an array; numpy for anything that is not a device array."""
    if not is_device_array(a):
        return "numpy", "cpu"
    xp, device = namespace_and_device(a)
    return xp.__name__, str(device)
