"""Where a ``%%compile`` cell runs (``--device cpu | cuda | auto``), the transfers that
costs, and how kernels are labelled in the report.

``auto`` puts a cell on the GPU only when there is one (CuPy finds a device) and the cell's
array inputs add up to at least :data:`AUTO_MIN_BYTES`: below that, copying the inputs over
PCIe and the results back costs more than the GPU saves on the few milliseconds of CPU work.
The threshold can be changed with ``NBACCEL_AUTO_GPU_BYTES`` (bytes) or
``nbaccel.gpu.placement.AUTO_MIN_BYTES``. Whatever ``auto`` decides, the report says why.
"""
from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass

import numpy as np

from ..devices import _cupy

__all__ = ["AUTO_MIN_BYTES", "Placement", "gpu_available", "decide", "label_kernels", "graph_device",
           "backend_for", "timed_sync"]

# 16 MiB: at ~20 GB/s each way a copy of the inputs and of a like-sized result takes ~1.6 ms,
# about what NumPy spends on a handful of elementwise passes over 4 M float32 values.
AUTO_MIN_BYTES = 16 * 1024 * 1024


def _threshold() -> int:
    # read here, not through nbaccel.compiler.config: gpu/ is a layer below the compiler
    # (tests/test_layering.py), and importing config from here would be an upward arrow
    env = os.environ.get("NBACCEL_AUTO_GPU_BYTES")
    if env:
        try:
            return max(int(float(env)), 0)
        except ValueError:
            pass
    return AUTO_MIN_BYTES


@functools.lru_cache(maxsize=1)
def _gpu_status() -> tuple[bool, str]:
    try:
        _cupy()
        return True, ""
    except RuntimeError as e:
        return False, str(e)


def gpu_available() -> tuple[bool, str]:
    """(True, "") when CuPy finds a GPU, else (False, why). Asked once per process (importing
    a missing CuPy again on every cell would cost each cell a search of sys.path)."""
    return _gpu_status()


def _forget_for_tests():
    _gpu_status.cache_clear()


@dataclass
class Placement:
    device: str                 # "cpu" | "cuda"
    requested: str              # what the cell asked for: "cpu" | "cuda" | "auto"
    reason: str | None = None   # why (for auto), shown in the report
    nbytes: int = 0


def _fmt_bytes(n: int) -> str:
    if n >= 1 << 30:
        return f"{n / (1 << 30):.1f} GiB"
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MiB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.1f} KiB"
    return f"{n} B"


def _nbytes(values) -> int:
    total = 0
    for v in values:
        n = getattr(v, "nbytes", None)
        if isinstance(n, (int, np.integer)):
            total += int(n)
    return total


def decide(requested: str, values) -> Placement:
    """The device for a cell whose array inputs are ``values``. ``cuda`` without a GPU raises
    RuntimeError with what is missing; ``auto`` never raises."""
    if requested == "cpu":
        return Placement("cpu", requested)
    ok, why = gpu_available()
    if requested == "cuda":
        if not ok:
            raise RuntimeError(why)
        return Placement("cuda", requested, nbytes=_nbytes(values))
    if requested != "auto":
        raise ValueError(f"device must be cpu, cuda or auto, got {requested!r}")
    if not ok:
        return Placement("cpu", requested, f"auto: stayed on the CPU because there is no usable GPU ({why})")
    n, limit = _nbytes(values), _threshold()
    if any(getattr(getattr(v, "device", None), "type", None) == "cuda" for v in values):
        return Placement("cuda", requested, "auto: the inputs are already on the GPU", n)
    if n < limit:
        return Placement("cpu", requested, f"auto: stayed on the CPU: the inputs ({_fmt_bytes(n)}) are under "
                                           f"{_fmt_bytes(limit)}, too small to pay for the transfer", n)
    return Placement("cuda", requested, f"auto: ran on the GPU: the inputs ({_fmt_bytes(n)}) are at least "
                                        f"{_fmt_bytes(limit)}", n)


def backend_for(backend: str, device: str, backends) -> str:
    """The backend a cell placed on ``device`` compiles with: on CUDA, ``auto`` means Triton
    when the compiler has that backend and Triton is installed (the CPU tiers do not run on
    CuPy arrays; without Triton such a cell runs plainly, with the reason in its report)."""
    if device == "cuda" and backend == "auto" and "triton" in backends and _triton_installed():
        return "triton"
    return backend


def _triton_installed() -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec("triton") is not None
    except (ImportError, ValueError):
        return False


def graph_device(graph) -> str:
    """'cpu' or 'cuda:N': where the graph's inputs live."""
    for s in getattr(graph, "sources", ()) or ():
        dev = getattr(s, "device", None)
        if dev is not None and getattr(dev, "type", "cpu") != "cpu":
            return str(dev)
    return "cpu"


def label_kernels(kernels: list, device: str) -> list:
    """Kernels as the report shows them: the device they ran on, and on CUDA the libraries
    behind externs (matmul through CuPy is cuBLAS, not the CPU's BLAS)."""
    if device == "cpu":
        return kernels
    out = []
    for k in kernels:
        k = dict(k, device=device)
        if k.get("backend") == "blas":
            k["backend"] = "cublas"
        out.append(k)
    return out


def timed_sync(fn, *args, sync: bool = True):
    """``fn(*args)`` and the seconds it took, with the GPU synchronised before the clock stops
    (a device copy may return before it is done); ``sync=False``: nothing on the GPU to wait for."""
    t0 = time.perf_counter()
    out = fn(*args)
    if sync and gpu_available()[0]:
        try:
            import cupy
            cupy.cuda.runtime.deviceSynchronize()
        except Exception:   # pragma: no cover - timing must never break a cell
            pass
    return out, time.perf_counter() - t0
