"""The values going into and out of a compiled cell: what the cell function receives besides
its traced arrays (:class:`_Env`), which namespace values are traced, and the swap of NumPy's
own objects for nbaccel.numpy's on the way in and back on the way out."""
from __future__ import annotations

import types

import numpy as np

from .. import dtypes as D, numpy_api, numpy_routing
from ..daskbridge import is_dask_array
from ..tensor import Tensor


class _Env:
    """What the cell function receives besides its traced arrays (opaque to the compiler, so
    containers are passed as they are, never copied)."""

    __slots__ = ("values", "slots")

    def __init__(self, values, slots):
        self.values = values
        self.slots = slots          # (name in the notebook, name in the cell function)

    def collect(self, local_vars):
        """The cell's outputs under their notebook names (an input the function renamed, see
        cellnames.local_names, is still the notebook's name)."""
        return {k: local_vars[local] for k, local in self.slots if local in local_vars}


# where nbaccel.numpy's functions are defined (a cell's `from numpy import sum as npsum` holds
# one of them inside the cell, and NumPy's own again afterwards)
_NAMESPACE_MODULES = frozenset({numpy_api.__name__, numpy_routing.__name__})


# real NumPy module -> its nbaccel.numpy counterpart, for inputs the cell reads (the modules
# live as long as the process, so their ids stay theirs; built once, not on every read)
_NUMPY_OBJECTS = {id(np): numpy_api, id(np.linalg): numpy_api.linalg, id(np.fft): numpy_api.fft}


def _swap_in(value):
    """The value a cell should see for a user-namespace object (NumPy itself -> nbaccel.numpy)."""
    swapped = _NUMPY_OBJECTS.get(id(value))
    if swapped is not None:
        return swapped
    if isinstance(value, (types.BuiltinFunctionType, types.FunctionType, np.ufunc)):
        name = getattr(value, "__name__", "")
        if name and getattr(np, name, None) is value:
            return getattr(numpy_api, name, value)
    return value


def _swap_out(value):
    """Inverse of _swap_in for write-back: nbaccel.numpy objects go back as NumPy's own."""
    if value is numpy_api:
        return np
    if value is numpy_api.linalg:
        return np.linalg
    if value is numpy_api.fft:
        return np.fft
    if type(value) is numpy_api._UFunc:             # (isinstance also holds for NumPy's own)
        return value._ufunc
    if isinstance(value, D.DType) and getattr(value, "np", None) is not None:
        return np.dtype(value.np)                   # `d = x.dtype` holds NumPy's dtype
    if type(value).__name__ == "Device" and getattr(value, "type", None) == "cpu" \
            and type(value).__module__ == "nbaccel.devices":
        return "cpu"                                # NumPy's ndarray.device
    if callable(value) and getattr(value, "__module__", None) in _NAMESPACE_MODULES:
        return getattr(value, "__wrapped__", None) or getattr(np, getattr(value, "__name__", ""), value)
    return value


def _traceable(value):
    """Tensors and plain NumPy arrays of a dtype nbaccel has are traced; the rest passes as is."""
    if isinstance(value, Tensor) or is_dask_array(value):   # Dask arrays: see nbaccel/daskbridge
        return True
    if type(value) is not np.ndarray:
        return False
    try:
        D.dtype(value.dtype)
    except TypeError:
        return False
    return True
