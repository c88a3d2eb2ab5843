"""One thread count for every library in a benchmark run, and the allocator modes of a run.

Thread pools: NumPy's BLAS (OpenBLAS / MKL), numba's parallel kernels and PyTorch's intra-op
pool each default to "all cores", read at import time. ``pin_env(n)`` sets the environment
variables they read (call it before NumPy is imported, in the parent and in every worker);
``pin_runtime(n)`` then sets what can be set after import (threadpoolctl when installed,
``numba.set_num_threads``, ``torch.set_num_threads``) and ``read_back()`` reports what each
library actually uses, which results.json records.

Allocator modes (``set_alloc_mode``): a fresh 64 MB output costs its first-touch page
faults on every call, about as much as a fused kernel's work. "fresh" leaves glibc's malloc as
it is (outputs that large are mmapped and returned to the OS when freed, so each call faults
its pages in again); "reused" keeps freed memory in the heap (``mallopt``: no mmap, no trim),
so a call that frees its last output and allocates the next one writes warm pages. The
harness runs both and reports both where they differ.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
              "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


def default_threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def pin_env(n: int, env=None):
    """Set every thread-count variable to ``n`` in ``env`` (default ``os.environ``).

    Must run before NumPy, numba or torch is imported in that process; returns a list of the
    libraries already imported (whose pools may not follow), for the record."""
    env = os.environ if env is None else env
    for k in THREAD_ENV:
        env[k] = str(n)
    return [m for m in ("numpy", "numba", "torch") if m in sys.modules] if env is os.environ else []


def pin_runtime(n: int, torch_mod=None) -> dict:
    """Apply ``n`` to the pools that can be changed after import; returns what was done."""
    done = {}
    try:
        from threadpoolctl import threadpool_limits
        threadpool_limits(n)
        done["threadpoolctl"] = True
    except ImportError:
        done["threadpoolctl"] = "not installed (BLAS pinned by environment variables)"
    if "numba" in sys.modules:
        import numba
        numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    if torch_mod is not None:
        torch_mod.set_num_threads(n)
    return done


def read_back(torch_mod=None) -> dict:
    """The thread count each library reports now (None: library not loaded here)."""
    out = {"env": {k: os.environ.get(k) for k in THREAD_ENV}}
    if "numba" in sys.modules:
        import numba
        out["numba"] = numba.get_num_threads()
    try:
        from threadpoolctl import threadpool_info
        out["blas"] = [d.get("num_threads") for d in threadpool_info()]
    except ImportError:
        out["blas"] = f"env OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}"
    if torch_mod is not None:
        out["torch"] = torch_mod.get_num_threads()
        out["torch_interop"] = torch_mod.get_num_interop_threads()
    return out


# -- allocator modes -------------------------------------------------------------------------------
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_MMAP_MAX = -1, -3, -4
_GLIBC_DEFAULTS = {M_MMAP_MAX: 65536, M_TRIM_THRESHOLD: 128 * 1024, M_MMAP_THRESHOLD: 128 * 1024}
ALLOC_MODES = ("fresh", "reused")
_libc = None


def _mallopt():
    global _libc
    if _libc is None:
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _libc = lib if hasattr(lib, "mallopt") else False
        except OSError:
            _libc = False
    return _libc.mallopt if _libc else None


def set_alloc_mode(mode: str) -> bool:
    """Switch this process's malloc to ``mode`` ("fresh" or "reused"); False where unsupported
    (not glibc): then both modes behave as "fresh" for NumPy and torch."""
    if mode not in ALLOC_MODES:
        raise ValueError(f"allocator mode {mode!r}: expected one of {ALLOC_MODES}")
    mallopt = _mallopt()
    if mallopt is None:
        return False
    if mode == "reused":
        ok = mallopt(M_MMAP_MAX, 0) and mallopt(M_TRIM_THRESHOLD, 2 ** 31 - 1)
    else:   # glibc's defaults, with a fixed mmap threshold: every large output is mmapped afresh
        ok = all(mallopt(k, v) for k, v in _GLIBC_DEFAULTS.items())
        _libc.malloc_trim(0)   # give back what the "reused" heap kept
    return bool(ok)
