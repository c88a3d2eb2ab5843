"""NumPy's own OpenBLAS, reached directly: a GEMM on strided views that accumulates.

``np.matmul`` cannot add into its output (``c += a @ b`` costs a temporary and a pass over
it), and the shifted-window convolution (conv/shifted.py) is nine such accumulating GEMMs
over overlapping views of one buffer. NumPy's wheels bundle OpenBLAS as
``numpy.libs/libscipy_openblas64_*.so`` with ILP64 CBLAS symbols (``scipy_cblas_sgemm64_``);
where they are absent (another BLAS, another platform) :func:`gemm` falls back to
``np.matmul`` with the same results.
"""
from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import time

import numpy as np

_LIB = None
_LOOKED = False
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


def library():
    """The CDLL of NumPy's bundled OpenBLAS, or None."""
    global _LIB, _LOOKED
    if not _LOOKED:
        _LOOKED = True
        libdir = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
        for path in sorted(glob.glob(os.path.join(libdir, "*openblas*"))):
            try:
                _LIB = ctypes.CDLL(path)
                break
            except OSError:
                continue
    return _LIB


def _cblas(dtype):
    lib = library()
    name = {np.dtype(np.float32): "scipy_cblas_sgemm64_", np.dtype(np.float64): "scipy_cblas_dgemm64_"}.get(dtype)
    fn = getattr(lib, name, None) if lib is not None and name else None
    if fn is not None and fn.argtypes is None:
        i64, ptr = ctypes.c_int64, ctypes.c_void_p
        scalar = ctypes.c_float if dtype == np.float32 else ctypes.c_double
        fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, i64, i64, i64, scalar, ptr, i64,
                       ptr, i64, scalar, ptr, i64]
        fn.restype = None
    return fn


def _rows(m, itemsize):
    """The row stride (in elements) of a 2-D view with contiguous rows, or None."""
    if m.ndim != 2 or (m.shape[1] > 1 and m.strides[1] != itemsize) or m.strides[0] % itemsize:
        return None
    ld = m.strides[0] // itemsize
    return ld if ld >= max(m.shape[1], 1) else None


def gemm(a, b, c, accumulate=False, trans_b=False):
    """c = a @ op(b) (``accumulate``: c += ...), op(b) = b.T when ``trans_b``. a, b, c are 2-D
    views of one float dtype whose rows are contiguous; b may be a window of a larger buffer."""
    dt = c.dtype
    fn = _cblas(dt)
    lda, ldb, ldc = (_rows(m, dt.itemsize) for m in (a, b, c))
    if fn is None or None in (lda, ldb, ldc) or a.dtype != dt or b.dtype != dt or 0 in c.shape:
        r = np.matmul(a, b.T if trans_b else b)
        if accumulate:
            c += r
        else:
            c[...] = r
        return c
    m, k = a.shape
    n = c.shape[1]
    if (b.shape[::-1] if trans_b else b.shape) != (k, n) or c.shape[0] != m:
        raise ValueError(f"gemm: shapes {a.shape} @ {b.shape}{'.T' if trans_b else ''} -> {c.shape}")
    fn(_ROW_MAJOR, _NO_TRANS, _TRANS if trans_b else _NO_TRANS, m, n, k, 1.0, a.ctypes.data, lda,
       b.ctypes.data, ldb, 1.0 if accumulate else 0.0, c.ctypes.data, ldc)
    return c


_SET_LOCAL = None


def _set_local():
    """OpenBLAS's per-thread thread count setter (OpenBLAS >= 0.3.27), or None."""
    global _SET_LOCAL
    if _SET_LOCAL is None:
        fn = getattr(library(), "openblas_set_num_threads_local", None)
        if fn is not None:
            fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
        _SET_LOCAL = fn or False
    return _SET_LOCAL or None


def single_threaded_blas() -> bool:
    """From now on, BLAS calls made by this thread run on one thread (for a worker of our own
    pool, whose threads already use every core); True when it could."""
    fn = _set_local()
    if fn is not None:
        fn(1)
    return fn is not None


@contextlib.contextmanager
def single_threaded():
    """BLAS calls made by this thread run on one thread inside the block. For a loop of small
    GEMMs with Python in between (an RNN's time steps): waking OpenBLAS's second thread costs
    more than it gives there, and when another process holds a core the pool's handover turns a
    0.1 ms GEMM into 10 ms (measured here, bimodally). No-op without OpenBLAS >= 0.3.27."""
    fn = _set_local()
    if fn is None:
        yield
        return
    before = fn(1)
    try:
        yield
    finally:
        fn(before)


class StepThreads:
    """BLAS threads for a loop of equal small steps (an RNN's time loop), chosen by measuring:
    the first steps alternate between single-threaded BLAS and BLAS's own threads, the rest
    run with whichever was faster. On a quiet machine BLAS's second thread gains 10-40% on a
    step's small GEMM; when another process holds a core it costs up to 100x (the pool waits
    for a descheduled thread). Measuring each loop chooses for the machine as it is now.

        threads = StepThreads()
        for t in range(L):
            with threads.step():
                ...
    """
    TRIALS = 3          # steps measured in each mode

    def __init__(self):
        self.times = {True: [], False: []}
        self.choice = None

    @contextlib.contextmanager
    def step(self):
        if self.choice is not None:
            with (single_threaded() if self.choice else contextlib.nullcontext()):
                yield
            return
        single = len(self.times[True]) <= len(self.times[False])
        t0 = time.perf_counter()
        with (single_threaded() if single else contextlib.nullcontext()):
            yield
        self.times[single].append(time.perf_counter() - t0)
        if len(self.times[False]) >= self.TRIALS:
            self.choice = min(self.times[True]) <= min(self.times[False])
