"""The generated source of one stage: a plain Python function over op-table names.

    def stage(a0, a1):
        v0 = op('multiply', a0, a1)
        v1 = op('tanh', v0)
        return (op('sum', v1, axis=(0,), keepdims=True),)

This text (and its hash, the cache key) is what a worker receives: it rebuilds the function
and compiles it with ``nb.compile`` (worker.py). No nbaccel object crosses the wire.
"""
from __future__ import annotations

import hashlib
import math

import numpy as np

from .. import dtypes as D
from .errors import NotChunkWork

HEADER = "# nbaccel Dask stage (generated)\n"


def literal(v, what="a value"):
    """Python source for a constant of a node (args and params)."""
    if v is None or isinstance(v, (bool, str)):
        return repr(v)
    if isinstance(v, int):
        return repr(int(v))
    if isinstance(v, float):
        if math.isnan(v):
            return "float('nan')"
        if math.isinf(v):
            return "float('inf')" if v > 0 else "float('-inf')"
        return repr(v)
    if isinstance(v, D.DType):
        return f"dt({v.name!r})"
    if isinstance(v, np.generic) and v.dtype.kind in "biuf":
        return f"np.{v.dtype.name}({literal(v.item())})"
    if isinstance(v, tuple):
        return "(" + "".join(literal(x, what) + ", " for x in v) + ")"
    raise NotChunkWork(f"{what} of type {type(v).__name__} has no source form")


def call_text(op_name, args, params):
    parts = [repr(op_name)] + list(args)
    for k, v in params.items():
        if k == "device":
            continue
        parts.append(f"{k}={literal(v, f'parameter {k!r} of {op_name}')}")
    return f"op({', '.join(parts)})"


class StageSource:
    """Builds the function text: inputs ``a0..``, one line per node, extra partial lines."""

    def __init__(self, inputs):
        self.names = {}                     # node -> variable name
        for i, node in enumerate(inputs):
            self.names[node] = f"a{i}"
        self.params = [f"a{i}" for i in range(len(inputs))]
        self.lines = []

    def ref(self, a):
        if hasattr(a, "graph") and hasattr(a, "op"):
            return self.names[a]
        return literal(a, "an argument")

    def node(self, n):
        var = f"v{n.index}"
        self.lines.append(f"    {var} = {call_text(n.op.name, [self.ref(a) for a in n.args], n.params)}")
        self.names[n] = var
        return var

    def line(self, var, op_name, args, params):
        self.lines.append(f"    {var} = {call_text(op_name, args, params)}")
        return var

    def text(self, returns):
        body = "\n".join(self.lines)
        ret = "    return (" + "".join(r + ", " for r in returns) + ")"
        return f"{HEADER}def stage({', '.join(self.params)}):\n" + (body + "\n" if body else "") + ret + "\n"


def key_of(source: str, backend: str) -> str:
    return hashlib.sha256(f"{backend}\n{source}".encode()).hexdigest()[:20]
