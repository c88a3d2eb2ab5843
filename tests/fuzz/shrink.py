"""Shrink a failing program to a small one that fails the same way (same failure class).

Greedy, in the order that removes most: drop statements, then outputs, then inputs nobody
reads, then make input dims smaller. Each candidate is re-checked, so ``budget`` bounds the
work (a numba check compiles, about 0.3 s).
"""
from __future__ import annotations

import re

from .check import check


def shrink(program, backend: str, klass: str, budget: int = 60):
    """The smallest program found whose check on backend fails with klass."""
    state = {"left": budget}

    def fails_alike(candidate) -> bool:
        if state["left"] <= 0:
            return False
        state["left"] -= 1
        outcome = check(candidate, backend)
        return not outcome.ok and outcome.klass == klass

    best = program
    changed = True
    while changed and state["left"] > 0:
        changed = False
        for candidate in _candidates(best):
            if fails_alike(candidate):
                best, changed = candidate, True
                break
    return best


def _candidates(p):
    # one statement fewer (last first: later statements depend on earlier ones)
    for i in reversed(range(len(p.statements))):
        stmts = p.statements[:i] + p.statements[i + 1:]
        outputs = tuple(o for o in p.outputs if _defined(o, stmts, p)) or None
        if outputs:
            yield _prune_inputs(p.replace(statements=stmts, outputs=outputs))
    # fewer outputs, then a bare value instead of a 1-tuple (and back)
    if len(p.outputs) > 1:
        for o in p.outputs:
            yield _prune_inputs(p.replace(outputs=(o,)))
    # smaller input dims (values are redrawn from the input's seed)
    for k, inp in enumerate(p.inputs):
        for d, size in enumerate(inp.shape):
            for smaller in sorted({1, size - 1}):
                if 0 < smaller < size:
                    shape = inp.shape[:d] + (smaller,) + inp.shape[d + 1:]
                    inputs = p.inputs[:k] + (inp.__class__(inp.name, shape, inp.dtype, inp.seed),) + p.inputs[k + 1:]
                    # notes name the shapes seen when generating: they no longer hold
                    stmts = tuple(s.__class__(s.code, s.rule) for s in p.statements)
                    yield p.replace(inputs=inputs, statements=stmts)


def _defined(name, statements, p) -> bool:
    if any(i.name == name for i in p.inputs):
        return True
    return any(re.match(rf"{name}\s*=[^=]", s.code) for s in statements)


def _prune_inputs(p):
    text = "\n".join(s.code for s in p.statements) + " " + " ".join(p.outputs)
    used = tuple(i for i in p.inputs if re.search(rf"\b{i.name}\b", text))
    return p.replace(inputs=used or p.inputs[:1])
