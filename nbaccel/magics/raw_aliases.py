"""Arrays a ``%%compile`` cell reaches untraced that share memory with its traced inputs.

The cell's arrays named at its own scope are traced: their reads and writes are graph values,
computed when the trace flushes. Arrays it reaches through a list, tuple, dict or set, a
notebook object's attributes, or a global read by a notebook function it calls are not: they
arrive as the NumPy arrays themselves and run plain NumPy at once. Where such an array shares
memory with a traced input (``lst = [a[:2]]``, ``parts = np.split(a, 2)``, ``rows = list(a)``,
a view that an earlier compiled cell handed back inside a container), the two run out of step:

* a traced write into the input (``a += 1``) is not in memory yet when a plain read of the
  untraced view (``print(lst[0])``) runs, which sees the old values;
* a plain write through the untraced view (``lst[0][0] = 9``, ``lst[0].fill(7)``) lands in
  memory before the trace's pending reads of the input (``c = a * 2`` above it) are computed.

NumPy has no list of an array's views, so the cell's reachable values are walked before each
compiled attempt (:func:`find`), as the safety net's snapshot walks them. The trace gives up on
a write into an input that such an array shares (``GivingUp.note_input_write`` reads
``TraceSession.raw_aliases``), and after the attempt if one
of those arrays changed by the end of the trace (``GivingUp.check_raw_writes``: a plain write
went through it); the cell then runs plainly, with the reason. Reads alone trace as before.
"""
from __future__ import annotations

import types

import numpy as np

from ..compiler.capture.give_up import arrays_share_memory

_MAX_ITEMS = 100_000        # a larger container is not walked (as the snapshot's limit)
_MAX_DEPTH = 4
_MAX_COPY_BYTES = 64 << 20  # copies of the aliased arrays kept to see a plain write through one


class RawAliases:
    """The untraced arrays sharing a traced input's memory. ``arrays``: (array, what the user
    calls it, the input's name, a copy of it before the attempt) each, which the trace reads
    (``TraceSession.raw_aliases``); ``unchecked``: None, or why the attempt could not tell a
    plain write through one (its copies would cost more than the limit): the cell runs plainly."""

    __slots__ = ("arrays", "unchecked")

    def __init__(self, found):
        self.unchecked = None
        if sum(a.nbytes for a, _, _ in found) > _MAX_COPY_BYTES:
            a, desc, name = found[0]
            self.unchecked = (f"{desc} shares memory with {name}, and the cell reads both: the "
                              "compiled code would hold them apart; it runs plainly")
            found = []
        self.arrays = tuple((a, desc, name, a.copy()) for a, desc, name in found)


NONE = RawAliases(())


def find(ns, loads, traced) -> RawAliases:
    """The untraced arrays that the cell (reading the names ``loads``, of which ``traced`` are
    traced) reaches and that share memory with one of its traced ndarray inputs."""
    inputs = [(n, ns[n]) for n in traced if isinstance(ns.get(n), np.ndarray) and ns[n].size]
    if not inputs:
        return NONE
    found, seen = [], set()

    def note(a, desc):
        if a.size:
            for name, x in inputs:
                if arrays_share_memory(a, x):
                    found.append((a, desc, f"`{name}`"))
                    return

    def walk(value, path, depth, via):
        if id(value) in seen or depth > _MAX_DEPTH:
            return
        t = type(value)
        if isinstance(value, np.ndarray):
            seen.add(id(value))
            if value.dtype.kind != "O":
                note(value, f"`{path}`" + (f" (read by {via})" if via else ""))
        elif t in (list, tuple, set, dict):
            if len(value) > _MAX_ITEMS:
                return
            seen.add(id(value))
            items = value.items() if t is dict else enumerate(value) if t is not set else \
                ((None, v) for v in value)
            for k, v in items:
                walk(v, f"{path}[{k!r}]" if k is not None else f"an element of {path}", depth + 1, via)
        elif isinstance(value, (types.FunctionType, type)):
            if getattr(value, "__module__", None) == "__main__":
                seen.add(id(value))
                # (a traced name too: the function reads the notebook's array, not the tracer)
                for g in _globals_read(value):
                    if g in ns:
                        walk(ns[g], g, depth + 1, getattr(value, "__name__", "a function"))
        elif type(value).__module__ == "__main__" and type(getattr(value, "__dict__", None)) is dict:
            seen.add(id(value))
            for k, v in list(value.__dict__.items()):
                walk(v, f"{path}.{k}", depth + 1, via)

    for n in loads:
        if n not in traced and n in ns:
            walk(ns[n], n, 0, None)
    return RawAliases(found) if found else NONE


def _globals_read(fn):
    """The global names a notebook function (a class: its methods) reads, nested code included."""
    codes = []
    if isinstance(fn, type):
        codes = [getattr(m, "__func__", m).__code__ for m in vars(fn).values()
                 if isinstance(getattr(m, "__func__", m), types.FunctionType)]
    elif getattr(fn, "__code__", None) is not None:
        codes = [fn.__code__]
    names = set()
    while codes:
        c = codes.pop()
        names.update(c.co_names)
        codes.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return names
