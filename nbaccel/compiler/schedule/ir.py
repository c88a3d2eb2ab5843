"""The compiler's IR: a graph of nodes, each one application of an op-table op.

A Node is small and slotted; a Graph prints like a short program:

    graph(x: f32[64, 128], w: f32[128]):
      %0 = multiply(x, w)            f32[64, 128]
      %1 = tanh(%0)                  f32[64, 128]
      return %1

and has a structural fingerprint (ops, params, wiring, input shapes/dtypes) used as the cache
key: equal fingerprints mean the same computation on the same kind of inputs.
"""
from __future__ import annotations

import hashlib
import math

import numpy as np

from ... import dtypes as D


class Node:
    __slots__ = ("op", "args", "params", "shape", "dtype", "graph", "index", "name", "where",
                 "np_flavour", "array_result", "fp", "__weakref__")

    def __init__(self, op, args, params, shape, dtype, graph, index, name=None):
        self.op = op            # an OpDef, or None for a placeholder
        self.args = args        # tuple of Node | Python scalar
        self.params = params    # dict of hashable values
        self.shape = tuple(shape)
        self.dtype = dtype
        self.graph = graph
        self.index = index
        self.name = name        # placeholders: the user-facing name ("x", "w", "arg0")
        self.where = None       # (filename, lineno) of the user's line that made it
        self.np_flavour = False  # made by NumPy's namespace with no array argument (np.arange)
        self.array_result = False  # made by a NumPy function that returns arrays (np.where)
        self.fp = None          # the floating-point state its op ran under (fpflags.FPState)

    @property
    def is_placeholder(self):
        return self.op is None

    def ref(self):
        return self.name if self.op is None else f"%{self.index}"

    def __repr__(self):
        return f"<Node {self.ref()} {self.op.name if self.op else 'input'} {fmt_type(self.dtype, self.shape)}>"


_SHORT = {"bool": "b8", "int8": "i8", "uint8": "u8", "int16": "i16", "int32": "i32", "int64": "i64",
          "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64"}


def fmt_type(dtype, shape, dyn=None):
    dims = ", ".join(dyn.get(i, str(s)) if dyn else str(s) for i, s in enumerate(shape))
    return f"{_SHORT.get(dtype.name, dtype.name)}[{dims}]"


def fmt_param(v):
    if isinstance(v, D.DType):
        return v.name
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, tuple):
        return "(" + ", ".join(fmt_param(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    return repr(v) if isinstance(v, str) else str(v)


def fmt_arg(a):
    return a.ref() if isinstance(a, Node) else fmt_param(a)


class Graph:
    """Placeholders (inputs), nodes in recording order, outputs."""

    def __init__(self):
        self.placeholders: list[Node] = []
        self.nodes: list[Node] = []
        self.outputs: list[Node] = []
        self.dynamic: dict[int, dict[int, str]] = {}   # placeholder index -> {dim: symbol}

    def placeholder(self, shape, dtype, name):
        n = Node(None, (), {}, shape, dtype, self, len(self.placeholders), name)
        self.placeholders.append(n)
        return n

    def add(self, op, args, params, shape, dtype):
        n = Node(op, args, params, shape, dtype, self, len(self.nodes))
        self.nodes.append(n)
        return n

    # -- text ---------------------------------------------------------------------------------
    def __str__(self):
        ins = ", ".join(f"{p.name}: {fmt_type(p.dtype, p.shape, self.dynamic.get(p.index))}"
                        for p in self.placeholders)
        lines = [f"graph({ins}):"]
        for n in self.nodes:
            args = [fmt_arg(a) for a in n.args]
            args += [f"{k}={fmt_param(v)}" for k, v in n.params.items() if k != "device"]
            lhs = f"  {n.ref()} = {n.op.name}({', '.join(args)})"
            lines.append(f"{lhs:<48} {fmt_type(n.dtype, n.shape)}")
        lines.append("  return " + ", ".join(o.ref() for o in self.outputs))
        return "\n".join(lines)

    # -- identity -------------------------------------------------------------------------------
    def structure(self, dynamic=None):
        """A hashable description of the computation. Node shapes are left out: they follow
        from the input shapes and the params. Dynamic input dims appear as symbols."""
        dynamic = self.dynamic if dynamic is None else dynamic
        ins = []
        for p in self.placeholders:
            dyn = dynamic.get(p.index, {})
            ins.append((p.dtype.name, tuple(dyn.get(i, s) for i, s in enumerate(p.shape))))
        body = []
        for n in self.nodes:
            args = tuple(("%" if not a.is_placeholder else "$", a.index) if isinstance(a, Node)
                         else (type(a).__name__, _signed(a)) for a in n.args)
            body.append((n.op.name, args, tuple(sorted((k, _hashable(v)) for k, v in n.params.items()))))
        outs = tuple(("$" if o.is_placeholder else "%", o.index) for o in self.outputs)
        return (tuple(ins), tuple(body), outs)

    def fingerprint(self, dynamic=None, extra=()):
        """The in-memory cache key: the structure itself (tuples compare exactly, no hashing
        collisions to reason about). ``digest`` gives a short stable text form."""
        return (self.structure(dynamic), extra)

    def digest(self, dynamic=None, extra=()):
        return hashlib.sha256(repr(self.fingerprint(dynamic, extra)).encode()).hexdigest()[:24]


def _signed(v):
    """A constant as the structure compares it: a negative zero apart from zero (0.0 == -0.0,
    but x / -0.0 is -inf: one compiled program for both would hand back the other's result)."""
    if isinstance(v, (float, np.floating)):
        if v == 0 and math.copysign(1.0, v) < 0:
            return ("-0", repr(v))
    elif isinstance(v, (complex, np.complexfloating)):
        if any(part == 0 and math.copysign(1.0, part) < 0 for part in (v.real, v.imag)):
            return ("-0", repr(v))
    return v


def _hashable(v):
    v = _signed(v) if type(v) is float else v
    if isinstance(v, D.DType):
        return ("dtype", v.name)
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, float) and v != v:
        return ("float", "nan")
    if hasattr(v, "type") and hasattr(v, "index") and not isinstance(v, (int, str)):
        return ("device", str(v))
    return v
