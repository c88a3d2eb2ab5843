"""A state_dict as flat entries: nested dicts (a model's and an optimizer's state_dict side by
side, as ``{"model": ..., "optim": ...}``) become dotted keys; each leaf is a tensor, a sharded
or quantized or 2:4 tensor, or a JSON value (a step count, a learning rate, betas)."""
from __future__ import annotations

import re

import numpy as np

from ...tensor import Tensor
from ..sharded import ShardedTensor
from ...quant.tensor import QuantizedTensor
from ...sparse.semi_structured import SparseSemiStructuredTensor

_SAFE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


def walk(obj, path=()):
    """Yield ``(path, container, name, leaf)`` for every leaf of a nested state_dict (dicts, and
    lists that hold more than JSON values, like an optimizer's ``param_groups``), and
    ``(path, container, name, EMPTY)`` for an empty dict (filled from the checkpoint on load)."""
    items = obj.items() if isinstance(obj, dict) else enumerate(obj)
    for name, value in items:
        if not isinstance(name, (str, int)) or isinstance(name, bool):
            raise TypeError(f"checkpoint: state_dict keys must be strings or ints, got {name!r} "
                            f"under {key_of(path)!r}")
        p = path + (name,)
        if isinstance(value, dict):
            if value:
                yield from walk(value, p)
            else:
                yield p, obj, name, EMPTY
        elif isinstance(value, list) and not is_json_value(value):
            yield from walk(value, p)
        else:
            yield p, obj, name, value


class _Empty:
    def __repr__(self):
        return "EMPTY"


EMPTY = _Empty()


def key_of(path) -> str:
    return ".".join(str(p) for p in path)


def kind_of(value) -> str:
    if isinstance(value, (Tensor, np.ndarray, ShardedTensor)) or hasattr(value, "__nbaccel_checkpoint__"):
        return "tensor"
    if isinstance(value, QuantizedTensor):
        return "quantized"
    if isinstance(value, SparseSemiStructuredTensor):
        return "sparse_2_4"
    if is_json_value(value):
        return "value"
    return "unsupported"


def is_json_value(v) -> bool:
    if v is None or isinstance(v, (bool, int, str)):
        return True
    if isinstance(v, float):
        return True                           # NaN / inf are written as JSON's NaN / Infinity
    if isinstance(v, (list, tuple)):
        return all(is_json_value(x) for x in v)
    return False


def array_names(keys) -> dict:
    """A file-system-safe, unique array name for every array key (the key itself when safe)."""
    out, used = {}, set()
    for i, k in enumerate(keys):
        ok = _SAFE.match(k) and len(k) < 200 and k.lower() not in used and k.lower() != "zarr.json"
        name = k if ok else f"~{i}"     # "~" never starts a safe key
        used.add(name.lower())
        out[k] = name
    return out
