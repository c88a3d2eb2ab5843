"""Devices and the array module (NumPy or CuPy) that backs each one.

Every eager op is written once against an array module ``xp``; the device picks it.
"""
from __future__ import annotations

import numpy as np

__all__ = ["Device", "device", "array_module", "cuda_available"]


class Device:
    __slots__ = ("type", "index")

    def __init__(self, type: str, index: int = 0):
        self.type = type
        self.index = index

    def __repr__(self):
        return f"device(type='{self.type}')" if self.type == "cpu" else \
            f"device(type='{self.type}', index={self.index})"

    def __str__(self):
        return "cpu" if self.type == "cpu" else f"cuda:{self.index}"

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = device(other)
            except (ValueError, RuntimeError):
                return False
        return isinstance(other, Device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))


cpu = Device("cpu")
_cuda_devices: dict[int, Device] = {}


def _cupy():
    try:
        import cupy
    except ImportError:
        raise RuntimeError("device 'cuda' needs CuPy and an NVIDIA GPU, and CuPy is not "
                           "installed: pip install 'nbaccel[gpu]'") from None
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # no driver, no device
        raise RuntimeError(f"device 'cuda' needs an NVIDIA GPU, and CuPy found none ({e})") from None
    if n == 0:
        raise RuntimeError("device 'cuda' needs an NVIDIA GPU, and CuPy found none")
    return cupy


def cuda_available() -> bool:
    try:
        _cupy()
        return True
    except RuntimeError:
        return False


def device(x) -> Device:
    """Parse 'cpu', 'cuda', 'cuda:1' or a Device; 'cuda' checks that CuPy and a GPU exist."""
    if x is None:
        return cpu
    if isinstance(x, Device):
        return x
    if not isinstance(x, str):
        x = str(x)
    kind, _, idx = x.partition(":")
    if kind == "cpu":
        return cpu
    if kind == "cuda":
        _cupy()
        i = int(idx or 0)
        return _cuda_devices.setdefault(i, Device("cuda", i))
    raise ValueError(f"unknown device {x!r}: expected 'cpu' or 'cuda[:N]'")


def array_module(dev: Device):
    """NumPy for the CPU, CuPy for CUDA."""
    if dev.type == "cpu":
        return np
    return _cupy()


def device_of_array(a) -> Device:
    if isinstance(a, np.ndarray) or np.isscalar(a):
        return cpu
    dev = getattr(a, "device", None)
    if dev is not None and type(a).__module__.startswith("cupy"):
        return device(f"cuda:{dev.id}")
    return cpu
