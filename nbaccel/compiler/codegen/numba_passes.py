"""The numba tier's reduction passes, kept apart from the loop-nest renderer (``numba.py``).

``NumbaReductions`` is a mixin of ``numba._Renderer``: it spells the reduction plan that
``kernel_passes.py`` makes for the kernel (which reductions share an accumulator, which pairs
run as one pass, which values are invariant along the reduced rows) as numba loops.

* one pass per distinct reduction: equal reductions (``x.mean(0)`` and the mean inside
  ``x.std(0)``) share one accumulator;
* float max/min through ``fmaximum``/``fminimum`` (``numba_reduce.py``): they vectorise and
  propagate NaN without a flag;
* float32 sums as float32 partials of a chunk, added to a float64 total: full-width vectors,
  and each partial covers only SUM_CHUNK elements (SUM_CHUNK_ROWS rows in a column block);
* in a column block (the last axis kept), two pairs of reductions run as one pass over memory:
  max(X) with sum(exp(X - max)) (an online softmax, ``online_softmax_pass``) and sum(X) with
  sum((X - M)^2) (shifted moments for var/std, ``shifted_moments_pass``);
* values invariant along the reduced rows are computed once per column of a block
  (``hoist_block``), and a float32 division by such a value becomes a multiplication by its
  reciprocal (``hoist_reciprocals``).

The renderer provides ``lines``, ``consts``, ``stashed``, ``recip``, ``k`` (the kernel),
``expr``, ``loops``, ``init_acc``, ``open_pass``, ``stash``, ``reduction_pass``, ``const``,
``out_of`` and ``index``, the class attribute ``BLOCK`` (the accumulators' size) and ``width``
(this kernel's column block width, at most ``BLOCK``).
"""
from __future__ import annotations

from .kernel_passes import (centred_mean, invariant_along, invariant_roots, reciprocal_divisors,
                             reduction_plan, signature)
from .numba_syntax import VECTOR_SELECT, _np_type

_VECTOR_MAX = ("float32", "float64")   # max/min through numba_reduce's intrinsics
SUM_CHUNK = 1024               # elements of a float32 partial sum along a reduced last axis
SUM_CHUNK_ROWS = 64            # rows of a float32 partial column sum (per column of the block)


class NumbaReductions:
    """Reduction passes of the numba renderer (a mixin; see the module docstring)."""

    def reduction_passes(self, var, pad, accs, block):
        """The kernel's reduction plan (``kernel_passes.reduction_plan``), pass by pass: a
        reduction equal to an earlier one reads the earlier accumulator; in a column block the
        online-softmax and shifted-moments pairs run as one pass each."""
        for step in reduction_plan(self.k, pairs=block):
            if step.kind == "same":
                accs[id(step.r)] = accs[id(step.partner)]
            elif step.kind == "online_softmax":
                self.online_softmax_pass(step.r, step.partner, dict(var), pad, accs)
            elif step.kind == "shifted_moments":
                self.shifted_moments_pass(step.r, step.partner, dict(var), pad, accs)
            else:
                self.reduction_pass(step.r, dict(var), pad, accs, block)

    def shifted_moments_pass(self, rsum, rsq, var, pad, accs):
        """sum(X) and sum((X - M)^2), M a per-column value computed from sum(X) (the mean:
        variance / std over axis 0), in one pass over memory instead of two. With a shift K
        (X at the first reduced index, per column) the pass sums T1 = sum(X - K) and
        T2 = sum((X - K)^2) in float64; then sum(X) = T1 + n K and, with d = M - K,
        sum((X - M)^2) = T2 - 2 d T1 + n d^2 (clamped at 0). The shift keeps the cancellation
        to the data's spread around one of its own values, not its distance from zero, and
        float64 keeps it to ~1e-16 of that."""
        x = rsum.src
        m_expr = centred_mean(rsq)
        t1, t2, kk = f"acc{rsum.index}t", f"acc{rsq.index}t", f"shift{rsum.index}"
        n_red = " * ".join(f"n{a}" for a in self.k.axes)
        first = dict(var)
        for a in self.k.axes:
            first[a] = "0"
        self.lines.append(f"{pad}{kk} = np.empty({self.BLOCK}, np.float64)")
        self.lines.append(f"{pad}for jj in range(jn):")
        self.lines.append(f"{pad}    {kk}[jj] = 0.0")
        self.lines.append(f"{pad}    if {n_red} > 0:   # an empty reduction has no first element")
        v = self.expr(x, first, dict(self.stashed), pad + "        ", accs)
        self.lines.append(f"{pad}        if math.isfinite({v}):   # an infinite shift would turn sum(X) into NaN")
        self.lines.append(f"{pad}            {kk}[jj] = np.float64({v})")
        self.init_acc(t1, "np.float64", "np.float64(0)", pad, True)
        self.init_acc(t2, "np.float64", "np.float64(0)", pad, True)
        inner, memo = self.open_pass([x], var, pad, accs, True)
        v = self.expr(x, var, memo, inner, accs)
        self.lines.append(f"{inner}dv = np.float64({v}) - {kk}[jj]")
        self.lines.append(f"{inner}{t1}[jj] += dv")
        self.lines.append(f"{inner}{t2}[jj] += dv * dv")
        s1, s2 = f"acc{rsum.index}", f"acc{rsq.index}"
        self.lines.append(f"{pad}{s1} = np.empty({self.BLOCK}, np.float64)")
        self.lines.append(f"{pad}for jj in range(jn):")
        self.lines.append(f"{pad}    {s1}[jj] = {t1}[jj] + ({n_red}) * {kk}[jj]")
        for r in self.k.reductions:   # rsum and its duplicates (the mean inside std)
            if signature(r) == signature(rsum):
                accs[id(r)] = f"np.float32({s1}[jj])"
        self.lines.append(f"{pad}{s2} = np.empty({self.BLOCK}, np.float64)")
        self.lines.append(f"{pad}for jj in range(jn):")
        mv = self.expr(m_expr, var, dict(self.stashed), pad + "    ", accs)
        self.lines.append(f"{pad}    dm = np.float64({mv}) - {kk}[jj]")
        self.lines.append(f"{pad}    raw = {t2}[jj] - 2.0 * dm * {t1}[jj] + ({n_red}) * dm * dm")
        self.lines.append(f"{pad}    {s2}[jj] = 0.0 if raw < 0.0 else raw   # rounding below 0; NaN stays")
        accs[id(rsq)] = f"np.float32({s2}[jj])"

    def online_softmax_pass(self, rmax, rsum, var, pad, accs):
        """max(X) and sum(exp(X - max)) over the reduced rows of a column block in one pass
        over memory (softmax / logsumexp over axis 0): per chunk of rows, the chunk's max
        first (the chunk is then in L1), the running sum rescaled to it, then the chunk's
        exps. Two passes over the input instead of three.

        Where the kernel's one element store uses exp(X - max) (softmax over axis 0), the
        chunk's exps, taken from the max so far, also go into the output (``softmax_stash``),
        and the final pass reads them back times exp(that max - the final max) per chunk and
        column: exp once per element, and the input read once."""
        m, s, cm, part = f"acc{rmax.index}", f"acc{rsum.index}", f"cm{rsum.index}", f"part{rsum.index}"
        slot = self.softmax_stash(rmax, rsum, var)
        seen = f"seen{rsum.index}"
        big = self.const(float("inf"), rmax.dtype)
        self.init_acc(m, "np.float32", "-" + big, pad, True)
        self.init_acc(s, "np.float64", "np.float64(0)", pad, True)
        self.lines.append(f"{pad}{cm} = np.empty({self.BLOCK}, np.float32)")
        self.lines.append(f"{pad}{part} = np.empty({self.BLOCK}, np.float32)")
        a = self.k.axes[-1]
        n_rows = f"n{a}"
        if slot is not None:
            chunks = f"({n_rows} + {SUM_CHUNK_ROWS - 1}) // {SUM_CHUNK_ROWS}"
            self.lines.append(f"{pad}{seen} = np.empty(({chunks}, {self.width}), np.float32)")
        memo = {}
        self.hoist_block([rmax.src], var, memo, pad, accs)
        inner = self.loops(self.k.axes[:-1], var, pad)
        rows = f"range(c{a}, min(n{a}, c{a} + {SUM_CHUNK_ROWS}))"
        self.lines.append(f"{inner}for c{a} in range(0, n{a}, {SUM_CHUNK_ROWS}):")
        p1 = inner + "    "
        var[a] = f"i{a}"
        self.per_lane(p1, True, f"{cm}[jj] = {m}[jj]")
        v = self.chunk_rows(rmax.src, a, rows, var, memo, p1, accs)
        self.lines.append(f"{p1}        {cm}[jj] = fmaximum({cm}[jj], np.float32({v}))")
        self.per_lane(p1, True, f"if {cm}[jj] != {m}[jj]:   # the max rose: rescale the sum so far",
                      f"    {s}[jj] *= fexp({m}[jj] - {cm}[jj])", f"    {m}[jj] = {cm}[jj]",
                      f"{part}[jj] = np.float32(0)")
        if slot is None:
            v = self.chunk_rows(rmax.src, a, rows, var, memo, p1, accs)
            self.lines.append(f"{p1}        {part}[jj] += fexp(np.float32({v}) - {cm}[jj])")
        else:
            # the chunk's exps are taken from its max so far, or from 0 where that is -inf (the
            # chunk is all -inf: exp gives 0 there, not exp(-inf + inf) = NaN); the chunk's max
            # is kept, for the final pass's factor
            self.per_lane(p1, True, f"{seen}[c{a} // {SUM_CHUNK_ROWS}, jj] = {cm}[jj]",
                          f"if {cm}[jj] == -{big}:", f"    {cm}[jj] = np.float32(0)")
            v = self.chunk_rows(rmax.src, a, rows, var, memo, p1, accs)
            ex = f"ex{rsum.index}"
            self.lines.append(f"{p1}        {ex} = fexp(np.float32({v}) - {cm}[jj])")
            self.lines.append(f"{p1}        {slot} = {ex}")
            self.lines.append(f"{p1}        {part}[jj] += {ex}")
            self.per_lane(p1, True, f"{cm}[jj] = {seen}[c{a} // {SUM_CHUNK_ROWS}, jj]")
        # a chunk whose max so far is -inf holds only -inf (exp(-inf - -inf) is NaN there):
        # it adds nothing unless the whole column is -inf, where NumPy's sum is NaN
        self.per_lane(p1, True, f"if {cm}[jj] != -{big}:", f"    {s}[jj] += {part}[jj]")
        self.per_lane(pad, True, f"if {m}[jj] == -{big}:", f"    {s}[jj] = np.nan")
        accs[id(rmax)] = f"{m}[jj]"
        accs[id(rsum)] = f"np.float32({s}[jj])"
        if slot is not None:
            # each chunk's factor exp(its max - the final max): <= 1, 0 for an all -inf chunk
            # of a column that is not all -inf, NaN where the column's max is NaN or +-inf
            self.lines.append(f"{pad}for ch in range({chunks}):")
            self.per_lane(pad + "    ", True, f"{seen}[ch, jj] = fexp({seen}[ch, jj] - {m}[jj])")
            self.stashed = {rsum.src.key(): f"({slot} * {seen}[i{a} // {SUM_CHUNK_ROWS}, jj])"}

    def softmax_stash(self, rmax, rsum, var):
        """The output slot (text, at the online pass's indices) where the online pass keeps
        exp(X - max so far), or None where the kernel's shape does not allow it: one reduced
        axis (the chunks index the factors), the pair the kernel's only reductions, and one
        float32 element store, the kernel's only output, that uses exp(X - max)."""
        st = self.softmax_stash_store()
        if st is None:
            return None
        v = dict(var)
        v[self.k.axes[-1]] = f"i{self.k.axes[-1]}"
        return f"{self.out_of[id(st.node)]}[{self.index(('out', id(st.node)), v)}]"

    def softmax_stash_store(self):
        """The element store the online-softmax pass can keep its exps in (see
        ``softmax_stash``), or None. The body asks it first to pick the block width."""
        k = self.k
        steps = [st for st in reduction_plan(k, pairs=True) if st.kind != "same"]
        elems = [st for st in k.stores if not st.per_outer]
        if (len(k.axes) != 1 or self.stashed or len(steps) != 1 or steps[0].kind != "online_softmax"
                or len(elems) != 1 or len(k.stores) != 1 or len(k.outputs) != 1
                or any(r.stored for r in k.reductions)):
            return None
        st, rsum = elems[0], steps[0].partner
        if st.node.dtype.name != "float32" or rsum.src.dtype.name != "float32":
            return None
        if rsum.src.key() not in {e.key() for e in st.expr.subexprs()}:
            return None
        return st

    def chunk_rows(self, src, a, rows, var, memo, pad, accs):
        """Open the loops over one chunk's rows and the block's columns; return ``src`` there."""
        self.lines.append(f"{pad}for i{a} in {rows}:")
        self.lines.append(f"{pad}    for jj in range(jn):")
        return self.expr(src, var, dict(memo), pad + "        ", accs)

    def chunked_loop(self, a, var, pad, part, block):
        """``for i{a} in range(n{a})`` as chunks of SUM_CHUNK (rows of SUM_CHUNK_ROWS in a
        column block); each chunk starts its float32 partial ``part`` at zero."""
        size = SUM_CHUNK_ROWS if block else SUM_CHUNK
        self.lines.append(f"{pad}for c{a} in range(0, n{a}, {size}):")
        pad += "    "
        if block:
            self.lines.append(f"{pad}for jj in range(jn):")
            self.lines.append(f"{pad}    {part}[jj] = np.float32(0)")
        else:
            self.lines.append(f"{pad}{part} = np.float32(0)")
        self.chunk_pad = pad
        self.lines.append(f"{pad}for i{a} in range(c{a}, min(n{a}, c{a} + {size})):")
        var[a] = f"i{a}"
        return pad + "    "

    def sum_pass(self, r, var, pad, accs, block):
        """A float32 sum: float32 partial sums over chunks (they vectorise at full width),
        each added to a float64 total. A float64 accumulator for every element costs 3x on
        a row sum; a chunk of 1024 summed in float32 across the vector lanes loses little."""
        acc, part = f"acc{r.index}", f"part{r.index}"
        if not block:
            pad = self.short_sum(r, var, pad, accs, part)
        self.init_acc(acc, "np.float64", "np.float64(0)", pad, block)
        if block:
            self.lines.append(f"{pad}{part} = np.empty({self.BLOCK}, np.float32)")
        inner, memo = self.open_pass([r.src], var, pad, accs, block, chunk=part)
        v = self.expr(r.src, var, memo, inner, accs)
        self.stash(r, var, memo, inner)
        j = "[jj]" if block else ""
        self.lines.append(f"{inner}{part}{j} += np.float32({v})")
        self.per_lane(self.chunk_pad, block, f"{acc}{j} += {part}{j}")
        accs[id(r)] = f"np.float32({acc}[jj])" if block else f"r{r.index}"
        if not block:
            self.lines.append(f"{pad}r{r.index} = np.float32({acc})")

    def short_sum(self, r, var, pad, accs, part):
        """When the whole reduction fits in one chunk (a pairwise distance's 8 coordinates), a
        branch sums it as one float32 partial with no chunk loop: the loop then unrolls and
        vectorises (measured 2x on a (20000, 64 | 8) kernel). Returns the indentation of the
        other branch, the chunked sum."""
        size = " * ".join(f"n{a}" for a in self.k.axes)
        stashed = self.stashed
        self.lines.append(f"{pad}if {size} <= {SUM_CHUNK}:")
        short = pad + "    "
        self.lines.append(f"{short}{part} = np.float32(0)")
        v2 = dict(var)
        inner, memo = self.open_pass([r.src], v2, short, accs, False)
        v = self.expr(r.src, v2, memo, inner, accs)
        self.stash(r, v2, memo, inner)
        self.lines.append(f"{inner}{part} += np.float32({v})")
        self.lines.append(f"{short}r{r.index} = {part}")
        self.lines.append(f"{pad}else:")
        self.stashed = stashed            # the other branch stashes the same value again
        return short

    def float_max_pass(self, r, var, pad, accs, block):
        """A float max/min pass through ``fmaximum``/``fminimum`` (numba_reduce.py): NaN
        propagates as in NumPy without a flag, and the loop vectorises."""
        acc = f"acc{r.index}"
        t = _np_type(r.dtype)
        self.init_acc(acc, t, self.identity(r.rule, r.dtype), pad, block)
        inner, memo = self.open_pass([r.src], var, pad, accs, block)
        v = self.expr(r.src, var, memo, inner, accs)
        self.stash(r, var, memo, inner)
        target = f"{acc}[jj]" if block else acc
        fn = VECTOR_SELECT[r.rule.combine]
        self.lines.append(f"{inner}{target} = {fn}({target}, {t}({v}))")
        accs[id(r)] = f"{acc}[jj]" if block else f"r{r.index}"
        if not block:
            self.lines.append(f"{pad}r{r.index} = {acc}")

    def hoist_block(self, exprs, var, memo, pad, accs):
        """``hoist`` for a column block: each invariant value is computed once per column of
        the block, into a small array, before the loops over the reduced rows (a column's
        mean and 1/std, instead of a division and a sqrt for every element)."""
        for e in self.invariants(exprs, memo, accs):
            name = f"h{len(self.consts) + len(self.lines)}"
            self.lines.append(f"{pad}{name} = np.empty({self.BLOCK}, {_np_type(e.dtype)})")
            self.lines.append(f"{pad}for jj in range(jn):")
            code = self.expr(e, var, dict(memo), pad + "    ", accs)
            self.lines.append(f"{pad}    {name}[jj] = {code}")
            memo[e.key()] = self.hoisted[e.key()] = f"{name}[jj]"
        self.hoist_reciprocals(exprs, var, memo, pad, accs)

    def hoist_reciprocals(self, exprs, var, memo, pad, accs):
        """A float32 division whose divisor is one value per column of the block (a softmax's
        sum, a std) becomes a multiplication by that value's reciprocal, computed once per
        column (``kernel_passes.reciprocal_divisors``): a vector division per element costs
        more than the rest of the element's work."""
        invariant = invariant_along(self.k.axes, accs)
        for d in reciprocal_divisors(exprs, invariant, memo):
            if d.key() in self.recip:
                continue
            name = f"rc{len(self.consts) + len(self.lines)}"
            self.lines.append(f"{pad}{name} = np.empty({self.BLOCK}, np.float32)")
            self.lines.append(f"{pad}for jj in range(jn):")
            code = self.expr(d, var, dict(memo), pad + "    ", accs)
            self.lines.append(f"{pad}    {name}[jj] = np.float32(1) / {code}")
            self.recip[d.key()] = f"{name}[jj]"

    def invariants(self, exprs, memo, accs):
        """The largest sub-expressions of ``exprs`` that do not vary along the reduction
        ranges (and are not constants or plain loads), in first-use order."""
        return invariant_roots(exprs, invariant_along(self.k.axes, accs), memo)
