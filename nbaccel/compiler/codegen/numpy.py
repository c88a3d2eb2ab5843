"""The fused NumPy tier: always available, zero compile wait.

Each fused kernel becomes straight-line NumPy over row chunks that stay in cache: every
primitive writes into a reused chunk buffer with ``out=``, reductions use ``ufunc.reduce``
with ``keepdims``, kernel outputs are written in place. Large kernels split their rows
between two threads (ufuncs release the GIL). The same renderer, run op by op without
chunks, is the reference interpreter the other backends are tested against.
"""
from __future__ import annotations

import concurrent.futures
import os

import numpy as np

from ..ir import Node
from ..schedule import IDENTITY_OPS, FusedKernel
from .common import kernel_input_classes, literal as _literal

_REDUCE_UFUNC = {"sum": "add", "amax": "maximum", "amin": "minimum", "prod": "multiply"}
_POOL = None
THREADS = max(1, min(2, os.cpu_count() or 1))
CHUNK_ELEMS = 1 << 15          # elements per chunk buffer: 128 KiB of float32, stays in L2
PARALLEL_MIN_ELEMS = 1 << 20   # below this, one thread


def _pool():
    global _POOL
    if _POOL is None:
        _POOL = concurrent.futures.ThreadPoolExecutor(THREADS, thread_name_prefix="nbaccel-np")
    return _POOL


def run_parts(part, R, C):
    """Run part(lo, hi) over row ranges, on two threads when the kernel is large."""
    if THREADS < 2 or R * C < PARALLEL_MIN_ELEMS or R < 2:
        part(0, R)
        return
    mid = R // 2
    futs = [_pool().submit(part, 0, mid), _pool().submit(part, mid, R)]
    for f in futs:
        f.result()


def chunk_rows(C):
    return max(1, CHUNK_ELEMS // max(C, 1))


class _Temps:
    """Greedy reuse of chunk buffers: a buffer returns to the pool after its last reader."""

    def __init__(self):
        self.decls: list[str] = []
        self.free: dict[tuple, list[str]] = {}

    def take(self, kind, dtype):
        key = (kind, dtype)
        if self.free.get(key):
            return self.free[key].pop()
        name = f"t{len(self.decls)}"
        shape = "(CH, C)" if kind == "elem" else "(CH, 1)"
        dt = "BF16" if dtype == "bfloat16" else f"np.dtype({dtype!r})"
        self.decls.append(f"{name} = np.empty({shape}, dtype={dt})")
        return name

    def give(self, entry):
        kind, dtype, name = entry
        self.free.setdefault((kind, dtype), []).append(name)


def render_kernel(k: FusedKernel, name: str) -> str:
    classes = kernel_input_classes(k)
    ins = [f"a{i}" for i in range(len(k.inputs))]
    outs = {id(o): f"o{i}" for i, o in enumerate(k.outputs)}
    last = {}
    for i, n in enumerate(k.nodes):
        for a in n.args:
            if isinstance(a, Node):
                last[id(a)] = i
    body: list[str] = []
    val: dict[int, str] = {}          # id(node) -> chunk expression
    buf: dict[int, str] = {}          # id(node) -> temp buffer name it owns
    temps = _Temps()
    for i, a in enumerate(k.inputs):
        cls = classes[i]
        val[id(a)] = f"a{i}[r0:r1]" if cls in ("elem", "row", "other") else f"a{i}"

    def arg(a):
        return val[id(a)] if isinstance(a, Node) else _literal(a)

    for i, n in enumerate(k.nodes):
        kind = k.kind[id(n)]
        dt = n.dtype.np.name if n.dtype.name != "bfloat16" else "bfloat16"
        if id(n) in outs:
            out = f"{outs[id(n)]}[r0:r1]"
        else:
            dkey = n.dtype.np.str if n.dtype.name != "bfloat16" else "bfloat16"
            t = temps.take(kind, dkey)
            buf[id(n)] = (kind, dkey, t)
            out = f"{t}[:m]"
        op = n.op
        args = [arg(a) for a in n.args]
        if op.name in IDENTITY_OPS or op.name == "full_like":
            src = args[0] if op.name != "full_like" else _literal(n.params["value"])
            if id(n) in outs:
                body.append(f"np.copyto({out}, {src}, casting='unsafe')")
                val[id(n)] = out
            else:
                temps.give(buf.pop(id(n)))
                val[id(n)] = src
                if op.name == "full_like":
                    val[id(n)] = f"np.{dt}({_literal(n.params['value'])})" if dt != "bfloat16" \
                        else _literal(n.params["value"])
            continue
        if op.name in _REDUCE_UFUNC:
            extra = f", dtype=np.{dt}" if n.dtype.kind in "iu" else ""
            body.append(f"np.{_REDUCE_UFUNC[op.name]}.reduce({args[0]}, axis=1, keepdims=True, out={out}{extra})")
        elif op.name == "astype":
            body.append(f"np.copyto({out}, {args[0]}, casting='unsafe')")
        elif op.name == "where":
            body.append(f"np.copyto({out}, {args[2]}, casting='unsafe')")
            body.append(f"np.copyto({out}, {args[1]}, casting='unsafe', where={args[0]})")
        elif isinstance(getattr(np, op.ufunc or "", None), np.ufunc) and not n.params:
            body.append(f"np.{op.ufunc}({', '.join(args)}, out={out}, casting='unsafe')")
        else:
            body.append(f"np.copyto({out}, IMPL[{op.name!r}](np, {', '.join(args)}, **P[{n.index}]), casting='unsafe')")
        val[id(n)] = out
        for a in n.args:
            if isinstance(a, Node) and last.get(id(a)) == i and id(a) in buf:
                temps.give(buf.pop(id(a)))
    sig = ", ".join(ins + [outs[id(o)] for o in k.outputs])
    first_out = f"o{0}"
    lines = [f"def {name}({sig}):",
             f"    R, C = {first_out}.shape[0], {_c_expr(k, classes)}",
             "    CH = chunk_rows(C)",
             "    def part(lo, hi):"]
    lines += [f"        {d}" for d in temps.decls]
    lines += ["        for r0 in range(lo, hi, CH):",
              "            r1 = min(r0 + CH, hi)",
              "            m = r1 - r0"]
    lines += [f"            {b}" for b in body]
    lines += ["    run_parts(part, R, C)", ""]
    return "\n".join(lines)


def _c_expr(k, classes):
    """The domain's column count, read from an array at run time (code stays shape-generic)."""
    for i, c in enumerate(classes):
        if c in ("elem", "col", "other"):
            return f"a{i}.shape[1]"
    for i, o in enumerate(k.outputs):
        if k.kind[id(o)] == "elem":
            return f"o{i}.shape[1]"
    return "1"


def namespace():
    from ...ops.registry import OPS
    import ml_dtypes
    return {"np": np, "run_parts": run_parts, "chunk_rows": chunk_rows, "BF16": ml_dtypes.bfloat16,
            "IMPL": {name: op.impl for name, op in OPS.items()}}
