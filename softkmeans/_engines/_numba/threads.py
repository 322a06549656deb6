"""Threads of the numba engine's passes.

A pass splits the rows of X into a fixed number of *slots* (runs of
consecutive chunks, :func:`slot_layout`), which depends on the data and the
number of centroids only. Each slot adds its rows into its own accumulators,
in row order, and the caller sums the slots in slot order: the results are
the same bits whatever the number of threads. Threads take contiguous groups
of slots (:func:`run_in_threads`); the kernels release the GIL.
"""

import threading

import numba

__all__ = ["MAX_SLOTS", "SLOT_FLOATS", "effective_n_threads", "run_in_threads", "slot_layout"]

#: Most slots of a pass: the most threads a pass can use.
MAX_SLOTS = 64
#: Float64 values that the accumulators of a pass's slots may hold together (32 MiB); a pass
#: with large ``n_clusters x n_features`` gets fewer slots (8 at least).
SLOT_FLOATS = 1 << 22


def effective_n_threads(n_threads=None):
    """Number of threads a pass may use.

    Parameters
    ----------
    n_threads : int, default=None
        Requested count; None follows the OpenMP limit in effect
        (``OMP_NUM_THREADS`` or a ``threadpoolctl`` limit, as scikit-learn
        reads it).

    Returns
    -------
    int
        Between 1 and ``numba.config.NUMBA_NUM_THREADS``.
    """
    if n_threads is None:
        from sklearn.utils._openmp_helpers import _openmp_effective_n_threads

        n_threads = _openmp_effective_n_threads()
    return int(max(1, min(n_threads, numba.config.NUMBA_NUM_THREADS)))


#: A slot is worth its accumulators (zeroed, then summed, at every pass) where the pass's
#: work is at least this many times theirs: wide sparse data get fewer slots.
WORK_PER_SLOT_FLOAT = 4


def slot_layout(n_chunks, slot_floats, work):
    """``(n_slots, chunks_per_slot)`` of a pass over ``n_chunks`` chunks.

    At most :data:`MAX_SLOTS`, at most as many as :data:`SLOT_FLOATS` allows
    (8 at least), and at most one per :data:`WORK_PER_SLOT_FLOAT` times
    ``slot_floats`` of work (1 at least).

    Parameters
    ----------
    n_chunks : int
    slot_floats : int
        Float64 values of one slot's accumulators.
    work : int
        Multiply-adds of the pass.

    Returns
    -------
    n_slots, chunks_per_slot : int
        Slot ``s`` covers chunks ``[s * chunks_per_slot, (s + 1) * chunks_per_slot)``;
        independent of the number of threads.
    """
    most = min(MAX_SLOTS, max(8, SLOT_FLOATS // max(1, slot_floats)),
               max(1, work // (WORK_PER_SLOT_FLOAT * max(1, slot_floats))))
    per_slot = max(1, -(-n_chunks // most))
    return max(1, -(-n_chunks // per_slot)), per_slot


def run_in_threads(kernel, n_parts, n_threads, *args):
    """``kernel(*args, start, stop)`` over ``n_threads`` contiguous groups of ``range(n_parts)``.

    The calling thread runs the first group, a new thread each other one
    (no pool outlives the call: a forked child or an interrupted pass leaves
    nothing behind). A KeyboardInterrupt abandons the pass once the calling
    thread's kernel has returned; the other threads finish their groups into
    the abandoned outputs. An exception of a group reaches the caller.
    """
    n_threads = max(1, min(n_threads, n_parts))
    if n_threads == 1:
        kernel(*args, 0, n_parts)
        return
    bounds = [t * n_parts // n_threads for t in range(n_threads + 1)]
    errors = []

    def share(start, stop):
        try:
            kernel(*args, start, stop)
        except BaseException as exc:  # noqa: BLE001 - raised again by the caller
            errors.append(exc)

    others = [threading.Thread(target=share, args=bounds[t:t + 2], daemon=True,
                               name="softkmeans-pass") for t in range(1, n_threads)]
    for thread in others:
        thread.start()
    kernel(*args, bounds[0], bounds[1])
    for thread in others:
        thread.join()
    if errors:
        raise errors[0]
