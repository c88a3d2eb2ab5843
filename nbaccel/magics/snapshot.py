"""What the safety net puts back before it re-runs a cell plainly (see docs/magics.md).

A compiled attempt that fails inside nbaccel may already have changed state that the plain
re-run reads. :func:`take` records, before the attempt, what a cell can change besides the
input arrays (those are undone by the compiler: ``CompiledFunction.last_undo``):

* the global ``np.random`` state, when the cell may draw from it (its source, or the code of a
  notebook function, class or object it reads, mentions random numbers), and every
  ``np.random.Generator`` / ``RandomState`` among its inputs (also inside lists and dicts);
* NumPy's print options and floating-point error handling (``np.set_printoptions``,
  ``np.seterr``, an ``errstate`` left open);
* the lists, dicts and sets among its inputs, nested ones included, the attributes of notebook
  objects among them, and the NumPy arrays they hold or that are inputs but not traced
  (object, string, datetime arrays, ...);
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

from ..tensor import Tensor
from .. import ndarray_methods

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


def _register():
    if guard not in ndarray_methods.ALIAS_HOOKS:
        ndarray_methods.ALIAS_HOOKS.append(guard)   # an input's .view(dtype) is such a hand-out


def _root(a):
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


class Snapshot:
    __slots__ = ("global_random", "generators", "printopts", "errstate", "containers", "arrays",
                 "figures", "current_figure", "seen", "budget", "inputs", "tensors")

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
    elif isinstance(value, Tensor):
        snap.tensors.add(id(value))       # made before the cell: write-back leaves it a Tensor
    elif type(value).__module__ == "__main__" and not isinstance(value, type) \
            and type(getattr(value, "__dict__", None)) is dict:
        seen.add(id(value))
        _walk(value.__dict__, snap, depth + 1)      # a notebook object's attributes
    elif isinstance(value, np.random.Generator):
        seen.add(id(value))
        snap.generators.append((value, value.bit_generator.state))
    elif isinstance(value, np.random.RandomState):
        seen.add(id(value))
        snap.generators.append((value, value.get_state()))


_code_draws: dict = {}       # code object -> whether its names mention random numbers


def _draws(fn, depth=0):
    """Whether a notebook function (or class) may draw random numbers: a name in its code, or
    in the code of notebook functions it reads (two calls down), mentions them."""
    if isinstance(fn, type):
        return any(_draws(getattr(m, "__func__", m), depth) for m in vars(fn).values()
                   if isinstance(getattr(m, "__func__", m), types.FunctionType))
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    known = _code_draws.get(code)
    if known is None:
        names, stack = set(), [code]
        while stack:
            c = stack.pop()
            names.update(c.co_names)
            stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
        known = _code_draws[code] = (any(_DRAWS.search(n) for n in names), tuple(sorted(names)))
    if known[0]:
        return True
    if depth >= 2:
        return False
    g = fn.__globals__
    return any(isinstance(g.get(n), (types.FunctionType, type)) and getattr(g[n], "__module__", None) == "__main__"
               and g[n] is not fn and _draws(g[n], depth + 1) for n in known[1])


def _may_draw(src, ns, loads):
    if _DRAWS.search(src):
        return True
    for n in loads:
        v = ns.get(n)
        if isinstance(v, (types.FunctionType, type)) and getattr(v, "__module__", None) == "__main__" \
                and _draws(v):
            return True
        if v is not None and type(v).__module__ == "__main__" and _draws(type(v)):
            return True         # a notebook object whose methods may draw (model.sample())
    return False


def take(src, ns, loads, traced) -> Snapshot:
    """Record what the cell (source ``src``, reading ``loads``) may change, before it runs."""
    snap = Snapshot()
    snap.global_random = np.random.get_state() if _may_draw(src, ns, loads) else None
    snap.generators, snap.containers, snap.arrays = [], [], []
    snap.printopts = np.get_printoptions()
    snap.errstate = np.geterr()
    snap.seen, snap.budget, snap.tensors = set(), _MAX_ARRAY_BYTES, set()
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


_register()
