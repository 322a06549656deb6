"""The CuPy engine: the device engine on an NVIDIA GPU.

:class:`CupyEngine` is :class:`~softkmeans._engines._array.ArrayEngine`
with CuPy as its namespace: the data are moved to the GPU once, the distance
cross-term goes through cuBLAS (``X_b @ C.T``), CSR data stay sparse
(``cupyx.scipy.sparse``), and :class:`CupyKernels` replaces the passes over
each block that matter most by fused kernels, optional accelerations of the
generic path (:class:`~softkmeans._engines._array_kernels.ArrayKernels`) that
they are tested against:

- ``finish_distances``: ``max(||x||^2 - 2 x.mu + ||mu||^2, 0)`` in place;
- ``nearest_two``: one reduction that returns the nearest centroid, its
  distance and the margin (the two smallest values of each row);
- ``softmax_others`` and ``softmax_resp``: the off-label sum ``S_i`` as one
  reduction, then the normalized weights in place.

Importing this module needs CuPy (``pip install softkmeans[gpu]``); the engine
registry imports it only when ``backend="cupy"`` is asked for.
"""

import cupy
import cupyx.scipy.sparse as cusparse
import numpy as np
import scipy.sparse as sp
from sklearn.externals.array_api_compat import array_namespace

from .._validation import check_sparse_structure
from ._array import ArrayEngine
from ._array_kernels import CANDIDATE_CAP, ArrayKernels

__all__ = ["CupyEngine", "CupyKernels", "check_cupy_array", "gpu_available"]

_INF = "__int_as_float(0x7f800000)"

_finish_distances = cupy.ElementwiseKernel(
    "T xs, T cs", "T d", "d = max(xs - 2 * d + cs, (T)0)", "softkmeans_finish_distances")

# The two smallest values of a row and the index of the smallest (first one on ties).
_TOP2_PREAMBLE = f"""
struct softkmeans_top2 {{
    T v1; T v2; long long i1;
    __device__ softkmeans_top2() : v1({_INF}), v2({_INF}), i1(0x7fffffffffffffffLL) {{}}
    __device__ softkmeans_top2(T v, long long i) : v1(v), v2({_INF}), i1(i) {{}}
}};
__device__ softkmeans_top2 softkmeans_merge(const softkmeans_top2& a,
                                            const softkmeans_top2& b) {{
    softkmeans_top2 r;
    if (a.v1 < b.v1 || (a.v1 == b.v1 && a.i1 <= b.i1)) {{
        r.v1 = a.v1; r.i1 = a.i1; r.v2 = min(a.v2, b.v1);
    }} else {{
        r.v1 = b.v1; r.i1 = b.i1; r.v2 = min(b.v2, a.v1);
    }}
    return r;
}}
"""

_nearest_two = cupy.ReductionKernel(
    "T d", "int64 lab, T dmin, T marg",
    "softkmeans_top2(d, _J)", "softkmeans_merge(a, b)",
    "lab = a.i1, dmin = a.v1, marg = a.v2 - a.v1",
    "softkmeans_top2()", "softkmeans_nearest_two",
    reduce_type="softkmeans_top2", preamble=_TOP2_PREAMBLE)

_softmax_others = cupy.ReductionKernel(
    "T d, T m, int64 lab, T tau", "T s",
    "_J == lab ? (T)0 : exp((m - d) / tau)", "a + b", "s = a", "0",
    "softkmeans_softmax_others")

_softmax_resp = cupy.ElementwiseKernel(
    "T m, T s, T tau", "T d", "d = exp((m - d) / tau) / (1 + s)", "softkmeans_softmax_resp")


def gpu_available():
    """Whether CuPy sees at least one CUDA device.

    Examples
    --------
    >>> from softkmeans._engines._cupy import gpu_available  # doctest: +SKIP
    >>> gpu_available()  # doctest: +SKIP
    True
    """
    try:
        return cupy.cuda.runtime.getDeviceCount() > 0
    except cupy.cuda.runtime.CUDARuntimeError:
        return False


class CupyKernels(ArrayKernels):
    """Block kernels with fused CUDA kernels where a pass over the block is saved.

    Same results as :class:`ArrayKernels` (to rounding), tested against it.

    Examples
    --------
    >>> import cupy  # doctest: +SKIP
    >>> from softkmeans._engines._cupy import CupyKernels  # doctest: +SKIP
    >>> D = cupy.asarray([[1.0, 0.0, 9.0]])  # doctest: +SKIP
    >>> labels, dmin, margins = CupyKernels().nearest_two(D)  # doctest: +SKIP
    >>> int(labels[0]), float(dmin[0]), float(margins[0])  # doctest: +SKIP
    (1, 0.0, 1.0)
    """

    def __init__(self, candidate_cap=CANDIDATE_CAP):
        super().__init__(array_namespace(cupy.empty(0)), candidate_cap)

    def finish_distances(self, cross, x_sq, c_sq):
        return _finish_distances(x_sq[:, None], c_sq[None, :], cross)

    def nearest_two(self, D):
        n_rows, k = D.shape
        labels = cupy.empty(n_rows, dtype=np.int64)
        dmin = cupy.empty(n_rows, dtype=D.dtype)
        margins = cupy.empty(n_rows, dtype=D.dtype)
        _nearest_two(D, labels, dmin, margins, axis=1)
        if k == 1:
            margins.fill(0)
        return labels, dmin, margins

    def softmax_others(self, D, labels, dmin, tau):
        return _softmax_others(D, dmin[:, None], labels[:, None], D.dtype.type(tau), axis=1)

    def softmax_resp(self, D, dmin, others, tau):
        return _softmax_resp(dmin[:, None], others[:, None], D.dtype.type(tau), D)


class CupyEngine(ArrayEngine):
    """Chunked passes on a GPU with CuPy.

    With a CuPy input the data stay where they are; a numpy or SciPy CSR input
    is copied to the GPU once. The statistics of a pass come back to the host
    (they are small, and the optimizers run there); the ``n_samples x
    n_clusters`` results stay on the GPU for a CuPy input.

    Parameters
    ----------
    X : ndarray, CSR matrix, cupy.ndarray or cupyx CSR matrix
        Validated data (float32 or float64).
    sample_weight : ndarray of shape (n_samples,), default=None
        Non-negative weights (host); ones when None.
    block_elements : int, default=DEVICE_BLOCK_ELEMENTS
        Entries of one block of distances on the GPU.

    Examples
    --------
    >>> import numpy as np  # doctest: +SKIP
    >>> from softkmeans._engines._cupy import CupyEngine  # doctest: +SKIP
    >>> from softkmeans._core.responsibilities import RelaxationSpec  # doctest: +SKIP
    >>> X = np.array([[0.0, 0.0], [0.0, 1.0], [4.0, 0.0]])  # doctest: +SKIP
    >>> CupyEngine(X).estep(X[[0, 2]], RelaxationSpec("hard")).labels.tolist()  # doctest: +SKIP
    [0, 0, 1]
    """

    name = "cupy"

    def __init__(self, X, sample_weight=None, **kwargs):
        if not gpu_available():
            raise RuntimeError(
                "backend='cupy' needs a CUDA device, and CuPy sees none; use backend='numpy'."
            )
        super().__init__(X, sample_weight, **kwargs)

    def _namespace(self, X):
        """CuPy's compat namespace, the current device and ``cupyx.scipy.sparse``."""
        return array_namespace(cupy.empty(0)), cupy.cuda.Device(), cusparse

    def _make_kernels(self):
        return CupyKernels()

    def _to_device(self, a):
        if sp.issparse(a):
            return cusparse.csr_matrix(a)
        if cusparse.issparse(a):
            return a
        return cupy.ascontiguousarray(cupy.asarray(a))  # CuPy 14 takes only CuPy arrays


def check_cupy_array(X, estimator=None, reset=True):
    """Validate a CuPy input on the GPU (the counterpart of ``validate_data``).

    Dense ``cupy.ndarray`` and ``cupyx.scipy.sparse`` CSR matrices are accepted;
    float32 and float64 are kept, other dtypes are cast to float64.

    Parameters
    ----------
    X : cupy.ndarray or cupyx CSR matrix
    estimator : BaseSoftKMeans, default=None
        Whose ``n_features_in_`` is set or checked; None for a function.
    reset : bool, default=True
        Set ``n_features_in_`` (in ``fit``) or check it (afterwards).

    Returns
    -------
    X : cupy.ndarray or cupyx CSR matrix
    """
    if cusparse.issparse(X):
        X = check_sparse_structure(X).tocsr()  # before a kernel reads out of bounds
        values = X.data
    else:
        X = cupy.asarray(X)
        if X.ndim != 2:
            raise ValueError(
                f"Expected a 2D array, got an array of shape {X.shape}; reshape it with "
                "X.reshape(-1, 1) for a single feature or X.reshape(1, -1) for a single sample."
            )
        values = X
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
        values = X.data if cusparse.issparse(X) else X
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"Found an array with shape {X.shape}; at least one sample and one "
                         "feature are required.")
    if not bool(cupy.isfinite(values).all()):
        raise ValueError("Input X contains NaN or infinity.")
    if estimator is not None and reset:
        estimator.n_features_in_ = X.shape[1]
    elif estimator is not None and X.shape[1] != estimator.n_features_in_:
        raise ValueError(
            f"X has {X.shape[1]} features, but {type(estimator).__name__} is expecting "
            f"{estimator.n_features_in_} features as input."
        )
    return X if cusparse.issparse(X) else cupy.ascontiguousarray(X)
