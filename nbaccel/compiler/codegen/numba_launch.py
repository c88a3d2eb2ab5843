"""Running a generated numba kernel on several threads without numba's ``parallel=True``.

A ``prange`` loop makes numba outline the loop body into a gufunc and compile it a second time
(its parfor passes and a second LLVM module): 0.3-0.4 s more per kernel, half of a cold
compile. The kernels are instead compiled serially (``nogil=True``) with two extra arguments,
``part`` and ``parts``, and run their share ``[part * n // parts, (part + 1) * n // parts)`` of
the outermost loop; :func:`launch` runs the shares on a small thread pool, the calling thread
taking the first. That is numba's own static schedule, so large kernels keep their speed, and
one compiled kernel serves both serial and threaded shapes.
"""
from __future__ import annotations

import concurrent.futures
import os
import threading

_POOL = None
_POOL_LOCK = threading.Lock()


def threads() -> int:
    """numba's thread count (``NUMBA_NUM_THREADS``, default the CPU count): the bench pins it."""
    try:
        import numba
        n = int(numba.config.NUMBA_NUM_THREADS)
    except Exception:       # pragma: no cover - numba missing or odd config
        n = os.cpu_count() or 1
    return max(1, n)


def _pool(n):
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = concurrent.futures.ThreadPoolExecutor(max(1, n - 1), thread_name_prefix="nbaccel-numba-run")
        return _POOL


def signature_tail():
    """The numba types of the two trailing arguments (``part``, ``parts``)."""
    import numba
    return (numba.int64, numba.int64)


def launch(fn, arrays, P, parallel: bool):
    """Run kernel ``fn`` over all of its outer loop: one call, or one share per thread."""
    n = threads() if parallel else 1
    if n < 2:
        fn(*arrays, P, 0, 1)
        return
    pool = _pool(n)
    futs = [pool.submit(fn, *arrays, P, i, n) for i in range(1, n)]
    try:
        fn(*arrays, P, 0, n)
    finally:
        for f in futs:
            f.result()
