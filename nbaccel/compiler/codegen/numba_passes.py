"""The numba tier's reduction passes, kept apart from the loop-nest renderer (``numba.py``).

``ReductionPasses`` is a mixin of ``numba._Renderer``: it decides how a kernel's reductions
become passes over memory and renders the special ones.

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
``expr``, ``loops``, ``init_acc``, ``open_pass``, ``stash``, ``reduction_pass`` and ``const``,
and the class attribute ``BLOCK`` (the column block width).
"""
from __future__ import annotations

from .common import small_power
from .numba_syntax import PARTIAL_SUM, VECTOR_SELECT, _np_type

_VECTOR_MAX = ("float32", "float64")   # max/min through numba_reduce's intrinsics
SUM_CHUNK = 1024               # elements of a float32 partial sum along a reduced last axis
SUM_CHUNK_ROWS = 64            # rows of a float32 partial column sum (per column of the block)


class ReductionPasses:
    """Reduction passes of the numba renderer (a mixin; see the module docstring)."""

    def reduction_passes(self, var, pad, accs, block):
        """One pass per distinct reduction: a reduction equal to an earlier one (``x.mean(0)``
        and the mean inside ``x.std(0)``) reads the earlier accumulator instead of passing over
        the input again."""
        first = {}
        reds = list(self.k.reductions)
        done = set()
        for i, r in enumerate(reds):
            if id(r) in done:
                continue
            sig = _signature(r)
            if sig in first:
                accs[id(r)] = accs[id(first[sig])]
                continue
            # pairs of reductions that one pass over a column block computes together
            softmax = next((r2 for r2 in reds[i + 1:] if block and _online_softmax_pair(r, r2)), None)
            centred = None if softmax is not None else next(
                (r2 for r2 in reds[i + 1:] if block and _centred_square_pair(r, r2, accs)), None)
            if softmax is not None:
                self.online_softmax_pass(r, softmax, dict(var), pad, accs)
            elif centred is not None:
                self.shifted_moments_pass(r, centred, dict(var), pad, accs)
            else:
                self.reduction_pass(r, dict(var), pad, accs, block)
            for partner in (softmax, centred):
                if partner is not None:
                    done.add(id(partner))
                    first[_signature(partner)] = partner
            first[sig] = r

    def shifted_moments_pass(self, rsum, rsq, var, pad, accs):
        """sum(X) and sum((X - M)^2), M a per-column value computed from sum(X) (the mean:
        variance / std over axis 0), in one pass over memory instead of two. With a shift K
        (X at the first reduced index, per column) the pass sums T1 = sum(X - K) and
        T2 = sum((X - K)^2) in float64; then sum(X) = T1 + n K and, with d = M - K,
        sum((X - M)^2) = T2 - 2 d T1 + n d^2 (clamped at 0). The shift keeps the cancellation
        to the data's spread around one of its own values, not its distance from zero, and
        float64 keeps it to ~1e-16 of that."""
        x = rsum.src
        m_expr = _centred_mean(rsq)
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
            if _signature(r) == _signature(rsum):
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
        first (the chunk is then in L2), the running sum rescaled to it, then the chunk's
        exps. Two passes over the input instead of three, and no stash to read back."""
        m, s, cm, part = f"acc{rmax.index}", f"acc{rsum.index}", f"cm{rsum.index}", f"part{rsum.index}"
        big = self.const(float("inf"), rmax.dtype)
        self.init_acc(m, "np.float32", "-" + big, pad, True)
        self.init_acc(s, "np.float64", "np.float64(0)", pad, True)
        self.lines.append(f"{pad}{cm} = np.empty({self.BLOCK}, np.float32)")
        self.lines.append(f"{pad}{part} = np.empty({self.BLOCK}, np.float32)")
        memo = {}
        self.hoist_block([rmax.src], var, memo, pad, accs)
        inner = self.loops(self.k.axes[:-1], var, pad)
        a = self.k.axes[-1]
        rows = f"range(c{a}, min(n{a}, c{a} + {SUM_CHUNK_ROWS}))"
        self.lines.append(f"{inner}for c{a} in range(0, n{a}, {SUM_CHUNK_ROWS}):")
        p1 = inner + "    "
        var[a] = f"i{a}"
        self.lines.append(f"{p1}for jj in range(jn):")
        self.lines.append(f"{p1}    {cm}[jj] = {m}[jj]")
        self.lines.append(f"{p1}for i{a} in {rows}:")
        self.lines.append(f"{p1}    for jj in range(jn):")
        v = self.expr(rmax.src, var, dict(memo), p1 + "        ", accs)
        self.lines.append(f"{p1}        {cm}[jj] = fmaximum({cm}[jj], np.float32({v}))")
        self.lines.append(f"{p1}for jj in range(jn):")
        self.lines.append(f"{p1}    if {cm}[jj] != {m}[jj]:   # the max rose: rescale the sum so far")
        self.lines.append(f"{p1}        {s}[jj] *= fexp({m}[jj] - {cm}[jj])")
        self.lines.append(f"{p1}        {m}[jj] = {cm}[jj]")
        self.lines.append(f"{p1}    {part}[jj] = np.float32(0)")
        self.lines.append(f"{p1}for i{a} in {rows}:")
        self.lines.append(f"{p1}    for jj in range(jn):")
        v = self.expr(rmax.src, var, dict(memo), p1 + "        ", accs)
        self.lines.append(f"{p1}        {part}[jj] += fexp(np.float32({v}) - {cm}[jj])")
        # a chunk whose max so far is -inf holds only -inf (exp(-inf - -inf) is NaN there):
        # it adds nothing unless the whole column is -inf, where NumPy's sum is NaN
        self.lines.append(f"{p1}for jj in range(jn):")
        self.lines.append(f"{p1}    if {cm}[jj] != -{big}:")
        self.lines.append(f"{p1}        {s}[jj] += {part}[jj]")
        self.lines.append(f"{pad}for jj in range(jn):")
        self.lines.append(f"{pad}    if {m}[jj] == -{big}:")
        self.lines.append(f"{pad}        {s}[jj] = np.nan")
        accs[id(rmax)] = f"{m}[jj]"
        accs[id(rsum)] = f"np.float32({s}[jj])"

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
        self.init_acc(acc, "np.float64", "np.float64(0)", pad, block)
        if block:
            self.lines.append(f"{pad}{part} = np.empty({self.BLOCK}, np.float32)")
        inner, memo = self.open_pass([r.src], var, pad, accs, block, chunk=part)
        v = self.expr(r.src, var, memo, inner, accs)
        self.stash(r, var, memo, inner)
        if block:
            self.lines.append(f"{inner}{part}[jj] += np.float32({v})")
            self.lines.append(f"{self.chunk_pad}for jj in range(jn):")
            self.lines.append(f"{self.chunk_pad}    {acc}[jj] += {part}[jj]")
        else:
            self.lines.append(f"{inner}{part} += np.float32({v})")
            self.lines.append(f"{self.chunk_pad}{acc} += {part}")
        accs[id(r)] = f"np.float32({acc}[jj])" if block else f"r{r.index}"
        if not block:
            self.lines.append(f"{pad}r{r.index} = np.float32({acc})")

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
            memo[e.key()] = f"{name}[jj]"
        self.hoist_reciprocals(exprs, var, memo, pad, accs)

    def hoist_reciprocals(self, exprs, var, memo, pad, accs):
        """A float32 division whose divisor is one value per column of the block (a softmax's
        sum, a std) becomes a multiplication by that value's reciprocal, computed once per
        column: a vector division per element costs more than the rest of the element's work
        (``arcp``, which the kernels use anyway, permits the rewrite; at most 1 ulp)."""
        invariant = invariant_along(self.k.axes, accs)
        seen = set()
        stack = list(exprs)
        while stack:
            e = stack.pop()
            if id(e) in seen or e.kind != "op":
                continue
            seen.add(id(e))
            stack.extend(e.args)
            if e.op.name != "divide" or e.params or e.dtype.name != "float32" or e.key() in memo:
                continue
            d = e.args[1]
            if d.dtype is None or d.dtype.name != "float32" or d.key() in self.recip:
                continue
            if not invariant(d) or d.kind == "const" or d.kind == "load":
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
        invariant = invariant_along(self.k.axes, accs)
        out, taken = [], set()

        def walk(e):
            if e.kind != "op" or e.key() in memo or e.key() in taken:
                return
            if invariant(e) and any(a.kind != "const" for a in e.args):
                taken.add(e.key())
                out.append(e)
                return
            for a in e.args:
                walk(a)
        for e in exprs:
            walk(e)
        return out


def invariant_along(axes, accs):
    """A memoised test: does an expression not vary along ``axes``? Loads with stride 0 on
    them, constants, and accumulators of the reductions in ``accs`` (already finished) do not;
    an op does not when none of its arguments does."""
    seen = {}

    def invariant(e):
        if id(e) not in seen:
            if e.kind == "load":
                seen[id(e)] = all(e.layout.strides[a] == 0 for a in axes)
            elif e.kind == "acc":
                seen[id(e)] = id(e.red) in accs
            elif e.kind == "const":
                seen[id(e)] = True
            else:
                seen[id(e)] = all(invariant(a) for a in e.args)
        return seen[id(e)]
    return invariant


def _is_sum(r):
    return r.rule.combine == PARTIAL_SUM and not r.rule.arg


def _is_max(r):
    return r.rule.selects and not r.rule.arg and r.rule.identity(r.dtype) == float("-inf")


def _signature(r):
    """Reductions with one signature compute the same value."""
    return (r.op, r.src.key(), r.dtype.name)


def _centred_mean(rsq):
    """M of ``rsq`` = sum((X - M) * (X - M)), or None."""
    e = rsq.src
    if e.kind != "op" or e.params:
        return None
    if e.op.name == "multiply" and e.args[0].key() == e.args[1].key():
        d = e.args[0]
    elif small_power(e) == 2 and e.args[0].dtype is e.dtype:
        d = e.args[0]
    else:
        return None
    if d.kind != "op" or d.op.name != "subtract" or d.params:
        return None
    return d.args[1]


def _centred_square_pair(rsum, rsq, accs) -> bool:
    """``rsq`` is sum((X - M)^2) where ``rsum`` is sum(X), X float32 and M a value per kept
    index computed from ``rsum`` (and from inputs constant along the reduced axes): the pair
    that ``shifted_moments_pass`` computes in one pass."""
    if not (_is_sum(rsum) and _is_sum(rsq)) or rsum.axes != rsq.axes:
        return False
    if not all(t.name == "float32" for t in (rsum.dtype, rsq.dtype, rsum.src.dtype, rsq.src.dtype)):
        return False
    m = _centred_mean(rsq)
    if m is None or rsq.src.args[0].args[0].key() != rsum.src.key():
        return False
    axes = rsum.axes
    uses_sum = False
    for e in m.subexprs():
        if e.kind == "load" and any(e.layout.strides[a] != 0 for a in axes):
            return False
        if e.kind == "acc":
            if e.red is rsum or _signature(e.red) == _signature(rsum):
                uses_sum = True
            elif id(e.red) not in accs:
                return False
    return uses_sum and m.dtype is not None and m.dtype.kind == "f"


def _online_softmax_pair(rmax, rsum) -> bool:
    """``rsum`` is sum(exp(X - rmax)) and ``rmax`` is max(X), X float32: the pair that
    ``online_softmax_pass`` computes in one pass."""
    if not (_is_max(rmax) and _is_sum(rsum)) or rmax.axes != rsum.axes:
        return False
    if rmax.dtype.name != "float32" or rsum.dtype.name != "float32" or rmax.src.dtype.name != "float32":
        return False
    e = rsum.src
    if e.kind != "op" or e.op.name != "exp" or e.params or e.dtype.name != "float32":
        return False
    d = e.args[0]
    if d.kind != "op" or d.op.name != "subtract" or d.params or d.dtype.name != "float32":
        return False
    x, mx = d.args
    return x.key() == rmax.src.key() and mx.kind == "acc" and mx.red is rmax
