"""``nb.save`` / ``nb.load``: a dict of tensors (and QuantizedTensors) in one ``.npz``, no pickle.

>>> import nbaccel as nb, tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "w.npz")
>>> nb.save({"w": nb.arange(3.0), "qw": nb.quant.QuantizedTensor.from_float(nb.ones(2, 4))}, path)
>>> d = nb.load(path)
>>> d["w"].tolist(), d["qw"]
([0.0, 1.0, 2.0], QuantizedTensor(int8, shape=(2, 4)))

Layout: entry ``i`` of the dict is stored as array ``t{i}`` (a tensor) or as arrays
``t{i}.qdata`` / ``t{i}.scale`` / ``t{i}.zero_point`` (a QuantizedTensor); a JSON string under
``__nbaccel__`` holds the names, dtypes and quantization metadata. Every array is a plain
NumPy array, so ``np.load(path, allow_pickle=False)`` reads the file.
"""
from __future__ import annotations

import json
import os

import numpy as np

from . import dtypes as D
from .tensor import Tensor, asarray

_META = "__nbaccel__"
_FORMAT = 1


def _host(t: Tensor):
    """A NumPy array of the tensor's data, and the dtype name to restore it with."""
    arr = np.ascontiguousarray(t.detach().numpy(force=True))
    name = t.dtype.name
    if arr.dtype.kind == "V" or type(arr.dtype).__module__ != "numpy":
        arr = arr.view(f"u{arr.dtype.itemsize}")   # e.g. bfloat16: stored as its raw bits
    return arr, name


def _restore(arr, dtype_name, device=None):
    dt = D.dtype(dtype_name)
    if arr.dtype != dt.np:
        arr = arr.view(dt.np)
    return asarray(arr, device=device, _np=False)


def save(obj: dict, f) -> None:
    """Write a dict ``name -> Tensor | QuantizedTensor | ndarray`` (e.g. a ``state_dict()``)
    to ``f`` (a path or a binary file) as an ``.npz`` archive. An ``ExportedProgram`` is saved
    as its directory (``ep.save(f)``)."""
    from .quant.tensor import QuantizedTensor
    from .export.program import ExportedProgram
    if isinstance(obj, ExportedProgram):
        return obj.save(f)                     # an exported program: a directory (docs/export.md)
    if not isinstance(obj, dict):
        raise TypeError(f"nb.save expects a dict of tensors, got {type(obj).__name__}")
    arrays, entries = {}, []
    for i, (name, value) in enumerate(obj.items()):
        if not isinstance(name, str):
            raise TypeError(f"nb.save: keys must be strings, got {name!r}")
        key = f"t{i}"
        if isinstance(value, QuantizedTensor):
            parts = {}
            for part, t in value.tensors().items():
                arrays[f"{key}.{part}"], parts[part] = _host(t)
            entries.append({"name": name, "kind": "quantized", "parts": parts,
                            "meta": value.metadata()})
        elif isinstance(value, (Tensor, np.ndarray)):
            t = value if isinstance(value, Tensor) else asarray(value, _np=False)
            arrays[key], dtype_name = _host(t)
            entries.append({"name": name, "kind": "tensor", "dtype": dtype_name})
        else:
            raise TypeError(f"nb.save: entry {name!r} is a {type(value).__name__}; only tensors, "
                            "QuantizedTensors and NumPy arrays can be saved")
    arrays[_META] = np.array(json.dumps({"format": _FORMAT, "entries": entries}))
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:       # np.savez would append '.npz' to a bare path
            np.savez(fh, **arrays)
    else:
        np.savez(f, **arrays)


def load(f, map_location=None):
    """Read a file written by :func:`save`: a dict of Tensors and QuantizedTensors.
    ``map_location`` is a device to put them on (default: the CPU). A directory written by
    ``ExportedProgram.save`` loads as that ``ExportedProgram`` (see docs/export.md)."""
    from .quant.tensor import QuantizedTensor
    if isinstance(f, (str, os.PathLike)) and os.path.isdir(f):
        from .export.load import load as load_program
        return load_program(f)
    with np.load(f, allow_pickle=False) as z:
        if _META not in z.files:
            raise ValueError("nb.load: not a file written by nb.save (no metadata entry)")
        meta = json.loads(str(z[_META]))
        if meta.get("format") != _FORMAT:
            raise ValueError(f"nb.load: unknown format {meta.get('format')!r}")
        out = {}
        for i, e in enumerate(meta["entries"]):
            key = f"t{i}"
            if e["kind"] == "quantized":
                parts = {p: _restore(z[f"{key}.{p}"], dt, map_location) for p, dt in e["parts"].items()}
                out[e["name"]] = QuantizedTensor.from_parts(e["meta"], parts)
            else:
                out[e["name"]] = _restore(z[key], e["dtype"], map_location)
    return out
