"""How a dense pass splits its work: rows per chunk, centroids per product, transposes.

``blocked_products`` is for BLAS libraries with small-matrix kernels
(OpenBLAS on SkylakeX and its successors, see
:func:`blocked_products`): products of at most :data:`SMALL_PRODUCT`
multiply-adds whose operands are contiguous in the right order run there
without packing, so that the transpose and the blocked products cost less
than one GEMM on ``X_chunk^T``. Without such kernels the blocks only cost
more calls. With fewer features than a tile the transpose is element by
element and costs more than it saves, so the products are not blocked. The
performance page of the documentation has the measurements.
"""

import functools

import numpy as np

from .._blas import blas_controller
from .transpose import TILE_BYTES

__all__ = ["SMALL_KERNEL_CORES", "SMALL_PRODUCT", "blocked_products", "chunk_rows",
           "pass_layout", "product_block"]

#: OpenBLAS core types (``threadpoolctl``'s ``architecture``) with small-matrix GEMM kernels.
SMALL_KERNEL_CORES = frozenset({"skylakex", "cooperlake", "sapphirerapids"})


@functools.lru_cache(maxsize=1)
def blocked_products():
    """Whether dense passes compute their products by blocks of centroids.

    True when every BLAS library loaded is an OpenBLAS running kernels of
    :data:`SMALL_KERNEL_CORES` (as ``threadpoolctl`` reports it; the
    ``OPENBLAS_CORETYPE`` variable changes it). Their small-matrix kernels
    multiply blocks of a few dozen centroids without packing, faster than
    one call for all centroids; other kernels (OpenBLAS's Haswell and Zen
    ones) are slower by blocks. See :mod:`.kernels`.

    Returns
    -------
    bool
    """
    libraries = [info for info in blas_controller().info() if info["user_api"] == "blas"]
    return bool(libraries) and all(
        info["internal_api"] == "openblas"
        and str(info.get("architecture", "")).lower() in SMALL_KERNEL_CORES
        for info in libraries
    )


#: Most multiply-adds of one blocked product (see :func:`product_block`).
SMALL_PRODUCT = 1 << 19


def chunk_rows(n_clusters):
    """Rows per chunk: 256, fewer for many centroids (32 at least), a multiple of 16.

    The column loops over a chunk's rows vectorize 16 float32 lanes wide; a
    row count that is not a multiple of 16 leaves a scalar tail for every
    centroid.
    """
    return max(32, min(256, (1 << 18) // max(n_clusters, 1)) // 16 * 16)


def product_block(rows, n_features):
    """Centroids per call of a blocked product (16 at least, a multiple of 16).

    ``C[j0:j1] @ X_chunk^T`` and ``E[j0:j1] @ (s * X_chunk)`` are called on
    blocks of centroids small enough (32 centroids of 64 features for 256
    rows) for OpenBLAS to take its unpacked small-matrix kernels, which are
    faster than one call for all centroids and than larger blocks.
    """
    return max(16, SMALL_PRODUCT // (n_features * rows) // 16 * 16)


def pass_layout(n_clusters, n_features, dtype, blocked_products):
    """How a dense pass splits its work: ``(chunk, step, transposes)``.

    ``chunk`` rows per chunk (:func:`chunk_rows`); products by blocks of
    ``step`` centroids (:func:`product_block` with ``blocked_products``,
    otherwise all ``n_clusters`` in one call); the cross term on the
    transposed chunk (``transposes``) with ``blocked_products`` and at least
    a tile of features (16 float32, 8 float64). No block holds a single
    centroid after larger ones: OpenBLAS computes a one-row product with
    other roundings, so a duplicate of an earlier centroid would no longer
    tie with it exactly.
    """
    chunk = chunk_rows(n_clusters)
    if not blocked_products:
        return chunk, n_clusters, False
    step = product_block(chunk, n_features)
    while n_clusters > step and n_clusters % step == 1:
        step += 16  # a last block of one centroid: BLAS rounds a one-row product its own way
    return chunk, step, n_features >= TILE_BYTES // np.dtype(dtype).itemsize
