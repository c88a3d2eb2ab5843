"""The background numba compiler: one daemon thread, and what an exiting process waits for."""
from __future__ import annotations

import atexit
import concurrent.futures
import queue
import sys
import threading

from nbaccel_kernels import _numba_warnings

from ..config import config


class _CompileThread:
    """The background numba compiler: one daemon thread that runs submitted compiles in order
    (``submit`` as an executor's, returning a Future).

    At exit (:func:`_at_exit`) a process waits for the compiles it queued (they fill the disk
    cache for the next session; a load from the cache fills nothing and is not waited for),
    except a worker process that a parent manages (a Dask worker under its nanny, which kills a
    worker still alive 4 s after it was told to close and logs a warning into the notebook):
    there the queued compiles are cancelled and the one in flight is left to the daemon thread,
    so the worker exits as soon as Dask closes it. A ThreadPoolExecutor's threads are joined at
    exit, in flight or not."""

    def __init__(self, name):
        self.name = name
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._pending: set = set()
        self._thread = None
        self._lock = threading.Lock()

    def submit(self, fn, *args, _fills_cache=True, **kwargs):
        fut = concurrent.futures.Future()
        fut.fills_cache = _fills_cache
        with self._lock:
            self._pending.add(fut)
            self._queue.put((fut, fn, args, kwargs))
            if self._thread is None or not self._thread.is_alive():     # (also after a fork)
                self._thread = threading.Thread(target=self._work, name=self.name, daemon=True)
                self._thread.start()
        return fut

    def _work(self):
        _numba_warnings.quiet_this_thread()      # numba's typing must not swap the warnings state
        while True:
            fut, fn, args, kwargs = self._queue.get()
            try:
                if not fut.set_running_or_notify_cancel():
                    continue
                try:
                    result = fn(*args, **kwargs)
                except BaseException as e:   # noqa: BLE001 - handed to the Future, as an executor does
                    fut.set_exception(e)
                else:
                    fut.set_result(result)
            finally:
                with self._lock:
                    self._pending.discard(fut)

    def cancel_pending(self):
        """Cancel the compiles not yet started; the one in flight runs on (it cannot be stopped)."""
        with self._lock:
            pending = list(self._pending)
        for fut in pending:
            fut.cancel()

    def wait(self, cache_fills_only=False, timeout=None):
        """Wait for every compile submitted so far (``cache_fills_only``: for those that fill
        the disk cache; the loads from it not yet started are cancelled, one in flight left to
        the daemon thread). ``timeout``: seconds at most; the compiles not started by then are
        cancelled, the one in flight left to the daemon thread."""
        with self._lock:
            pending = list(self._pending)
        if cache_fills_only:
            for fut in pending:
                if not fut.fills_cache:
                    fut.cancel()
            pending = [f for f in pending if f.fills_cache]
        _, late = concurrent.futures.wait(pending, timeout=timeout)
        for fut in late:
            fut.cancel()


def _managed_worker_process() -> bool:
    """A process that multiprocessing started for a parent that times its exit: a Dask worker
    (distributed's nanny spawns each worker this way)."""
    import multiprocessing
    return "distributed" in sys.modules and multiprocessing.parent_process() is not None


def _at_exit():
    if _managed_worker_process():
        _COMPILER.cancel_pending()
    else:
        # what the next session will find on disk, for a bounded time: a long session can
        # leave minutes of queued compiles (a benchmark's exit waited 13 minutes), and a
        # process that is asked to end should end; the rest compile when next needed
        _COMPILER.wait(cache_fills_only=True, timeout=config.get("exit_compile_wait", 10.0))


_COMPILER = _CompileThread("nbaccel-numba")
atexit.register(_at_exit)
