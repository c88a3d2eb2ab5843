"""Cells that call a Python function per element run plainly at once (see docs/magics.md).

``cellfunc.needs_plain`` sees ``np.vectorize(...)`` written in the cell itself. This module
finds the same work reached from the notebook: the cell reads an ``np.vectorize`` object or an
``np.frompyfunc`` ufunc made anywhere, or calls a notebook function (or a method of a notebook
class) whose code, directly or through other notebook functions it reads, uses one, or calls
``vectorize``, ``frompyfunc``, ``apply_along_axis``, ``apply_over_axes`` or ``piecewise``.
Tracing such a call costs far more than running it: the per-element (or per-row) calls would
each be traced.
"""
from __future__ import annotations

import types

import numpy as np

_PER_ELEMENT = ("vectorize", "frompyfunc", "apply_along_axis", "apply_over_axes", "piecewise")
_code_verdicts: dict = {}            # code object -> the name that makes it per-element, or ""


def _object_reason(v):
    if isinstance(v, np.vectorize):
        return "an np.vectorize object"
    if isinstance(v, np.ufunc) and v.__name__.endswith("(vectorized)"):
        return "an np.frompyfunc ufunc"
    return None


def _codes(code):
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _codes(c)


def _function_reason(fn, depth=0, seen=None):
    code = getattr(fn, "__code__", None)
    if code is None or getattr(fn, "__module__", None) != "__main__":
        return None
    seen = set() if seen is None else seen
    if id(code) in seen:
        return None
    seen.add(id(code))
    known = _code_verdicts.get(code)
    if known is None:
        known = ""
        for c in _codes(code):
            hit = next((n for n in c.co_names if n in _PER_ELEMENT), None)
            if hit:
                known = f"np.{hit}"
                break
        _code_verdicts[code] = known
    if known:
        return f"{fn.__qualname__} uses {known}"
    if depth >= 3:
        return None
    g = getattr(fn, "__globals__", {})
    for c in _codes(code):
        for n in c.co_names:
            v = g.get(n)
            why = _object_reason(v) if v is not None else None
            if why:
                return f"{fn.__qualname__} calls {n}, {why}"
            if isinstance(v, (types.FunctionType, type)):
                why = _reason_of(v, depth + 1, seen)
                if why:
                    return why
    return None


def _reason_of(v, depth=0, seen=None):
    why = _object_reason(v)
    if why:
        return why
    if isinstance(v, types.FunctionType):
        return _function_reason(v, depth, seen)
    if isinstance(v, type) and v.__module__ == "__main__":
        for attr in vars(v).values():
            fn = getattr(attr, "__func__", attr)
            if isinstance(fn, types.FunctionType):
                why = _function_reason(fn, depth, seen)
                if why:
                    return why
    return None


def reason(ns, names):
    """Why the cell (reading ``names`` from ``ns``) should run plainly now, or None."""
    for n in names:
        v = ns.get(n)
        if v is None or isinstance(v, (np.ndarray, int, float, str, types.ModuleType)):
            continue
        if not isinstance(v, (types.FunctionType, type, np.vectorize, np.ufunc)):
            v = type(v) if type(v).__module__ == "__main__" else None      # a notebook object
            if v is None:
                continue
        why = _reason_of(v)
        if why:
            return (f"{n}: {why}, which calls a Python function per element: the cell runs "
                    "plainly")
    return None
