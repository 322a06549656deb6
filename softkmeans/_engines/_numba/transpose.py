"""Transposing a chunk of rows of X with vector shuffles (numba only).

OpenBLAS's small-matrix kernels (SkylakeX and its successors) compute
``C_block @ X_chunk^T`` without packing its operands only when ``X_chunk^T``
is stored as a C-contiguous ``(n_features, rows)`` array. numba's element-wise
loops transpose a chunk at about the cost of the packing that the transpose
saves; :func:`transpose_rows` moves whole square tiles of 64 bytes per row
through registers instead (16 x 16 float32, 8 x 8 float64): one vector load
per row of the tile, ``log2(tile)`` rounds of two-input shuffles, one vector
store per column.
"""

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from ..._jit import INNER_JIT_OPTIONS

__all__ = ["TILE_BYTES", "transpose_rows"]

#: Bytes of one row of a tile: a 512-bit vector.
TILE_BYTES = 64


def _swap_masks(lanes):
    """Shuffle masks of the rounds of a ``lanes`` x ``lanes`` transpose.

    Round ``s`` (``lanes / 2``, ..., 2, 1) pairs rows ``i`` and ``i + s``
    (bit ``s`` of ``i`` clear) and swaps their off-diagonal ``s``-lane
    blocks; index ``lanes + p`` picks lane ``p`` of the second row. After all
    rounds row ``i`` holds column ``i``.
    """
    rounds = []
    s = lanes // 2
    while s >= 1:
        low = [p if p & s == 0 else lanes + p - s for p in range(lanes)]
        high = [p + s if p & s == 0 else lanes + p for p in range(lanes)]
        rounds.append((s, low, high))
        s //= 2
    return rounds


def _tile_pointers(context, builder, array_type, array, row, col, lanes):
    """Pointers to the ``lanes`` rows of a tile of a C-contiguous 2-d array."""
    ary = context.make_array(array_type)(context, builder, array)
    intp = context.get_value_type(types.intp)  # the type of strides and of row, col
    stride = cgutils.unpack_tuple(builder, ary.strides)[0]
    itemsize = ir.Constant(intp, array_type.dtype.bitwidth // 8)
    start = builder.add(builder.ptrtoint(ary.data, intp),
                        builder.add(builder.mul(row, stride), builder.mul(col, itemsize)))
    vector = ir.VectorType(context.get_data_type(array_type.dtype), lanes)
    return [builder.inttoptr(builder.add(start, builder.mul(ir.Constant(intp, a), stride)),
                             vector.as_pointer()) for a in range(lanes)]


@intrinsic
def _transpose_tile(typingctx, src, src_row, src_col, dst, dst_row, dst_col):
    """``dst[dst_row + b, dst_col + a] = src[src_row + a, src_col + b]`` over one tile.

    Both arrays are C-contiguous, 2-d, of one float dtype; the tile is
    ``lanes`` x ``lanes`` with ``lanes = 64 bytes / itemsize``. No bounds
    are checked: the caller keeps the tile inside both arrays.
    """
    arrays = (src, dst)
    if not all(isinstance(a, types.Array) and a.ndim == 2 and a.layout == "C" for a in arrays):
        return None
    if src.dtype not in (types.float32, types.float64) or dst.dtype != src.dtype:
        return None
    lanes = TILE_BYTES * 8 // src.dtype.bitwidth
    align = src.dtype.bitwidth // 8

    def codegen(context, builder, signature, args):  # the indices arrive as intp
        loads = _tile_pointers(context, builder, signature.args[0], args[0], args[1], args[2],
                               lanes)
        rows = [builder.load(p, align=align) for p in loads]
        mask_type = ir.VectorType(ir.IntType(32), lanes)
        for s, low, high in _swap_masks(lanes):
            swapped = list(rows)
            for i in range(lanes):
                if i & s == 0:
                    a, b = rows[i], rows[i + s]
                    swapped[i] = builder.shuffle_vector(a, b, ir.Constant(mask_type, low))
                    swapped[i + s] = builder.shuffle_vector(a, b, ir.Constant(mask_type, high))
            rows = swapped
        stores = _tile_pointers(context, builder, signature.args[3], args[3], args[4], args[5],
                                lanes)
        for vector, p in zip(rows, stores, strict=True):
            builder.store(vector, p, align=align)
        return context.get_dummy_value()

    return types.none(src, types.intp, types.intp, dst, types.intp, types.intp), codegen


@njit(**INNER_JIT_OPTIONS)
def transpose_rows(X, start, out):
    """``out[f, r] = X[start + r, f]`` for the ``out.shape[1]`` rows from ``start``.

    ``X`` and ``out`` (shape ``(n_features, rows)``) are C-contiguous and of
    one dtype. Whole tiles go through :func:`_transpose_tile`, the edges
    (rows or features short of a tile) element by element.
    """
    n_features, rows = out.shape
    lanes = TILE_BYTES // X.itemsize
    rows_tiled = rows // lanes * lanes
    features_tiled = n_features // lanes * lanes
    for r0 in range(0, rows_tiled, lanes):
        for f0 in range(0, features_tiled, lanes):
            _transpose_tile(X, start + r0, f0, out, f0, r0)
    for f in range(features_tiled, n_features):
        for r in range(rows_tiled):
            out[f, r] = X[start + r, f]
    for f in range(n_features):
        for r in range(rows_tiled, rows):
            out[f, r] = X[start + r, f]
