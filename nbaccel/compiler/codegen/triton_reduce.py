"""The Triton renderer's reductions: one block in registers, or a loop over blocks of the
reduction range with an accumulator per lane (the mixin :class:`ReductionPasses` of the
renderer in ``triton.py``).

sum/prod accumulate in float32 for float32 and narrower floats (float64 in float64, integers
in NumPy's result dtype); any/all as int32 flags; max/min with a NaN flag, because NumPy
propagates NaN and Triton's max does not; argmax/argmin keep the first best index and the
first NaN, as NumPy does. Masked lanes contribute the reduction's identity.
"""
from __future__ import annotations

from .triton_syntax import const_text, int32_dtype, reg


class ReductionPasses:
    """Rendering of a kernel's reductions (needs the renderer's expr/cvt/emit/name)."""

    # one block: the whole reduction range in registers
    def reduce_block(self, r, memo, pad, accs):
        i = r.index
        src_dt = r.src.dtype
        v = self.expr(r.src, "full", memo, pad, accs)
        op = r.op
        if op in ("sum", "prod"):
            adt = acc_dtype(r)
            x = self.cvt(v, src_dt, adt)
            ident = "1" if op == "prod" else "0"
            t = f"tl.where(mask, {x}, {const_text(int(ident), adt)})"
            red = f"tl.sum({t}, axis=1)" if op == "sum" else f"tl.reduce({t}, 1, _mul)"
            self.emit(pad, f"red{i} = {self.cvt(red, adt, r.dtype)}[:, None]")
        elif op in ("any", "all"):
            flag = f"tl.where(mask, ({v} != 0).to(tl.int32), {0 if op == 'any' else 1})"
            fn = "tl.max" if op == "any" else "tl.min"
            self.emit(pad, f"red{i} = ({fn}({flag}, axis=1) != 0)[:, None]")
        elif op in ("amax", "amin"):
            x, rdt = self.ordered(v, src_dt)
            fn = "tl.max" if op == "amax" else "tl.min"
            self.emit(pad, f"red{i} = {fn}(tl.where(mask, {x}, {extreme(rdt, op == 'amax')}), axis=1)[:, None]")
            if src_dt.kind == "f":
                self.emit(pad, f"nan{i} = tl.max(tl.where(mask & ({x} != {x}), 1, 0), axis=1)[:, None] != 0")
                self.emit(pad, f"red{i} = tl.where(nan{i}, float('nan'), red{i})")
            if src_dt.kind == "b":
                self.emit(pad, f"red{i} = red{i} != 0")
        else:   # argmax / argmin: the first best index, the first NaN wins
            x, rdt = self.ordered(v, src_dt)
            fn = "tl.max" if op == "argmax" else "tl.min"
            self.emit(pad, f"best{i} = {fn}(tl.where(mask, {x}, {extreme(rdt, op == 'argmax')}), axis=1)[:, None]")
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
            return f"{v}.to(tl.int32)", int32_dtype()
        return v, dt

    # a loop over blocks of the reduction range: per-lane accumulators
    def init_acc(self, r, pad):
        i, op = r.index, r.op
        shape = "[BLOCK_O, BLOCK_R]"
        if op in ("sum", "prod"):
            self.emit(pad, f"acc{i} = tl.full({shape}, {1 if op == 'prod' else 0}, {reg(acc_dtype(r))})")
        elif op in ("any", "all"):
            self.emit(pad, f"acc{i} = tl.full({shape}, {0 if op == 'any' else 1}, tl.int32)")
        else:
            _, rdt = self.ordered("", r.src.dtype)
            arg = op in ("argmax", "argmin")
            big = op in ("amax", "argmax")
            self.emit(pad, f"acc{i} = tl.full({shape}, {extreme_value(rdt, big)}, {reg(rdt)})")
            if r.src.dtype.kind == "f" and not arg:
                self.emit(pad, f"nan{i} = tl.full({shape}, 0, tl.int32)")
            if arg:
                idt = "tl.int64" if self.wide else "tl.int32"
                self.emit(pad, f"idx{i} = tl.full({shape}, -1, {idt})")

    def update_acc(self, r, memo, pad, accs):
        i, op = r.index, r.op
        v = self.expr(r.src, "full", memo, pad, accs)
        src_dt = r.src.dtype
        if op in ("sum", "prod"):
            adt = acc_dtype(r)
            x = self.cvt(v, src_dt, adt)
            sym = "+" if op == "sum" else "*"
            ident = 1 if op == "prod" else 0
            self.emit(pad, f"acc{i} = acc{i} {sym} tl.where(mask, {x}, {const_text(ident, adt)})")
        elif op == "any":
            self.emit(pad, f"acc{i} = acc{i} | tl.where(mask, ({v} != 0).to(tl.int32), 0)")
        elif op == "all":
            self.emit(pad, f"acc{i} = acc{i} & tl.where(mask, ({v} != 0).to(tl.int32), 1)")
        elif op in ("amax", "amin"):
            x, rdt = self.ordered(v, src_dt)
            fn = "tl.maximum" if op == "amax" else "tl.minimum"
            self.emit(pad, f"acc{i} = {fn}(acc{i}, tl.where(mask, {x}, {extreme(rdt, op == 'amax')}))")
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
            adt = acc_dtype(r)
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
                           f"{extreme(self.ordered('', r.src.dtype)[1], op == 'argmax')}), axis=1)[:, None]")
            hit = f"(acc{i} == best{i})"
            if r.src.dtype.kind == "f":
                self.emit(pad, f"nan{i} = tl.max(tl.where(acc{i} != acc{i}, 1, 0), axis=1)[:, None] != 0")
                hit = f"tl.where(nan{i}, acc{i} != acc{i}, {hit})"
            self.emit(pad, f"red{i} = tl.min(tl.where(({valid}) & {hit}, idx{i}, n_red), axis=1)[:, None]"
                           f".to(tl.int64)")
        accs[id(r)] = f"red{i}"


def acc_dtype(r):
    """Sums and products of float32 and narrower floats accumulate in float32; float64 in
    float64; integers in the result's own dtype (NumPy's)."""
    from ... import dtypes as D
    if r.dtype.kind == "f":
        return D.float64 if r.dtype.name == "float64" else D.float32
    return r.dtype


def extreme_value(dt, for_max):
    """The identity of max (for_max) or min over dtype dt, as source text."""
    import numpy as np
    if dt.kind == "f":
        return "-float('inf')" if for_max else "float('inf')"
    info = np.iinfo(dt.np)
    return str(int(info.min if for_max else info.max))


def extreme(dt, for_max):
    return f"tl.full(o.shape, {extreme_value(dt, for_max)}, {reg(dt)})"


def phases(k):
    """Reductions grouped into passes: each needs only reductions of earlier passes."""
    phase = {}
    for r in k.reductions:
        deps = [leaf.red for leaf in r.src.leaves() if leaf.kind == "acc"]
        phase[id(r)] = 1 + max((phase[id(d)] for d in deps if id(d) in phase), default=-1)
    groups = {}
    for r in k.reductions:
        groups.setdefault(phase[id(r)], []).append(r)
    return [groups[p] for p in sorted(groups)]
