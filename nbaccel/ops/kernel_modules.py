"""Where an op family finds its hand-written kernels: ``nbaccel_kernels.<family>.cpu`` (numba)
for NumPy arrays, ``nbaccel_kernels.<family>.triton`` for CuPy ones, with the GPU driver made
active first (Triton launches through CuPy's device and stream, without PyTorch).

Imported on first use, by name, so that ``import nbaccel`` loads neither numba nor Triton
(tests/test_startup.py), and written once rather than in every family: the quantized and 2:4
families had their own copies, and theirs never activated the driver."""
from __future__ import annotations

import importlib
import os
import threading

import numpy as np
from nbaccel_kernels import _numba_warnings

_CPU: dict = {}


def kernels(family: str, xp=None, *, on_cpu: bool | None = None):
    """The kernel module of ``family`` ("conv", "attention", "quant", "sparse", ...) for the
    array module ``xp`` (or for ``on_cpu``)."""
    if on_cpu is None:
        on_cpu = getattr(xp, "__name__", "") == "numpy"
    if on_cpu:
        module = _CPU.get(family)       # a quantized layer asks on every call (~µs matter)
        if module is None:
            module = _CPU[family] = importlib.import_module(f"nbaccel_kernels.{family}.cpu")
        return module
    # not cached: activate() also sets Triton's allocator on the calling thread
    module = importlib.import_module(f"nbaccel_kernels.{family}.triton")
    from ..gpu import triton_driver  # lazy: CuPy and Triton, on a GPU only
    triton_driver.activate()
    return module


# ---- eager kernels that load in the background ---------------------------------------------------
# An eager op (LayerNorm, BatchNorm, GELU, cross-entropy, Adam's update ...) may run one numba
# kernel instead of a chain of NumPy passes. The first call must not wait for numba (importing
# it and loading the kernels from numba's disk cache takes about 1 s, compiling them 10-35 s on
# a cold cache): it starts a daemon thread that imports the family and calls its ``warm()``,
# and the op keeps its NumPy path until the thread is done. ``NBACCEL_EAGER_KERNELS``: "1"
# (default) as above, "0" never (NumPy only), "sync" load on first use in the calling thread.

_READY: dict = {}
_STARTED: dict = {}


def _load(family):
    try:
        _numba_warnings.quiet_this_thread()  # numba's typing must not swap the warnings state
        module = importlib.import_module(f"nbaccel_kernels.{family}.cpu")
        module.warm()
    except Exception:            # pragma: no cover - no numba, or a broken cache: NumPy it is
        return
    _READY[family] = module


def eager_kernels(family: str):
    """The CPU kernel module of ``family`` once it is loaded and warm, else None (and its
    loading starts on a background thread, once per process)."""
    module = _READY.get(family)
    if module is not None or family in _STARTED:
        return module
    mode = os.environ.get("NBACCEL_EAGER_KERNELS", "1")
    if mode == "0":
        return None
    if mode == "sync":
        return load_now(family)
    thread = threading.Thread(target=_load, args=(family,), daemon=True,
                              name=f"nbaccel-kernels-{family}")
    _STARTED[family] = thread
    thread.start()
    return None


def load_now(family: str):
    """Load (or wait for) ``family``'s eager kernels in this thread; the module, or None."""
    thread = _STARTED.get(family)
    if thread is not None and thread.is_alive():
        thread.join()
    if family not in _READY:
        _STARTED[family] = None
        _load(family)
    return _READY.get(family)


def set_eager_kernels(family: str, module):
    """Force the eager path of ``family``: a module to use, or None for NumPy (tests).
    Returns what was there before."""
    prev = _READY.get(family)
    if module is None:
        _READY.pop(family, None)
        _STARTED[family] = None
    else:
        _READY[family] = module
    return prev


def fused_for(xp, *arrays):
    """The fused CPU kernels (``nbaccel_kernels.fused``) when they apply to these arrays:
    NumPy, float32 or float64, one dtype; None while they load, on CuPy, in a decomposition
    (``xp`` is nbaccel itself) or for other dtypes: the caller's NumPy path runs then."""
    if xp is not np:
        return None
    dt = arrays[0].dtype
    if dt != np.float32 and dt != np.float64:
        return None
    for a in arrays[1:]:
        if a.dtype != dt:
            return None
    return eager_kernels("fused")


def fused_extern(params=None):
    """``extern_backend`` of a composite op whose ``impl`` runs a fused kernel (``fused_for``):
    the compiler keeps it whole on CPU values and runs that impl as an extern step, as it runs
    a convolution, instead of decomposing it (compiler/capture/decompose.py). The label is what
    the report shows; an op whose kernel covers only some params returns None for the others,
    which then decompose."""
    return "fused"


def rows(a, n):
    """A C-contiguous (rows, n) view (or copy) of ``a``."""
    return np.ascontiguousarray(a).reshape(-1, n)
