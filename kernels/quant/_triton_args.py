"""Hand NumPy (or CuPy) arrays to Triton kernels without PyTorch.

Triton's launcher needs only ``data_ptr()`` and ``dtype`` from a tensor argument. Its CPU
interpreter (``TRITON_INTERPRET=1``) also copies "device" arguments to the host and back
through a few torch-shaped methods (``untyped_storage``, ``new_empty``, ``set_``, ...). For a
NumPy array host and device are the same memory, so every one of those is zero-copy here and
the kernel writes straight into the array (see /work/shared/design/FINDINGS.md).
"""
from __future__ import annotations

import numpy as np


def _owner(a):
    while isinstance(getattr(a, "base", None), np.ndarray):
        a = a.base
    return a


def _address(a) -> int:
    if hasattr(a, "__cuda_array_interface__"):
        return a.__cuda_array_interface__["data"][0]
    return a.__array_interface__["data"][0]


class _Storage:
    __slots__ = ("owner",)

    def __init__(self, owner):
        self.owner = owner

    def data_ptr(self) -> int:
        return _address(self.owner)

    def cpu(self):
        return self

    def copy_(self, other):
        return self     # the same memory: nothing to copy


class _View:
    def __init__(self, interface, owner):
        self.__array_interface__ = interface
        self.owner = owner      # keeps the memory alive


class TritonArg:
    """An array as a Triton kernel argument (zero-copy)."""
    __slots__ = ("array", "_storage")

    def __init__(self, array):
        self.array = array
        self._storage = None

    @property
    def dtype(self):
        return self.array.dtype

    def data_ptr(self) -> int:
        return _address(self.array)

    # -- what the interpreter's host round trip uses ------------------------------------------
    def untyped_storage(self):
        return self._storage if self._storage is not None else _Storage(_owner(self.array))

    def storage_offset(self) -> int:
        return (self.data_ptr() - self.untyped_storage().data_ptr()) // self.array.itemsize

    def size(self):
        return self.array.shape

    def stride(self):
        return tuple(s // self.array.itemsize for s in self.array.strides)

    def new_empty(self, *size, device=None):
        return TritonArg(np.empty(0, self.array.dtype))

    def set_(self, storage, offset, size, stride):
        item = self.array.itemsize
        iface = dict(shape=tuple(size), typestr=self.array.dtype.str, version=3,
                     data=(storage.data_ptr() + offset * item, False),
                     strides=tuple(s * item for s in stride))
        self.array = np.asarray(_View(iface, storage.owner))
        self._storage = storage
        return self
