"""The public compiler API: compile, explain, reset, mark_dynamic.

    >>> import nbaccel as nb
    >>> @nb.compile
    ... def f(x, w):
    ...     return (x * w).tanh().sum(axis=-1)
    >>> f(nb.ones(4, 8), nb.ones(8)).shape
    (4,)
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import time
import warnings
import weakref

import numpy as np

from .. import ndarray_methods
from ..convert import asarray
from ..dispatch import active_trace, set_active_trace
from ..tensor import Tensor
from ..parameter_holder import ParameterHolder   # an nn.Module, known without importing nn
from .capture.capture import TraceSession, TraceTooCostly, note_inline
from .capture import heap, numpy_identity
from .call_values import array_leaves, map_arrays, numpy_like, to_output
from .dynamic_marks import mark_dynamic, marked_dims as _marked_dims  # noqa: F401 (nb.mark_dynamic)
from .replay.compiled import Compiled, CompiledModule
from .replay.entries import GraphCache
from .replay.guarded import GuardedReplays, call_key, layout_failure, layout_guard
from .replay.read_recorder import ReadRecorder
from .cache import cache, jit_split
from .replay import cheap_path, train_step
from . import foreign
from .report.report import CompileReport
from .replay.decision import Decision, output_signature
from .config import config  # noqa: F401 - the settings dict; nbaccel.config is the same one
from .replay.replay import record, metadata_key, scalar_args

MODES = ("default", "reduce-overhead", "max-autotune")
BACKENDS = ("auto", "numba", "numpy", "eager", "triton")

_all_functions: "weakref.WeakSet[CompiledFunction]" = weakref.WeakSet()


class Stats(dict):
    def __init__(self):
        super().__init__(calls=0, compiles=0, recompiles=0, cache_hits=0, graph_breaks=0,
                         backward_compiles=0, eager_fallbacks=0)

    def __getattr__(self, k):
        try:
            return self[k]
        except KeyError:
            raise AttributeError(k) from None


class CompiledFunction(Compiled):
    """What ``nbaccel.compile(fn)`` returns: call it like ``fn``; see ``.report`` and ``.stats``."""

    # seconds a trace may take before it gives up and the call runs plainly (TraceOverBudget);
    # None: no limit. A %%compile cell sets it from its decision (magics/extension.py)
    trace_budget: float | None = None

    def __init__(self, fn, *, mode="default", backend="auto", dynamic=None, fullgraph=False,
                 name=None, param_names=None):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if backend == "triton":          # a GPU with CuPy, or the interpreter when asked; else say so now
            # lazy: Triton's tier and renderer stay out of %load_ext
            from .runtime.triton_runtime import run_mode
            run_mode()
        self.fn = fn
        self.mode = mode
        self.backend = backend
        self.dynamic = dynamic
        self.fullgraph = fullgraph
        self.name = name or getattr(fn, "__qualname__", getattr(fn, "__name__", "fn"))
        self.param_names = param_names or (lambda: {})
        self.cache = GraphCache(self)
        self.stats = Stats()
        self._report: CompileReport | None = None
        self.history: list = []
        self.eager_only = False
        self.recompile_limit = None
        self._replays = {}
        self._decisions: dict = {}     # argument signature -> Decision (plain or compiled)
        self._last_decision = None
        self._guarded = GuardedReplays(self)
        self._in_cell = False          # a %%compile cell: the magic runs the cell plainly itself
        self.before_trace = None       # called when a call does not replay (magics/replay_path.py)
        self._first_call_seconds = None
        self._cold_replay = False      # this call was an entry's first replay (decision: not a sample)
        self.last_undo = None
        try:
            self._sig = inspect.signature(fn)
        except (TypeError, ValueError):
            self._sig = None
        functools.update_wrapper(self, fn, updated=())
        _all_functions.add(self)

    # -- calling ----------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        self.stats["calls"] += 1
        if self.backend == "eager" or self.eager_only:
            return self.fn(*args, **kwargs)
        d = self._decision(args, kwargs)
        if d is None:
            return self._call_compiled(args, kwargs)
        if d.next_path() == "plain":
            t0 = time.perf_counter()
            out = self.fn(*args, **kwargs)
            d.record("plain", time.perf_counter() - t0, steady=not self.pending())
            if d.out_signature is not None and output_signature(out) != d.out_signature:
                # NumPy in, nbaccel out: the compiled function hands NumPy back (as a %%compile
                # cell does), so this result is handed back the same way, and it stays compiled
                out = numpy_like(out)
                d.keep_compiled("the plain function returns nbaccel tensors for NumPy inputs; "
                                "compiled it returns NumPy: it stays compiled")
            self._last_decision = d
            return out
        t0 = time.perf_counter()
        before = self._report
        out = self._call_compiled(args, kwargs)
        seconds = time.perf_counter() - t0
        rep = self._report
        compiling = rep.compile_seconds if rep is not None and rep is not before and rep.cache != "hit" else 0.0
        # (an entry's first replay runs a new program once: its kernels load, its buffers are
        # made; as a code's first plain run, it is no sample of the runs that follow)
        d.record("compiled", seconds, compiling, steady=not self.pending() and not self._cold_replay)
        if d.out_signature is None:
            d.out_signature = output_signature(out)
            why = self._plain_cannot_stand_in(args, kwargs)
            if why is not None:
                d.keep_compiled(why)
        self._last_decision = d
        return out

    def _plain_cannot_stand_in(self, args, kwargs):
        """Why calling the plain function is not what these calls are, or None. On nbaccel
        tensors it is the same code run eagerly. On NumPy arrays the compiled function sees
        tensors: the plain function is the same only where its trace was plain NumPy work,
        NumPy in and NumPy out (a replay entry that says so); a layer or a training step would
        refuse the raw arrays."""
        ck = call_key(args, kwargs)
        if ck is None or not any(type(x) is np.ndarray for x in ck[1]):
            return None
        entry = self._guarded.entries.get(ck[0])
        if entry is not None and entry.numpy_io:
            return None
        return ("it takes NumPy arrays where its code needs tensors (or its calls cannot replay): "
                "the compiled function is the only one that runs")

    def _decision(self, args, kwargs):
        """This call's plain-or-compiled decision (decision.py), per argument signature; None
        where the plain function is not run in its place: a %%compile cell (the magic decides),
        a call inside another trace, arguments that are not plain data (tracers, objects), or
        ``mode="max-autotune"`` (kernels asked for by name)."""
        if self._in_cell or self.mode == "max-autotune" or not config["decide_functions"] \
                or active_trace() is not None:
            return None
        ck = call_key(args, kwargs)
        if ck is None:
            return None
        d = self._decisions.get(ck[0])
        if d is None:
            if len(self._decisions) >= 64:
                self._decisions.pop(next(iter(self._decisions)))
            d = self._decisions[ck[0]] = Decision(first="compiled", what="function")
            d.out_signature = None
        return d

    def _call_compiled(self, args, kwargs):
        self._cold_replay = False        # (set below when this call is an entry's first replay)
        guard_key = recorder = env = step_snap = None
        if self.mode == "default" and config["guarded_replay"] and active_trace() is None:
            # a %%compile cell's function takes its other inputs last, in one object (magics)
            env = args[-1] if self._in_cell and args else None
            ck = call_key(args[:-1] if env is not None else args, kwargs)   # None: tracers, objects
            if ck is not None:
                guard_key, gleaves = ck
                entry = self._guarded.lookup(guard_key, env, gleaves)
                if entry is not None:         # the guards hold: run the program, no tracing
                    self.stats["cache_hits"] += 1
                    self.stats["replays"] = self.stats.get("replays", 0) + 1
                    self.last_undo = None
                    out = entry.run(self, args, kwargs, gleaves)
                    if not entry.reported:
                        self._cold_replay = True
                        self._note_replay(entry)
                    return out
                recorder = self._guarded.recorder()
                if recorder is not None and env is None:   # a training step's guard, before the call
                    step_snap = train_step.Snapshot(self.fn, gleaves)
        if self.before_trace is not None:      # no replay: the function's Python runs from here on
            self.before_trace()                # (a %%compile cell's short replay path stops here)
        if active_trace() is not None or any(isinstance(x, Tensor) and x._node is not None
                                             for _, x in array_leaves((args, kwargs), "", [])):
            note_inline(self)      # (in a loop with a graph break each round: the trace gives up)
            return self.fn(*args, **kwargs)   # called while another function is traced: inline it
        handler = foreign.handler_for(args, kwargs)   # inputs a package above runs (Dask: daskbridge/)
        if handler is not None:
            return handler(self, args, kwargs)
        t0 = time.perf_counter()
        replay_key = snap = None
        if self.mode == "reduce-overhead":
            replay_key, leaves, snap = self._replay_key(args, kwargs)
            rp = self._replays.get(replay_key) if replay_key is not None else None
            reads = getattr(rp, "reads", None)         # (training steps keep their own guard)
            failed = reads.failing() if reads is not None else None
            # (the key holds no strides: a view-or-copy decision that read them guards them)
            moved = layout_failure(rp.layouts, leaves) if getattr(rp, "layouts", ()) else None
            if failed is not None or moved is not None:   # a read or a layout changed: trace again
                del self._replays[replay_key]
                self._guarded.last_guard_failure = moved or f"guard failed: `{failed.desc}` changed"
            elif rp is not None:
                self.stats["cache_hits"] += 1
                self.stats["replays"] = self.stats.get("replays", 0) + 1
                return rp.run(leaves)
            if replay_key is not None:
                recorder = ReadRecorder()
        session = TraceSession(self, self.fullgraph)
        session.max_breaks = None if self.fullgraph else config["max_graph_breaks"]
        session.t_start = t0
        # (set by the caller that knows what the plain code costs: a %%compile cell's decision)
        session.deadline = t0 + self.trace_budget if self.trace_budget else None
        self.last_undo = None
        session.events = []
        names = self._arg_names(args, kwargs)
        session.names.update(self.param_names())   # id(parameter) -> "fc1.weight"
        leaves, leaf_index = {}, {}

        def to_tracer(x):
            key = id(x)
            if key in leaves:
                return leaves[key]
            t = asarray(x) if isinstance(x, np.ndarray) else x
            leaf_index[id(t)] = len(leaf_index)
            tr = session.input(t, names.get(key, f"arg{len(leaves)}"))
            marked = _marked_dims(x)
            if marked:
                session.marked = getattr(session, "marked", {})
                session.marked[tr._node.index] = set(marked)
            leaves[key] = tr
            return tr

        targs = map_arrays(args, to_tracer)
        tkwargs = map_arrays(kwargs, to_tracer)
        prev = set_active_trace(session.graph_proxy)
        heap.freeze()                 # (full collections walk only what the trace makes: heap.py)
        kinds = {isinstance(x, np.ndarray) for _, x in array_leaves((args, kwargs), "", [])}
        # NumPy arrays handed in: the plain function runs NumPy, whose methods mean what
        # ndarray's do (a.repeat(2), a.transpose(0, 1), a.view(dtype)), as in a cell
        numpy_methods = ndarray_methods.numpy_code() if True in kinds and not self._in_cell \
            else contextlib.nullcontext()
        try:
            with numpy_identity.installed(), numpy_methods, \
                    recorder if recorder is not None else contextlib.nullcontext():
                out = self.fn(*targs, **tkwargs)        # (np.asarray(tracer) is the tracer)
            final = [t for _, t in array_leaves(out, "out", []) if isinstance(t, Tensor)]
            session.flush(final=final)
            session.check_raw_writes()          # (a %%compile cell's untraced views: give_up.py)
            session.share_views(final)          # (nb.from_numpy's tensors: views.py)
        except BaseException as exc:
            set_active_trace(prev)
            self.last_undo = session.undo
            self._settle_failed(session, exc)
            if isinstance(exc, TraceTooCostly) and not self._in_cell:
                session.undo()
                self.eager_only = True
                warnings.warn(f"nbaccel: {self.name}: {exc}", RuntimeWarning, stacklevel=2)
                return self.fn(*args, **kwargs)
            raise
        finally:
            set_active_trace(prev)
            heap.thaw()
        self.stats["graph_breaks"] += len(session.breaks)
        # None: each value follows its flavour (a cell). A function with no array argument hands
        # back what its plain code returns: Tensors, also from NumPy data (closure tensors)
        numpy_out = None if self._in_cell else True if kinds == {True} else False
        if replay_key is not None:
            rp = record(session, leaf_index, out, numpy_out, replay_key)
            if rp is None:       # a training step (in-place updates, backward inside)
                rp = train_step.record_step(self, session, leaf_index, out, numpy_out, replay_key, snap)
            else:                # a pure function: guards on its reads where they can be had
                rp.reads = self._guarded.reads_of(recorder, session)
            if rp is not None:
                rp.layouts = layout_guard(session, leaf_index)
                self._replays[replay_key] = rp
        if guard_key is not None:
            self._guarded.record(guard_key, recorder, session, leaf_index, out, numpy_out,
                                 {id(t) for t in leaves.values()}, env, step_snap)
        result = map_arrays(out, lambda t: to_output(session, t, numpy_out))
        session.close()
        self._finish_report(session, time.perf_counter() - t0)
        return result

    def _note_replay(self, entry):
        """A replayed call: the report keeps the trace's kernels and gains the replay's state
        and, once both sides were timed, the headline against the plain function."""
        rep = self._report
        if rep is None:
            return
        entry.reported = True
        rep.cache = "hit"
        rep.replay = self._guarded.state(entry)

    @staticmethod
    def _settle_failed(session, exc):
        """The call raised: the values computed so far still happen (as in the plain function:
        in-place updates done before the error stay done, names bound before it hold values)."""
        if isinstance(exc, (TraceTooCostly, KeyboardInterrupt)):
            return
        try:
            session.flush()
        except Exception:   # the pending graph itself fails: nothing more can be realised
            return
        session.close()

    def _replay_key(self, args, kwargs):
        scalars = scalar_args(args, kwargs)
        if scalars is None:
            return None, None, None
        leaves = [x for _, x in array_leaves((args, kwargs), "", [])]
        if len({id(x) for x in leaves}) != len(leaves):
            return None, None, None   # the same array passed twice: trace to keep aliasing right
        # the modules, optimizers and tensors the function names are guarded too (train_step.py)
        snap = train_step.Snapshot(self.fn, leaves)
        return metadata_key(leaves, scalars) + snap.key, leaves, snap

    def _arg_names(self, args, kwargs):
        names = {}
        pairs = []
        if self._sig is not None:
            try:
                bound = self._sig.bind(*args, **kwargs)
                for k, v in bound.arguments.items():
                    array_leaves(v, k, pairs)
            except TypeError:
                pass
        if not pairs:
            for i, a in enumerate(args):
                array_leaves(a, f"arg{i}", pairs)
            for k, v in kwargs.items():
                array_leaves(v, k, pairs)
        for n, leaf in pairs:
            names.setdefault(id(leaf), n)
        return names

    # engine protocol: the session calls these for each graph segment --------------------------
    def run_segment(self, session, graph, live):
        return self.cache.run(session, graph, live)

    def link_autograd(self, session, graph, live, concrete):
        self.cache.link_autograd(session, graph, live, concrete)

    # -- reports -----------------------------------------------------------------------------------
    def _finish_report(self, session, total):
        events = session.events
        rep = CompileReport(name=self.name, backend=self.backend, mode=self.mode)
        rep.graphs = len(events)
        rep.graph_breaks = [dict(b) for b in session.breaks]
        if events:
            rep.cache = "hit" if all(e["cache"] == "hit" for e in events) else \
                "disk" if all(e["cache"] in ("hit", "disk") for e in events) else "miss"
            rep.tier = "numba" if all(e["tier"] == "numba" for e in events) else events[-1]["tier"]
            if any(e["pending"] for e in events):
                rep.pending_tier = "numba"
            br = {k: sum(e["breakdown"][k] for e in events) for k in rep.compile_breakdown}
            rep.set_breakdowns(br, jit_split.total(e.get("jit_split") for e in events)
                               if any(e.get("jit_split") for e in events) else None)
            ests = [e.get("eager_estimate") for e in events]
            rep.eager_estimate_seconds = sum(ests) if all(x is not None for x in ests) else None
            rep.path, rep.path_reason = cheap_path.report_path(events)
            rep.compile_seconds = sum(br.values())   # capture (re-tracing) is paid on hits too
            rep.compiled_seconds = sum(e["seconds"] for e in events)
            rep.kernels = [k for e in events for k in e["kernels"]]
            rep.refused_fusions = [r for e in events for r in e["refused"]]
            rep._text_thunks = [(e["graph"], e["code"]) for e in events]   # rendered when read
            rep.device = events[-1]["device"]
            # the eager baseline is measured when the report is first read, never on the call
            rep._eager_thunks = [e["eager"] for e in events]
        rep.recompiles = [dict(r) for r in self.cache.recompile_log]
        rep.replay = self._guarded.state(None) if self.mode == "default" else {}
        rep.dynamic_dims = self.cache.dynamic_dim_names()
        self.history.append({"compiled_seconds": rep.compiled_seconds, "eager_seconds": rep.eager_seconds,
                             "cache": rep.cache, "tier": rep.tier})
        self.history = self.history[-config["history"]:]
        rep.history = list(self.history)
        rep.stats = dict(self.stats)
        rep.cache_problem = cache.problem() if self.backend in ("auto", "numba") else None
        rep.call_seconds = total
        if self._first_call_seconds is None:
            self._first_call_seconds = total
        rep.first_call_seconds = self._first_call_seconds
        self._report = rep

    @property
    def report(self) -> CompileReport | None:
        """The latest call's CompileReport (its eager baseline is measured on first access)."""
        rep = self._report
        if rep is not None:
            rep.stats = dict(self.stats)       # replayed calls since the trace count too
            rep.tier_arrived(self.pending())
            d = getattr(self, "_last_decision", None)
            if d is not None:                  # the headline: against the plain function
                rep.set_verdict(d.verdict())
            rep.measure_eager()
        return rep

    # -- conveniences --------------------------------------------------------------------------------
    def pending(self) -> bool:
        """Whether a background numba compile of one of its graphs is still running."""
        return self.cache.pending() or any(p.pending() for p in self._replay_programs())

    def _replay_programs(self):
        """The programs replays run that the graph cache does not hold (a training step's)."""
        progs = self._guarded.programs() + [getattr(r, "prog", None) for r in self._replays.values()]
        return [p for p in progs if p is not None and hasattr(p, "pending")]

    def jit_seconds(self) -> float:
        """numba/Triton compile seconds of every graph so far (background compiles included)."""
        return self.cache.jit_seconds()

    def wait(self, timeout=None):
        """Wait for background numba compiles of every graph this function compiled."""
        self.cache.wait(timeout)
        for p in self._replay_programs():
            p.wait(timeout)
        return self

    def reset(self):
        self._replays = {}
        self._decisions: dict = {}     # argument signature -> Decision (plain or compiled)
        self._last_decision = None
        self._guarded = GuardedReplays(self)
        self.cache = GraphCache(self)
        self.stats = Stats()
        self._report = None
        self.history = []
        self.eager_only = False
        self._first_call_seconds = None

    def _target_fn(self):
        return self.fn

    def __get__(self, obj, objtype=None):   # compiled methods
        if obj is None:
            return self
        return functools.partial(self, obj)

    def __repr__(self):
        return f"<nbaccel compiled {self.name} (backend={self.backend}, mode={self.mode})>"


def compile(fn=None, *, mode="default", backend="auto", dynamic=None, fullgraph=False):  # noqa: A001
    """Compile a function or an ``nn.Module`` (like ``torch.compile``).

    Use as ``nb.compile(f)``, ``@nb.compile`` or ``@nb.compile(backend="numba")``.
    ``dynamic=None`` compiles static first and makes dims that change symbolic on the
    first shape-only recompile; ``True`` starts dynamic; ``False`` never does.
    """
    if fn is None:
        return lambda f: compile(f, mode=mode, backend=backend, dynamic=dynamic, fullgraph=fullgraph)
    if isinstance(fn, ParameterHolder):
        module = fn
        names = lambda: {id(p): n for n, p in module.named_parameters()}  # noqa: E731
        cf = CompiledFunction(module.forward, mode=mode, backend=backend, dynamic=dynamic,
                              fullgraph=fullgraph, name=type(module).__name__, param_names=names)
        return CompiledModule(module, cf)
    return CompiledFunction(fn, mode=mode, backend=backend, dynamic=dynamic, fullgraph=fullgraph)


def reset():
    """Forget every compiled graph of every compiled function (the disk cache stays)."""
    for f in list(_all_functions):
        f.reset()


def explain(fn, *args, **kwargs):
    """Trace ``fn`` once and say what the compiler sees (like ``torch._dynamo.explain``)."""
    target = fn._compiled.fn if isinstance(fn, CompiledModule) else fn.fn if isinstance(fn, CompiledFunction) else fn
    cf = CompiledFunction(target, backend="numpy")
    cf(*args, **kwargs)
    rep = cf.report
    graphs = rep.graph.split("\n\n") if rep.graph else []
    return {"graph_count": rep.graphs, "graph_break_count": len(rep.graph_breaks),
            "op_count": sum(1 for g in graphs for line in g.splitlines() if " = " in line),
            "break_reasons": rep.graph_breaks, "graphs": graphs,
            "kernels": rep.kernels, "report": rep}
