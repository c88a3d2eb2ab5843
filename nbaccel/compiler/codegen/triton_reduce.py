"""The Triton renderer's reductions: one block in registers, or a loop over blocks of the
reduction range with an accumulator per lane (the mixin :class:`TritonReductions` of the
renderer in ``triton.py``).

What a reduction means comes from its op's rule (``ops/registry.py``: ``ReduceRule``): its
identity (what a masked lane contributes), its combine op, whether it selects an element (max,
min: NaN propagates through a flag, because Triton's max does not) or returns its index (the
first best index and the first NaN win, as in NumPy), and whether it counts truth values
(any/all, as int32 flags). Folding sums and products accumulate in float32 for float32 and
narrower floats (float64 in float64, integers in NumPy's result dtype). The spellings are the
tables of ``triton_syntax.py``, keyed by the combine op.
"""
from __future__ import annotations

from ... import dtypes as D
from .triton_syntax import (BETTER, BLOCK_FOLD, LOOP_FOLD, SELECT_BLOCK, SELECT_FOLD, TRUTH_BLOCK,
                            TRUTH_FOLD, const_text, float_text, reg)


class TritonReductions:
    """Rendering of a kernel's reductions (needs the renderer's expr/cvt/emit/name)."""

    # one block: the whole reduction range in registers
    def reduce_block(self, r, memo, pad, accs):
        i, rule = r.index, r.rule
        src_dt = r.src.dtype
        v = self.expr(r.src, "full", memo, pad, accs)
        masked = self.masked(r, v)
        if rule.truth:
            self.emit(pad, f"red{i} = ({TRUTH_BLOCK[rule.combine]}({masked}, axis=1) != 0)[:, None]")
        elif not rule.selects:
            adt = acc_dtype(r)
            red = BLOCK_FOLD[rule.combine].format(masked)
            self.emit(pad, f"red{i} = {self.cvt(red, adt, r.dtype)}[:, None]")
        elif not rule.arg:
            x, rdt = self.ordered(v, src_dt)
            self.emit(pad, f"red{i} = {SELECT_BLOCK[rule.combine]}({masked}, axis=1)[:, None]")
            if src_dt.kind == "f":
                self.emit(pad, f"nan{i} = tl.max(tl.where(mask & ({x} != {x}), 1, 0), axis=1)[:, None] != 0")
                self.emit(pad, f"red{i} = tl.where(nan{i}, float('nan'), red{i})")
            if src_dt.kind == "b":
                self.emit(pad, f"red{i} = red{i} != 0")
        else:   # the first best index; the first NaN wins
            x, rdt = self.ordered(v, src_dt)
            self.emit(pad, f"best{i} = {SELECT_BLOCK[rule.combine]}({masked}, axis=1)[:, None]")
            hit = f"({x} == best{i})"
            if src_dt.kind == "f":
                self.emit(pad, f"nan{i} = tl.max(tl.where(mask & ({x} != {x}), 1, 0), axis=1)[:, None] != 0")
                hit = f"tl.where(nan{i}, {x} != {x}, {hit})"
            self.emit(pad, f"red{i} = tl.min(tl.where(mask & {hit}, r, n_red), axis=1)[:, None]"
                           f".to(tl.int64)")
        accs[id(r)] = f"red{i}"

    def masked(self, r, v):
        """The source value ``v`` with masked lanes as the reduction's identity, in the type the
        reduction compares or accumulates in."""
        rule = r.rule
        if rule.truth:
            return f"tl.where(mask, ({v} != 0).to(tl.int32), {int(rule.identity(r.src.dtype))})"
        if not rule.selects:
            adt = acc_dtype(r)
            return f"tl.where(mask, {self.cvt(v, r.src.dtype, adt)}, {const_text(int(rule.identity(adt)), adt)})"
        x, rdt = self.ordered(v, r.src.dtype)
        return f"tl.where(mask, {x}, {identity(rule, rdt)})"

    def ordered(self, v, dt):
        """A value max/min can compare: bools as int32."""
        if dt.kind == "b":
            return f"{v}.to(tl.int32)", D.int32
        return v, dt

    # a loop over blocks of the reduction range: per-lane accumulators
    def init_acc(self, r, pad):
        i, rule = r.index, r.rule
        shape = "[BLOCK_O, BLOCK_R]"
        if rule.truth:
            self.emit(pad, f"acc{i} = tl.full({shape}, {int(rule.identity(r.src.dtype))}, tl.int32)")
        elif not rule.selects:
            adt = acc_dtype(r)
            self.emit(pad, f"acc{i} = tl.full({shape}, {int(rule.identity(adt))}, {reg(adt)})")
        else:
            _, rdt = self.ordered("", r.src.dtype)
            self.emit(pad, f"acc{i} = tl.full({shape}, {identity_value(rule, rdt)}, {reg(rdt)})")
            if r.src.dtype.kind == "f" and not rule.arg:
                self.emit(pad, f"nan{i} = tl.full({shape}, 0, tl.int32)")
            if rule.arg:
                idt = "tl.int64" if self.wide else "tl.int32"
                self.emit(pad, f"idx{i} = tl.full({shape}, -1, {idt})")

    def update_acc(self, r, memo, pad, accs):
        i, rule = r.index, r.rule
        v = self.expr(r.src, "full", memo, pad, accs)
        src_dt = r.src.dtype
        if rule.truth:
            self.emit(pad, f"acc{i} = acc{i} {TRUTH_FOLD[rule.combine]} {self.masked(r, v)}")
        elif not rule.selects:
            self.emit(pad, f"acc{i} = {LOOP_FOLD[rule.combine].format(f'acc{i}', self.masked(r, v))}")
        elif not rule.arg:
            x, rdt = self.ordered(v, src_dt)
            self.emit(pad, f"acc{i} = {SELECT_FOLD[rule.combine]}(acc{i}, {self.masked(r, v)})")
            if src_dt.kind == "f":
                self.emit(pad, f"nan{i} = nan{i} | tl.where(mask & ({x} != {x}), 1, 0)")
        else:
            x, rdt = self.ordered(v, src_dt)
            better = f"({x} {BETTER[rule.combine]} acc{i}) | (idx{i} < 0)"
            if src_dt.kind == "f":
                # a NaN beats everything and stays; the first of equal values stays
                better = f"(({better}) & (acc{i} == acc{i})) | (({x} != {x}) & (acc{i} == acc{i}))"
            b = self.name("b")
            self.emit(pad, f"{b} = mask & ({better})")
            self.emit(pad, f"acc{i} = tl.where({b}, {x}, acc{i})")
            self.emit(pad, f"idx{i} = tl.where({b}, r, idx{i})")

    def finish_acc(self, r, pad, accs):
        i, rule = r.index, r.rule
        if rule.truth:
            self.emit(pad, f"red{i} = ({TRUTH_BLOCK[rule.combine]}(acc{i}, axis=1) != 0)[:, None]")
        elif not rule.selects:
            adt = acc_dtype(r)
            red = BLOCK_FOLD[rule.combine].format(f"acc{i}")
            self.emit(pad, f"red{i} = {self.cvt(red, adt, r.dtype)}[:, None]")
        elif not rule.arg:
            self.emit(pad, f"red{i} = {SELECT_BLOCK[rule.combine]}(acc{i}, axis=1)[:, None]")
            if r.src.dtype.kind == "f":
                self.emit(pad, f"red{i} = tl.where(tl.max(nan{i}, axis=1)[:, None] != 0, float('nan'), red{i})")
            if r.src.dtype.kind == "b":
                self.emit(pad, f"red{i} = red{i} != 0")
        else:
            fn = SELECT_BLOCK[rule.combine]
            valid = f"idx{i} >= 0"
            self.emit(pad, f"best{i} = {fn}(tl.where({valid}, acc{i}, "
                           f"{identity(rule, self.ordered('', r.src.dtype)[1])}), axis=1)[:, None]")
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
    if r.dtype.kind == "f":
        return D.float64 if r.dtype.name == "float64" else D.float32
    return r.dtype


def identity_value(rule, dt):
    """The identity of a selecting reduction over dtype dt, as source text (-inf, an integer)."""
    v = rule.identity(dt)
    return float_text(v) if dt.kind == "f" else str(int(v))


def identity(rule, dt):
    return f"tl.full(o.shape, {identity_value(rule, dt)}, {reg(dt)})"
