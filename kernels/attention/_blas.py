"""Keep BLAS single-threaded inside the kernel's own worker threads.

NumPy's OpenBLAS runs its own thread pool; when several of our worker threads each call
``np.matmul`` on a tile, those pools fight over the same cores (OpenBLAS threads spin while
waiting), and a run can take ten times longer. OpenBLAS >= 0.3.27 has a per-thread setting,
``openblas_set_num_threads_local``; each worker calls :func:`single_threaded_blas` once, so
BLAS calls made from the user's own threads keep their usual parallelism. Without OpenBLAS
(another BLAS, or an older one) this does nothing.
"""
from __future__ import annotations

import ctypes

from .._openblas import library

_SETTER = None
_LOOKED = False


def _find_setter():
    fn = getattr(library(), "openblas_set_num_threads_local", None)
    if fn is not None:
        fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
    return fn


def single_threaded_blas() -> bool:
    """Make BLAS calls from the current thread single-threaded; True when it could."""
    global _SETTER, _LOOKED
    if not _LOOKED:
        _SETTER, _LOOKED = _find_setter(), True
    if _SETTER is None:
        return False
    _SETTER(1)
    return True
