"""NumPy's own OpenBLAS, found through threadpoolctl: a GEMM on strided views that accumulates,
and per-thread BLAS thread counts.

``np.matmul`` cannot add into its output (``c += a @ b`` costs a temporary and a pass over
it), and the shifted-window convolution (conv/shifted.py) is nine such accumulating GEMMs
over overlapping views of one buffer. The library is the one threadpoolctl reports for
``internal_api="openblas"`` (NumPy's bundled ``libscipy_openblas64_``, or a system OpenBLAS),
and its CBLAS ``sgemm`` / ``dgemm`` is looked up under the affixes OpenBLAS builds use
(``scipy_`` prefix, ``64_`` ILP64 suffix). Where there is none (another BLAS, another
platform) :func:`gemm` falls back to ``np.matmul`` with the same results.

Thread counts: :func:`single_threaded` and :func:`single_threaded_blas` limit *this thread's*
BLAS calls through OpenBLAS's ``openblas_set_num_threads_local`` (>= 0.3.27). threadpoolctl
cannot do that with OpenBLAS's pthreads build: its limits are process-wide, and set from any
thread but the first that set one they are silently ignored (threadpoolctl's own
``OpenBLASController`` documents both); a kernel's helper thread needs a per-thread limit.
Without the local setter, :func:`single_threaded` falls back to ``threadpool_limits(1)``.
(NumPy 2.4's bundled OpenBLAS 0.3.31 keeps that "local" count process-wide too: a count set in
a worker is the count every thread reads. Sets are skipped when the count is in effect.)
"""
from __future__ import annotations

import contextlib
import ctypes
import itertools
import threading
import time

import numpy as np

_LIB = None
_LOOKED = False
_LOOKUP = threading.Lock()
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_PREFIXES = ("scipy_", "")
_SUFFIXES = ("64_", "_64", "")
_CBLAS: dict = {}


def _controller():
    """threadpoolctl's controller of NumPy's OpenBLAS, or None."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:             # pragma: no cover - a dependency
        return None
    libs = ThreadpoolController().select(internal_api="openblas").lib_controllers
    if not libs:
        return None
    # NumPy's own copy first (the one np.matmul calls), then any other OpenBLAS
    libs = sorted(libs, key=lambda c: "numpy" not in (c.filepath or ""))
    return libs[0]


def library():
    """The CDLL of the OpenBLAS NumPy uses (as threadpoolctl finds it), or None."""
    global _LIB, _LOOKED
    if not _LOOKED:
        # kernels call this from their pool's threads: a second thread must wait for the
        # lookup, not read "no library" while the first is still looking (and cache that)
        with _LOOKUP:
            if not _LOOKED:
                ctl = _controller()
                _LIB = getattr(ctl, "dynlib", None) if ctl is not None else None
                _LOOKED = True
    return _LIB


def _symbol(base):
    """``(function, ilp64)``: ``base`` under OpenBLAS's affixes, or ``(None, False)``."""
    lib = library()
    if lib is None:
        return None, False
    for pre, suf in itertools.product(_PREFIXES, _SUFFIXES):
        fn = getattr(lib, f"{pre}{base}{suf}", None)
        if fn is not None:
            return fn, "64" in suf
    return None, False


def _cblas(dtype):
    dtype = np.dtype(dtype)
    if dtype in _CBLAS:
        return _CBLAS[dtype]
    base = {np.dtype(np.float32): "cblas_sgemm", np.dtype(np.float64): "cblas_dgemm"}.get(dtype)
    fn, ilp64 = _symbol(base) if base else (None, False)
    if fn is not None:
        i, ptr = (ctypes.c_int64 if ilp64 else ctypes.c_int), ctypes.c_void_p
        scalar = ctypes.c_float if dtype == np.float32 else ctypes.c_double
        fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, i, i, i, scalar, ptr, i,
                       ptr, i, scalar, ptr, i]
        fn.restype = None
    _CBLAS[dtype] = fn
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


def _holding_the_gil(name, restype, *argtypes):
    """The library's function ``name`` called without releasing the GIL (ctypes.PYFUNCTYPE),
    or None. For the thread-count calls, which take a microsecond: a CDLL call releases the
    GIL and must take it back, and while the kernels' threads hold it (Python between their
    GEMMs) that waited up to a switch interval (5 ms): the CNN step's 36 such calls a step cost
    it 4.8 ms in the calling thread, up to 11 ms for one."""
    lib = library()
    if lib is None or getattr(lib, name, None) is None:
        return None
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, lib))


def _set_local():
    """OpenBLAS's per-thread thread count setter (OpenBLAS >= 0.3.27), or None."""
    global _SET_LOCAL
    if _SET_LOCAL is None:
        _SET_LOCAL = (_holding_the_gil("openblas_set_num_threads_local", ctypes.c_int, ctypes.c_int)
                      or False)
    return _SET_LOCAL or None


_GET = None


def _in_effect():
    """OpenBLAS's thread count in effect (``openblas_get_num_threads``), or None."""
    global _GET
    if _GET is None:
        fn, _ = _symbol("openblas_get_num_threads")
        _GET = (fn is not None and _holding_the_gil(fn.__name__, ctypes.c_int)) or False
    return _GET() if _GET else None


def _set(fn, n):
    """``fn(n)`` unless n is already in effect; the count that was. (NumPy's OpenBLAS 0.3.31
    keeps the "local" count in one process-wide variable: once a worker set 1, nearly every
    later set is to the count in effect.)"""
    now = _in_effect()
    if now == n:
        return now
    return fn(n)


def single_threaded_blas() -> bool:
    """From now on, BLAS calls made by this thread run on one thread (for a worker of our own
    pool, whose threads already use every core); True when it could. Per thread, which
    threadpoolctl cannot do for OpenBLAS's pthreads build (see the module's docstring)."""
    fn = _set_local()
    if fn is not None:
        _set(fn, 1)
    return fn is not None


@contextlib.contextmanager
def single_threaded():
    """BLAS calls made by this thread run on one thread inside the block. For a loop of small
    GEMMs with Python in between (an RNN's time steps): waking OpenBLAS's second thread costs
    more than it gives there, and when another process holds a core the pool's handover turns a
    0.1 ms GEMM into 10 ms (measured here, bimodally). Without OpenBLAS's per-thread setter,
    threadpoolctl's process-wide ``threadpool_limits(1)`` for the block."""
    fn = _set_local()
    if fn is None:
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:         # pragma: no cover - a dependency
            yield
            return
        with threadpool_limits(1, user_api="blas"):
            yield
        return
    before = _set(fn, 1)
    try:
        yield
    finally:
        _set(fn, before)


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
