"""``mode="reduce-overhead"``: replay the last compiled program without re-tracing.

The contract (docs/compiler.md): the function is *pure* — its result depends only on its array
arguments, the Python scalars it is called with, and tensors it reads from outside (parameters),
whose current values are read on every call; it has no side effects, draws no random numbers and
has no data-dependent control flow. Under that contract the guard can be the inputs' metadata
(types, shapes, dtypes, scalar values) instead of a fresh trace. Calls that trace with a graph
break, in-place updates or autograd are never recorded for replay.
"""
from __future__ import annotations

import copy
import math

import numpy as np

from ...tensor import Tensor
from ..config import config
from ..runtime import fpflags
from ..runtime.runtime import EagerProgram, interpret
from ..schedule.views import numpy_gives_array, view_by_chain


def metadata_key(leaves, scalars):
    key = []
    for x in leaves:
        key.append((type(x).__name__, tuple(x.shape), str(x.dtype),
                    getattr(x, "requires_grad", False)))
    return tuple(key) + tuple(scalars)


def scalar_part(o) -> tuple:
    """A float, complex or NumPy scalar as a key part: its type (a NumPy scalar's type is its
    dtype: np.float32 and a Python float promote differently), its value, and the signs of its
    parts (0.0 == -0.0, but the trace's constant is the one it saw, and 1 / -0.0 is -inf)."""
    v = o.item() if isinstance(o, np.generic) else o
    if isinstance(v, (complex, np.complexfloating)):      # (a longdouble's .item() is itself)
        return (type(o), v, math.copysign(1.0, v.real), math.copysign(1.0, v.imag))
    if isinstance(v, (float, np.floating)):
        return (type(o), v, math.copysign(1.0, v))
    return (type(o), v)


def scalar_args(args, kwargs):
    """The non-array leaves of the arguments, or None if one is not a plain Python value."""
    out = []

    def walk(o):
        if isinstance(o, (Tensor, np.ndarray)):
            return True
        if isinstance(o, (list, tuple)):
            return all(walk(v) for v in o)
        if isinstance(o, dict):
            return all(walk(v) for v in o.values())
        if isinstance(o, np.generic) and o.dtype.kind in "biufc" or isinstance(o, (float, complex)):
            out.append(scalar_part(o))          # (np.float64 is a float, and keyed as NumPy's)
            return True
        if o is None or isinstance(o, (bool, int, str)):
            out.append((type(o).__name__, o))
            return True
        return False
    ok = walk(args) and walk(kwargs)
    return out if ok else None


class Replay:
    def __init__(self, key, prog, consts, plan, outs, out_tree, numpy_out):
        self.key = key
        self.prog = prog
        self.consts = consts
        self.plan = plan          # per placeholder: ("arg", leaf index) | ("const", Tensor)
        self.outs = outs          # per output leaf: ("out", i) | ("arg", i) | ("value", v)
        self.out_tree = out_tree
        self.numpy_out = numpy_out
        self.reads = None         # mode="reduce-overhead": guards on the function's reads, if any
        self.prog_graph = None    # the captured graph with the program's outputs (run_program)
        self.fell_back = None     # why the program gave way to the interpreter (run_program)

    def run(self, leaves):
        inputs = [np.asarray(leaves[i]._data if isinstance(leaves[i], Tensor) else leaves[i])
                  if kind == "arg" else ref._data for kind, i, ref in self.plan]
        graph = getattr(self, "graph", None)
        arrays = fpflags.run(graph, inputs, lambda: run_program(self, inputs), self.prog,
                             getattr(self, "fp_entry", None), replayed=True)
        values = []
        for kind, v, meta in self.outs:
            if kind == "value":
                values.append(v)
                continue
            if kind == "view":
                # (made again from its base as the trace made it: views.py, share_views; the
                # layout guards keep what its reshapes read, so NumPy gives a view again)
                a = view_by_chain(arrays[v[1]] if v[0] == "out" else inputs[v[1]], meta[4])
            else:
                a = arrays[v] if kind == "out" else inputs[v]
            dtype, device, keep_array, np_flag = meta[:4]
            if self.numpy_out or (self.numpy_out is None and np_flag):   # as the trace gave it
                values.append(a[()] if a.ndim == 0 and not keep_array else a)
            else:
                values.append(Tensor._wrap(a, dtype, device, np_flag))
        it = iter(values)
        return self.out_tree(it)


def run_program(rp, inputs):
    """Run a replay's program on ``inputs``. A fault inside it (a kernel that raises where the
    captured graph's reference interpreter does not) is nbaccel's, never the user's: as on a
    traced call (entries.Entry.run_program), this call's values come from the interpreter and
    the replay runs eagerly from now on (``rp.fell_back`` says why; ``strict`` raises the
    fault). An error the interpreter raises too is the user's own, the one the plain code
    raises, and propagates unchanged. A training step whose kernels write parameters in place
    can be run again once the buffers written are put back (``rp.restore_inputs()``, which
    keeps their old values while a kernel runs its NumPy version); where they cannot be (every
    kernel numba's, which raises nothing once it runs), the fault stays."""
    try:
        return rp.prog.run(inputs + rp.consts)
    except Exception as e:       # (handled below, outside this block: the user's error, if
        fault = e                # the interpreter raises one, carries no internal context)
    if isinstance(rp.prog, EagerProgram) or rp.prog_graph is None \
            or not getattr(rp, "restore_inputs", lambda: True)():
        raise fault
    out = interpret(rp.prog_graph, inputs)
    if config.get("strict"):
        raise fault
    rp.fell_back = f"{type(fault).__name__}: {fault}"
    rp.prog = EagerProgram(rp.prog_graph, rp.fell_back, "replay")
    rp.consts = []
    return out


def outputs_graph(graph, outputs):
    """``graph`` computing ``outputs`` (a shallow copy: the nodes are shared)."""
    g = copy.copy(graph)
    g.outputs = list(outputs)
    return g


def record(session, leaves_by_id, out, numpy_out, key, local_writes_ok=False, prune=None):
    """A Replay for this call, or None when the call is not replayable. ``local_writes_ok``:
    the caller checked that in-place writes only touched values made inside the call (the
    functional graph already holds their final values). ``prune(graph, outputs)`` compiles the
    graph for fewer outputs, (program, constants), or None."""
    last = getattr(session, "last_run", None)
    # (grad_writes: backward() ran inside and set .grad — a training step, train_step.py)
    if last is None or session.segment_index != 1 or session.breaks or session.grad_escapes \
            or getattr(session, "grad_writes", None) \
            or (getattr(session, "mutated", False) and not local_writes_ok) \
            or getattr(session, "had_backward", False) or getattr(session, "value_reads", None) \
            or getattr(session, "no_replay", None):
        return None      # (value_reads: x.item() on an input made a constant of its value)
    prog, consts, graph = last
    plan = []
    for i, src in enumerate(graph.sources):
        if id(src) in leaves_by_id:
            plan.append(("arg", leaves_by_id[id(src)], None))
        else:
            plan.append(("const", None, src))
    out_index = {id(n): i for i, n in enumerate(graph.outputs)}
    outs = []

    views = getattr(session, "returned_views", {})

    def tensor_leaf(o):
        n = o._node
        if n is None or n.graph is not graph:
            raise LookupError
        if id(o) in views:
            # a view of an input or of another value it returns: the replay makes it again from
            # that array, so that the two share memory as the traced call's (and NumPy's) do
            root, chain = views[id(o)]
            r = root._node
            if r is None or r.graph is not graph:
                raise LookupError
            if r.is_placeholder:
                if id(graph.sources[r.index]) not in leaves_by_id:
                    raise LookupError
                of = ("arg", r.index)
            elif id(r) in out_index:
                of = ("out", out_index[id(r)])
            else:
                raise LookupError           # a view of a value it does not hand back
            return ("view", of, (n.dtype, o.device, numpy_gives_array(n), o._np, chain))
        if n.is_placeholder:
            if id(graph.sources[n.index]) not in leaves_by_id:
                raise LookupError
            return ("arg", n.index, (n.dtype, o.device, True, o._np))
        # a 0-d result is a NumPy scalar or a 0-d array as NumPy's op would give it; ``_np``:
        # a value that came from NumPy data goes back as NumPy data (numpy_out None)
        return ("out", out_index[id(n)], (n.dtype, o.device, numpy_gives_array(n), o._np))
    tree = output_tree(out, tensor_leaf, outs)
    if tree is None:
        return None
    prog_graph = outputs_graph(graph, graph.outputs)    # (a copy: the list is the session's)
    if prune is not None:
        used = sorted({i for kind, i, _ in outs if kind == "out"} |
                      {i[1] for kind, i, _ in outs if kind == "view" and i[0] == "out"})
        if len(used) < len(graph.outputs):
            # the trace's program also gives values to every tracer still alive (views kept for
            # aliasing, say); a replay needs only the returned ones: compile without the rest
            pruned = prune(graph, [graph.outputs[i] for i in used])
            if pruned is not None:
                prog, consts = pruned
                prog_graph = outputs_graph(graph, [graph.outputs[i] for i in used])
                remap = {i: j for j, i in enumerate(used)}
                outs = [(kind, remap[i], m) if kind == "out" else
                        (kind, ("out", remap[i[1]]), m) if kind == "view" and i[0] == "out" else
                        (kind, i, m) for kind, i, m in outs]
    rp = Replay(key, prog, consts, plan, outs, tree, numpy_out)
    rp.graph = graph             # the user's ops: their floating-point warnings (fpflags.py)
    rp.prog_graph = prog_graph
    rp.fp_entry = getattr(session, "fp_entry", None)
    return rp


def output_tree(out, tensor_leaf, outs):
    """How to rebuild a call's returned structure from a replay's results, or None when it
    cannot be rebuilt. Tuples, lists and dicts are walked; each tensor leaf appends
    ``tensor_leaf(t)`` to ``outs`` (it raises LookupError for a tensor the replay cannot give
    back) and each plain Python value appends ``("value", v, None)``. The result is a function
    of an iterator over the leaves' values, in ``outs`` order."""
    def walk(o):
        if isinstance(o, Tensor):
            outs.append(tensor_leaf(o))
            return lambda it: next(it)
        if isinstance(o, tuple) and not hasattr(o, "_fields"):
            subs = [walk(v) for v in o]
            return lambda it: tuple(s(it) for s in subs)
        if isinstance(o, list):
            subs = [walk(v) for v in o]
            return lambda it: [s(it) for s in subs]
        if isinstance(o, dict):
            subs = {k: walk(v) for k, v in o.items()}
            return lambda it: {k: s(it) for k, s in subs.items()}
        if o is None or isinstance(o, (bool, int, float, str)):
            outs.append(("value", o, None))
            return lambda it: next(it)
        raise LookupError
    try:
        return walk(out)
    except LookupError:
        return None
