"""Run a list of independent tasks on our own threads, each with single-threaded BLAS.

For kernels made of many medium BLAS calls (attention's tiles, a convolution's images):
OpenBLAS's own pool splits each call and every thread waits for the slowest at the end of
each one; a late thread (another process holds its core) then stalls every call. Here each
thread takes the next task when it is free (a late thread costs nothing) and calls BLAS on
one thread (``_openblas.single_threaded_blas``: the threads already use every core).
"""
from __future__ import annotations

import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from ._openblas import single_threaded, single_threaded_blas

_POOL = None
_POOL_LOCK = threading.Lock()
_PREFIX = "nbaccel-kernel"


def num_threads() -> int:
    """The kernels' thread count: NBACCEL_KERNEL_THREADS, NUMBA_NUM_THREADS, or the cores."""
    for var in ("NBACCEL_KERNEL_THREADS", "NUMBA_NUM_THREADS"):
        if os.environ.get(var, "").isdigit() and int(os.environ[var]) > 0:
            return int(os.environ[var])
    return _cores()


@functools.lru_cache(maxsize=1)
def _cores() -> int:
    # (os.cpu_count() reads /sys on every call: 11 us, paid by every conv and attention call)
    return os.cpu_count() or 1


def _pool(n):
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL._max_workers != n:
            if _POOL is not None:
                _POOL.shutdown(wait=False)
            _POOL = ThreadPoolExecutor(max_workers=n, thread_name_prefix=_PREFIX)
        return _POOL


def run_tasks(tasks, work, threads=None):
    """Run ``work(task, state)`` for every task on ``threads`` threads (tasks taken in order,
    so put the expensive ones first); ``state`` is a dict per thread for scratch buffers."""
    tasks = list(tasks)
    threads = max(1, min(threads or num_threads(), len(tasks)))
    if threading.current_thread().name.startswith(_PREFIX):
        threads = 1           # called from one of our workers: waiting on the pool could deadlock
    if threads == 1:
        state = {}
        for t in tasks:
            work(t, state)
        return
    it = iter(tasks)            # next() on a shared list iterator is atomic under the GIL
    lock = threading.Lock()

    def take():
        state = {}
        while True:
            with lock:
                t = next(it, None)
            if t is None:
                return
            work(t, state)

    def worker():
        single_threaded_blas()
        take()

    # the calling thread takes tasks too, beside threads - 1 workers: it would only wait
    # otherwise, and a worker slow to wake (another process holds its core) then costs the
    # tasks it has not taken, not a stall (the CNN step's shifted convolutions: measured in
    # docs/eager.md). Its single-threaded block is entered before the workers start and left
    # after they all finished: NumPy's OpenBLAS (0.3.31) keeps the "per-thread" count in one
    # process-wide variable, so a worker's count of 1 is every thread's, and the block then
    # puts back the count from before the tasks. (It put back the workers' 1 when they set it
    # first, and they set it again afterwards: every later matmul of the process, the eager
    # GPT step's among them, ran on one core.)
    with single_threaded():
        futures = [_pool(threads - 1).submit(worker) for _ in range(threads - 1)]
        try:
            take()
        finally:
            for f in futures:
                f.result()
