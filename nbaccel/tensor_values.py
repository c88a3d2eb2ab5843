"""A tensor as Python and NumPy values: ``numpy()``, ``__array__``, ``tolist``, ``bool``/``float``/
``int``/``index``/``complex``, printing (``repr``, ``str``, ``format``), and the dtype shorthands
(``.float()``, ``.double()``, ``.long()``, ...).

``TensorValues`` is a base class of ``Tensor`` (``tensor.py``). A concrete value of a tracer is
a graph break: each conversion asks ``self._value(reason)``, whose reason names what asked.
``item`` stays on Tensor itself: ``ndarray_methods`` wraps the class's own ``item`` with
NumPy's meaning for NumPy-flavoured tensors.
"""
from __future__ import annotations

import numpy as np

from . import dtypes as D


class TensorValues:
    """Conversions of a tensor to Python and NumPy values (a base class of Tensor)."""

    __slots__ = ()      # Tensor's fields are its own slots: no instance dict

    def numpy(self, *, force=False):
        a = self._value("a NumPy array is needed (.numpy())")
        if self.device.type != "cpu":
            if not force:
                raise TypeError(f"can't convert a {self.device} tensor to NumPy: use .cpu() first")
            a = a.get()
        return a

    def __array__(self, dtype=None, copy=None):
        a = self._value("a NumPy array is needed (np.asarray / __array__)")
        if self.device.type != "cpu":
            raise TypeError(f"implicit conversion of a {self.device} tensor to NumPy is not "
                            "allowed: use .cpu() first")
        if dtype is not None and np.dtype(dtype) != a.dtype:
            return a.astype(dtype)
        return a.copy(order="K") if copy else a     # (as np.array copies an ndarray: its layout kept)

    def _scalar(self, construct):
        """The Python number of a one-element tensor; ``construct`` (``.item()``, ``float()``,
        ...) names what asked for it in a graph break's reason."""
        if self.numel() != 1:
            if construct != ".item()":
                return self.item()           # its error (NumPy's for NumPy-flavoured tensors)
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to a "
                               "Python scalar")
        return self._value(f"a Python scalar is needed ({construct})").reshape(()).item()

    def tolist(self):
        return self._value("a Python list is needed (.tolist())").tolist()

    def __bool__(self):
        if self.numel() != 1:
            raise ValueError(f"The truth value of a tensor with {self.numel()} elements is "
                             "ambiguous. Use a.any() or a.all()")
        return bool(self._value("a Python bool is needed (`if`, `and`, `or`, bool())").reshape(()).item())

    def __float__(self):
        return float(self._scalar("float()"))

    def __int__(self):
        return int(self._scalar("int()"))

    def __index__(self):
        if self.dtype.kind not in "iu" or self.ndim:
            raise TypeError("only integer 0-d tensors can be converted to an index")
        return int(self._scalar("an index"))

    def __complex__(self):
        return complex(self._scalar("complex()"))

    def __repr__(self):
        if self._node is not None and self._data is None:
            a = self._value("the tensor is printed")
        else:
            a = self._data
        if self.device.type != "cpu":
            a = a.get()
        if D.is_bfloat16(a.dtype):
            a = a.astype(np.float32)
        body = np.array2string(np.asarray(a), separator=", ", prefix="tensor(")
        extra = []
        if self.dtype not in (D.float32, D.int64, D.bool_):
            extra.append(f"dtype={self.dtype.name}")
        if self.device.type != "cpu":
            extra.append(f"device='{self.device}'")
        if self.grad_fn is not None:
            extra.append(f"grad_fn={self.grad_fn!r}")
        elif self.requires_grad:
            extra.append("requires_grad=True")
        return "tensor(" + body + "".join(", " + e for e in extra) + ")"

    def __str__(self):
        if self._np:   # NumPy-flavoured tensors print like NumPy (print() in a %%compile cell)
            a = self._value("the tensor is printed")
            a = a.get() if self.device.type != "cpu" else a
            return str(a[()] if a.ndim == 0 else a)
        return self.__repr__()

    def __format__(self, spec):
        if self.ndim == 0:
            return format(self.item(), spec)
        return format(str(self), spec)

    def float(self):
        return self.astype(D.float32)

    def double(self):
        return self.astype(D.float64)

    def half(self):
        return self.astype(D.float16)

    def bfloat16(self):
        return self.astype(D.bfloat16)

    def long(self):
        return self.astype(D.int64)

    def int(self):
        return self.astype(D.int32)

    def bool(self):
        return self.astype(D.bool_)

    def type(self, dtype=None):
        return self.dtype.name if dtype is None else self.astype(dtype)
