"""NumPy's floating-point warnings, issued for the user's ops as the plain code issues them.

NumPy checks the FPU flags after every ufunc call and, per ``np.errstate``, warns ("overflow
encountered in square"), raises ``FloatingPointError``, calls the errcall, prints or logs. A
warning is attributed to the innermost Python frame: the user's line for a ufunc or ndarray
method called there, NumPy's own file for a NumPy function written in Python (``np.sum``).

A compiled graph runs its ops fused: the kernels' ufunc calls are not the user's ops
(``square`` of a complex array is two ``multiply`` calls), numba kernels set no warnings, and a
kernel's file is ``<nbaccel k4>``. So the program never speaks for the user:

1. **Trace time.** Each node records the floating-point state the user's op ran under
   (:func:`trace_state`: ``np.geterr()``, the errcall and the warning filters, read again only
   when NumPy's errstate context or the filter list changed), and :func:`note_globals` the
   user's module globals (the ``__warningregistry__`` that dedupes warnings as Python's
   ``default`` action does).
2. **The run** (:func:`run`) is silent: the categories some node does not ignore are set to
   ``call`` a recorder; the others are ignored. A program with numba or Triton kernels (which
   report no flags) is checked by its results instead: a float or complex output that holds
   inf or nan, or an integer division or float-to-integer cast in the graph.
3. **Only when a flag was seen** the captured graph (the user's ops, before decomposition) is
   replayed op by op with the reference implementations, each op under the state it was traced
   with and with warnings recorded; each floating-point warning is then issued with
   ``warnings.warn_explicit`` at the place NumPy would name: the node's line in the user's file
   (or NumPy's own file, as NumPy's Python functions give it), with the user's registry and the
   filters of the op's time. ``raise`` raises the op's ``FloatingPointError`` there; ``call``,
   ``print`` and ``log`` are NumPy's own, in the replay. Nothing is computed again when no flag
   was set.
"""
from __future__ import annotations

import contextlib
import operator
import os
import re
import sys
import warnings

import numpy as np

from ..codegen import common
from ..schedule.views import numpy_gives_array

_CATS = ("divide", "over", "under", "invalid")
_FP_MESSAGE = re.compile(r"^(divide by zero|overflow|underflow|invalid value) encountered in ")
# nbaccel/: this file is nbaccel/compiler/<room>/<module>.py
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
try:                                        # NumPy 2: errstate lives in a context variable
    from numpy._core._ufunc_config import _extobj_contextvar as _EXTOBJ
except ImportError:                          # pragma: no cover - older NumPy
    _EXTOBJ = None

# filename -> the globals of the code it holds (the user's module: registry and name)
_GLOBALS: dict = {}


def note_globals(filename, f_globals):
    if _GLOBALS.get(filename) is not f_globals:
        _GLOBALS[filename] = f_globals


class FPState:
    """The floating-point state one traced op ran under."""

    __slots__ = ("extobj", "flist", "nfilters", "first", "errs", "call", "filters", "quiet")

    def __init__(self, extobj, flist):
        self.extobj = extobj
        self.flist = flist
        self.nfilters = len(flist)
        self.first = flist[0] if flist else None
        self.errs = np.geterr()
        self.call = np.geterrcall()
        self.filters = list(flist)
        self.quiet = all(v == "ignore" for v in self.errs.values())

    def equals(self, other):
        return self is other or (self.errs == other.errs and self.call is other.call
                                 and self.filters == other.filters)

    def same(self, extobj, flist):
        return (extobj is self.extobj and flist is self.flist and len(flist) == self.nfilters
                and (flist[0] if flist else None) is self.first)


def current_state(last=None) -> FPState:
    """The state now (``last`` when nothing changed since it was read)."""
    extobj = _EXTOBJ.get() if _EXTOBJ is not None else None
    flist = warnings.filters
    if last is not None and _EXTOBJ is not None and last.same(extobj, flist):
        return last
    return FPState(extobj, flist)


def trace_state(graph) -> FPState:
    """The state for a node being traced into ``graph`` (shared by the nodes of one state)."""
    st = current_state(graph.__dict__.get("_fp_state"))
    graph._fp_state = st
    return st


# -- running -----------------------------------------------------------------------------------

def _plan(graph, entry):
    """(each node's state, the categories to watch or None) for a run now; kept on the graph
    while NumPy's errstate and the warning filters stay as they were (a replayed cell's runs:
    working them out again cost tens of microseconds a run)."""
    plan = graph.__dict__.get("_fp_plan")
    now = current_state(plan[0] if plan is not None else None)
    if plan is not None and plan[0] is now and plan[1] is entry:
        return plan[2], plan[3]
    states = _node_states(graph, entry, now)
    watch = {c: "ignore" for c in _CATS}
    for st in states:
        if not st.quiet:
            for c in _CATS:
                if st.errs[c] != "ignore":
                    watch[c] = "call"
    if all(v == "ignore" for v in watch.values()):
        watch = None
    graph._fp_plan = (now, entry, states, watch)
    return states, watch


def _node_states(graph, entry, now=None):
    """Each node's state. A replayed graph (``entry``: the state its trace began with) runs
    the nodes traced under that state under the caller's state now, and the others (inside an
    ``np.errstate`` or ``catch_warnings`` of the function) under the state they were traced with."""
    now = now if now is not None else current_state()
    states = [getattr(n, "fp", None) for n in graph.nodes]
    if entry is not None:
        states = [now if s is None or s.equals(entry) else s for s in states]
    return [s if s is not None else now for s in states]


def run(graph, inputs, call, prog=None, entry=None, replayed=False):
    """``call()`` (which runs ``graph``'s program on ``inputs``) without NumPy's own
    floating-point warnings, then the user's warnings for the ops of ``graph`` that set a
    flag. ``entry``: the state the trace began under (the caller's); ``replayed``: the graph
    was traced by an earlier call (mode="reduce-overhead")."""
    if graph is None or not graph.nodes:
        with np.errstate(all="ignore"):
            return call()
    states, watch = _plan(graph, entry if replayed else None)
    if watch is None:
        with np.errstate(all="ignore"):
            out = call()
        _stored_nonfinite(prog)                  # (read, so that it is this run's next time)
        return out
    seen = []
    with np.errstate(call=lambda kind, flag: seen.append(kind), **watch):
        out = call()
    flagged = _stored_nonfinite(prog)
    if not seen:
        seen = _structure_says(graph)
    if not seen and _opaque(prog):
        # numba kernels flag an inf or NaN they stored; where no flag is kept (Triton),
        # the outputs are looked at
        seen = _results_say(out) if flagged is None else ["nonfinite"] if flagged else []
    if seen:
        _replay(graph, inputs, states, entry)
    return out


def _stored_nonfinite(prog):
    """The program's kernels' flag of a stored inf or NaN (and clear it), or None where
    the program keeps none."""
    ask = getattr(prog, "stored_nonfinite", None)
    return ask() if ask is not None else None


def _opaque(prog) -> bool:
    """Whether the program ran kernels that report no flags (numba, Triton)."""
    if prog is None:
        return False
    if type(prog).__name__ == "TritonProgram":
        return True
    slots = getattr(prog, "slots", None) or {}
    return any(getattr(s, "backend", "numpy") != "numpy" for s in slots.values())


def _structure_says(graph) -> list:
    """Ops whose warning no kernel reports (they compute it with a guard, or in numba) and no
    result shows: an integer division by an array (x // 0 is 0 and warns) and a cast of floats
    to integers (nan or inf warns). Such a graph is replayed whenever it runs. (Kept on the
    graph: a replayed training step asks on every run.)"""
    said = graph.__dict__.get("_fp_structure")
    if said is None:
        said = graph._fp_structure = _structure(graph)
    return list(said)


def _structure(graph) -> list:
    for n in graph.nodes:
        kind = n.dtype.np.kind
        if getattr(n.op.impl, "hides_integer_warnings", False) and kind in "iu" and len(n.args) > 1 and (
                hasattr(n.args[1], "op") or n.args[1] == 0):
            return ["integer division"]
        if n.op.name == "astype" and kind in "iu" and any(
                hasattr(a, "op") and a.dtype.np.kind in "fc" for a in n.args):
            return ["cast"]
    return []


def _results_say(out) -> list:
    """Whether a program whose kernels report no flags may have set one: a float or complex
    result holds inf or nan."""
    try:
        for a in out if isinstance(out, (list, tuple)) else [out]:
            if getattr(a, "dtype", None) is not None and a.dtype.kind in "fc" and a.size:
                xp = sys.modules.get("cupy") if type(a).__module__.startswith("cupy") else np
                if not bool(xp.isfinite(a).all()):
                    return ["nonfinite"]
    except Exception:        # noqa: BLE001 - an output that cannot be checked: replay
        return ["unknown"]
    return []


def _impl(n, args):
    """The op as the user's NumPy call made it: ``z ** 2`` is NumPy's ``square`` (ndarray's
    power takes that fast path for the exponents 2, 0.5 and -1)."""
    if n.op.name == "power" and len(args) == 2 and isinstance(args[0], np.ndarray) \
            and isinstance(n.args[1], (int, float)) and not isinstance(n.args[1], bool):
        e = n.args[1]
        if e == 2:
            return lambda xp, a, b: xp.square(a)
        if a_inexact(args[0]) and e == 0.5:
            return lambda xp, a, b: xp.sqrt(a)
        if a_inexact(args[0]) and e == -1:
            return lambda xp, a, b: xp.reciprocal(a)
    # NumPy scalars meet in Python's operators ("scalar divide"), as ``s / 0`` does plainly
    fn = _python_operator(n.op)
    if fn is not None and len(args) == 2 and not n.params and any(
            isinstance(a, np.generic) for a in args) and not any(isinstance(a, np.ndarray) for a in args):
        return lambda xp, a, b: fn(a, b)
    # NumPy's ufunc itself where the op is one (an op's impl may silence it: integer x // 0)
    ufunc = getattr(np, n.op.name, None)
    if isinstance(ufunc, np.ufunc) and not n.params and len(args) == ufunc.nin:
        return lambda xp, *xs: getattr(xp, n.op.name)(*xs)
    # a monoid reduction (sum, prod, max, any, ...) as NumPy's function of the op's name spells
    # it (np.sum: its warnings come from fromnumeric.py); an eager impl may call the array's
    # method instead, a microsecond cheaper, whose warnings NumPy attributes to _methods.py
    rule = n.op.reduce if n.op.kind == "reduce" else None
    name = n.op.numpy[0] if rule is not None and not rule.arg and n.op.numpy else None
    if callable(getattr(np, name or "", None)) and len(args) == 1 and isinstance(args[0], np.ndarray) \
            and set(n.params) <= {"axis", "keepdims", "dtype"}:
        return lambda xp, x, **kw: getattr(xp, name)(
            x, **{k: v.np if k == "dtype" and v is not None else v for k, v in kw.items()})
    return n.op.impl


def _python_operator(op):
    """The Python operator an op's dunder method spells (``__add__`` -> ``operator.add``), read
    from the op's own methods; None for an op no binary operator spells."""
    for m in op.methods:
        if m.startswith("__") and not m.startswith(("__r", "__i")) and callable(getattr(operator, m, None)):
            return getattr(operator, m)
    return None


def a_inexact(a):
    return a.dtype.kind in "fc"


def _replay(graph, inputs, states, entry=None):
    """Run ``graph`` op by op (the reference interpreter) and issue each op's warnings."""
    xp = common.inputs_array_module(inputs)
    env = {id(p): a for p, a in zip(graph.placeholders, inputs)}
    for n, st in zip(graph.nodes, states):
        args = [env[id(a)] if hasattr(a, "op") and hasattr(a, "index") else a for a in n.args]
        impl = _impl(n, args)
        if st.quiet:
            with np.errstate(all="ignore"):
                out = xp.asarray(impl(xp, *args, **n.params))
        else:
            rec = []
            try:
                with _recording(rec), np.errstate(call=st.call, **st.errs):
                    out = xp.asarray(impl(xp, *args, **n.params))
            except FloatingPointError:
                _issue(n, st, rec, entry)
                raise
            _issue(n, st, rec, entry)
        if out.dtype != n.dtype.np:
            with np.errstate(all="ignore"):
                out = out.astype(n.dtype.np)
        if out.ndim == 0 and xp is np and not numpy_gives_array(n):
            out = out[()]        # a NumPy scalar, as plainly: its ops say "scalar divide"
        env[id(n)] = out


@contextlib.contextmanager
def _recording(rec):
    """Record the warnings issued inside (every one: the "always" action) as (message,
    category, filename, lineno). Not ``warnings.catch_warnings``: entering and leaving it counts
    as a change of the filters, which empties every module's ``__warningregistry__`` (the
    "default" action would then show the user's warnings again on every run)."""
    filters, show = warnings.filters, warnings.showwarning
    warnings.filters = [("always", None, Warning, None, 0)]
    warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: \
        rec.append((message, category, filename, lineno))
    try:
        yield
    finally:
        warnings.filters, warnings.showwarning = filters, show


def _issue(n, st, rec, entry=None):
    todo = [w for w in rec if issubclass(w[1], RuntimeWarning) and _FP_MESSAGE.match(str(w[0]))]
    if not todo:
        return
    # the filters of the op's time where the cell or function changed them (a catch_warnings
    # inside); else the filters now (a swap empties the registries: "default" would repeat)
    swap = entry is not None and not st.equals(entry) and st.filters != warnings.filters
    saved = warnings.filters
    if swap:
        warnings.filters = list(st.filters)
        warnings._filters_mutated()
    try:
        for message, category, filename, lineno in todo:
            if filename.startswith(_PKG_DIR) and n.where:
                filename, lineno = n.where
            g = _globals_for(filename)
            registry = g.setdefault("__warningregistry__", {}) if g is not None else None
            module = g.get("__name__") if g is not None else None
            warnings.warn_explicit(str(message), category, filename, lineno, module=module,
                                   registry=registry, module_globals=g)
    finally:
        if swap:
            warnings.filters = saved
            warnings._filters_mutated()


def _globals_for(filename):
    g = _GLOBALS.get(filename)
    if g is None:
        for mod in list(sys.modules.values()):
            if getattr(mod, "__file__", None) == filename:
                g = _GLOBALS[filename] = mod.__dict__
                break
    return g
