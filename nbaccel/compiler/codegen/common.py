"""What every backend's code shares: the graph program, and the dtype rules that every
loop renderer needs spelled out (the op table's operand classes applied to one expression).

The *graph program* is generated Python that runs the schedule's steps in order. Buffers are
flat arrays: inputs are made contiguous once, kernels and extern ops write fresh flat
buffers, and every read of a view (a slice, a transpose, a broadcast) is the buffer plus a
layout (``strided``), so no movement op ever copies. Buffers are freed after their last use
so that later allocations can reuse the memory.
"""
from __future__ import annotations

import math
import sys

import numpy as np

from ... import dtypes as D
from ..schedule.ir import Node
from ..schedule.loops import Kernel
from ..schedule.schedule import ExternStep



def array_module(a):
    """CuPy for a CuPy array, else NumPy (CuPy is never imported here)."""
    return sys.modules["cupy"] if type(a).__module__.startswith("cupy") else np


def inputs_array_module(arrays):
    """The array module of a graph's inputs: CuPy when any is a CuPy array, else NumPy."""
    return next((array_module(a) for a in arrays if hasattr(a, "dtype")), np)

# The graph program's helpers, written once against the buffers' array module (NumPy on the
# CPU, CuPy on a GPU): every tier's program calls these.

def strided(flat, shape, strides, offset):
    """A view of a flat buffer: ``strides`` in elements; size-1 axes broadcast."""
    n, expect = 1, 1      # a C-contiguous layout is a reshape (as_strided costs ~8 µs a call)
    for s, st in zip(reversed(shape), reversed(strides)):
        if s != 1 and st != expect:
            break
        expect *= s
        n *= s
    else:
        if offset + n <= flat.size:
            return flat[offset:offset + n].reshape(shape)
    item = flat.itemsize
    byte_strides = tuple(s * item for s in strides)
    if flat.size and type(flat) is np.ndarray:
        try:    # the ndarray constructor on the flat buffer: a few µs less than as_strided
            return np.ndarray(shape, flat.dtype, flat, offset * item, byte_strides)
        except (ValueError, TypeError):
            pass
    xp = np if type(flat) is np.ndarray else array_module(flat)
    return xp.lib.stride_tricks.as_strided(flat[offset:] if flat.size else flat, shape, byte_strides)


def flat(a):
    """A contiguous 1-D view (a copy only for a non-contiguous input)."""
    xp = np if type(a) is np.ndarray else array_module(a)
    return xp.ascontiguousarray(xp.asarray(a)).reshape(-1)


# -- dtype rules of one expression (the op table's operand classes, ops/registry.py) -----------

_KIND_RANK = {"b": 0, "i": 1, "u": 1, "f": 2, "c": 3}


def operand_dtype(e):
    """The dtype the array operands of ``e`` promote to (a weak Python scalar takes it): the
    values of a ``select`` op (where), not its condition."""
    ts = [a for a in e.args if not (a.kind == "const" and a.dtype is None)]
    if e.op.operands == "select":
        ts = ts[1:] or ts
    if not ts:
        return e.dtype
    return D.result_type(*[a.dtype for a in ts])


def weak_dtype(e, value):
    """The dtype a weak Python scalar operand of ``e`` is computed in: NumPy's loop dtype, which
    is the result dtype, except for comparisons (operand class ``common``), where a scalar of a
    higher kind than the array (a float next to ints or bools) is compared in its own default
    dtype."""
    if e.op.operands != "common":
        return e.dtype
    base = operand_dtype(e)
    kind = "b" if isinstance(value, bool) else "i" if isinstance(value, int) else \
        "f" if isinstance(value, float) else "c"
    if _KIND_RANK[kind] > _KIND_RANK[base.kind]:
        return {"i": D.int64, "f": D.float64, "c": D.complex128}[kind]
    return base


def is_cast(e):
    """astype: a conversion whose dtype is a parameter; every renderer spells it itself."""
    return e.op.name == "astype"


# params that say how NumPy lays out a copy (clone's ``order``): only the trace's view
# decisions read them (schedule/views.py); a kernel's copy is its output buffer
_LAYOUT_ONLY = frozenset({"order"})


def unrendered_params(e) -> bool:
    """Whether ``e`` has parameters a kernel renderer cannot spell: any but a cast's dtype
    (each renderer spells it) and a copy's layout (:data:`_LAYOUT_ONLY`)."""
    return not is_cast(e) and any(k not in _LAYOUT_ONLY for k in e.params)


def small_power(e):
    """The exponent c of ``x ** c`` when NumPy computes it exactly another way, else None: 2 and
    3 are products, 0 and 1 trivial, and for floats -1 and 0.5 are a reciprocal and a square
    root (NumPy's own fast paths). Each renderer spells the cases it can; the rule is one."""
    if e.kind != "op" or e.op.name != "power" or e.args[1].kind != "const":
        return None
    v = e.args[1].value
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    kind = e.dtype.kind
    if (v in (2, 3) and kind in "iufc") or (v in (0, 1) and kind in "iuf") or (v in (-1, 0.5) and kind == "f"):
        return v
    return None


def view_text(buf, lay):
    if lay.is_contiguous() and math.prod(lay.shape) == math.prod(buf.shape):
        return f"{ref_name(buf)}.reshape({lay.shape!r})"
    return f"strided({ref_name(buf)}, {lay.shape!r}, {lay.strides!r}, {lay.offset})"


def ref_name(n: Node) -> str:
    return f"in{n.index}" if n.is_placeholder else f"v{n.index}"


def literal(v):
    """A Python scalar as source text (inf and nan have no literal of their own)."""
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return f"float({str(v)!r})"
    return repr(v)


def render_program(sch, kernel_names, backend) -> str:
    """The graph program: one Python function ``run(inputs) -> outputs``."""
    g = sch.graph
    last_use: dict[int, int] = {}
    for s in sch.steps:
        for a in _step_inputs(s):
            last_use[id(a)] = s.index
    end = len(sch.steps)
    for o in sch.outputs:
        last_use[id(o if isinstance(o, Node) else o[0])] = end
    lines = [f"# graph program ({backend} tier), generated by nbaccel",
             "def run(inputs):"]
    for p in g.placeholders:
        lines.append(f"    {ref_name(p)} = flat(inputs[{p.index}])  # {p.name}")
    for s in sch.steps:
        if isinstance(s, Kernel):
            for o in s.outputs:
                lines.append(f"    {ref_name(o)} = alloc({o.index}, {math.prod(o.shape)}, DT[{o.index}])")
            args = [ref_name(a) for a in s.inputs] + [ref_name(o) for o in s.outputs]
            lines.append(f"    {kernel_names[s.index]}({', '.join(args)})  # {s.ranges_text()} "
                         f"{', '.join(dict.fromkeys(s.op_names()))}")
        else:
            n = s.node
            views = iter(s.views)
            args = ", ".join(view_text(*next(views)) if isinstance(a, Node) else literal(a) for a in n.args)
            lines.append(f"    {ref_name(n)} = flat(extern({n.index}, {args}))  # {n.op.name}")
        dead = [a for a in _step_inputs(s) if last_use.get(id(a)) == s.index and not a.is_placeholder]
        if dead:
            lines.append("    del " + ", ".join(dict.fromkeys(ref_name(a) for a in dead)))
    outs = []
    for o in sch.outputs:
        if isinstance(o, Node):
            outs.append(f"inputs[{o.index}]")
        else:
            outs.append(view_text(*o))
    lines.append("    return [" + ", ".join(outs) + "]")
    return "\n".join(lines) + "\n"


def _step_inputs(s):
    if isinstance(s, Kernel):
        return s.inputs
    return [b for b, _ in s.views]


def make_extern(sch):
    """extern(index, *arrays): run node ``index`` through its op's eager implementation, on
    the array module of its arguments."""
    by_index = {s.node.index: s.node for s in sch.steps if isinstance(s, ExternStep)}

    def extern(index, *arrays):
        n = by_index[index]
        xp = inputs_array_module(arrays)
        out = xp.asarray(n.op.impl(xp, *arrays, **n.params))
        return out if out.dtype == n.dtype.np else out.astype(n.dtype.np)
    return extern


class BufferPool:
    """Kernel output buffers kept from one call to the next: a buffer nobody else holds any
    more (the caller dropped the result, an intermediate was freed) is written again instead of
    a fresh one. A fresh 64 MB buffer costs its page faults on every call, about as much as a
    fused kernel's work, and the spread of those costs made run times bimodal."""

    def __init__(self):
        self.xp = np
        self.by_module = {np.__name__: {}}
        self.buffers: dict[int, np.ndarray] = self.by_module[np.__name__]

    def use(self, xp):
        """Allocate with ``xp`` (NumPy or CuPy) from now on; each module keeps its own buffers."""
        if xp is not self.xp:
            self.xp = xp
            self.buffers = self.by_module.setdefault(xp.__name__, {})

    def __call__(self, key, n, dtype):
        a = self.buffers.get(key)
        # references: the pool's, this local, getrefcount's argument; any more is a live view
        if a is not None and sys.getrefcount(a) <= 3:
            return a
        a = self.xp.empty(n, dtype=dtype)
        self.buffers[key] = a
        return a


def program_namespace(sch, kernels: dict, pool: BufferPool):
    ns = {"np": np, "flat": flat, "strided": strided, "extern": make_extern(sch), "alloc": pool,
          "DT": {n.index: n.dtype.np for n in sch.graph.nodes}}
    ns.update(kernels)
    return ns
