"""The Triton tier: ``@triton.jit`` kernels from the loop IR, in the style of Triton's tutorials.

A kernel's kept ranges are flattened into one index ``o`` that programs cover in blocks of
``BLOCK_O`` (``tl.program_id``, ``tl.arange``, a tail mask); its reduction ranges into one
index ``r`` covered by blocks of ``BLOCK_R``: one block when they are small (the whole row
is in registers), else an inner loop with an accumulator per lane. The flat indices are
split back per dimension with ``//`` and ``%``; sizes, strides and offsets are arguments
and only their *class* is in the source (a broadcast term is left out, a unit stride needs
no multiply). Before that, size-1 dimensions are dropped and neighbouring dimensions that
every layout walks as one (a contiguous block) are merged, so a contiguous elementwise
kernel indexes with ``o`` alone.

Reductions run in *phases*: one pass over ``r`` for every reduction whose source needs no
other reduction of the kernel, one more for those that need the first (softmax: max, then
sum of exp(x - max)), then a pass for the elementwise stores. Sums of float32 and narrower
floats accumulate in float32, argmax/argmin keep the first best index (and the first NaN,
as NumPy), max/min propagate NaN through a flag.

Per-element spellings are in :mod:`.triton_syntax`. What cannot be rendered raises
:class:`TritonUnsupported`, which the compiler's safety net turns into an eager run with
the reason in the report.
"""
from __future__ import annotations

import math

from ..loops import Expr, Kernel
from . import triton_syntax as S
from .numba_syntax import _COMPARISONS, _operand_dtype, _weak_dtype

ELEMS_GPU = 1024          # elements per program of an elementwise kernel (4 warps × 8 per thread)
RED_ELEMS_GPU = 4096      # BLOCK_O × BLOCK_R of a reduction kernel
BLOCK_R_MAX = 4096        # a longer reduction range loops in blocks of this
ELEMS_INTERP = 1 << 14    # the interpreter pays per program: fewer, larger blocks
INT32_LIMIT = 2 ** 31 - 1


class TritonUnsupported(NotImplementedError):
    """This kernel has no Triton rendering (the reason is the message)."""


def _reg(dt):
    return S.DTYPES[dt.name][1]


def _buf(dt):
    return S.DTYPES[dt.name][0]


def _kind(dt):
    return "b" if dt.kind == "b" else dt.kind


def unsupported_reason(k: Kernel, interpret: bool) -> str | None:
    """Why this kernel cannot be rendered for Triton, or None."""
    for b in k.inputs + k.outputs:
        if b.dtype.name not in S.DTYPES:
            return f"triton has no {b.dtype.name}"
    for e in _all_ops(k):
        name = e.op.name
        for d in [e.dtype] + [a.dtype for a in e.args if a.dtype is not None]:
            if d.name not in S.DTYPES:
                return f"triton has no {d.name}"
        if e.params and name != "astype":
            return f"{name} with parameters has no triton rendering"
        if name == "astype" or _small_power(e) is not None:
            continue
        if name in S.LIBDEVICE:
            if interpret:
                return f"{name} needs libdevice, which Triton's interpreter lacks"
            continue
        table = _table(e.dtype if name not in S.OWN_INPUTS | _COMPARISONS else _in_dtype(e))
        if name not in table:
            return f"{name} has no triton rendering for {e.dtype.name}"
    for r in k.reductions:
        for d in (r.dtype, r.src.dtype):
            if d.name not in S.DTYPES:
                return f"triton has no {d.name}"
    return None


def _in_dtype(e):
    ts = [a.dtype for a in e.args if a.dtype is not None]
    return ts[0] if ts else e.dtype


def _table(dt):
    t = dict(S.COMMON)
    if dt.kind == "f":
        t.update(S.FLOAT)
    elif dt.kind in "iu":
        t.update(S.INT)
        if dt.kind == "u":
            t.update(S.UNSIGNED)
    else:
        t.update(S.BOOL)
    return t


def _all_ops(k):
    seen, out = set(), []
    stack = [r.src for r in k.reductions] + [st.expr for st in k.stores]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if e.kind == "op":
            out.append(e)
        stack.extend(e.args)
    return out


def _small_power(e):
    """x ** c for a constant c NumPy computes exactly another way: 2, 3 (products), -1 and 0.5
    (a reciprocal and a square root, NumPy's own fast paths for floats)."""
    if e.op.name != "power" or e.args[1].kind != "const":
        return None
    v = e.args[1].value
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if v in (0, 1, 2, 3) and e.dtype.kind in "iuf":
        return v
    if v in (-1, 0.5) and e.dtype.kind == "f":
        return v
    return None


def _float_text(v):
    v = float(v)
    if v != v:
        return "float('nan')"
    if v in (float("inf"), float("-inf")):
        return "float('inf')" if v > 0 else "-float('inf')"
    return repr(v)


def _const_text(value, dt):
    """A typed scalar in register type (half floats rounded to their own precision)."""
    import numpy as np
    if dt.kind == "b":
        return f"tl.full(o.shape, {1 if value else 0}, tl.int1)"
    if dt.kind == "f":
        v = float(value)
        if dt.name in S.HALF:
            v = float(np.asarray(v, dtype=dt.np).astype(np.float32))
        return f"tl.full(o.shape, {_float_text(v)}, {_reg(dt)})"
    if isinstance(value, float):
        value = int(value)
    if not _fits(value, dt):     # NumPy's error for a weak scalar its array's dtype cannot hold
        raise OverflowError(f"Python integer {value} out of bounds for {dt.name}")
    return f"tl.full(o.shape, {int(value)}, {_reg(dt)})"


class _Dims:
    """The kernel's dimensions after dropping size-1 ones and merging runs every layout
    walks as one: (size, reduced) per dimension, and per layout its strides over them."""

    def __init__(self, k: Kernel, layouts):
        dims = [a for a in range(len(k.domain)) if k.domain[a] != 1]
        groups = []
        for a in dims:
            red = a in k.axes
            if groups:
                last = groups[-1]
                b = last[-1]
                if (b in k.axes) == red and all(l.strides[b] == l.strides[a] * k.domain[a] for l in layouts):
                    last.append(a)
                    continue
            groups.append([a])
        self.sizes = [math.prod(k.domain[a] for a in g) for g in groups]
        self.red = [g[0] in k.axes for g in groups]
        self.groups = groups

    def strides(self, lay):
        return [lay.strides[g[-1]] for g in self.groups]


class _Renderer:
    def __init__(self, k: Kernel, interpret: bool):
        self.k = k
        self.interpret = interpret
        self.layouts = []             # distinct (key, Layout), in order of first use
        self.layout_index = {}
        for e in [r.src for r in k.reductions] + [st.expr for st in k.stores]:
            for leaf in _leaves_in_order(e):
                if leaf.kind == "load":
                    self._layout(("in", id(leaf.buf), leaf.layout.key()), leaf.layout)
        for o in k.outputs:
            self._layout(("out", id(o)), k.output_layout(o))
        self.dims = _Dims(k, [lay for _, lay in self.layouts])
        nd = len(self.dims.sizes)
        self.kept = [j for j in range(nd) if not self.dims.red[j]]
        self.redd = [j for j in range(nd) if self.dims.red[j]]
        self.n_out = math.prod(self.dims.sizes[j] for j in self.kept)
        self.n_red = math.prod(self.dims.sizes[j] for j in self.redd)
        self.reducing = bool(k.reductions)
        self.wide = self._needs_int64()
        self.args: list[str] = []     # scalar argument names, in order
        self.values: list[int] = []   # their values for this shape
        self.lines: list[str] = []
        self.counter = 0
        self.arg_of = {id(b): f"in{i}" for i, b in enumerate(k.inputs)}
        self.out_of = {id(b): f"out{i}" for i, b in enumerate(k.outputs)}
        self.uses_libdevice = False
        self.errors: list[str] = []   # messages the kernel can flag (see flag_error)
        self.addr = {}                # layout key -> (offset text, [(dim, stride text)])
        for j, size in enumerate(self.dims.sizes):
            self._arg(f"n{j}", size)
        self._arg("n_out", self.n_out)
        if self.reducing:
            self._arg("n_red", self.n_red)
        for i, (key, lay) in enumerate(self.layouts):
            self.addr[key] = self._declare(i, lay)

    # -- arguments and addresses ---------------------------------------------------------------
    def _layout(self, key, lay):
        if key not in self.layout_index:
            self.layout_index[key] = len(self.layouts)
            self.layouts.append((key, lay))

    def _arg(self, name, value):
        self.args.append(name)
        self.values.append(int(value))
        return name

    def _declare(self, i, lay):
        off = self._arg(f"f{i}", lay.offset) if lay.offset else None
        terms = []
        for j, st in enumerate(self.dims.strides(lay)):
            if st == 0:
                continue
            terms.append((j, None if st == 1 else self._arg(f"s{i}_{j}", st)))
        return off, terms

    def _needs_int64(self):
        top = max([self.n_out * max(self.n_red, 1)] +
                  [lay.offset + sum(abs(st) * (s - 1) for s, st in zip(lay.shape, lay.strides) if s)
                   for _, lay in self.layouts])
        return top + ELEMS_INTERP + BLOCK_R_MAX >= INT32_LIMIT

    def address(self, key, ctx):
        """(text, uses kept dims, uses reduced dims) of a layout's flat element index."""
        off, terms = self.addr[key]
        parts = [off] if off else []
        kept = red = False
        for j, s in terms:
            if self.dims.red[j]:
                if ctx == "outer":
                    continue
                red = True
            else:
                kept = True
            parts.append(f"i{j}" if s is None else f"i{j} * {s}")
        return " + ".join(parts) or "0", kept, red

    # -- expressions ---------------------------------------------------------------------------
    def name(self, prefix):
        self.counter += 1
        return f"{prefix}{self.counter}"

    def emit(self, pad, line):
        self.lines.append(pad + line)

    def load(self, e, ctx, pad):
        addr, kept, red = self.address(("in", id(e.buf), e.layout.key()), ctx)
        if kept and red:
            mask = "mask"
        elif red:
            mask = "r_mask"
        else:
            mask = "o_mask"
            if not kept:
                addr = f"{addr} + zo"
        x = self.name("x")
        self.emit(pad, f"{x} = tl.load({self.arg_of[id(e.buf)]} + ({addr}), mask={mask}, other=0)")
        dt = e.dtype
        if dt.kind == "b":
            return f"({x} != 0)"
        if dt.name in S.HALF:
            return f"{x}.to(tl.float32)"
        return x

    def cvt(self, code, src, dst):
        """Register value ``code`` of dtype ``src`` as dtype ``dst``."""
        if src is dst or src is None:
            return code
        if dst.kind == "b":
            return f"({code} != 0)"
        if dst.name in S.HALF:
            base = code if src.kind == "f" and src.name != "float64" else f"{code}.to(tl.float32)"
            return _half_round(base, dst)
        if src.name in S.HALF and dst.name == "float32":
            return code
        return f"{code}.to({_reg(dst)})"

    def expr(self, e: Expr, ctx, memo, pad, accs):
        key = (ctx, e.key())
        if key in memo:
            return memo[key]
        if e.kind == "load":
            code = self.load(e, ctx, pad)
        elif e.kind == "acc":
            code = accs[id(e.red)]
        elif e.kind == "const":
            code = _const_text(e.value, e.dtype) if e.dtype is not None else _float_text(e.value) \
                if isinstance(e.value, float) else repr(e.value)
        else:
            code = self.op(e, ctx, memo, pad, accs)
            if not code.isidentifier():
                v = self.name("v")
                self.emit(pad, f"{v} = {code}")
                code = v
        memo[key] = code
        return code

    def operand(self, a, want, e, ctx, memo, pad, accs):
        if a.kind == "const" and a.dtype is None:       # a weak Python scalar: typed at once
            return _const_text(a.value, want)
        return self.cvt(self.expr(a, ctx, memo, pad, accs), a.dtype, want)

    def op(self, e: Expr, ctx, memo, pad, accs):
        name = e.op.name
        if name == "astype":
            return self.cvt(self.expr(e.args[0], ctx, memo, pad, accs), e.args[0].dtype, e.dtype)
        p = _small_power(e)
        if p is not None:
            x = self.operand(e.args[0], e.dtype, e, ctx, memo, pad, accs)
            if p == 0:
                return self.cvt(f"({x} == {x}) | ({x} != {x})", _bool(), e.dtype)
            code = {1: "{0}", 2: "({0} * {0})", 3: "({0} * {0} * {0})", -1: "(1.0 / {0})",
                    0.5: "{sqrt}({0})"}[p].format(x, sqrt=_sqrt(e.dtype))
            return self.round(code, e.dtype)
        if name in S.COMPARISONS:
            weak = [a.value for a in e.args if a.kind == "const" and a.dtype is None]
            want = _weak_dtype(e, weak[0]) if weak else _operand_dtype(e)
            if weak and want.kind in "iu" and not _fits(weak[0], want):
                want = _int64() if _fits(weak[0], _int64()) else _float64()   # NumPy compares exactly
            args = [self.operand(a, want, e, ctx, memo, pad, accs) for a in e.args]
            in_dt = want
        elif name in S.OWN_INPUTS:
            args = []
            for a in e.args:
                if a.kind == "const" and a.dtype is None and name.startswith("logical_"):
                    args.append(_const_text(a.value != 0, _bool()))      # a scalar's truth value
                    continue
                dt = a.dtype if a.dtype is not None else _operand_dtype(e)
                args.append(self.operand(a, dt, e, ctx, memo, pad, accs))
            in_dt = _in_dtype(e) if e.args[0].dtype is not None else _operand_dtype(e)
        elif name == "where":
            cond = self.operand(e.args[0], _bool(), e, ctx, memo, pad, accs)
            args = [cond] + [self.operand(a, e.dtype, e, ctx, memo, pad, accs) for a in e.args[1:]]
            in_dt = e.dtype
        else:
            args = [self.operand(a, e.dtype, e, ctx, memo, pad, accs) for a in e.args]
            in_dt = e.dtype
        if name == "power" and in_dt.kind == "i":
            self.flag_error(f"({args[1]} < 0)", ctx, pad, S.NEGATIVE_POWER)
        if name in S.LIBDEVICE:
            if self.interpret:
                raise TritonUnsupported(f"{name} needs libdevice, which Triton's interpreter lacks")
            self.uses_libdevice = True
            template = S.LIBDEVICE[name]
        else:
            template = _table(in_dt).get(name)
            if template is None:
                raise TritonUnsupported(f"{name} has no triton rendering for {in_dt.name}")
        extra = {"reg": _reg(in_dt), "sqrt": _sqrt(in_dt), "bits": in_dt.bits,
                 "big": "4503599627370496.0" if in_dt.name == "float64" else "8388608.0"}
        if in_dt.kind == "f":
            ity = "tl.int64" if in_dt.name == "float64" else "tl.int32"
            for i, a in enumerate(args[:2]):
                extra[f"sb{i}"] = f"({a}.to({ity}, bitcast=True) < 0)"
        return self.round(template.format(*args, **extra), e.dtype)

    def round(self, code, dt):
        """A half-precision result rounded to its own precision (NumPy rounds every op)."""
        if dt.name in S.HALF:
            return _half_round(code, dt)
        return code

    def flag_error(self, cond, ctx, pad, message):
        """Where ``cond`` holds, set the kernel's error flag; the launcher raises ``message``
        (NumPy's error) after the kernel ran."""
        if message not in self.errors:
            self.errors.append(message)
        code = len(self.errors)
        live = "o_mask" if ctx == "outer" else "mask"
        hit = self.name("err")
        self.emit(pad, f"{hit} = {live} & {cond}")
        self.emit(pad, f"tl.store(err + {hit}.to(tl.int32) * 0, {hit}.to(tl.int32) * {code}, mask={hit})")

    # -- stores ---------------------------------------------------------------------------------
    def store(self, node, value, value_dt, ctx, pad):
        addr, kept, red = self.address(("out", id(node)), ctx)
        if not kept:
            addr += " + zo"
        if ctx == "full" and not red:
            addr += " + zr"
        mask = "mask" if ctx == "full" else "o_mask"
        v = self.cvt(value, value_dt, node.dtype)
        if node.dtype.kind == "b":
            v = f"{v}.to(tl.uint8)"
        elif node.dtype.name in S.HALF:
            v = f"{v}.to({_buf(node.dtype)})"
        self.emit(pad, f"tl.store({self.out_of[id(node)]} + ({addr}), {v}, mask={mask})")

    # -- index decoding -------------------------------------------------------------------------
    def decode(self, dims, flat, pad):
        """One index variable per dimension from a flat C-order index over ``dims``."""
        rest = flat
        for pos, j in enumerate(reversed(dims)):
            if pos == len(dims) - 1:
                self.emit(pad, f"i{j} = {rest}")
            else:
                self.emit(pad, f"i{j} = {rest} % n{j}")
                q = self.name("q")
                self.emit(pad, f"{q} = {rest} // n{j}")
                rest = q

    # -- kernel bodies --------------------------------------------------------------------------
    def body(self):
        k = self.k
        pad = "    "
        self.emit(pad, "pid = tl.program_id(0)")
        base = "pid.to(tl.int64)" if self.wide else "pid"
        if not self.reducing:
            self.emit(pad, f"o = {base} * BLOCK_O + tl.arange(0, BLOCK_O)")
            self.emit(pad, "o_mask = o < n_out")
            self.emit(pad, "zo = o * 0")
            self.decode(self.kept, "o", pad)
            memo, accs = {}, {}
            for st in k.stores:
                self.store(st.node, self.expr(st.expr, "outer", memo, pad, accs), st.expr.dtype, "outer", pad)
            return
        self.emit(pad, f"o = {base} * BLOCK_O + tl.arange(0, BLOCK_O)[:, None]")
        self.emit(pad, "o_mask = o < n_out")
        self.emit(pad, "zo = o * 0")
        self.decode(self.kept, "o", pad)
        ar = "tl.arange(0, BLOCK_R)[None, :]" + (".to(tl.int64)" if self.wide else "")
        phases = _phases(k)
        elems = [st for st in k.stores if not st.per_outer]
        accs = {}
        if self.single:
            memo = {}
            self.open_block(ar, pad)
            for group in phases:
                for r in group:
                    self.reduce_block(r, memo, pad, accs)
            for st in elems:
                self.store(st.node, self.expr(st.expr, "full", memo, pad, accs), st.expr.dtype, "full", pad)
        else:
            for group in phases:
                for r in group:
                    self.init_acc(r, pad)
                inner = pad + "    "
                self.emit(pad, "for r0 in range(0, n_red, BLOCK_R):")
                self.open_block(f"r0 + {ar}", inner)
                memo = {}
                for r in group:
                    self.update_acc(r, memo, inner, accs)
                for r in group:
                    self.finish_acc(r, pad, accs)
            if elems:
                inner = pad + "    "
                self.emit(pad, "for r0 in range(0, n_red, BLOCK_R):")
                self.open_block(f"r0 + {ar}", inner)
                memo = {}
                for st in elems:
                    self.store(st.node, self.expr(st.expr, "full", memo, inner, accs), st.expr.dtype, "full",
                               inner)
        memo = {}
        for r in k.reductions:
            if r.stored:
                self.store(r.node, accs[id(r)], r.dtype, "outer", pad)
        for st in k.stores:
            if st.per_outer:
                self.store(st.node, self.expr(st.expr, "outer", memo, pad, accs), st.expr.dtype, "outer", pad)

    def open_block(self, r_text, pad):
        self.emit(pad, f"r = {r_text}")
        self.emit(pad, "r_mask = r < n_red")
        self.emit(pad, "mask = o_mask & r_mask")
        self.emit(pad, "zr = r * 0")
        self.decode(self.redd, "r", pad)

    # one block: the whole reduction range in registers
    def reduce_block(self, r, memo, pad, accs):
        i = r.index
        src_dt = r.src.dtype
        v = self.expr(r.src, "full", memo, pad, accs)
        op = r.op
        if op in ("sum", "prod"):
            adt = _acc_dtype(r)
            x = self.cvt(v, src_dt, adt)
            ident = "1" if op == "prod" else "0"
            t = f"tl.where(mask, {x}, {_const_text(int(ident), adt)})"
            red = f"tl.sum({t}, axis=1)" if op == "sum" else f"tl.reduce({t}, 1, _mul)"
            self.emit(pad, f"red{i} = {self.cvt(red, adt, r.dtype)}[:, None]")
        elif op in ("any", "all"):
            flag = f"tl.where(mask, ({v} != 0).to(tl.int32), {0 if op == 'any' else 1})"
            fn = "tl.max" if op == "any" else "tl.min"
            self.emit(pad, f"red{i} = ({fn}({flag}, axis=1) != 0)[:, None]")
        elif op in ("amax", "amin"):
            x, rdt = self.ordered(v, src_dt)
            fn = "tl.max" if op == "amax" else "tl.min"
            self.emit(pad, f"red{i} = {fn}(tl.where(mask, {x}, {_extreme(rdt, op == 'amax')}), axis=1)[:, None]")
            if src_dt.kind == "f":
                self.emit(pad, f"nan{i} = tl.max(tl.where(mask & ({x} != {x}), 1, 0), axis=1)[:, None] != 0")
                self.emit(pad, f"red{i} = tl.where(nan{i}, float('nan'), red{i})")
            if src_dt.kind == "b":
                self.emit(pad, f"red{i} = red{i} != 0")
        else:   # argmax / argmin: the first best index, the first NaN wins
            x, rdt = self.ordered(v, src_dt)
            fn = "tl.max" if op == "argmax" else "tl.min"
            self.emit(pad, f"best{i} = {fn}(tl.where(mask, {x}, {_extreme(rdt, op == 'argmax')}), axis=1)[:, None]")
            hit = f"({x} == best{i})"
            if src_dt.kind == "f":
                self.emit(pad, f"nan{i} = tl.max(tl.where(mask & ({x} != {x}), 1, 0), axis=1)[:, None] != 0")
                hit = f"tl.where(nan{i}, {x} != {x}, {hit})"
            self.emit(pad, f"red{i} = tl.min(tl.where(mask & {hit}, r, n_red), axis=1)[:, None]"
                           f".to(tl.int64)")
        accs[id(r)] = f"red{i}"

    def ordered(self, v, dt):
        """A value max/min can compare: bools as int32."""
        if dt.kind == "b":
            return f"{v}.to(tl.int32)", _int32()
        return v, dt

    # a loop over blocks of the reduction range: per-lane accumulators
    def init_acc(self, r, pad):
        i, op = r.index, r.op
        shape = "[BLOCK_O, BLOCK_R]"
        if op in ("sum", "prod"):
            self.emit(pad, f"acc{i} = tl.full({shape}, {1 if op == 'prod' else 0}, {_reg(_acc_dtype(r))})")
        elif op in ("any", "all"):
            self.emit(pad, f"acc{i} = tl.full({shape}, {0 if op == 'any' else 1}, tl.int32)")
        else:
            _, rdt = self.ordered("", r.src.dtype)
            arg = op in ("argmax", "argmin")
            big = op in ("amax", "argmax")
            self.emit(pad, f"acc{i} = tl.full({shape}, {_extreme_value(rdt, big)}, {_reg(rdt)})")
            if r.src.dtype.kind == "f":
                self.emit(pad, f"nan{i} = tl.full({shape}, 0, tl.int32)")
            if arg:
                idt = "tl.int64" if self.wide else "tl.int32"
                self.emit(pad, f"idx{i} = tl.full({shape}, -1, {idt})")

    def update_acc(self, r, memo, pad, accs):
        i, op = r.index, r.op
        v = self.expr(r.src, "full", memo, pad, accs)
        src_dt = r.src.dtype
        if op in ("sum", "prod"):
            adt = _acc_dtype(r)
            x = self.cvt(v, src_dt, adt)
            sym = "+" if op == "sum" else "*"
            ident = 1 if op == "prod" else 0
            self.emit(pad, f"acc{i} = acc{i} {sym} tl.where(mask, {x}, {_const_text(ident, adt)})")
        elif op == "any":
            self.emit(pad, f"acc{i} = acc{i} | tl.where(mask, ({v} != 0).to(tl.int32), 0)")
        elif op == "all":
            self.emit(pad, f"acc{i} = acc{i} & tl.where(mask, ({v} != 0).to(tl.int32), 1)")
        elif op in ("amax", "amin"):
            x, rdt = self.ordered(v, src_dt)
            fn = "tl.maximum" if op == "amax" else "tl.minimum"
            self.emit(pad, f"acc{i} = {fn}(acc{i}, tl.where(mask, {x}, {_extreme(rdt, op == 'amax')}))")
            if src_dt.kind == "f":
                self.emit(pad, f"nan{i} = nan{i} | tl.where(mask & ({x} != {x}), 1, 0)")
        else:
            x, rdt = self.ordered(v, src_dt)
            cmp = ">" if op == "argmax" else "<"
            better = f"({x} {cmp} acc{i}) | (idx{i} < 0)"
            if src_dt.kind == "f":
                # a NaN beats everything and stays; the first of equal values stays
                better = f"(({better}) & (acc{i} == acc{i})) | (({x} != {x}) & (acc{i} == acc{i}))"
            b = self.name("b")
            self.emit(pad, f"{b} = mask & ({better})")
            self.emit(pad, f"acc{i} = tl.where({b}, {x}, acc{i})")
            self.emit(pad, f"idx{i} = tl.where({b}, r, idx{i})")

    def finish_acc(self, r, pad, accs):
        i, op = r.index, r.op
        if op in ("sum", "prod"):
            adt = _acc_dtype(r)
            red = f"tl.sum(acc{i}, axis=1)" if op == "sum" else f"tl.reduce(acc{i}, 1, _mul)"
            self.emit(pad, f"red{i} = {self.cvt(red, adt, r.dtype)}[:, None]")
        elif op in ("any", "all"):
            fn = "tl.max" if op == "any" else "tl.min"
            self.emit(pad, f"red{i} = ({fn}(acc{i}, axis=1) != 0)[:, None]")
        elif op in ("amax", "amin"):
            fn = "tl.max" if op == "amax" else "tl.min"
            self.emit(pad, f"red{i} = {fn}(acc{i}, axis=1)[:, None]")
            if r.src.dtype.kind == "f":
                self.emit(pad, f"red{i} = tl.where(tl.max(nan{i}, axis=1)[:, None] != 0, float('nan'), red{i})")
            if r.src.dtype.kind == "b":
                self.emit(pad, f"red{i} = red{i} != 0")
        else:
            fn = "tl.max" if op == "argmax" else "tl.min"
            valid = f"idx{i} >= 0"
            self.emit(pad, f"best{i} = {fn}(tl.where({valid}, acc{i}, "
                           f"{_extreme(self.ordered('', r.src.dtype)[1], op == 'argmax')}), axis=1)[:, None]")
            hit = f"(acc{i} == best{i})"
            if r.src.dtype.kind == "f":
                self.emit(pad, f"nan{i} = tl.max(tl.where(acc{i} != acc{i}, 1, 0), axis=1)[:, None] != 0")
                hit = f"tl.where(nan{i}, acc{i} != acc{i}, {hit})"
            self.emit(pad, f"red{i} = tl.min(tl.where(({valid}) & {hit}, idx{i}, n_red), axis=1)[:, None]"
                           f".to(tl.int64)")
        accs[id(r)] = f"red{i}"

    # -- the module -----------------------------------------------------------------------------
    def render(self, name):
        k = self.k
        self.single = not self.reducing or self.n_red <= BLOCK_R_MAX
        self.body()
        import re
        for z in ("zo", "zr"):       # the zero blocks only broadcast what needs it
            if not any(re.search(rf"\b{z}\b", ln) for ln in self.lines if not ln.lstrip().startswith(f"{z} =")):
                self.lines = [ln for ln in self.lines if not ln.lstrip().startswith(f"{z} =")]
        ptrs = list(self.arg_of.values()) + list(self.out_of.values()) + (["err"] if self.errors else [])
        consts = ["BLOCK_O: tl.constexpr"] + (["BLOCK_R: tl.constexpr"] if self.reducing else [])
        sig = ", ".join(ptrs + self.args + consts)
        head = S.HEADER + (S.LIBDEVICE_IMPORT if self.uses_libdevice else "") + S.HELPERS
        doc = f"    # {k.name} {k.ranges_text()}: {', '.join(dict.fromkeys(k.op_names()))}"
        return "\n".join([head, "", "@triton.jit", f"def {name}({sig}):", doc] + self.lines) + "\n"


def _half_round(code, dt):
    if dt.name == "bfloat16":
        return f"_round_bf16({code})"
    return f"({code}).to(tl.float16).to(tl.float32)"


def _bool():
    from ... import dtypes as D
    return D.bool_


def _int64():
    from ... import dtypes as D
    return D.int64


def _float64():
    from ... import dtypes as D
    return D.float64


def _fits(value, dt):
    import numpy as np
    if isinstance(value, bool) or not isinstance(value, int):
        return True
    info = np.iinfo(dt.np)
    return info.min <= value <= info.max


def _int32():
    from ... import dtypes as D
    return D.int32


def _sqrt(dt):
    return "tl.sqrt" if dt.name == "float64" else "tl.sqrt_rn"


def _acc_dtype(r):
    """Sums and products of float32 and narrower floats accumulate in float32; float64 in
    float64; integers in the result's own dtype (NumPy's)."""
    from ... import dtypes as D
    if r.dtype.kind == "f":
        return D.float64 if r.dtype.name == "float64" else D.float32
    return r.dtype


def _extreme_value(dt, for_max):
    """The identity of max (for_max) or min over dtype dt, as source text."""
    import numpy as np
    if dt.kind == "f":
        return "-float('inf')" if for_max else "float('inf')"
    info = np.iinfo(dt.np)
    return str(int(info.min if for_max else info.max))


def _extreme(dt, for_max):
    return f"tl.full(o.shape, {_extreme_value(dt, for_max)}, {_reg(dt)})"


def _phases(k):
    """Reductions grouped into passes: each needs only reductions of earlier passes."""
    phase = {}
    for r in k.reductions:
        deps = [leaf.red for leaf in r.src.leaves() if leaf.kind == "acc"]
        phase[id(r)] = 1 + max((phase[id(d)] for d in deps if id(d) in phase), default=-1)
    groups = {}
    for r in k.reductions:
        groups.setdefault(phase[id(r)], []).append(r)
    return [groups[p] for p in sorted(groups)]


def _leaves_in_order(e, seen=None):
    seen = set() if seen is None else seen
    if id(e) in seen:
        return []
    seen.add(id(e))
    if e.kind in ("load", "acc"):
        return [e]
    out = []
    for a in e.args:
        out += _leaves_in_order(a, seen)
    return out


class Rendered:
    """A kernel's Triton module source and how to launch it for this shape."""

    def __init__(self, source, values, n_out, n_red, reducing, single):
        self.source = source
        self.values = values          # the scalar arguments after the pointers
        self.n_out = n_out
        self.n_red = n_red
        self.reducing = reducing
        self.single = single
        self.errors: list[str] = []   # NumPy errors the kernel flags in its `err` argument (1-based)

    def blocks(self, interpret: bool):
        """(grid, constexpr block sizes, num_warps) for this shape."""
        elems = ELEMS_INTERP if interpret else (RED_ELEMS_GPU if self.reducing else ELEMS_GPU)
        if not self.reducing:
            bo = min(_pow2(self.n_out), elems)
            return (triton_cdiv(self.n_out, bo),), {"BLOCK_O": bo}, 4
        br = min(_pow2(self.n_red), BLOCK_R_MAX)
        bo = max(1, min(_pow2(self.n_out), elems // br))
        warps = 8 if bo * br >= 4096 else 4
        return (triton_cdiv(self.n_out, bo),), {"BLOCK_O": bo, "BLOCK_R": br}, warps


def _pow2(n):
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def triton_cdiv(a, b):
    return -(-a // b)


def render_kernel(k: Kernel, name: str = "kernel", interpret: bool = False) -> Rendered:
    """The Triton module for one loop-IR kernel (raises :class:`TritonUnsupported`)."""
    why = unsupported_reason(k, interpret)
    if why is not None:
        raise TritonUnsupported(why)
    r = _Renderer(k, interpret)
    src = r.render(name)
    out = Rendered(src, r.values, r.n_out, r.n_red, r.reducing, r.single)
    out.errors = r.errors
    return out
