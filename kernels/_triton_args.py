"""Hand raw arrays to Triton kernels without PyTorch.

Triton's launcher takes any object with ``data_ptr()`` and ``dtype``. On a GPU a CuPy array
only needs those two. Triton's interpreter (``TRITON_INTERPRET=1``, the CPU test path) also
copies each argument to the host and back through a few torch-tensor methods
(``untyped_storage``, ``new_empty``, ``set_``, ``storage_offset``, ``size``, ``stride``); for a
NumPy array "host" is where it already lives, so :class:`HostArray` implements them as
zero-copy views and the kernel writes straight into the array.
"""
from __future__ import annotations

import numpy as np


def _owner(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


class _Storage:
    __slots__ = ("owner",)

    def __init__(self, owner):
        self.owner = owner

    def data_ptr(self) -> int:
        return self.owner.__array_interface__["data"][0]

    def cpu(self):
        return self

    def copy_(self, other):
        if other.data_ptr() != self.data_ptr():
            np.copyto(self.owner, other.owner)
        return self


class _Interface:
    """Something np.asarray can view through ``__array_interface__``; keeps its owner alive."""

    def __init__(self, iface, owner):
        self.__array_interface__ = iface
        self.owner = owner


class HostArray:
    """A NumPy array dressed as the torch tensor Triton's interpreter expects."""
    __slots__ = ("arr", "_storage")

    def __init__(self, arr: np.ndarray):
        self.arr = arr
        self._storage = None

    @property
    def dtype(self):
        return self.arr.dtype

    def data_ptr(self) -> int:
        return self.arr.__array_interface__["data"][0]

    def untyped_storage(self):
        return self._storage if self._storage is not None else _Storage(_owner(self.arr))

    def storage_offset(self) -> int:
        return (self.data_ptr() - self.untyped_storage().data_ptr()) // self.arr.itemsize

    def size(self):
        return self.arr.shape

    def stride(self):
        return tuple(s // self.arr.itemsize for s in self.arr.strides)

    def new_empty(self, *size, device=None):
        if len(size) == 1 and isinstance(size[0], (tuple, list)):
            size = tuple(size[0])
        return HostArray(np.empty(size, self.arr.dtype))

    def set_(self, storage, offset, size, stride):
        item = self.arr.itemsize
        iface = dict(shape=tuple(size), typestr=self.arr.dtype.str, version=3,
                     data=(storage.data_ptr() + offset * item, False),
                     strides=tuple(s * item for s in stride))
        self.arr = np.asarray(_Interface(iface, storage.owner))
        self._storage = storage
        return self


class DeviceArray:
    """A CuPy (or any ``__cuda_array_interface__``) array as a Triton pointer argument."""
    __slots__ = ("arr", "dtype")

    def __init__(self, arr):
        self.arr = arr
        self.dtype = np.dtype(arr.dtype)   # NumPy's dtype objects are long-lived singletons

    def data_ptr(self) -> int:
        return self.arr.__cuda_array_interface__["data"][0]


def as_triton_arg(a):
    """Wrap a NumPy or CuPy array for a Triton kernel launch."""
    return HostArray(a) if isinstance(a, np.ndarray) else DeviceArray(a)


def array_module(a):
    """NumPy for NumPy arrays, CuPy for anything else (imported only then)."""
    if isinstance(a, np.ndarray):
        return np
    import cupy
    return cupy
