"""Passes over one loop-IR kernel (``loops.Kernel``) before any renderer sees it.

The renderers (``codegen/numpy.py``, ``numba.py``, ``triton.py``) only spell: what a kernel's
reductions share, which of them one pass over memory can compute together, in which order
they must run, which dimensions are one run of memory and which values do not vary along the
reduced ranges are decided here, once, from the loop IR and the op table (the ops' reduce
rules), the same for every tier.

* :func:`reduction_plan`: one pass per distinct reduction (equal reductions, ``x.mean(0)``
  and the mean inside ``x.std(0)``, share an accumulator), and the pairs one pass computes
  together: max(X) with sum(exp(X - max)) (an *online softmax*) and sum(X) with
  sum((X - M)^2), M a value computed from sum(X) (*shifted moments* for var/std);
* :func:`phases`: reductions grouped into passes, each needing only earlier ones (softmax:
  the max, then the sum of exp(x - max)); :func:`duplicates` names the reductions that equal an
  earlier one (every tier computes each value once);
* :func:`merge_dims`: size-1 dimensions dropped and neighbours every layout walks as one run
  merged (a contiguous elementwise kernel indexes with one flat index);
* :func:`invariant_along`, :func:`invariant_roots`, :func:`reciprocal_divisors`: the values
  that do not vary along the reduced ranges (computed once per kept index instead of once per
  element), and the float32 divisors among them (a division becomes a multiplication by a
  reciprocal computed once).

The patterns below name the ops they match (a pattern is about particular ops, as tinygrad's
rewrite rules are); what a reduction *is* comes from its ``ReduceRule``.
"""
from __future__ import annotations

import math

from .common import small_power
from ..schedule.loops import Kernel


# -- the reduction plan -------------------------------------------------------------------------

def signature(r):
    """Reductions with one signature compute the same value."""
    return (r.op, r.src.key(), r.dtype.name)


class Step:
    """One pass of the reduction plan: ``kind`` is ``"single"`` (one reduction), ``"same"``
    (``r`` reads the accumulator of the earlier ``partner``), ``"online_softmax"`` (``r`` is
    the max, ``partner`` the sum of exp) or ``"shifted_moments"`` (``r`` the sum, ``partner``
    the centred sum of squares)."""

    __slots__ = ("kind", "r", "partner")

    def __init__(self, kind, r, partner=None):
        self.kind = kind
        self.r = r
        self.partner = partner

    def __repr__(self):
        extra = f", r{self.partner.index}" if self.partner is not None else ""
        return f"Step({self.kind}, r{self.r.index}{extra})"


def reduction_plan(k: Kernel, pairs: bool = True) -> list[Step]:
    """The kernel's reductions as passes over memory, in order. With ``pairs`` the two pairs
    above run as one pass each (a renderer asks for them where its loop structure can run
    them: numba's column blocks)."""
    first = {}
    reds = list(k.reductions)
    done = set()            # partners computed by an earlier pair pass
    finished = set()        # reductions whose value is known before the current pass
    steps = []
    for i, r in enumerate(reds):
        if id(r) in done:
            continue
        sig = signature(r)
        if sig in first:
            steps.append(Step("same", r, first[sig]))
            finished.add(id(r))
            continue
        softmax = next((r2 for r2 in reds[i + 1:] if pairs and online_softmax_pair(r, r2)), None)
        centred = None if softmax is not None else next(
            (r2 for r2 in reds[i + 1:] if pairs and centred_square_pair(r, r2, finished)), None)
        if softmax is not None:
            steps.append(Step("online_softmax", r, softmax))
        elif centred is not None:
            steps.append(Step("shifted_moments", r, centred))
            finished |= {id(x) for x in reds if signature(x) == sig}
        else:
            steps.append(Step("single", r))
        finished.add(id(r))
        for partner in (softmax, centred):
            if partner is not None:
                done.add(id(partner))
                finished.add(id(partner))
                first[signature(partner)] = partner
        first[sig] = r
    return steps


def duplicates(k: Kernel) -> dict:
    """{id(r): the earlier equal reduction} for every reduction that computes the same value as
    an earlier one of the kernel (its accumulator is the earlier one's)."""
    return {id(st.r): st.partner for st in reduction_plan(k, pairs=False) if st.kind == "same"}


def _is_sum(r):
    return r.rule.combine == "add" and not r.rule.arg


def _is_max(r):
    return r.rule.combine == "maximum" and not r.rule.arg


def centred_mean(rsq):
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


def centred_square_pair(rsum, rsq, finished) -> bool:
    """``rsq`` is sum((X - M)^2) where ``rsum`` is sum(X), X float32 and M a value per kept
    index computed from ``rsum`` (and from inputs constant along the reduced axes, and
    reductions in ``finished``): the pair of a shifted-moments pass."""
    if not (_is_sum(rsum) and _is_sum(rsq)) or rsum.axes != rsq.axes:
        return False
    if not all(t.name == "float32" for t in (rsum.dtype, rsq.dtype, rsum.src.dtype, rsq.src.dtype)):
        return False
    m = centred_mean(rsq)
    if m is None or rsq.src.args[0].args[0].key() != rsum.src.key():
        return False
    axes = rsum.axes
    uses_sum = False
    for e in m.subexprs():
        if e.kind == "load" and any(e.layout.varies(a) for a in axes):
            return False
        if e.kind == "acc":
            if e.red is rsum or signature(e.red) == signature(rsum):
                uses_sum = True
            elif id(e.red) not in finished:
                return False
    return uses_sum and m.dtype is not None and m.dtype.kind == "f"


def online_softmax_pair(rmax, rsum) -> bool:
    """``rsum`` is sum(exp(X - rmax)) and ``rmax`` is max(X), X float32: the pair of an
    online-softmax pass."""
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


def phases(k: Kernel):
    """Reductions grouped into passes: each needs only reductions of earlier passes."""
    phase = {}
    for r in k.reductions:
        deps = [leaf.red for leaf in r.src.leaves() if leaf.kind == "acc"]
        phase[id(r)] = 1 + max((phase[id(d)] for d in deps if id(d) in phase), default=-1)
    groups = {}
    for r in k.reductions:
        groups.setdefault(phase[id(r)], []).append(r)
    return [groups[p] for p in sorted(groups)]


# -- dimensions ---------------------------------------------------------------------------------

class Dims:
    """The kernel's dimensions after dropping size-1 ones and merging runs every layout walks
    as one: ``sizes`` and ``red`` (reduced or kept) per merged dimension, ``groups`` the
    kernel axes of each, and per layout its strides over them (:meth:`strides`)."""

    def __init__(self, k: Kernel, layouts):
        dims = [a for a in range(len(k.domain)) if k.domain[a] != 1]
        groups = []
        for a in dims:
            red = a in k.axes
            if groups:
                last = groups[-1]
                b = last[-1]
                if (b in k.axes) == red and all(lay.strides[b] == lay.strides[a] * k.domain[a]
                                                and lay.map_of(a) is None and lay.map_of(b) is None
                                                for lay in layouts):
                    last.append(a)
                    continue
            groups.append([a])
        self.sizes = [math.prod(k.domain[a] for a in g) for g in groups]
        self.red = [g[0] in k.axes for g in groups]
        self.groups = groups

    def strides(self, lay):
        return [lay.strides[g[-1]] for g in self.groups]

    def maps(self, lay):
        """Per merged dimension, the layout's index map (a mapped axis is never merged)."""
        return [lay.map_of(g[-1]) if len(g) == 1 else None for g in self.groups]


def merge_dims(k: Kernel, layouts) -> Dims:
    return Dims(k, layouts)


# -- values invariant along the reduced ranges ----------------------------------------------------

def invariant_along(axes, finished):
    """A memoised test: does an expression not vary along ``axes``? Loads with stride 0 on
    them, constants, and accumulators of the reductions in ``finished`` (already computed) do
    not; an op does not when none of its arguments does."""
    seen = {}

    def leaf(e):
        if e.kind == "load":
            return not any(e.layout.varies(a) for a in axes)
        if e.kind == "acc":
            return id(e.red) in finished
        return True                                  # a constant

    def invariant(e):
        # without recursion: a Python loop fused into one kernel nests its expression hundreds
        # of levels deep (past the interpreter's recursion limit)
        stack = [e]
        while stack:
            top = stack[-1]
            if id(top) in seen:
                stack.pop()
            elif top.kind != "op":
                seen[id(top)] = leaf(top)
                stack.pop()
            else:
                todo = [a for a in top.args if id(a) not in seen]
                if todo:
                    stack.extend(todo)
                else:
                    seen[id(top)] = all(seen[id(a)] for a in top.args)
                    stack.pop()
        return seen[id(e)]
    return invariant


def invariant_roots(exprs, invariant, known):
    """The largest sub-expressions of ``exprs`` that do not vary (and are not constants or
    plain loads), in first-use order, skipping the keys in ``known``."""
    out, taken = [], set()
    stack = list(reversed(exprs))                    # depth first, first use first (no recursion)
    while stack:
        e = stack.pop()
        if e.kind != "op" or e.key() in known or e.key() in taken:
            continue
        if invariant(e) and any(a.kind != "const" for a in e.args):
            taken.add(e.key())
            out.append(e)
            continue
        stack.extend(reversed(e.args))
    return out


def reciprocal_divisors(exprs, invariant, known):
    """The float32 divisors under ``exprs`` that do not vary (a softmax's sum, a std) and are
    not constants or loads: a division by one becomes a multiplication by its reciprocal,
    computed once (``arcp``, which the kernels use anyway, permits it; at most 1 ulp). Each
    divisor once, in the order a depth-first walk meets it; ``known`` maps keys already
    computed (their divisions are not revisited)."""
    out, seen, found = [], set(), set()
    stack = list(exprs)
    while stack:
        e = stack.pop()
        if id(e) in seen or e.kind != "op":
            continue
        seen.add(id(e))
        stack.extend(e.args)
        if e.op.name != "divide" or e.params or e.dtype.name != "float32" or e.key() in known:
            continue
        d = e.args[1]
        if d.dtype is None or d.dtype.name != "float32" or d.key() in found:
            continue
        if not invariant(d) or d.kind in ("const", "load"):
            continue
        found.add(d.key())
        out.append(d)
    return out
