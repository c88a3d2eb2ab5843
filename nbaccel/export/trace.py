"""One full-graph trace of a function for export (the compiler's capture, strictly).

It reuses the compiler's :class:`TraceSession` with ``fullgraph=True`` and a runner that never
compiles anything, and is stricter in three places, because an exported graph must not depend
on anything but its inputs' shapes and dtypes:

* a graph break is an :class:`ExportError` naming the line and the reason;
* reading the value of an input (``bool(x)``, ``float(w[0])``) is one too, although plain
  capture may read an input's value without a break (it is known at that call);
* an in-place update of an input or a weight, and an op that draws random numbers, are refused.
"""
from __future__ import annotations

import inspect

import numpy as np

from ..autograd import no_grad
from ..compiler.capture.capture import TraceSession, _fix_for, user_frame
from ..compiler.schedule.views import numpy_gives_array
from ..convert import asarray
from ..dispatch import set_active_trace
from ..tensor import Tensor
from .dims import ExportError
from ..ops import creation


class _Runner:
    """The session's engine protocol: a segment is recorded, never run (outputs are zeros)."""

    def run_segment(self, session, graph, live):
        return [np.zeros(n.shape, n.dtype.np) for n in graph.outputs]

    def link_autograd(self, session, graph, live, concrete):
        pass


class ExportSession(TraceSession):
    def _break(self, reason):
        fn, line, src = user_frame()
        fix = _fix_for(reason, src)
        raise ExportError(f"nb.export needs one full graph, but there is a graph break at {fn}:{line} "
                          f"(`{src}`): {reason}" + (f"; fix: {fix}" if fix else ""))

    def realize(self, t, reason):
        node = t._node
        if node is not None and node.graph is self.graph and node.is_placeholder:
            self._break(reason or "the value of an input is read")
        return super().realize(t, reason)

    def assign(self, target, new):
        if target._node is None or id(target) in self.sources:
            name = self.names.get(id(self.sources.get(id(target), target)), "an input or weight")
            fn, line, src = user_frame()
            raise ExportError(f"nb.export: {fn}:{line} (`{src}`) updates {name} in place; an exported "
                              "graph may not change its inputs or weights (use out-of-place ops, "
                              "and model.eval() for layers that update buffers)")
        return super().assign(target, new)

    def record(self, op, args, params):
        if op.kind == "random":
            fn, line, src = user_frame()
            raise ExportError(f"nb.export: {fn}:{line} (`{src}`) draws random numbers ({op.name}); an "
                              "exported graph is deterministic (call model.eval() to turn dropout off)")
        return super().record(op, args, params)


def arg_names(fn, n):
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params[:n]]
    return names + [f"arg{i}" for i in range(len(names), n)]


class Trace:
    """What one trace found: the graph, its sources (inputs first, then lifted weights and
    constants), the output tree and the output leaves."""

    def __init__(self, graph, sources, n_inputs, tree, leaves, names):
        self.graph, self.sources, self.n_inputs = graph, sources, n_inputs
        self.tree, self.leaves, self.names = tree, leaves, names


def trace(fn, args, names, weight_names, runner=None):
    """Trace ``fn(*args)`` once (arrays in ``args`` become inputs named ``names``). ``runner``
    replaces the zeros runner (the Dask bridge's allocates nothing: its inputs may not fit)."""
    runner = runner or _Runner()
    session = ExportSession(runner, fullgraph=True)
    session.t_start = 0.0
    session.events = []
    session.names.update(weight_names)
    targs = []
    for a, name in zip(args, names):
        if isinstance(a, (Tensor, np.ndarray)):
            # a fresh Tensor per argument: each is its own input even if one array is passed twice
            t = asarray(a) if isinstance(a, np.ndarray) else Tensor._wrap(a._data, a.dtype, a.device, a._np)
            targs.append(session.input(t, name))
        else:
            targs.append(a)
    n_inputs = len(session.graph.placeholders)
    rng_before = _rng_states()
    prev = set_active_trace(session.graph_proxy)
    leaves = []
    try:
        with no_grad():
            out = fn(*targs)
            tree = _tree(session, out, leaves)
            g = session.graph              # the one graph (flush sets its sources)
            session.flush(final=[t for t in leaves])
    finally:
        set_active_trace(prev)
    if _rng_states() != rng_before:
        raise ExportError("nb.export: the function draws random numbers (nb.randn, np.random, dropout "
                          "in training mode); an exported graph would replay one fixed draw. Pass "
                          "the random values in as an argument, or call model.eval()")
    if not hasattr(g, "sources"):
        g.sources = list(session.ph_sources)
    srcs = list(g.sources)
    wnames = [session.names.get(id(s)) for s in srcs]
    return Trace(g, srcs, n_inputs, tree, [_leaf(t) for t in leaves], wnames)


def _leaf(t):
    return {"node": t._node, "np": bool(t._np), "gives_array": bool(numpy_gives_array(t._node))}


def _tree(session, out, leaves):
    """The output structure with tensors replaced by leaf numbers."""
    if isinstance(out, np.ndarray):
        out = asarray(out)
    if isinstance(out, Tensor):
        t = session.lift(out)               # a concrete tensor returned as it is: a graph input
        leaves.append(t)
        return {"leaf": len(leaves) - 1}
    if isinstance(out, tuple) and hasattr(out, "_fields"):
        raise ExportError("nb.export: a namedtuple output cannot be exported; return a tuple or a dict")
    if isinstance(out, (tuple, list)):
        return {"tuple" if isinstance(out, tuple) else "list": [_tree(session, o, leaves) for o in out]}
    if isinstance(out, dict):
        if not all(isinstance(k, str) for k in out):
            raise ExportError("nb.export: an output dict needs string keys")
        return {"dict": [[k, _tree(session, v, leaves)] for k, v in out.items()]}
    if out is None or isinstance(out, (bool, int, float, str)):
        return {"value": out}
    raise ExportError(f"nb.export: the function returns a {type(out).__name__}; outputs must be "
                      "tensors, arrays, Python scalars or tuples/lists/dicts of them")


def _rng_states():
    """nbaccel's and NumPy's global generator states (random draws are eager, not graph ops)."""
    st = np.random.get_state(legacy=False)
    return (repr(creation._rng.bit_generator.state), st["state"]["key"].tobytes(), st["state"]["pos"])
