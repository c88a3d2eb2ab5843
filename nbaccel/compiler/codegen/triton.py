"""The Triton tier: ``@triton.jit`` kernels from the loop IR, in the style of Triton's tutorials.

A kernel's kept ranges are flattened into one index ``o`` that programs cover in blocks of
``BLOCK_O`` (``tl.program_id``, ``tl.arange``, a tail mask); its reduction ranges into one
index ``r`` covered by blocks of ``BLOCK_R``: one block when they are small (the whole row
is in registers), else an inner loop with an accumulator per lane. The flat indices are
split back per dimension with ``//`` and ``%``; sizes, strides and offsets are arguments
and only their *class* is in the source (a broadcast term is left out, a unit stride needs
no multiply). Before that, size-1 dimensions are dropped and neighbouring dimensions that
every layout walks as one (a contiguous block) are merged (``kernel_passes.merge_dims``), so
a contiguous elementwise kernel indexes with ``o`` alone.

Reductions run in *phases* (``kernel_passes.phases``): one pass over ``r`` for every
reduction whose source needs no other reduction of the kernel, one more for those that need
the first (softmax: max, then sum of exp(x - max)), then a pass for the elementwise stores. Sums of float32 and narrower
floats accumulate in float32, argmax/argmin keep the first best index (and the first NaN,
as NumPy), max/min propagate NaN through a flag.

This module writes the kernel's source. Per-element spellings are in :mod:`.triton_syntax`,
the reduction loops in :mod:`.triton_reduce`, the check of what Triton cannot spell in
:mod:`.triton_check` and the grid and block sizes of a launch in :mod:`.triton_launch`. What
cannot be rendered raises :class:`TritonUnsupported`, which the compiler's safety net turns
into an eager run with the reason in the report.
"""
from __future__ import annotations

import math

from ... import dtypes as D
from ..schedule import index_maps
from ..schedule.loops import Expr, Kernel
from . import triton_syntax as S
from .common import is_cast as _is_cast, operand_dtype, small_power, weak_dtype
from .kernel_passes import duplicates, merge_dims, phases
from .triton_check import TritonUnsupported, input_dtype, spelling_table, unsupported_reason
from .triton_launch import (  # noqa: F401 - some re-exported: they lived here
    BLOCK_R_MAX, COLUMN_BLOCK_R, ELEMS_GPU, ELEMS_INTERP, INT32_LIMIT, RED_ELEMS_GPU, Rendered, triton_cdiv,
)
from .triton_reduce import TritonReductions
from .triton_syntax import buf, const_text, float_text, fits, half_round, reg, sqrt_fn


def _source(m, v):
    """a·i + b of a mapped dim, as text."""
    _, coef, b, _ = m
    return f"({v} + {b})" if coef == 1 else f"({b} - {v})" if coef == -1 else f"({coef} * {v} + {b})"


def _mapped(m, v):
    """The source index of a mapped dim: a select where one fold suffices (a roll), else a
    remainder made non-negative (Triton's ``%`` keeps the dividend's sign), a clamp, or the
    raw index of a mask (masked-out lanes load nothing)."""
    cls, _, _, n = m
    t = _source(m, v)
    if cls == "sub":
        return f"tl.where({t} >= {n}, {t} - {n}, {t})"
    if cls == "add":
        return f"tl.where({t} < 0, {t} + {n}, {t})"
    if cls == "mod":
        return f"((({t}) % {n} + {n}) % {n})"
    if cls == index_maps.CLAMP:
        return f"tl.minimum(tl.maximum({t}, 0), {n} - 1)"
    return t


def _fill_text(value, dtype):
    """A pad's fill as a load's ``other=``: finite literals only (the safety net runs the
    rest eagerly)."""
    if isinstance(value, complex) or (isinstance(value, float) and not math.isfinite(value)):
        raise TritonUnsupported(f"pad fill {value!r} has no Triton literal here")
    return str(int(value)) if dtype.kind in "biu" else repr(float(value))


class _Renderer(TritonReductions):
    def __init__(self, k: Kernel, interpret: bool):
        self.k = k
        self.interpret = interpret
        self.layouts = []             # distinct (key, Layout), in order of first use
        self.layout_index = {}
        for leaf in k.loads():
            self._layout(("in", id(leaf.buf), leaf.layout.key()), leaf.layout)
        for o in k.outputs:
            self._layout(("out", id(o)), k.output_layout(o))
        self.dims = merge_dims(k, [lay for _, lay in self.layouts])
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
        terms, maps = [], {}
        for j, (st, m) in enumerate(zip(self.dims.strides(lay), self.dims.maps(lay))):
            if m is not None:   # roll / pad / tile: shift and source size are arguments too
                mode, coef, b, n = m
                cls = index_maps.wrap_class(m, self.dims.sizes[j]) if mode == index_maps.WRAP else mode
                maps[j] = (cls, coef, self._arg(f"b{i}_{j}", b), self._arg(f"m{i}_{j}", n))
            if st == 0:
                continue
            terms.append((j, None if st == 1 else self._arg(f"s{i}_{j}", st)))
        return off, terms, maps

    def _needs_int64(self):
        top = max([self.n_out * max(self.n_red, 1)] +
                  [lay.offset + sum(abs(st) * (s - 1) for s, st in zip(lay.shape, lay.strides) if s)
                   for _, lay in self.layouts])
        return top + ELEMS_INTERP + BLOCK_R_MAX >= INT32_LIMIT

    def _kept_is_contiguous(self):
        """Does the first input walk memory along a kept dimension (a column reduction)?"""
        for key, lay in self.layouts:
            if key[0] == "in":
                for j, st in enumerate(self.dims.strides(lay)):
                    if st == 1:
                        return not self.dims.red[j]
        return False

    def address(self, key, ctx):
        """(text, uses kept dims, uses reduced dims) of a layout's flat element index."""
        off, terms, maps = self.addr[key]
        parts = [off] if off else []
        kept = red = False
        for j, s in terms:
            if self.dims.red[j]:
                if ctx == "outer":
                    continue
                red = True
            else:
                kept = True
            v = _mapped(maps[j], f"i{j}") if j in maps else f"i{j}"
            parts.append(v if s is None else f"{v} * {s}")
        for j, m in maps.items():       # a mask varies along its dim even with stride 0
            if m[0] == index_maps.MASK and not (ctx == "outer" and self.dims.red[j]):
                red, kept = red or self.dims.red[j], kept or not self.dims.red[j]
        return " + ".join(parts) or "0", kept, red

    def inside(self, key, ctx):
        """The condition under which a padded load reads memory (else it reads its fill)."""
        conds = [f"({_source(m, f'i{j}')} >= 0) & ({_source(m, f'i{j}')} < {m[3]})"
                 for j, m in self.addr[key][2].items()
                 if m[0] == index_maps.MASK and not (ctx == "outer" and self.dims.red[j])]
        return " & ".join(conds)

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
        inside, other = self.inside(("in", id(e.buf), e.layout.key()), ctx), "0"
        if inside:          # pad(mode="constant"): masked-out lanes read the fill
            mask, other = f"{mask} & {inside}", _fill_text(e.layout.fill, e.dtype)
        self.emit(pad, f"{x} = tl.load({self.arg_of[id(e.buf)]} + ({addr}), mask={mask}, other={other})")
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
            return half_round(base, dst)
        if src.name in S.HALF and dst.name == "float32":
            return code
        return f"{code}.to({reg(dst)})"

    def expr(self, e: Expr, ctx, memo, pad, accs):
        key = (ctx, e.key())
        if key in memo:
            return memo[key]
        if e.kind == "load":
            code = self.load(e, ctx, pad)
        elif e.kind == "acc":
            code = accs[id(e.red)]
        elif e.kind == "const":
            code = const_text(e.value, e.dtype) if e.dtype is not None else float_text(e.value) \
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
            return const_text(a.value, want)
        return self.cvt(self.expr(a, ctx, memo, pad, accs), a.dtype, want)

    def op(self, e: Expr, ctx, memo, pad, accs):
        name = e.op.name
        cls = e.op.operands
        if _is_cast(e):
            return self.cvt(self.expr(e.args[0], ctx, memo, pad, accs), e.args[0].dtype, e.dtype)
        p = small_power(e)
        if p is not None:
            x = self.operand(e.args[0], e.dtype, e, ctx, memo, pad, accs)
            if p == 0:
                return self.cvt(f"({x} == {x}) | ({x} != {x})", D.bool_, e.dtype)
            code = {1: "{0}", 2: "({0} * {0})", 3: "({0} * {0} * {0})", -1: "(1.0 / {0})",
                    0.5: "{sqrt}({0})"}[p].format(x, sqrt=sqrt_fn(e.dtype))
            return self.round(code, e.dtype)
        if cls == "common":
            weak = [a.value for a in e.args if a.kind == "const" and a.dtype is None]
            want = weak_dtype(e, weak[0]) if weak else operand_dtype(e)
            if weak and want.kind in "iu" and not fits(weak[0], want):
                want = D.int64 if fits(weak[0], D.int64) else D.float64   # NumPy compares exactly
            args = [self.operand(a, want, e, ctx, memo, pad, accs) for a in e.args]
            in_dt = want
        elif cls == "own":
            args = []
            for a in e.args:
                if a.kind == "const" and a.dtype is None:
                    # a weak scalar next to an array: only logical ops take one, by its truth value
                    args.append(const_text(a.value != 0, D.bool_))
                    continue
                dt = a.dtype if a.dtype is not None else operand_dtype(e)
                args.append(self.operand(a, dt, e, ctx, memo, pad, accs))
            in_dt = input_dtype(e) if e.args[0].dtype is not None else operand_dtype(e)
        elif cls == "select":
            cond = self.operand(e.args[0], D.bool_, e, ctx, memo, pad, accs)
            args = [cond] + [self.operand(a, e.dtype, e, ctx, memo, pad, accs) for a in e.args[1:]]
            in_dt = e.dtype
        else:
            args = [self.operand(a, e.dtype, e, ctx, memo, pad, accs) for a in e.args]
            in_dt = e.dtype
        if name in S.INT_ERRORS and in_dt.kind == "i":
            cond, message = S.INT_ERRORS[name]
            self.flag_error(cond.format(*args), ctx, pad, message)
        if name in S.LIBDEVICE:
            if self.interpret:
                raise TritonUnsupported(f"{name} needs libdevice, which Triton's interpreter lacks")
            self.uses_libdevice = True
            template = S.LIBDEVICE[name]
        else:
            template = spelling_table(in_dt).get(name)
            if template is None:
                raise TritonUnsupported(f"{name} has no triton rendering for {in_dt.name}")
        extra = {"reg": reg(in_dt), "sqrt": sqrt_fn(in_dt), "bits": in_dt.bits,
                 "big": "4503599627370496.0" if in_dt.name == "float64" else "8388608.0"}
        if in_dt.kind == "f":
            ity = "tl.int64" if in_dt.name == "float64" else "tl.int32"
            for i, a in enumerate(args[:2]):
                extra[f"sb{i}"] = f"({a}.to({ity}, bitcast=True) < 0)"
        return self.round(template.format(*args, **extra), e.dtype)

    def round(self, code, dt):
        """A half-precision result rounded to its own precision (NumPy rounds every op)."""
        if dt.name in S.HALF:
            return half_round(code, dt)
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
            v = f"{v}.to({buf(node.dtype)})"
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
        same = duplicates(k)          # an equal earlier reduction: its accumulator serves
        groups = [g for g in ([r for r in group if id(r) not in same] for group in phases(k)) if g]
        elems = [st for st in k.stores if not st.per_outer]
        accs = {}
        if self.single:
            memo = {}
            self.open_block(ar, pad)
            for group in groups:
                for r in group:
                    self.reduce_block(r, memo, pad, accs)
                _share(same, accs)
            for st in elems:
                self.store(st.node, self.expr(st.expr, "full", memo, pad, accs), st.expr.dtype, "full", pad)
        else:
            for group in groups:
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
                _share(same, accs)
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

    # -- the module -----------------------------------------------------------------------------
    def render(self, name):
        k = self.k
        self.column = self.reducing and self._kept_is_contiguous()
        self.r_limit = COLUMN_BLOCK_R if self.column else BLOCK_R_MAX
        self.single = not self.reducing or self.n_red <= self.r_limit
        self.body()
        import re
        for z in ("zo", "zr"):       # the zero blocks only broadcast what needs it
            if not any(re.search(rf"\b{z}\b", ln) for ln in self.lines if not ln.lstrip().startswith(f"{z} =")):
                self.lines = [ln for ln in self.lines if not ln.lstrip().startswith(f"{z} =")]
        text = "\n".join(self.lines)       # sizes and strides no index reads are not passed
        keep = [i for i, a in enumerate(self.args) if re.search(rf"\b{a}\b", text)]
        self.args = [self.args[i] for i in keep]
        self.values = [self.values[i] for i in keep]
        ptrs = list(self.arg_of.values()) + list(self.out_of.values()) + (["err"] if self.errors else [])
        consts = ["BLOCK_O: tl.constexpr"] + (["BLOCK_R: tl.constexpr"] if self.reducing else [])
        sig = ", ".join(ptrs + self.args + consts)
        target = "# for Triton's interpreter (NumPy arrays)\n" if self.interpret else "# for an NVIDIA GPU\n"
        head = S.HEADER + target + (S.LIBDEVICE_IMPORT if self.uses_libdevice else "") + S.HELPERS
        doc = f"    # {k.name} {k.ranges_text()}: {', '.join(dict.fromkeys(k.op_names()))}"
        return "\n".join([head, "", "@triton.jit", f"def {name}({sig}):", doc] + self.lines) + "\n"


def _share(same, accs):
    """Each duplicate reduction reads the accumulator of the equal one computed before it."""
    for rid, first in same.items():
        if id(first) in accs:
            accs[rid] = accs[id(first)]


def render_kernel(k: Kernel, name: str = "kernel", interpret: bool = False) -> Rendered:
    """The Triton module for one loop-IR kernel (raises :class:`TritonUnsupported`)."""
    why = unsupported_reason(k, interpret)
    if why is not None:
        raise TritonUnsupported(why)
    r = _Renderer(k, interpret)
    src = r.render(name)
    out = Rendered(src, r.values, r.n_out, r.n_red, r.reducing, r.single, r.r_limit)
    out.errors = r.errors
    out.column = r.column          # the reduction runs across memory (kept index contiguous)
    return out
