"""Where an op family finds its hand-written kernels: ``nbaccel_kernels.<family>.cpu`` (numba)
for NumPy arrays, ``nbaccel_kernels.<family>.triton`` for CuPy ones, with the GPU driver made
active first (Triton launches through CuPy's device and stream, without PyTorch).

Imported on first use, by name, so that ``import nbaccel`` loads neither numba nor Triton
(tests/test_startup.py), and written once rather than in every family: the quantized and 2:4
families had their own copies, and theirs never activated the driver."""
from __future__ import annotations

import importlib

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
