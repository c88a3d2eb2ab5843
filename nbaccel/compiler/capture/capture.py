"""Capture by tracing (the TorchDynamo role, done with tracer tensors).

A :class:`TraceSession` runs one call of a user function. Inputs become *tracer* Tensors
(``t._node`` set); every op on a tracer records a node instead of computing. Concrete
tensors that meet tracers (parameters, constants made inside the function) are *lifted*
into graph inputs, so their current values are read on every call.

When Python needs a concrete value (``bool(t)``, ``.item()``, printing, an op whose output
shape depends on data) the graph **breaks**: the pending graph is compiled and run, the
value is handed back and tracing continues in a new graph. In-place updates rebind the
tracer to the new node (functionalisation) and are written back to the real buffers when
the graph runs.

This is the one tracing context of the project; it is passed explicitly through the
tracer tensors (``tracer._node.graph.session``), never through a global.
"""
from __future__ import annotations

import weakref

import numpy as np

from ...ops.meta import DataDependentShape, infer  # (DataDependentShape is raised by infer rules)
from ...dispatch import _eager, set_active_trace
from ...tensor import NP_ARRAY_0D, Tensor
from ..runtime import fpflags
from ..schedule.views import COPY, ViewTracking, numpy_gives_array
from .give_up import _BUDGET_EVERY, GivingUp, note_inline  # noqa: F401 (note_inline: api.py)
from ..schedule.ir import Graph
from ...devices import cpu
from ...ops.registry import OPS
from .buffers import _copy_into, _unshared
from .user_code import (GraphBreakError, TooManyGraphBreaks, TraceOverBudget, TraceTooCostly,  # noqa: F401
                        _fix_for, _is_internal,
                        display_filename, user_frame, user_line)


class TracedGraph(Graph):
    """A Graph that forwards the engine's tracing protocol to its session."""

    def __init__(self, session):
        super().__init__()
        self.session = session

    def record(self, op, args, params):
        return self.session.record(op, args, params)

    def lift_args(self, args):
        if self.session.redirect is not None:
            return self.session.redirect.lift_args(args)
        return tuple(self.session.lift(a) for a in args)

    def realize(self, tensor, reason):
        return self.session.realize(tensor, reason)

    def assign(self, target, new):
        return self.session.assign(target, new)

    @staticmethod
    def numpy_scalar(tensor) -> bool:
        """Whether NumPy's value of this 0-d tracer is a scalar (a ufunc's or reduction's
        result), which has no in-place operators (the engine asks, for ``s **= 2``)."""
        return not tensor.shape and not numpy_gives_array(tensor._node)

    def read_only(self, tensor) -> bool:
        """Whether NumPy's array of this tracer is read-only (a broadcast view): a write into it
        raises ValueError before NumPy looks at the dtypes (the engine asks, in ``_assign``)."""
        info = self.session.view_of.get(id(tensor))
        return info is not None and any(op.name == "broadcast_to" for op, _, _ in info[1])

    def c_contiguous(self, tensor) -> bool:
        """Whether NumPy's array of this tracer is C-contiguous (``np.ravel`` asks: views.py)."""
        return self.session.c_contiguous(tensor)

    def numpy_layout(self, tensor):
        """An array with the strides of NumPy's array of this tracer, or None (views.py)."""
        return self.session.numpy_layout(tensor)

    def track(self, tensor):
        self.session.track(tensor)

    def shared_view(self, tensor):
        """``nb.from_numpy`` of a traced array made ``tensor``: None, or why it cannot share."""
        return self.session.note_shared_view(tensor)

    def note_grad(self, tensor):
        self.session.note_grad(tensor)


class _SessionProxy:
    """The engine's active-trace handle: always the session's current graph."""

    def __init__(self, session):
        self.session = session

    def assign(self, target, new):
        return self.session.assign(target, new)

    def record(self, op, args, params):
        return self.session.record(op, args, params)

    def lift_args(self, args):
        return self.session.graph.lift_args(args)


class TraceSession(ViewTracking, GivingUp):
    """Traces one call. ``runner.run_segment(session, graph, live)`` compiles and runs a segment
    and returns one array per graph output."""

    def __init__(self, runner, fullgraph=False):
        self.runner = runner
        self.fullgraph = fullgraph
        self.fp_entry = fpflags.current_state()    # the caller's errstate and filters (replays)
        self.names: dict[int, str] = {}           # id(concrete) -> readable input name
        self.sources: dict[int, Tensor] = {}      # id(placeholder tracer) -> concrete source
        self.materialized: dict[int, tuple] = {}  # id(tracer) -> (tracer, concrete Tensor)
        self.view_base: dict[int, Tensor] = {}
        self.stale: set[int] = set()
        # view functionalization: id(view) -> (root tensor, [(op, params, extra args)], root version)
        self.view_of: dict[int, tuple] = {}
        # id(node of a buffer's value after an in-place write) -> the node of the value it
        # overwrote: the buffer, whose layout NumPy keeps (views.py reads it)
        self.written_into: dict[int, object] = {}
        self.version: dict[int, int] = {}          # id(root) -> number of writes to it
        self.view_tensors: dict[int, Tensor] = {}
        # id(placeholder of a value realized at a graph break) -> the user's tensor it stands
        # for: a view made from it after the break is a view of that tensor (and of its root)
        self.realized_as: dict[int, Tensor] = {}
        self.breaks: list[dict] = []
        self.grad_escapes: list[Tensor] = []
        self.segment_index = 0
        self.redirect = None
        self.mutated = False          # an in-place update happened (never replayed)
        self.had_backward = False
        self.graph_proxy = _SessionProxy(self)    # what the engine's tracing context holds
        self._keep: list = []                     # strong refs so ids stay unique
        self.placeholders_made: list[tuple] = []
        self.max_breaks = None                    # None: no limit
        # a perf_counter time past which the trace gives up (TraceOverBudget), checked every
        # _BUDGET_EVERY ops; None: no limit
        self.deadline: float | None = None
        self._recorded = 0
        self._undo: dict[int, tuple] = {}         # id(buffer) -> (buffer, copy before the call)
        self.writes: list[tuple] = []             # (output node, real tensor written in place)
        self.grad_writes: list[tuple] = []        # (tensor, output node its .grad now holds)
        # inputs whose values the traced code read into Python (x.item(), x.numpy()): no break,
        # but what it computed from them is a constant of the graph, so the call never replays
        self.value_reads: list[str] = []
        # tensors nb.from_numpy made from traced arrays: they share the array's memory after
        # the call (views.py, share_views); a call that returns one never replays (no_replay)
        self.shared_views: list[Tensor] = []
        self.no_replay: str | None = None
        self.written_inputs: set[int] = set()     # ids of inputs written in place (note_input_write)
        # (array, its name, the input's name): arrays the traced code reaches untraced that share
        # an input's memory (a %%compile cell's view held in a list: magics/raw_aliases.py)
        self.raw_aliases = getattr(runner, "raw_aliases", ())
        self.kept_outside: dict[int, str] = {}    # id(tracer) -> who kept its array (give_up.py)
        self.inlined: dict[int, int] = {}         # id(compiled function called) -> breaks by then
        self._new_segment()

    def _new_segment(self):
        self.graph = TracedGraph(self)
        self.live: list[weakref.ref] = []
        self.lifted: dict[int, Tensor] = {}       # id(concrete) -> placeholder tracer
        self.ph_sources: list[Tensor] = []        # placeholder index -> concrete source
        self.assigned: dict[int, Tensor] = {}     # targets of in-place updates in this segment
        self.concrete_targets: dict[int, Tensor] = {}

    # -- inputs -----------------------------------------------------------------------------------
    def input(self, value: Tensor, name: str) -> Tensor:
        self.names[id(value)] = name
        return self._placeholder(value)

    def _placeholder(self, c: Tensor) -> Tensor:
        hit = self.lifted.get(id(c))
        if hit is not None:
            return hit
        name = self.names.get(id(c)) or f"c{len(self.graph.placeholders)}"
        node = self.graph.placeholder(c.shape, c.dtype, name)
        node.params = {"np": c._np}
        t = Tensor._tracer(node, c.dtype, c.device, c._np, data=c._data)
        t.requires_grad = c.requires_grad
        t.grad_fn = c.grad_fn
        t._origin = c._origin if c._origin is not None else c
        t._version = c._version
        self.lifted[id(c)] = t
        self.ph_sources.append(c)
        self.sources[id(t)] = c
        self.placeholders_made.append((t, c))
        self._keep += [c, t]
        self.live.append(weakref.ref(t))
        return t

    def lift(self, a):
        """Make ``a`` usable in the current graph (concrete tensors become inputs)."""
        if not isinstance(a, Tensor):
            return a
        node = a._node
        if node is None:
            return self._placeholder(a)
        info = self.view_of.get(id(a))
        if info is not None and self.version.get(id(info[0]), 0) != info[2]:
            # its base was written since (in this segment or after a graph break): re-read it
            self._rederive(a, info)
            return a
        if node.graph is not self.graph:
            if id(a) in self.materialized:          # realized at an earlier graph break
                ph = self._placeholder(self.materialized[id(a)][1])
                self.realized_as[id(ph)] = a
                if not a.shape and not numpy_gives_array(node):
                    ph._node.params["scalar"] = True  # NumPy's value is still a scalar (its .T too)
                return ph
            if id(a) in self.sources:               # an input of an earlier segment
                return self._placeholder(self.sources[id(a)])
            raise RuntimeError("internal error: a tracer from a finished graph was used")
        if id(a) in self.stale:
            fn, line, src = user_frame()
            raise RuntimeError(f"{fn}:{line}: a tensor is read after it was modified through a "
                               f"view inside a compiled region (`{src}`); write through the base "
                               "tensor (x[idx] = ...) or use out-of-place ops")
        return a

    def track(self, t: Tensor):
        self._keep.append(t)
        self.live.append(weakref.ref(t))

    # -- recording --------------------------------------------------------------------------------
    def record(self, op, args, params):
        if self.redirect is not None:               # deriving a backward graph
            return self.redirect.record(op, args, params)
        self._recorded += 1
        if self.deadline is not None and not self._recorded % _BUDGET_EVERY:
            self._check_deadline()
        args = tuple(self.lift(a) for a in args)
        try:
            shape, dtype = infer(op, args, params)
        except DataDependentShape as e:
            return self._eager_op(op, args, params, f"{op.name}: data-dependent output shape ({e})")
        dev = None
        npflag = False
        for a in args:
            if isinstance(a, Tensor):
                dev = dev or a.device
                npflag = npflag or a._np
        if dev is None:
            dev = params.get("device") or cpu
        node = self.graph.add(op, tuple(a._node if isinstance(a, Tensor) else a for a in args),
                              params, shape, dtype)
        node.where = user_line()
        node.fp = fpflags.trace_state(self.graph)
        t = Tensor._tracer(node, dtype, dev, npflag)
        if op.view and args and isinstance(args[0], Tensor):
            self._keep.append(t)
            if self._note_view(t, op, params, args) is not COPY:     # (a reshape NumPy copies)
                self.view_base[id(t)] = self.view_base.get(id(args[0]), args[0])
        self.live.append(weakref.ref(t))
        return t

    def _eager_op(self, op, args, params, reason):
        self._break(reason)
        concrete = tuple(self._concrete(a) if isinstance(a, Tensor) else a for a in args)
        dev = next((a.device for a in concrete if isinstance(a, Tensor)), None) or params.get("device")
        npflag = any(getattr(a, "_np", False) for a in concrete)
        return _eager(op, concrete, params, dev, npflag)

    def _concrete(self, t):
        if t._node is None:
            return t
        self.realize(t, None)
        if id(t) in self.materialized:
            return self.materialized[id(t)][1]
        src = self.sources.get(id(t))
        return src if src is not None else Tensor._wrap(t._data, t.dtype, t.device, t._np)

    # -- in-place ---------------------------------------------------------------------------------
    def assign(self, target: Tensor, new: Tensor):
        # only an array is written in place: a 0-d target stays a 0-d array, whatever op made
        # its new value (`z[...] = 0`, `z += 1` on np.zeros(()) leave an ndarray, not a scalar)
        keeps_array = not target.shape and numpy_gives_array(target._node)
        if self.kept_outside:
            self.check_kept_write(target)            # (its array kept by code outside: give_up.py)
        info = self.view_of.get(id(target))
        if info is not None and any(op.name not in self._INVERTIBLE for op, _, _ in info[1]):
            if any(op.name == "broadcast_to" for op, _, _ in info[1]):
                raise ValueError("assignment destination is read-only")    # NumPy's broadcast view
            info = None                               # real/imag: the old refusal below applies
        new = self.lift(new)
        if isinstance(new, Tensor) and new.dtype is not target.dtype:
            # an in-place result keeps the target's dtype
            new = self.record(OPS["astype"], (new,), {"dtype": target.dtype})
        if info is not None:                         # a write through a view updates its root
            root, chain, _ = info
            self.assign(root, self._scatter(self.lift(root), chain, new))
            self.view_of[id(target)] = (root, chain, self.version.get(id(root), 0))
        else:
            self.version[id(target)] = self.version.get(id(target), 0) + 1
            src = target if target._node is None else self.sources.get(id(target))
            if src is not None and id(src) not in self.written_inputs:
                self.written_inputs.add(id(src))
                self.note_input_write(src)           # (another input sharing its memory: give_up.py)
            if target._node is None:                 # a concrete tensor updated inside the trace
                self._placeholder(target)            # (its old value stays readable as an input)
                self.concrete_targets[id(target)] = target
            elif id(target) in self.view_base:       # writing through a view: the base is stale
                self.stale.add(id(self.view_base[id(target)]))
        self.stale.discard(id(target))
        if keeps_array and isinstance(new, Tensor) and not numpy_gives_array(new._node):
            new = self.record(OPS["clone"], (new,), {})
        if info is None and target._node is not None and isinstance(new, Tensor) and \
                new._node is not None and new._node is not target._node:
            # NumPy wrote into the target's buffer: the new value keeps its layout (views.py)
            self.written_into.setdefault(id(new._node), target._node)
        target._node = new._node
        self.mutated = True
        self.assigned[id(target)] = target
        self._keep.append(target)
        if info is None and self.segment_index:        # (after a graph break)
            self._rederive_realized_views(target)

    def _rederive_realized_views(self, root):
        """A view realized at an earlier graph break holds an array of its own: after a write
        into its root it is derived again from the root's new value, as NumPy's view, which
        shares the root's memory, would read it."""
        for vid, info in list(self.view_of.items()):
            if info[0] is not root:
                continue
            view = self.view_tensors[vid]
            if view._node is not None and view._node.graph is not self.graph:
                self._rederive(view, info)
                self.track(view)

    def note_grad(self, t: Tensor):
        """``t.grad`` became a tracer (backward() inside the trace): give it a value at the flush."""
        self.grad_escapes.append(t)
        self._keep.append(t)

    # -- graph breaks -----------------------------------------------------------------------------
    def _break(self, reason):
        fn, line, src = user_frame()
        if self.fullgraph:
            raise GraphBreakError(f"graph break at {fn}:{line} (`{src}`): {reason}. fullgraph=True "
                                  f"forbids breaks; fix: {_fix_for(reason, src) or 'see docs/compiler.md'}")
        self.breaks.append({"reason": reason, "filename": fn, "lineno": line, "line": src,
                            "fix": _fix_for(reason, src), "segment": self.segment_index})
        if self.max_breaks is not None and len(self.breaks) > self.max_breaks:
            lines = {}
            for b in self.breaks:
                lines[b["lineno"]] = lines.get(b["lineno"], 0) + 1
            worst = max(lines, key=lines.get)
            why = next(b["reason"] for b in self.breaks if b["lineno"] == worst)
            raise TooManyGraphBreaks(
                f"too many graph breaks: more than {self.max_breaks}, {lines[worst]} at line {worst} "
                f"({why}); it runs plainly")

    def realize(self, t: Tensor, reason):
        node = t._node
        if node is None:
            return t._data
        if node.graph is not self.graph:             # realized earlier
            if id(t) in self.materialized:
                return self.materialized[id(t)][1]._data
            return t._data
        if node.is_placeholder and t._data is not None and id(t) not in self.assigned:
            self.value_reads.append(reason)
            return t._data                           # an input: its value is known, no break
        # (a tensor written in this segment may hold another tensor's placeholder, e.g. after
        # `z.put(...)` ran NumPy on its value: its own buffer is stale until the flush)
        if reason is not None:
            self._break(reason)
        self.flush()
        if id(t) not in self.materialized:           # a concrete tensor written in place inside
            return t._data                           # the trace: its own buffer holds the value
        return self.materialized[id(t)][1]._data

    def flush(self, final=None):
        """Compile and run the pending graph; every live tracer gets its value. At the end of
        the function (``final``: the returned tracers) only results and in-place updates count."""
        self._refresh_views()
        g = self.graph
        live, seen = [], set()
        # at the end, results first, then every tracer still referenced (e.g. optimizer state)
        candidates = ([] if final is None else list(final)) + [r() for r in self.live]
        for t in candidates + list(self.assigned.values()):
            if t is None or id(t) in seen or t._node is None or t._node.graph is not g:
                continue
            if t._saved_version is not None and id(t) not in self.assigned:
                continue   # autograd shells: backward runs from compiled graphs, not this tape
            seen.add(id(t))
            live.append(t)
        escaped = [t for t in self.grad_escapes if isinstance(t.grad, Tensor)
                   and t.grad._node is not None and t.grad._node.graph is g]
        outs, index = [], set()
        for n in [t._node for t in live] + [t.grad._node for t in escaped]:
            if not n.is_placeholder and id(n) not in index:
                index.add(id(n))
                outs.append(n)
        g.outputs = outs
        g.sources = list(self.ph_sources)
        if self.deadline is not None and outs:
            self._check_deadline(compiling=len(g.nodes))
        prev = set_active_trace(None)      # compiling and running are not part of the trace
        try:
            arrays = self.runner.run_segment(self, g, live) if outs else []
        finally:
            set_active_trace(prev)
        arrays = _unshared(arrays)
        concrete = {}
        holding: dict[int, list] = {}                # output node -> the live tensors it feeds
        for t in live:                               # (one pass: a search per output was
            holding.setdefault(id(t._node), []).append(t)   # quadratic in a long graph)
        for n, a in zip(outs, arrays):
            holders = holding.get(id(n), ())
            npflag = any(t._np for t in holders)
            dev = holders[0].device if holders else g.sources[0].device if g.sources else None
            concrete[id(n)] = Tensor._wrap(a, n.dtype, dev or cpu, npflag)
        self.runner.link_autograd(self, g, live, concrete)
        for t in live:
            n = t._node
            c = g.sources[n.index] if n.is_placeholder else concrete[id(n)]
            if id(t) in self.assigned:               # in-place update: write into the real buffer
                src = t if id(t) in self.concrete_targets else self.sources.get(id(t))
                if src is not None:
                    self.writes.append((n, src))     # (a replayed training step repeats these)
                if src is not None and src._data is not c._data:
                    self._remember(src._data)
                    _copy_into(src._data, c._data)
                if id(t) in self.concrete_targets:
                    t._node = None
                    if c.requires_grad:
                        t.grad_fn, t.requires_grad = c.grad_fn, True
                    continue
                if src is not None and not c.requires_grad:
                    c = src      # an input updated in place stays that array (x += 1 keeps identity)
            elif self._broadcast_view(t) and not c.requires_grad and isinstance(c._data, np.ndarray):
                # NumPy's broadcast view is read-only: NumPy code run on its value (np.copyto,
                # np.put) refuses the write in NumPy's words, and never writes through it
                ro = c._data.view()
                ro.flags.writeable = False
                c = Tensor._wrap(ro, c.dtype, c.device, c._np)
            t._data = c._data
            self.materialized[id(t)] = (t, c)
        for t in escaped:
            n = t.grad._node
            if n is None:       # a concrete gradient updated in place: written above (writes)
                continue
            self.grad_writes.append((t, n))
            # a gradient that entered this segment unchanged is one of its inputs
            t.grad = (g.sources[n.index] if n.is_placeholder else concrete[id(n)]).detach()
        done = {id(t) for t in escaped}
        self.grad_escapes = [t for t in self.grad_escapes if id(t) not in done]
        self.segment_index += 1
        self._new_segment()


    def _broadcast_view(self, t) -> bool:
        info = self.view_of.get(id(t))
        return info is not None and any(op.name == "broadcast_to" for op, _, _ in info[1])

    def _remember(self, buf):
        """Keep a copy of a real buffer before its first in-place write in this call, so that a
        failed call can be undone (see :meth:`undo`)."""
        if id(buf) not in self._undo:
            self._undo[id(buf)] = (buf, buf.copy())

    def undo(self):
        """Put every buffer this call wrote in place back as it was before the call."""
        for buf, saved in self._undo.values():
            _copy_into(buf, saved)
        self._undo.clear()

    def close(self):
        """After the call: every tracer that outlived it (stored in optimizer state, on an
        object, in a closure) becomes the ordinary concrete tensor it stands for."""
        for t, c in list(self.materialized.values()) + self.placeholders_made:
            if t._node is None or t is c:
                continue
            if t._np and not t._data.shape and numpy_gives_array(t._node):
                t._np = NP_ARRAY_0D                  # NumPy holds a 0-d array here, not a scalar
            t._node = None
            t._data = c._data
            t._version = c._version
            t.grad_fn = c.grad_fn
            t.requires_grad = c.requires_grad
