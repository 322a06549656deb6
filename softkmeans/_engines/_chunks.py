"""How the engines split the rows of X into blocks."""

__all__ = ["BLOCK_ELEMENTS", "row_blocks"]

#: Target number of entries of one (rows x n_clusters) block of distances.
BLOCK_ELEMENTS = 1 << 17


def row_blocks(n_samples, n_clusters, block_elements=BLOCK_ELEMENTS):
    """Yield ``slice`` objects covering ``range(n_samples)`` in blocks.

    Each block holds about ``block_elements / n_clusters`` rows (at least 8), so
    that one block of distances stays small whatever ``n_samples`` is.
    """
    rows = max(8, block_elements // max(1, n_clusters))
    for start in range(0, n_samples, rows):
        yield slice(start, min(start + rows, n_samples))
