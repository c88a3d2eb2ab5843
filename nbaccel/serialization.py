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

Anything else PyTorch's ``torch.save`` is used for (a single tensor, a list, a tuple, nested
dicts with any keys such as an optimizer's ``state_dict()``, Python numbers, strings, None)
is written as format 2: the tensors as arrays ``t{i}`` as above, and the object's structure
as a JSON tree under ``__nbaccel__`` whose leaves refer to them. A flat ``{str: tensor}`` dict
is still written as format 1, so files stay readable by older versions; ``load`` reads both.
There is still no pickle: an object that is none of these raises ``TypeError``.

Formats 3 and 4 are formats 1 and 2 holding a QuantizedTensor whose int4 codes are not
row-major: its metadata names the layout (``"layout": "rows4x64"``, see
``nbaccel.quant.layout``). A file is written as 3 / 4 only then, so that a version that knows
no layouts refuses it ("unknown format") instead of reading interleaved codes as row-major;
every other file stays 1 / 2. Quantized metadata without a layout is row-major.
"""
from __future__ import annotations

import json
import os

import numpy as np

from . import dtypes as D
from .convert import asarray
from .tensor import Tensor, Parameter
from .dtypes import DType

_META = "__nbaccel__"
_FORMAT = 1
_TREE_FORMAT = 2
# formats 1 / 2 with a non-row-major QuantizedTensor in them (module docstring)
_LAYOUT_FORMAT = {_FORMAT: 3, _TREE_FORMAT: 4}
_KNOWN = {_FORMAT: _FORMAT, _TREE_FORMAT: _TREE_FORMAT, 3: _FORMAT, 4: _TREE_FORMAT}

# What the layers above save through this module register here, so that it imports none of
# them (they sit above it and import the engine it is part of):
# kind -> (type, parts(value) -> ({part: Tensor}, metadata), from_parts(metadata, {part: Tensor}))
_PARTED: dict = {}
_DIRECTORY: list = []          # (type, load(path)): saved as a directory by ``value.save(path)``


def register_parted(kind: str, cls, parts, from_parts):
    """Save ``cls`` values as named tensor parts and JSON metadata, under entries of ``kind``
    (``nbaccel.quant`` registers QuantizedTensor as ``"quantized"``)."""
    _PARTED[kind] = (cls, parts, from_parts)


def register_directory(cls, load_directory):
    """Save ``cls`` values as a directory, with their own ``save(path)``, and read a directory
    back with ``load_directory(path)`` (``nbaccel.export`` registers ExportedProgram)."""
    _DIRECTORY.append((cls, load_directory))


def _parted_kind(value):
    return next((kind for kind, (cls, _, _) in _PARTED.items() if isinstance(value, cls)), None)


def _tensor_like(value) -> bool:
    return isinstance(value, (Tensor, np.ndarray)) or _parted_kind(value) is not None


def _from_parts(kind, meta, z, key, dtypes, device):
    parts = {p: _restore(z[f"{key}.{p}"], dt, device) for p, dt in dtypes.items()}
    return _PARTED[kind][2](meta, parts)


def _host(t: Tensor):
    """A NumPy array of the tensor's data, and the dtype name to restore it with."""
    arr = t.detach().numpy(force=True)
    arr = np.ascontiguousarray(arr).reshape(arr.shape)     # (ascontiguousarray makes 0-d 1-d)
    name = t.dtype.name
    if arr.dtype.kind == "V" or type(arr.dtype).__module__ != "numpy":
        arr = arr.view(f"u{arr.dtype.itemsize}")   # e.g. bfloat16: stored as its raw bits
    return arr, name


def _restore(arr, dtype_name, device=None):
    dt = D.dtype(dtype_name)
    if arr.dtype != dt.np:
        arr = arr.view(dt.np)
    return asarray(arr, device=device, _np=False)


def _flat(obj):
    """Is ``obj`` a dict that format 1 holds (string keys, tensor-like values)?"""
    return isinstance(obj, dict) and all(isinstance(k, str) and _tensor_like(v) for k, v in obj.items())


def _write(arrays, f):
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:       # np.savez would append '.npz' to a bare path
            np.savez(fh, **arrays)
    else:
        np.savez(f, **arrays)


def _tensor_entry(value, key, arrays):
    """Store one tensor-like under ``key``; its JSON description."""
    kind = _parted_kind(value)
    if kind is not None:
        tensors, meta = _PARTED[kind][1](value)
        parts = {}
        for part, t in tensors.items():
            arrays[f"{key}.{part}"], parts[part] = _host(t)
        return {"kind": kind, "parts": parts, "meta": meta}   # (a quantized layout in meta)
    t = value if isinstance(value, Tensor) else asarray(value, _np=False)
    arrays[key], dtype_name = _host(t)
    entry = {"kind": "tensor", "dtype": dtype_name}
    if isinstance(value, np.ndarray):
        entry["ndarray"] = True
    elif value.requires_grad:
        entry["requires_grad"] = True
    if isinstance(value, Parameter):
        entry["parameter"] = True
    return entry


def _encode(obj, arrays):
    """The JSON tree of ``obj``; tensors go into ``arrays``."""
    if _tensor_like(obj):
        key = f"t{len(arrays)}"          # unique: earlier keys are t{m} or t{m}.part, m < len
        return {"$tensor": key, **_tensor_entry(obj, key, arrays)}
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, float)) and not isinstance(obj, np.generic):
        return {"$int": str(obj)} if isinstance(obj, int) else {"$float": repr(float(obj))}
    if isinstance(obj, np.generic):
        return {"$np": obj.dtype.str, "value": obj.item() if obj.dtype.kind in "biuf" else str(obj)}
    if isinstance(obj, complex):
        return {"$complex": [obj.real, obj.imag]}
    if isinstance(obj, dict):
        return {"$dict": [[_encode(k, arrays), _encode(v, arrays)] for k, v in obj.items()]}
    if isinstance(obj, tuple):
        return {"$tuple": [_encode(v, arrays) for v in obj]}
    if isinstance(obj, list):
        return [_encode(v, arrays) for v in obj]
    if isinstance(obj, DType):
        return {"$dtype": obj.name}
    raise TypeError(f"nb.save: cannot save a {type(obj).__name__} (nbaccel saves tensors, "
                    "NumPy arrays, QuantizedTensors, numbers, strings, None and lists, tuples "
                    "and dicts of them; it never pickles)")


def save(obj, f, *args, **kwargs) -> None:
    """Write ``obj`` to ``f`` (a path or a binary file) as an ``.npz`` archive: a tensor, a
    NumPy array, a ``state_dict()``, an optimizer's ``state_dict()``, or any list / tuple / dict
    of tensors, numbers, strings and None (see the module docstring for the layout). An
    ``ExportedProgram`` is saved as its directory (``ep.save(f)``). PyTorch's extra arguments
    (``pickle_module``, ``_use_new_zipfile_serialization``) are accepted and ignored."""
    for cls, _ in _DIRECTORY:
        if isinstance(obj, cls):
            return obj.save(f)                 # an exported program: a directory (docs/export.md)
    arrays = {}
    if _flat(obj):
        entries = []
        for i, (name, value) in enumerate(obj.items()):
            entry = _tensor_entry(value, f"t{i}", arrays)
            entry.pop("ndarray", None), entry.pop("requires_grad", None), entry.pop("parameter", None)
            entries.append({"name": name, **entry})
        meta = {"format": _FORMAT, "entries": entries}
    else:
        meta = {"format": _TREE_FORMAT, "tree": _encode(obj, arrays)}
    if _has_layout(meta):
        meta["format"] = _LAYOUT_FORMAT[meta["format"]]
    arrays[_META] = np.array(json.dumps(meta))
    _write(arrays, f)


def _has_layout(node) -> bool:
    """Does the JSON description hold a quantized entry whose metadata names a layout?"""
    if isinstance(node, list):
        return any(_has_layout(v) for v in node)
    if not isinstance(node, dict):
        return False
    if node.get("kind") == "quantized" and "layout" in node.get("meta", {}):
        return True
    return any(_has_layout(v) for v in node.values())


def _device_of(map_location):
    """PyTorch's ``map_location`` spellings that name one device: a string, a Device, or a
    dict / callable mapping (resolved for 'cpu', the only place nbaccel files come from)."""
    if map_location is None:
        return None
    if isinstance(map_location, dict):
        return map_location.get("cpu", None)
    if callable(map_location) and not isinstance(map_location, str):
        return None
    return map_location


def _decode(node, z, device):
    if isinstance(node, list):
        return [_decode(v, z, device) for v in node]
    if not isinstance(node, dict):
        return node
    if "$tensor" in node:
        key = node["$tensor"]
        if node["kind"] in _PARTED:
            return _from_parts(node["kind"], node["meta"], z, key, node["parts"], device)
        if node.get("ndarray"):
            arr = z[key]
            dt = D.dtype(node["dtype"])
            return arr.view(dt.np) if arr.dtype != dt.np else arr
        t = _restore(z[key], node["dtype"], device)
        if node.get("parameter"):
            return Parameter(t, requires_grad=node.get("requires_grad", False))
        return t.requires_grad_(True) if node.get("requires_grad") else t
    if "$int" in node:
        return int(node["$int"])
    if "$float" in node:
        return float(node["$float"])
    if "$complex" in node:
        return complex(*node["$complex"])
    if "$np" in node:
        return np.array(node["value"], dtype=np.dtype(node["$np"]))[()]
    if "$dtype" in node:
        return D.dtype(node["$dtype"])
    if "$tuple" in node:
        return tuple(_decode(v, z, device) for v in node["$tuple"])
    if "$dict" in node:
        return {_hashable(_decode(k, z, device)): _decode(v, z, device) for k, v in node["$dict"]}
    raise ValueError(f"nb.load: unknown entry {sorted(node)!r}")


def _hashable(k):
    return tuple(_hashable(v) for v in k) if isinstance(k, list) else k


def load(f, map_location=None, *, weights_only=None, mmap=None, **kwargs):
    """Read a file written by :func:`save`: whatever was saved (a dict of Tensors and
    QuantizedTensors for a ``state_dict``). ``map_location`` is a device to put tensors on
    (default: the CPU). ``weights_only`` is accepted: loading never runs code, whatever its
    value. A directory written by ``ExportedProgram.save`` loads as that ``ExportedProgram``
    (see docs/export.md)."""
    if isinstance(f, (str, os.PathLike)) and os.path.isdir(f):
        if not _DIRECTORY:
            raise ValueError(f"nb.load: {os.fspath(f)!r} is a directory, and no saver of directories is registered")
        return _DIRECTORY[0][1](f)
    device = _device_of(map_location)
    with np.load(f, allow_pickle=False) as z:
        if _META not in z.files:
            raise ValueError("nb.load: not a file written by nb.save (no metadata entry)")
        meta = json.loads(str(z[_META]))
        structure = _KNOWN.get(meta.get("format"))
        if structure is None:
            raise ValueError(f"nb.load: unknown format {meta.get('format')!r}")
        if structure == _TREE_FORMAT:
            return _decode(meta["tree"], z, device)
        out = {}
        for i, e in enumerate(meta["entries"]):
            key = f"t{i}"
            if e["kind"] in _PARTED:
                out[e["name"]] = _from_parts(e["kind"], e["meta"], z, key, e["parts"], device)
            else:
                out[e["name"]] = _restore(z[key], e["dtype"], device)
    return out


class safe_globals:
    """PyTorch's allow-list for unpickling (``torch.serialization.safe_globals``). nbaccel
    files hold no pickles, so there is nothing to allow: a no-op context manager."""

    def __init__(self, safe_globals=()):
        self.safe_globals = list(safe_globals)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def add_safe_globals(safe_globals):
    """A no-op, as :class:`safe_globals` (nothing is unpickled)."""


def get_safe_globals():
    return []
