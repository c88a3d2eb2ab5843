"""Row chunks handed out by an atomic counter, with the calling thread taking part: the
parallel launcher of the quantized kernels (``quant/cpu.py``) and the 2:4 sparse products
(``sparse/cpu.py``).

Why not ``prange``: an OpenMP parallel region ends at a barrier that waits for *every* thread
of the team, including one that has not even started yet. On a 2-core machine where another
process holds the second core, that thread starts a scheduler time slice late, and a 0.5 ms
layer took 8 ms (measured here: medians of 8.0 ms against 0.9 ms for the serial kernel, for
minutes at a time). Dynamic chunks (``kernels/_parallel.py``) share the work out better but
cannot remove the barrier.

Here the caller runs the kernel's chunk loop itself, and helper threads (plain Python
threads, each woken by an Event, running the same ``nogil`` numba function) claim chunks
from the same counter. When the caller finds the counter exhausted it waits only for the
chunks a helper has *claimed* (at most one each), never for a helper to wake: a helper that
wakes late finds no chunk left and goes back to sleep. A layer therefore costs at most the
serial time plus one chunk, and about half of it when the second core is free.

``ctr`` (int64 ``[2]``): ``ctr[0]`` the next chunk to claim, ``ctr[1]`` chunks finished.
"""
from __future__ import annotations

import os
import threading

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def atomic_add(typingctx, arr, idx, val):
    """``old = arr[idx]; arr[idx] += val`` as one sequentially consistent atomic; returns
    ``old`` (``val = 0`` is an atomic load)."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.int64 and arr.ndim == 1):
        return None

    def codegen(context, builder, sig, args):
        aryty, _, valty = sig.args
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]])
        v = context.cast(builder, args[2], valty, types.int64)
        return builder.atomic_rmw("add", ptr, v, "seq_cst")

    return types.int64(arr, types.intp, types.int64), codegen


@intrinsic
def wide_vectors(typingctx):
    """Called first in a kernel: lets LLVM vectorise that kernel's loops with 512-bit vectors.

    On AVX-512 CPUs LLVM defaults to 256-bit vectors (``prefer-256-bit``, against clock
    throttling on older Xeons); the int4 GEMV's unpacking loop is bound by instruction
    throughput, and 512-bit vectors made it 1.4x faster (1.60 -> 1.15 ms per 4096 x 4096
    layer, measured here). The two LLVM function attributes are added to the kernel's own
    function (llvmlite knows no string attributes, hence ``set.add``); where there are no
    512-bit registers they change nothing."""
    def codegen(context, builder, sig, args):
        allow_512_bit(builder)
        return context.get_dummy_value()
    return types.none(), codegen


def allow_512_bit(builder):
    """Give the function ``builder`` writes the two attributes that let LLVM keep 512-bit
    vectors whole (:func:`wide_vectors`); explicit-SIMD intrinsics call it in their codegen."""
    attrs = builder.function.attributes
    set.add(attrs, '"prefer-vector-width"="512"')
    set.add(attrs, '"min-legal-vector-width"="512"')


@njit(cache=True, inline="always")
def claim(ctr, n_chunks):
    """The next chunk index, or -1 when none is left."""
    c = atomic_add(ctr, 0, 1)
    return c if c < n_chunks else -1


@intrinsic
def sched_yield(typingctx):
    """``sched_yield()`` from libc (resolved by name when the code is loaded, so the kernels
    calling it stay in numba's disk cache, where a ctypes pointer would not)."""
    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(ir.IntType(32), [])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "sched_yield")
        builder.call(fn, [])
        return context.get_dummy_value()
    return types.none(), codegen


# spins before the waiting caller starts yielding its CPU (~ a microsecond of spinning)
SPINS_BEFORE_YIELD = 256


@njit(cache=True, inline="always")
def finish(ctr, wait, n_chunks):
    """Mark a chunk done (``wait`` false: called after each chunk) or, with ``wait``, wait
    until every claimed chunk is done (the caller's last step): a short spin, then
    ``sched_yield`` between checks. Yielding matters when the helper holding the last chunk
    was woken on the caller's own CPU (Linux often places a woken thread next to its waker
    until the load balancer moves it): a spinning caller kept it off that CPU until the
    caller's time slice ended, and the first layer after a pause took 9.8 ms instead of 1.6
    (measured, 2:4 GEMV 4096 x 4096)."""
    if not wait:
        atomic_add(ctr, 1, 1)
        return
    spins = 0
    while atomic_add(ctr, 1, 0) < n_chunks:
        spins += 1
        if spins > SPINS_BEFORE_YIELD:
            sched_yield()


class _Helper:
    """One helper thread: runs the latest job it is given, as long as it lives (daemon)."""

    def __init__(self):
        self.event = threading.Event()
        self.job = None
        self.thread = threading.Thread(target=self._loop, name="nbaccel-kernel-helper", daemon=True)
        self.thread.start()

    def _loop(self):
        while True:
            self.event.wait()
            self.event.clear()
            job = self.job
            if job is None:
                continue
            fn, args, caller_cpu = job
            before = _leave_cpu(caller_cpu)
            try:
                fn(*args)
            except Exception:       # the caller computes every chunk it can claim itself
                pass
            if before is not None:
                _restore_cpus(before)
            if self.job is job:     # don't keep the layer's arrays alive
                self.job = None


def _getcpu_fn():
    try:
        import ctypes
        fn = ctypes.CDLL(None, use_errno=True).sched_getcpu
        fn.restype = ctypes.c_int
        fn.argtypes = []
        return fn if fn() >= 0 else None
    except (OSError, AttributeError):
        return None


_getcpu = _getcpu_fn()


def _leave_cpu(cpu):
    """A helper woken on the caller's CPU (Linux often wakes a thread next to its waker, and
    the load balancer moves it only milliseconds later) moves off it at once: sharing the CPU,
    caller and helper ran one layer at one thread's speed (2:4 GEMV: 3 ms against 1.6 ms with
    the second core idle, after a pause). Returns the CPUs it had (to restore), or None."""
    if cpu is None or _getcpu is None or _getcpu() != cpu:
        return None
    try:
        allowed = os.sched_getaffinity(0)
        if len(allowed - {cpu}) == 0:
            return None
        os.sched_setaffinity(0, allowed - {cpu})
        return allowed
    except (OSError, AttributeError):
        return None


def _restore_cpus(allowed):
    try:
        os.sched_setaffinity(0, allowed)
    except OSError:
        pass


_helpers: list = []
_lock = threading.Lock()
if hasattr(os, "register_at_fork"):     # a forked child has none of the parent's threads
    os.register_at_fork(after_in_child=_helpers.clear)


def helpers(n):
    """``n`` helper threads, started on first use."""
    if len(_helpers) < n:
        with _lock:
            while len(_helpers) < n:
                _helpers.append(_Helper())
    return _helpers[:n]


def run(fn, args, n_chunks, threads):
    """``fn(*args, ctr, n_chunks, wait)`` on the calling thread and ``threads - 1`` helpers.

    ``fn`` must be a ``nogil`` numba function that claims chunks with :func:`claim`, calls
    ``finish(ctr, False, n_chunks)`` after each, and ends with ``finish(ctr, wait, n_chunks)``.
    Returns when every chunk is done."""
    ctr = np.zeros(2, np.int64)
    if threads > 1 and n_chunks > 1:
        job = (fn, tuple(args) + (ctr, n_chunks, False), _getcpu() if _getcpu else None)
        for h in helpers(min(threads, n_chunks) - 1):
            h.job = job
            h.event.set()
    fn(*args, ctr, n_chunks, True)


def chunked(n_items, threads, chunks_per_thread=16, multiple=1):
    """``(chunk, n_chunks)``: ``n_items`` in ``~threads * chunks_per_thread`` chunks, each a
    multiple of ``multiple`` items (one chunk when ``threads`` is 1)."""
    if threads <= 1 or n_items <= multiple:
        return max(n_items, 1), 1
    chunk = max(1, -(-n_items // (threads * chunks_per_thread)))
    chunk = -(-chunk // multiple) * multiple
    return chunk, -(-n_items // chunk)
