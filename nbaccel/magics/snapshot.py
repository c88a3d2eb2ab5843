"""What the safety net puts back before it re-runs a cell plainly (see docs/magics.md).

A compiled attempt that fails inside nbaccel may already have changed state that the plain
re-run reads. :func:`take` records, before the attempt, what a cell can change besides the
input arrays (those are undone by the compiler: ``CompiledFunction.last_undo``):

* the global ``np.random`` state, when the cell may draw from it (its source mentions random
  numbers, or it calls a function or class defined in the notebook), and every
  ``np.random.Generator`` / ``RandomState`` among its inputs (also inside lists and dicts);
* NumPy's print options and floating-point error handling (``np.set_printoptions``,
  ``np.seterr``, an ``errstate`` left open);
* the lists, dicts and sets among its inputs, nested ones included, and the NumPy arrays they
  hold or that are inputs but not traced (object, string, datetime arrays, ...);
* the matplotlib figures open before the attempt (figures the attempt opened are closed);
* a traced input's own buffer when the boundary hands it to code outside NumPy's namespace
  (:func:`guard`: ``np.random.shuffle(x)`` shuffles it in place).

:meth:`Snapshot.restore` puts all of it back in place (containers and arrays keep their
identity). Files written and other side effects are not undone.
"""
from __future__ import annotations

import contextlib
import re
import sys
import types

import numpy as np

_DRAWS = re.compile(r"rand|seed|shuffle|choice|permutation|normal|uniform|default_rng")
_MAX_ITEMS = 100_000            # larger containers are not copied (the re-run sees them as left)
_MAX_ARRAY_BYTES = 64 << 20     # nor arrays beyond this much in total


_watching: list = []             # the snapshot of the attempt running now (innermost last)


def guard(values):
    """Arrays the boundary hands to code outside NumPy's namespace (``np.random.shuffle(x)``
    receives the input's own buffer): copied on first hand-out, so a failed attempt can be undone."""
    if not _watching:
        return
    snap = _watching[-1]
    for v in values:
        if not isinstance(v, np.ndarray) or not v.flags.writeable:
            continue
        root = _root(v)
        # only the memory of an input matters to the re-run (values the trace computed are new)
        if id(root) in snap.inputs and id(root) not in snap.seen and snap.budget >= root.nbytes:
            snap.seen.add(id(root))
            snap.budget -= root.nbytes
            snap.arrays.append((root, root.copy()))


def _root(a):
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


class Snapshot:
    __slots__ = ("global_random", "generators", "printopts", "errstate", "containers", "arrays",
                 "figures", "current_figure", "seen", "budget", "inputs")

    @contextlib.contextmanager
    def watching(self):
        _watching.append(self)
        try:
            yield
        finally:
            _watching.remove(self)

    def restore(self):
        for c, saved in self.containers:
            if type(c) is list:
                c[:] = saved
            elif type(c) is dict:
                c.clear()
                c.update(saved)
            else:
                c.clear()
                c.update(saved)
        for a, saved in reversed(self.arrays):       # (the earliest copy of an array wins)
            if a.dtype.kind == "O" or a.tobytes() != saved.tobytes():
                np.copyto(a, saved, casting="unsafe")
        if self.global_random is not None:
            np.random.set_state(self.global_random)
        for g, state in self.generators:
            if isinstance(g, np.random.Generator):
                g.bit_generator.state = state
            else:
                g.set_state(state)
        np.set_printoptions(**self.printopts)
        np.seterr(**self.errstate)
        if self.figures is not None:
            plt = sys.modules.get("matplotlib.pyplot")
            if plt is not None:
                for num in plt.get_fignums():
                    if num not in self.figures:
                        plt.close(num)
                if self.current_figure in plt.get_fignums():
                    plt.figure(self.current_figure)


def _walk(value, snap, depth=0):
    seen = snap.seen
    if id(value) in seen or depth > 4:
        return
    t = type(value)
    if t in (list, dict, set):
        if len(value) > _MAX_ITEMS:
            return
        seen.add(id(value))
        snap.containers.append((value, list(value) if t is list else dict(value) if t is dict else set(value)))
        items = value.values() if t is dict else value
        for v in list(items):
            _walk(v, snap, depth + 1)
    elif t is tuple:
        for v in value:
            _walk(v, snap, depth + 1)
    elif isinstance(value, np.ndarray):
        if value.flags.writeable and snap.budget >= value.nbytes and (value.dtype.kind != "O"
                                                                      or value.size <= _MAX_ITEMS):
            seen.add(id(value))
            snap.budget -= value.nbytes
            snap.arrays.append((value, value.copy()))
    elif isinstance(value, np.random.Generator):
        seen.add(id(value))
        snap.generators.append((value, value.bit_generator.state))
    elif isinstance(value, np.random.RandomState):
        seen.add(id(value))
        snap.generators.append((value, value.get_state()))


def _may_draw(src, ns, loads):
    if _DRAWS.search(src):
        return True
    for n in loads:
        v = ns.get(n)
        if isinstance(v, (types.FunctionType, type)) and getattr(v, "__module__", None) == "__main__":
            return True
    return False


def take(src, ns, loads, traced) -> Snapshot:
    """Record what the cell (source ``src``, reading ``loads``) may change, before it runs."""
    snap = Snapshot()
    snap.global_random = np.random.get_state() if _may_draw(src, ns, loads) else None
    snap.generators, snap.containers, snap.arrays = [], [], []
    snap.printopts = np.get_printoptions()
    snap.errstate = np.geterr()
    snap.seen, snap.budget = set(), _MAX_ARRAY_BYTES
    snap.inputs = {id(_root(ns[n])) for n in traced if isinstance(ns.get(n), np.ndarray)}
    for n in loads:
        if n in traced or n not in ns:
            continue                    # traced arrays: the compiler undoes their writes itself
        _walk(ns[n], snap)
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        snap.figures = set(plt.get_fignums())
        snap.current_figure = plt.gcf().number if snap.figures else None
    else:
        snap.figures = set()            # pyplot imported by the attempt: close what it opened
        snap.current_figure = None
    return snap
