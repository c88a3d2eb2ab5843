"""The fused NumPy tier: always available, zero compile wait.

A loop-IR kernel becomes straight-line NumPy over chunks of its outermost kept range. Every
load is a strided view of a flat buffer (``as_strided``: broadcast axes have stride 0 and
stay size 1, so NumPy broadcasts them), every primitive writes into a reused chunk buffer
with ``out=``, reductions are ``ufunc.reduce`` over the kernel's reduction axes with
``keepdims``, and stores write the kernel's output views in place. Large kernels split their
chunks between two threads (ufuncs release the GIL). :data:`UFUNC` is this renderer's own
table from primitive to NumPy function.
"""
from __future__ import annotations

import concurrent.futures
import math
import os
import re

import numpy as np

from ... import dtypes as D
from ...ops.registry import OPS
from ..schedule.index_maps import gather, source_shape
from .kernel_passes import duplicates
from ..schedule.loops import Expr, Kernel
from .common import literal, small_power, strided

UFUNC = {
    "add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "true_divide",
    "floor_divide": "floor_divide", "remainder": "remainder", "fmod": "fmod", "maximum": "maximum",
    "minimum": "minimum", "power": "power", "atan2": "arctan2", "copysign": "copysign",
    "equal": "equal", "not_equal": "not_equal", "less": "less", "less_equal": "less_equal",
    "greater": "greater", "greater_equal": "greater_equal", "logical_and": "logical_and",
    "logical_or": "logical_or", "logical_xor": "logical_xor", "bitwise_and": "bitwise_and",
    "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor", "bitwise_left_shift": "left_shift",
    "bitwise_right_shift": "right_shift", "negative": "negative", "positive": "positive",
    "abs": "absolute", "logical_not": "logical_not", "bitwise_invert": "invert", "signbit": "signbit",
    "isfinite": "isfinite", "isinf": "isinf", "isnan": "isnan", "sign": "sign", "floor": "floor",
    "ceil": "ceil", "trunc": "trunc", "round": "rint", "exp": "exp", "expm1": "expm1", "log": "log",
    "log1p": "log1p", "sqrt": "sqrt", "sin": "sin", "cos": "cos", "tan": "tan", "asin": "arcsin",
    "acos": "arccos", "atan": "arctan", "tanh": "tanh", "asinh": "arcsinh", "acosh": "arccosh",
    "atanh": "arctanh",
}
# ops that are a copy with a cast (np.copyto into the chunk buffer)
COPY = ("astype", "detach", "clone")
# an arg-reduction by its combine op: the NumPy function that returns the index
ARG_FUNCTION = {"maximum": "argmax", "minimum": "argmin"}
_POOL = None
THREADS = max(1, min(2, os.cpu_count() or 1))
CHUNK_ELEMS = 1 << 15          # elements per chunk buffer: 128 KiB of float32, stays in L2
PARALLEL_MIN_ELEMS = 1 << 20   # below this, one thread


def reduce_function(rule) -> str:
    """The NumPy spelling of a reduction (its op's ``ReduceRule``): ``ufunc.reduce`` of the
    combine op's ufunc, or the arg function of an arg-reduction."""
    return ARG_FUNCTION[rule.combine] if rule.arg else UFUNC[rule.combine]


def _pool():
    global _POOL
    if _POOL is None:
        _POOL = concurrent.futures.ThreadPoolExecutor(THREADS, thread_name_prefix="nbaccel-np")
    return _POOL


def run_parts(part, n, numel):
    """Run part(lo, hi) over the chunk range, on two threads when the kernel is large."""
    if THREADS < 2 or numel < PARALLEL_MIN_ELEMS or n < 2:
        part(0, n)
        return
    mid = n // 2
    futs = [_pool().submit(part, 0, mid), _pool().submit(part, mid, n)]
    for f in futs:
        f.result()


def _natural(lay):
    """A load's view shape: broadcast axes (stride 0) stay size 1, so NumPy broadcasts them (and a
    value constant along empty reduction ranges is still one value per kept index)."""
    return tuple(s if lay.varies(d) else 1 for d, s in enumerate(lay.shape))


def _bshape(shapes):
    return tuple(np.broadcast_shapes(*shapes)) if shapes else ()


class _Renderer:
    def __init__(self, k: Kernel, name: str):
        self.k = k
        self.name = name
        nd = len(k.domain)
        kept = [a for a in k.kept_axes() if k.domain[a] > 1]
        self.c = kept[0] if kept else None
        self.views: list[str] = []
        self.view_of: dict = {}
        self.shape_of: dict = {}
        self.body: list[str] = []
        self.temps: list[tuple] = []       # (name, shape, dtype text)
        self.free: dict = {}
        self.stored: dict = {}             # output chunk text -> (shape, dtype text)
        self.params: list[dict] = []
        self.nd = nd

    def chunk(self, shape):
        """Shape text with the chunk axis as the chunk length (when it is not broadcast)."""
        if self.c is None or shape[self.c] == 1:
            return shape, False
        return shape[:self.c] + ("m",) + shape[self.c + 1:], True

    def sl(self, name, shape):
        if self.c is None or shape[self.c] == 1:
            return name
        idx = [":"] * self.c + ["r0:r1"]
        return f"{name}[{', '.join(idx)}]"

    @staticmethod
    def _dtype_text(dtype):
        return "BF16()" if dtype.name == "bfloat16" else f"np.dtype({dtype.np.str!r})"

    def _chunked(self, shape):
        return tuple("CH" if (self.c is not None and i == self.c and s != 1) else s for i, s in enumerate(shape))

    def temp(self, shape, dtype):
        dt = self._dtype_text(dtype)
        key = (shape, dt)
        if self.free.get(key):
            return self.free[key].pop()
        name = f"t{len(self.temps)}"
        self.temps.append((name, self._chunked(shape), dt))
        return name

    def tslice(self, name, shape):
        if self.c is None or shape[self.c] == 1:
            return name
        idx = [":"] * self.c + [":m"]
        return f"{name}[{', '.join(idx)}]"

    def load(self, e: Expr):
        key = (id(e.buf), e.layout.key())
        if key not in self.view_of:
            i = self.k.inputs.index(e.buf)
            v = f"v{len(self.views)}"
            lay = e.layout
            shape = _natural(lay)
            if lay.maps is None:
                self.views.append(f"{v} = strided(a{i}, {shape!r}, {lay.strides!r}, {lay.offset})")
            else:   # roll / pad / tile: NumPy has no wrapped view, so the read is a gather
                src = source_shape(lay.shape, lay.strides, lay.maps)
                self.views.append(f"{v} = gather(np, strided(a{i}, {src!r}, {lay.strides!r}, {lay.offset}), "
                                  f"{lay.shape!r}, {lay.maps!r}, {literal(lay.fill)})")
            self.view_of[key] = (v, shape)
        v, shape = self.view_of[key]
        return self.sl(v, shape), shape

    def expr(self, e: Expr, memo, accs):
        key = e.key()
        if key in memo:
            return memo[key]
        if e.kind == "load":
            out = self.load(e)
        elif e.kind == "acc":
            out = accs[id(e.red)]
        elif e.kind == "const":
            if e.dtype is None or e.dtype.name == "bfloat16":
                out = (literal(e.value), ())
            else:
                out = (f"np.{e.dtype.np.name}({literal(e.value)})", ())
        else:
            args = [self.expr(a, memo, accs) for a in e.args]
            shape = _bshape([s for _, s in args])
            shape = (1,) * (self.nd - len(shape)) + shape
            t = self.temp(shape, e.dtype)
            dst = self.tslice(t, shape)
            codes = [c for c, _ in args]
            name = e.op.name
            if name in COPY:
                self.body.append(f"np.copyto({dst}, {codes[0]}, casting='unsafe')")
            elif e.op.operands == "select":
                self.body.append(f"np.copyto({dst}, {codes[2]}, casting='unsafe')")
                self.body.append(f"np.copyto({dst}, {codes[1]}, casting='unsafe', where={codes[0]})")
            elif small_power(e) == 2 and e.args[0].dtype is e.dtype:
                self.body.append(f"np.square({codes[0]}, out={dst}, casting='unsafe')")   # NumPy's x**2
            elif name in UFUNC and not e.params:
                self.body.append(f"np.{UFUNC[name]}({', '.join(codes)}, out={dst}, casting='unsafe')")
            else:
                self.params.append(e.params)
                self.body.append(f"np.copyto({dst}, IMPL[{name!r}](np, {', '.join(codes)}, "
                                 f"**P[{len(self.params) - 1}]), casting='unsafe')")
            out = (dst, shape)
        memo[key] = out
        return out

    def render(self) -> str:
        k = self.k
        memo, accs = {}, {}
        dom = k.domain
        same = duplicates(k)       # an equal earlier reduction: its result serves
        for r in k.reductions:
            if id(r) in same:
                accs[id(r)] = accs[id(same[id(r)])]
                continue
            code, shape = self.expr(r.src, memo, accs)
            shape = (1,) * (len(dom) - len(shape)) + shape
            full = tuple(dom[a] if a in k.axes else s for a, s in enumerate(shape))
            src = f"np.broadcast_to({code}, {self._chunk_text(full)})" if full != shape else code
            out_shape = tuple(1 if a in k.axes else s for a, s in enumerate(full))
            t = self.temp(out_shape, r.dtype)
            dst = self.tslice(t, out_shape)
            rule = r.rule
            fn = reduce_function(rule)
            # a folding reduction of integers or bools accumulates in its own result dtype
            extra = f", dtype=np.{r.dtype.np.name}" if r.dtype.kind in "iub" and not (rule.selects or rule.truth) \
                else ""
            if rule.arg and len(k.axes) == 1:
                self.body.append(f"np.{fn}({src}, axis={k.axes[0]}, keepdims=True, out={dst})")
            elif rule.arg:       # over every axis: the flat index
                self.body.append(f"np.copyto({dst}, np.{fn}({src}), casting='unsafe')")
            else:
                self.body.append(f"np.{fn}.reduce({src}, axis={k.axes!r}, keepdims=True, out={dst}{extra})")
            accs[id(r)] = (dst, out_shape)
        for r in k.reductions:
            if r.stored:
                self.store(r.node, accs[id(r)][0])
        for st in k.stores:
            code, _ = self.expr(st.expr, memo, accs)
            self.store(st.node, code)
        return self._assemble()

    def _chunk_text(self, shape):
        parts = ["m" if (self.c is not None and i == self.c and s != 1) else str(s) for i, s in enumerate(shape)]
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"

    def store(self, node, code):
        i = self.k.outputs.index(node)
        lay = self.k.output_layout(node)
        per_outer = any(r.node is node for r in self.k.reductions) or \
            any(st.node is node and st.per_outer for st in self.k.stores)
        # a reduced value has one element per kept index (even when the reduced ranges are empty)
        shape = tuple(1 if per_outer and a in self.k.axes else d for a, d in enumerate(self.k.domain))
        w = f"w{i}"
        line = f"{w} = strided(o{i}, {shape!r}, {lay.strides!r}, 0)"
        if line not in self.views:
            self.views.append(line)
        dst = self.sl(w, shape)
        self.stored[dst] = (self._chunked(shape), self._dtype_text(node.dtype))
        self.body.append(f"np.copyto({dst}, {code}, casting='unsafe')")

    def _store_directly(self):
        """A stored value's last op writes into the output's chunk itself, not into a chunk
        buffer that np.copyto then copies: one pass over the output less (the NumPy tier was
        slower than NumPy on column standardisation and the axis-0 softmax). Only where the
        buffer has the output's shape and dtype and nothing reads it afterwards."""
        info = {name: (shape, dt) for name, shape, dt in self.temps}
        copy = re.compile(r"np\.copyto\((w\d+(?:\[[^\]]*\])?), ((t\d+)(?:\[[^\]]*\])?), casting='unsafe'\)$")
        for i in range(1, len(self.body)):
            m = copy.match(self.body[i])
            prev = self.body[i - 1]
            if m is None or prev is None or prev.startswith("np.copyto"):
                continue
            dst, src, t = m.groups()
            out = re.compile(rf"out={re.escape(src)}(?=[,)])")      # not out=t03 for t0
            if len(out.findall(prev)) != 1 or info.get(t) != self.stored.get(dst) or \
                    any(b is not None and re.search(rf"\b{t}\b", b) for b in self.body[i + 1:]):
                continue
            self.body[i - 1] = out.sub(lambda _: f"out={dst}", prev)
            self.body[i] = None
        self.body = [b for b in self.body if b is not None]

    def _reuse_temps(self):
        """Greedy buffer reuse: a chunk buffer returns to the pool after its last reader, so a
        long chain touches a few cache-resident buffers instead of one per op."""
        info = {name: (shape, dt) for name, shape, dt in self.temps}
        first, last = {}, {}
        for i, stmt in enumerate(self.body):
            for t in re.findall(r"\bt\d+\b", stmt):
                first.setdefault(t, i)
                last[t] = i
        pool, mapping, kept = {}, {}, []
        for i, stmt in enumerate(self.body):
            for t, f in first.items():
                if f == i:
                    key = info[t]
                    if pool.get(key):
                        mapping[t] = pool[key].pop()
                    else:
                        mapping[t] = f"t{len(kept)}"
                        kept.append((mapping[t],) + key)
            for t, l_ in last.items():
                if l_ == i:
                    pool.setdefault(info[t], []).append(mapping[t])
        self.body = [re.sub(r"\bt\d+\b", lambda m: mapping[m.group(0)], b) for b in self.body]
        self.temps = kept

    def _assemble(self):
        self._store_directly()
        self._reuse_temps()
        k = self.k
        ins = [f"a{i}" for i in range(len(k.inputs))]
        outs = [f"o{i}" for i in range(len(k.outputs))]
        n = k.domain[self.c] if self.c is not None else 1
        per = math.prod(k.domain) // max(n, 1) if self.c is not None else 1
        ch = max(1, CHUNK_ELEMS // max(per, 1))
        if self.c == len(k.domain) - 1:
            ch = max(ch, 256)     # chunks of the contiguous axis stay long enough for SIMD loops
        lines = [f"def {self.name}({', '.join(ins + outs)}):"]
        lines += [f"    {v}" for v in self.views]
        lines += ["    def part(lo, hi):", f"        CH = {ch}"]
        lines += [f"        {t} = np.empty(({', '.join(str(s) for s in shp)}{',' if len(shp) == 1 else ''}), dtype={dt})"
                  for t, shp, dt in self.temps]
        lines += ["        for r0 in range(lo, hi, CH):",
                  "            r1 = min(r0 + CH, hi)",
                  "            m = r1 - r0"]
        lines += [f"            {b}" for b in self.body]
        lines += [f"    run_parts(part, {n}, {math.prod(k.domain)})", ""]
        return "\n".join(lines)


def render_kernel(k: Kernel, name: str):
    """(source, params): the kernel function and the op params its fallback calls read."""
    r = _Renderer(k, name)
    src = r.render()
    return src, r.params


def _bfloat16():
    return D.bfloat16.np


def namespace():
    # BF16(): ml_dtypes' bfloat16, imported by the first kernel that allocates one (not at
    # `%load_ext`, where importing ml_dtypes cost 0.56 s)
    return {"np": np, "run_parts": run_parts, "strided": strided, "gather": gather, "BF16": _bfloat16,
            "IMPL": {name: op.impl for name, op in OPS.items()}}
