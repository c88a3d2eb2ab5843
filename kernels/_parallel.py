"""Dynamic scheduling for the kernels' numba ``prange`` loops.

numba splits a ``prange`` loop into one static share per thread by default, so a kernel ends
when its slowest thread does: a worker slow to wake from sleep, or whose core another pool's
spinning thread holds, stalled the whole kernel (the same kernel took 11 ms or 85 ms). Handed
out in small chunks instead, the loop's other threads take a late thread's rows.
"""
from __future__ import annotations

import contextlib

# chunks per thread: enough that a late thread's share is small, few enough that handing them
# out costs nothing next to a layer's work
CHUNKS_PER_THREAD = 16


@contextlib.contextmanager
def dynamic_chunks(iterations: int):
    """Within the block, ``prange`` loops launched from this thread run in chunks of about
    ``iterations / (threads * CHUNKS_PER_THREAD)`` iterations (numba's thread-local
    ``set_parallel_chunksize``, restored afterwards)."""
    import numba
    chunk = max(1, iterations // (numba.get_num_threads() * CHUNKS_PER_THREAD))
    old = numba.set_parallel_chunksize(chunk)
    try:
        yield chunk
    finally:
        numba.set_parallel_chunksize(old)
