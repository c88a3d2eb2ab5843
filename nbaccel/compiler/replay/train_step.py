"""``mode="reduce-overhead"`` for training steps: one traced step, replayed as one program.

A training step (zero_grad, forward, ``loss.backward()``, ``opt.step()``) traces into one
graph whose outputs are the loss, the new gradients and the new values of every tensor it
updates in place (parameters, optimizer state, buffers). Once such a call has been traced, a
later call with the same guard key runs that graph's program directly: its inputs are read
from where the trace found them (the arguments, the parameters, the optimizer state, the
gradients at entry), its outputs are written back the same way (in place into the real
buffers, ``.grad`` rebound, version counters bumped), and nothing is traced.

What the guard covers (``Snapshot``), computed on every call before anything runs:

* the arguments' metadata and Python scalar values (as for pure functions, ``replay.py``);
* every nn.Module, Optimizer and Tensor the step names (its bound ``self``, closure cells,
  default arguments, the globals its code names, and plain functions it names, a few levels
  deep): module tree, ``training`` flags, parameter and buffer identities; optimizer groups,
  parameter identities and state-tensor identities; shapes, dtypes, ``requires_grad`` and
  whether ``.grad`` is None of every parameter;
* the optimizer's branch-deciding hyper-parameters (``if momentum:``) by truthiness, and by
  value every group key that code outside the optimizer read during the trace.

Hyper-parameters the optimizer reads (lr, momentum, betas, ...) are 0-d graph inputs
(``optim.HYPER``), refreshed from ``param_groups`` before each replay: a new learning rate is
used at once, without re-tracing. A call is recorded only if it leaves the guarded state as it
found it (the key after the call equals the key before, except for which gradients exist): a
first step that creates optimizer state is traced, the second is recorded. A step whose graph reads a tensor the guard cannot
find again (a tensor made inside the step from Python data, a random mask) is never recorded:
it traces on every call, which is always correct.
"""
from __future__ import annotations

import copy
import functools
import types

import numpy as np

from ... import autograd
from ...parameter_holder import ParameterHolder   # an nn.Module, known without importing nn
from ...optim import BRANCH_KEYS, HYPER, LIFTED_KEYS, Optimizer
from ...tensor import Tensor
from .replay import output_tree, outputs_graph, run_program
from ..schedule.views import numpy_gives_array
from ..capture.decompose import decompose
from ..runtime import fpflags
from ..runtime.runtime import Program
from ..schedule.loops import Kernel, Layout
from ..config import config

_DEPTH = 3          # how deep plain functions named by the step are searched for modules


def discover(fn) -> list:
    """Modules, Optimizers and Tensors the step reaches by name (see the module docstring)."""
    found, seen = [], set()

    def add(o, depth):
        if id(o) in seen:
            return
        if isinstance(o, (ParameterHolder, Optimizer, Tensor)):
            seen.add(id(o))
            found.append(o)
        elif isinstance(o, (types.FunctionType, types.MethodType, functools.partial)) and depth > 0:
            seen.add(id(o))
            walk(o, depth - 1)

    def walk(f, depth):
        while isinstance(f, functools.partial):
            for a in list(f.args) + list(f.keywords.values()):
                add(a, depth)
            f = f.func
        if isinstance(f, types.MethodType):
            add(f.__self__, depth)
            f = f.__func__
        code = getattr(f, "__code__", None)
        if code is None:
            return
        for cell in f.__closure__ or ():
            try:
                add(cell.cell_contents, depth)
            except ValueError:          # an empty cell
                pass
        for d in f.__defaults__ or ():
            add(d, depth)
        g = f.__globals__
        for name in code.co_names:
            o = g.get(name)
            if o is not None:
                add(o, depth)
    walk(fn, _DEPTH)
    return found


def _meta(t):
    return (id(t), tuple(t.shape), t.dtype.name, t.requires_grad)


def _grad_meta(t):
    g = t.grad
    return None if g is None else (tuple(g.shape), g.dtype.name)


def _group_key(g):
    reads = g.__dict__.get("read_in_trace", ()) if hasattr(g, "__dict__") else ()
    out = []
    for k, v in dict.items(g):
        if k == "params":
            continue
        if k in LIFTED_KEYS and k not in reads:
            if k not in BRANCH_KEYS:
                continue
            v = bool(v)
        out.append((k, v))
    return tuple(out)


class Snapshot:
    """What a step can see, taken before a call: the guard key and how to find tensors again."""

    def __init__(self, fn, leaves=()):
        self.found = discover(fn)
        self.params = self._params()
        self.key = self.state_key()
        self.grads = {id(p): p.grad for p in self.params}        # .grad at entry
        self.versions = {id(t): t._version[0] for t in self._tensors()}
        self.versions.update((id(x), x._version[0]) for x in leaves if isinstance(x, Tensor))

    def _params(self):
        out, seen = [], set()
        for o in self.found:
            ps = o.parameters() if isinstance(o, ParameterHolder) else \
                (p for g in o.param_groups for p in dict.__getitem__(g, "params")) if isinstance(o, Optimizer) else ()
            for p in ps:
                if id(p) not in seen:
                    seen.add(id(p))
                    out.append(p)
        return out

    def _tensors(self):
        """Every tensor the guard identifies: parameters, buffers, state, named tensors."""
        out = list(self.params)
        for o in self.found:
            if isinstance(o, ParameterHolder):
                out += list(o.buffers())
            elif isinstance(o, Optimizer):
                out += [v for st in o.state.values() for v in st.values() if isinstance(v, Tensor)]
            elif isinstance(o, Tensor):
                out.append(o)
        return out

    def state_key(self) -> tuple:
        """The guard key. Its last part says which gradients exist (and their shapes); a
        call may change that part and still be recorded (a step sets gradients that were
        None: the next call with None gradients is the same step)."""
        parts = [autograd.is_grad_enabled()]
        for o in self.found:
            if isinstance(o, ParameterHolder):
                for m in o.modules():
                    parts.append((id(m), m.training,
                                  tuple(None if p is None else _meta(p) for p in m._parameters.values()),
                                  tuple(None if b is None else _meta(b) for b in m._buffers.values())))
            elif isinstance(o, Optimizer):
                parts.append(id(o))
                for g in o.param_groups:
                    ps = dict.__getitem__(g, "params")
                    parts.append(tuple(_meta(p) for p in ps))
                    parts.append(_group_key(g))
                    for p in ps:
                        st = o.state.get(p)
                        parts.append(None if st is None else tuple(
                            (k, _meta(v) if isinstance(v, Tensor) else v) for k, v in st.items()))
            else:
                parts.append(_meta(o))
        grads = [_grad_meta(o) for o in self.found if isinstance(o, Tensor)]
        grads += [_grad_meta(p) for p in self.params]
        return tuple(parts) + (tuple(grads),)

    def owned_tensors(self):
        """The parameters, buffers and optimizer state of the modules and optimizers found."""
        return [t for t in self._tensors() if not any(t is o for o in self.found)]

    def covers(self, objs):
        """The first of ``objs`` (modules, optimizers a step's code reads) that this snapshot's
        key does not follow, or None: a module reached only through an attribute chain
        (``trainer.model``) would have its training flag and parameters unguarded."""
        ids = {id(o) for o in self.found}
        ids.update(id(m) for o in self.found if isinstance(o, ParameterHolder) for m in o.modules())
        return next((o for o in objs if id(o) not in ids), None)

    def accessors(self):
        """id(array) -> how a replay finds that buffer again."""
        acc = {}
        for t in self._tensors():
            acc.setdefault(id(t._data), ("tensor", t))
        for p in self.params:
            g = self.grads[id(p)]
            if g is not None:
                acc.setdefault(id(g._data), ("grad", p))
        for o in self.found:
            if isinstance(o, Optimizer):
                for (gi, name, _, _), t in o._hyper_tensors.items():
                    acc[id(t._data)] = ("hyper", t, o, gi, name)
        return acc


class StepReplay:
    """A recorded training step: read inputs, run the program, write results back."""

    def __init__(self, key, prog, consts, plan, writes, grads, drop, outs, out_tree, numpy_out):
        self.key = key
        self.prog = prog
        self.consts = consts
        self.plan = plan          # per placeholder: an accessor
        self.writes = writes      # (output index, accessor, version delta)
        self.grads = grads        # (output index, parameter, dtype, device, np flag)
        self.drop = drop          # parameters whose old .grad is replaced and not read
        self.outs = outs
        self.out_tree = out_tree
        self.numpy_out = numpy_out
        self.graph = None         # the traced graph and the fp state its trace began under
        self.fp_entry = None
        self.prog_graph = None    # the traced graph with the program's outputs (run_program)
        self.fell_back = None

    @staticmethod
    def _tensor(acc, leaves):
        kind = acc[0]
        if kind == "arg":
            return leaves[acc[1]]
        if kind == "grad":
            return acc[1].grad
        return acc[1]

    def inputs_intact(self) -> bool:
        """Whether the run so far left every input as it was: no kernel was given a parameter's
        (or an optimizer state's) own buffer to write (``run_program`` may then run the graph
        again on the same inputs, after a fault)."""
        run_fn = getattr(self.prog, "run_fn", None)
        dest = run_fn.__globals__.get("alloc") if run_fn is not None else None
        return not (isinstance(dest, _Destinations) and dest.placed)

    def restore_inputs(self) -> bool:
        """After a fault (``run_program``): put back the buffers this run's kernels wrote in place,
        whose old values are kept while a kernel runs its NumPy version; whether every input is
        now as it was before the run."""
        dest = self.prog.run_fn.__globals__.get("alloc") if hasattr(self.prog, "run_fn") else None
        if not (isinstance(dest, _Destinations) and dest.placed):
            return True
        if dest.saved is None:
            return False                        # (all numba: a fault there keeps the fault)
        for a, old in reversed(dest.saved):
            np.copyto(a, old)
        dest.saved, dest.placed = [], False
        return True

    def run(self, leaves):
        run_fn = getattr(self.prog, "run_fn", None)     # (none: it fell back, run_program)
        dest = run_fn.__globals__.get("alloc") if run_fn is not None else None
        if isinstance(dest, _Destinations):
            dest.leaves = leaves
            dest.placed = False
            # a kernel that runs its NumPy version may fault after an earlier kernel wrote a
            # parameter in place (a numba kernel raises nothing once it runs): the old values are
            # kept, so that the fault can fall back (restore_inputs)
            dest.saved = [] if _numpy_kernels(self.prog) else None
        inputs = []
        for acc in self.plan:
            if acc[0] == "hyper":
                _, t, opt, gi, name = acc
                t._data[()] = HYPER[name](dict(opt.param_groups[gi]))
            x = self._tensor(acc, leaves)
            inputs.append(x._data if isinstance(x, Tensor) else np.asarray(x))
        dropped = [(p, p.grad) for p in self.drop]
        for p in self.drop:      # its buffer may then be reused for the new gradient
            p.grad = None
        try:
            # the user's floating-point warnings, as the traced call gives them (fpflags.py)
            arrays = fpflags.run(self.graph, inputs, lambda: run_program(self, inputs),
                                 self.prog, self.fp_entry, replayed=True)
        except BaseException:    # (an interrupt): the gradients stay as they were
            for p, g in dropped:
                p.grad = g
            raise
        for i, acc, delta in self.writes:
            x = self._tensor(acc, leaves)
            dst = x._data if isinstance(x, Tensor) else x
            src = arrays[i]
            if not np.may_share_memory(dst, src):       # (placed outputs are the buffer itself)
                np.copyto(dst, src.reshape(dst.shape), casting="unsafe")
            if delta and isinstance(x, Tensor):
                x._version[0] += delta
        for i, p, dtype, device, npflag in self.grads:
            p.grad = Tensor._wrap(arrays[i], dtype, device, npflag)
        values = []
        for kind, v, meta in self.outs:
            if kind == "value":
                values.append(v)
            elif kind == "tensor":
                x = self._tensor(v, leaves)
                if isinstance(x, Tensor) and (self.numpy_out or (self.numpy_out is None and x._np)):
                    x = x._data                 # as a traced call returns it (call_values.to_output)
                values.append(x)
            else:
                a = arrays[v]
                if self.numpy_out or (self.numpy_out is None and meta[2]):
                    values.append(a[()] if a.ndim == 0 and not meta[3] else a)
                else:
                    values.append(Tensor._wrap(a, meta[0], meta[1], False))
        return self.out_tree(iter(values))


class NotRecorded(Exception):
    """Why a traced step cannot be replayed (the report's re-trace reason)."""


def record_step(cf, session, leaf_index, out, numpy_out, key, snap):
    """A StepReplay for this traced call, or None when it cannot be replayed safely."""
    try:
        return build_step(cf, session, leaf_index, out, numpy_out, key, snap)
    except NotRecorded:
        return None


def build_step(cf, session, leaf_index, out, numpy_out, key, snap):
    """A StepReplay for this traced call; raises NotRecorded with the reason otherwise."""
    last = getattr(session, "last_run", None)
    if session.had_backward:
        raise NotRecorded("its results carry autograd history (a backward() outside the call)")
    if last is None or session.segment_index != 1 or session.breaks:
        raise NotRecorded("its trace is not one graph")
    if getattr(session, "no_replay", None):
        raise NotRecorded(session.no_replay)
    if getattr(session, "value_reads", None):
        raise NotRecorded(f"it reads a tensor's value into Python ({session.value_reads[0]}): "
                          "what it computes from that value is a constant of the graph")
    prog, consts, graph = last
    if not hasattr(prog, "slots"):          # ran eagerly (a compiler error): nothing to replay
        raise NotRecorded("its graph ran eagerly (the compiler failed on it)")
    if snap.state_key()[:-1] != snap.key[:-1]:
        # (a first step that creates the optimizer's state: the next one is recorded)
        raise NotRecorded("the call changed the modules' or optimizer's state it is guarded on")
    acc = snap.accessors()

    def accessor(t):
        if id(t) in leaf_index:
            return ("arg", leaf_index[id(t)])
        return acc.get(id(t._data)) if t._data is not None else None

    plan = []
    for src in graph.sources:
        a = accessor(src)
        if a is None:
            raise NotRecorded("it reads a tensor the guard cannot find again (one made from "
                              "Python data or drawn at random inside the step)")
        plan.append(a)
    needed, index = [], {}

    def output(n):
        if id(n) not in index:
            index[id(n)] = len(needed)
            needed.append(n)
        return index[id(n)]
    writes, written = [], {}
    for n, target in session.writes:
        a = accessor(target)
        if a is None or n.is_placeholder or n.graph is not graph:
            raise NotRecorded("it updates in place a tensor the guard cannot find again")
        delta = target._version[0] - snap.versions.get(id(target), target._version[0])
        writes.append((output(n), a, delta))
        written[id(n)] = a
    grads, granted = [], set()
    by_id = {id(p): p for p in snap.params}
    for t, n in session.grad_writes:
        if id(t) not in by_id or n.graph is not graph:
            raise NotRecorded("it sets the gradient of a tensor that is not a parameter it reaches")
        g = t.grad
        grads.append((output(n), t, g.dtype, g.device, g._np))
        granted.add(id(t))
    for p in snap.params:                   # any other .grad must be left as it was
        if id(p) not in granted and p.grad is not snap.grads[id(p)]:
            raise NotRecorded("it changes a gradient outside its graph")
    read = {id(a[1]) for a in plan if a[0] == "grad"}
    drop = [p for p in snap.params if id(p) in granted and id(p) not in read]
    outs = []

    def tensor_leaf(o):
        n = o._node
        if n is None or n.graph is not graph:
            raise LookupError
        if n.is_placeholder:
            return ("tensor", plan[n.index], None)
        if id(n) in written and not o.requires_grad:
            return ("tensor", written[id(n)], None)     # x += 1 returns x itself
        # (a 0-d result: a NumPy scalar or a 0-d array, as NumPy's op gives it: views.py)
        return ("out", output(n), (n.dtype, o.device, o._np, numpy_gives_array(n)))
    tree = output_tree(out, tensor_leaf, outs)
    if tree is None:
        raise NotRecorded("its result cannot be rebuilt from the compiled program's outputs")
    try:
        prog2, consts2 = _program(cf, graph, needed)
        _write_in_place(prog2, plan, writes)
    except Exception as e:
        if config.get("strict"):
            raise
        raise NotRecorded(f"its replay program failed to build ({type(e).__name__})") from e
    rp = StepReplay(key, prog2, consts2, plan, writes, grads, drop, outs, tree, numpy_out)
    rp.graph, rp.fp_entry = graph, getattr(session, "fp_entry", None)
    rp.prog_graph = outputs_graph(graph, needed)
    return rp


def _program(cf, graph, needed):
    """The step's program with only the outputs a replay uses (no intermediates the trace kept
    alive, no views the tape held)."""
    g = copy.copy(graph)
    g.outputs = list(needed)
    prim = decompose(g)
    prog = Program(prim, cf.backend, cf.mode, dynamic=False)
    n0 = len(graph.placeholders)
    return prog, [prim.constants[i] for i in range(n0, len(prim.placeholders))]


class _Destinations:
    """The program's allocator with some outputs placed: the kernel that computes a new
    parameter value writes it straight into the parameter's buffer (no copy afterwards)."""

    def __init__(self, pool, places):
        self.pool = pool
        self.places = places          # node index -> accessor of the tensor it is written into
        self.leaves = None
        self.placed = False           # this run handed out a tensor's own buffer (a write began)
        self.saved = None             # (buffer, its values before) each, while kept (StepReplay.run)

    def __call__(self, key, n, dtype):
        acc = self.places.get(key)
        if acc is not None:
            t = StepReplay._tensor(acc, self.leaves)
            a = t._data if isinstance(t, Tensor) else t
            if a.dtype == dtype and a.size == n and a.flags.c_contiguous:
                self.placed = True
                if self.saved is not None:
                    self.saved.append((a, a.copy()))
                return a.reshape(-1)
        return self.pool(key, n, dtype)


def _write_in_place(prog, plan, writes):
    """Let each update kernel write into the buffer it updates when that is safe: the kernel
    is elementwise (no reduction), reads the old value only at the element it writes, and no
    later step reads the old value."""
    sch = prog.schedule
    places = {}
    for i, acc, _ in writes:
        j = next((j for j, a in enumerate(plan) if a[0] == acc[0] and a[1] is acc[1]), None)
        if acc[0] not in ("tensor", "grad") or j is None:
            continue
        out = sch.outputs[i]
        if not isinstance(out, tuple):
            continue
        buf, lay = out
        ph = sch.graph.placeholders[j]
        k = next((s for s in sch.steps if isinstance(s, Kernel) and buf in s.outputs), None)
        if k is None or k.reductions or lay != Layout.contiguous(buf.shape) or tuple(buf.shape) != k.domain:
            continue
        if any(st.node is buf and (st.per_outer or st.layout != Layout.contiguous(k.domain)) for st in k.stores):
            continue
        whole = Layout.contiguous(k.domain)
        if not all(leaf.layout == whole for st in k.stores for leaf in st.expr.leaves()
                   if leaf.kind == "load" and leaf.buf is ph):
            continue
        at = next(n for n, st in enumerate(k.stores) if st.node is buf)
        if any(leaf.kind == "load" and leaf.buf is ph for st in k.stores[at + 1:]
               for leaf in st.expr.leaves()):
            continue           # a later store of the same kernel still reads the old value
        if any(_reads(s, ph) for s in sch.steps[sch.steps.index(k) + 1:]):
            continue
        if any(o is ph or (isinstance(o, tuple) and o[0] is ph) for o in sch.outputs):
            continue
        places[buf.index] = acc
    if places:
        ns = prog.run_fn.__globals__
        ns["alloc"] = _Destinations(ns["alloc"], places)
    prog.destinations = places


def _numpy_kernels(prog) -> bool:
    """Whether a kernel of ``prog`` runs its NumPy version now (its numba version is not built,
    not ready or was refused), which, unlike a numba kernel, could raise after it began."""
    for slot in getattr(prog, "slots", {}).values():
        if hasattr(slot, "np_fn") and (slot.numba is None or slot.numba.state != "ready"):
            return True
    return False


def _reads(step, ph):
    if isinstance(step, Kernel):
        return ph in step.inputs
    return any(b is ph for b, _ in step.views)
