"""The per-function graph cache: guards → entry → program, recompiles and the eager fallback."""
from __future__ import annotations

import time
import warnings

import numpy as np

from ... import autograd
from ... import dtypes as D
from ...tensor import Tensor
from . import cheap_path
from ..runtime import fpflags
from ..capture.aot import derive_backward
from ..capture.decompose import decompose
from .guards import all_dims, dynamic_spec, explain_miss, shape_only_diff, similarity
from ..runtime.runtime import EagerProgram, Program, interpret
from ..config import config
from ..capture.capture import user_frame
from ...gpu.placement import graph_device, label_kernels


def _program_class(backend):
    if backend == "triton":
        # lazy: Triton's tier and renderer stay out of %load_ext
        from ..runtime.triton_runtime import TritonProgram
        return TritonProgram
    return Program


class Entry:
    """One compiled graph (a cache entry): programs for each concrete shape signature."""

    def __init__(self, cf, graph, dyn, kind):
        self.cf = cf
        self.kind = kind
        self.structure = graph.structure(dyn or {})   # dynamic dims as symbols: reasons skip them
        self.dyn = dyn or {}
        self.programs: dict[tuple, Program] = {}
        self.constants: dict[tuple, list] = {}
        self.eager_seconds = None
        self._eager_args = None
        self._timings = None
        self.layouts: dict = {}     # {input name: layout class} its view decisions read

    def program(self, graph):
        sig = tuple(p.shape for p in graph.placeholders)
        prog = self.programs.get(sig)
        fresh = prog is None
        if fresh:
            t0 = time.perf_counter()
            stage = "decompose"
            try:
                cheap, est, why = cheap_path.graph_choice(self.cf, graph)
                if cheap:       # small: one NumPy function, no kernels (cheap_path.py)
                    prog, consts = cheap_path.CheapProgram(graph, est, why), []
                else:
                    prim = decompose(graph)
                    lowering = time.perf_counter() - t0
                    stage = "schedule/codegen"
                    prog = _program_class(self.cf.backend)(prim, self.cf.backend, self.cf.mode, dynamic=bool(self.dyn))
                    prog.lowering_seconds = lowering
                    n0 = len(graph.placeholders)
                    consts = [prim.constants[i] for i in range(n0, len(prim.placeholders))]
                prog.eager_estimate, prog.path_reason = est, why
            except Exception as e:
                prog, consts = self.compiler_error(graph, e, stage), []
            prog.captured_text = str(graph)
            self.constants[sig] = consts
            self.programs[sig] = prog
        return prog, self.constants[sig], fresh

    def compiler_error(self, graph, exc, stage):
        """Compiling this graph failed: it runs eagerly (or raises, for tests and bug reports)."""
        if config.get("strict"):
            raise exc
        return EagerProgram(graph, f"{type(exc).__name__}: {exc}", stage)

    def run_program(self, graph, prog, arrays):
        """Run a compiled program; if it raises where the reference interpreter does not, the
        fault is ours: the graph runs eagerly from now on and the report says why."""
        try:
            return prog.run(arrays)
        except Exception as e:
            if isinstance(prog, EagerProgram):
                raise
            out = interpret(graph, arrays)      # raises the user's error if the graph has one
            if config.get("strict"):
                raise
            sig = tuple(p.shape for p in graph.placeholders)
            eager = EagerProgram(graph, f"{type(e).__name__}: {e}", "run")
            eager.captured_text = getattr(prog, "captured_text", "")
            self.programs[sig] = eager
            self.constants[sig] = []
            return out

    def eager(self, graph, inputs):
        """Time the captured graph op by op through the reference interpreter (once)."""
        if self.eager_seconds is None:
            t0 = time.perf_counter()
            interpret(graph, inputs)
            self.eager_seconds = time.perf_counter() - t0
        return self.eager_seconds

    def timings(self, graph, inputs, prog, consts):
        """(eager runs, compiled runs): both timed the same way, warm, several runs each
        (as %timeit does), once per entry. Each list is sorted, best first."""
        # per input shapes: a dynamic entry serves every size, and each size has its own times
        sig = tuple(tuple(getattr(a, "shape", ())) for a in inputs)
        if self._timings is None:
            self._timings = {}
        if sig not in self._timings:
            with np.errstate(all="ignore"):     # measuring: the cell's warnings were issued
                eager = _runs(lambda: interpret(graph, inputs))
                compiled = _runs(lambda: prog.run(inputs + consts))
            self.eager_seconds = eager[0]
            self._timings[sig] = (eager, compiled)
        return self._timings[sig]


def _runs(fn, budget=0.02, most=7):
    """Sorted wall times of ``fn``: a warm-up run, then repeats within ``budget`` seconds."""
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    if first > 5 * budget:
        return [first]
    times = []
    spent = 0.0
    while len(times) < most and (len(times) < 2 or spent < budget):
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        times.append(dt)
        spent += dt
    return sorted(times)


def compile_for_outputs(cf, graph, outputs):
    """(program, constants) for ``graph`` computing only ``outputs``, or None when that
    program could not be built (then the full one is used)."""
    import copy
    g = copy.copy(graph)
    g.outputs = list(outputs)
    entry = Entry(cf, g, None, "fwd")
    prog, consts, _ = entry.program(g)
    return None if isinstance(prog, EagerProgram) else (prog, consts)


class GraphCache:
    def __init__(self, cf):
        self.cf = cf
        self.entries: dict[str, Entry] = {}
        self.by_slot: dict[tuple, list[Entry]] = {}
        self.dyn_dims: dict[tuple, dict[int, set]] = {}
        self.recompile_log: list[dict] = []
        self.specs: dict[int, list] = {}
        self.names: dict[tuple, list] = {}

    # -- lookup ------------------------------------------------------------------------------------
    def lookup(self, graph, slot, marked=None):
        """(entry, event, reason): event is 'hit', 'miss' (first compile) or 'recompile'."""
        key = graph.fingerprint({}, slot)
        try:
            entry = self.entries.get(key)
        except TypeError:       # a param that is not hashable: fall back to its text form
            key = graph.digest({}, slot)
            entry = self.entries.get(key)
        if entry is not None:
            return entry, "hit", None
        dims = self.dyn_dims.get(slot)
        if self.cf.dynamic is True:
            dims = all_dims(graph)
        elif marked:
            dims = {pi: set(ds) for pi, ds in (dims or {}).items()}
            for pi, ds in marked.items():
                dims.setdefault(pi, set()).update(ds)
        spec = dynamic_spec(graph, dims) if dims else None
        if spec:
            entry = self.entries.get(graph.fingerprint(spec, slot))
            if entry is not None:
                return entry, "hit", None
        previous = self.by_slot.get(slot, [])
        reason = None
        event = "miss"
        if previous:
            event = "recompile"
            # the closest earlier entry (the most recent one among equals) explains the miss
            closest = max(reversed(previous), key=lambda e: similarity(graph, e.structure))
            reason = explain_miss(graph, closest.structure, None)
            if self.cf.dynamic is None and not spec:
                new = shape_only_diff(graph, closest.structure)
                if new:
                    merged = self.dyn_dims.setdefault(slot, {})
                    for pi, ds in new.items():
                        merged.setdefault(pi, set()).update(ds)
                    spec = dynamic_spec(graph, merged)
                    names = [f"{graph.placeholders[pi].name}.shape[{d}]" for pi, ds in sorted(new.items())
                             for d in sorted(ds)]
                    reason += f" ({', '.join(names)} now dynamic)"
        if spec and event == "miss":
            # dims made dynamic up front (dynamic=True, mark_dynamic) stay dynamic for later
            # calls, whose arrays are not marked, and show in the report
            merged = self.dyn_dims.setdefault(slot, {})
            for pi, ds in spec.items():
                merged.setdefault(pi, set()).update(ds)
        entry = Entry(self.cf, graph, spec, slot[0])
        self.entries[graph.fingerprint(spec or {}, slot)] = entry
        self.by_slot.setdefault(slot, []).append(entry)
        self.names[slot] = [p.name for p in graph.placeholders]
        return entry, event, reason

    def dynamic_dim_names(self):
        out = []
        for slot, dims in self.dyn_dims.items():
            names = self.names.get(slot, [])
            for pi, ds in sorted(dims.items()):
                for d in sorted(ds):
                    nm = names[pi] if pi < len(names) else f"in{pi}"
                    out.append(f"{nm}.shape[{d}]")
        return sorted(set(out))

    # -- running a traced segment --------------------------------------------------------------------
    def run(self, session, graph, live):
        t_capture = time.perf_counter() - getattr(session, "t_segment", session.t_start)
        specs = []
        if autograd.is_grad_enabled() and any(t.requires_grad for t in live):
            specs = derive_backward(session, graph, live)
        # which inputs require grad needs no place in the key: it decides the backward graph,
        # whose saved values are outputs of this graph, so the structure already differs
        slot = ("fwd", session.segment_index)
        cf = self.cf
        limit = cf.recompile_limit or _limit()
        entry, event, reason = self.lookup(graph, slot, getattr(session, "marked", None))
        inputs = [s._data for s in graph.sources]
        if event != "hit":
            entry.layouts = _layouts(session)
            if event == "recompile":
                reason = _layout_reason(self.by_slot[slot][:-1], entry.layouts, reason)
        if event == "recompile":
            cf.stats["recompiles"] += 1
            self.recompile_log.append({"reason": reason, "dynamic_dims": self.dynamic_dim_names()})
            if cf.stats["compiles"] >= limit:
                _warn_limit(cf, reason)
                cf.eager_only = True
                cf.stats["eager_fallbacks"] += 1
                self.specs[id(graph)] = specs
                out = fpflags.run(graph, inputs, lambda: interpret(graph, inputs), None,
                                  getattr(session, "fp_entry", None))
                session.events.append(_event("miss", "eager", graph, None, 0.0, 0.0, lambda: None))
                return out
        if event == "hit":
            cf.stats["cache_hits"] += 1
        else:
            cf.stats["compiles"] += 1
        prog, consts, fresh = entry.program(graph)
        # NumPy's floating-point warnings for the user's ops, never the kernels' (fpflags.py)
        arrays = fpflags.run(graph, inputs, (lambda: entry.run_program(graph, prog, inputs + consts))
                             if not isinstance(prog, EagerProgram) else (lambda: prog.run(inputs)), prog,
                             getattr(session, "fp_entry", None))
        self.specs[id(graph)] = specs
        # a program that failed while running was replaced by the eager one: never replay it
        sig = tuple(p.shape for p in graph.placeholders)
        session.last_run = (prog, consts, graph) if entry.programs.get(sig) is prog else None
        session.had_backward = session.had_backward or bool(specs)
        # a new size inside a dynamic entry only re-schedules: its kernels are reused (a hit)
        cache_state = "hit" if event == "hit" and (not fresh or entry.dyn) else (prog.cache_state() or "miss")
        breakdown = {"capture": t_capture, "lowering": getattr(prog, "lowering_seconds", 0.0) if fresh else 0.0,
                     "codegen": prog.codegen_seconds if fresh else 0.0,
                     "jit": prog.jit_total() if fresh and not prog.pending() else 0.0}
        ev = _event(cache_state, prog.tier(), graph, prog, prog.last_seconds, 0.0,
                    lambda: entry.timings(graph, inputs, prog, consts), breakdown)
        ev["eager_estimate"] = getattr(prog, "eager_estimate", None)
        ev["path_reason"] = getattr(prog, "path_reason", None)
        if breakdown["jit"] and hasattr(prog, "jit_split"):
            ev["jit_split"] = prog.jit_split()       # the report's jit_breakdown (jit_split.py)
        session.events.append(ev)
        session.t_segment = time.perf_counter()
        return arrays

    def link_autograd(self, session, graph, live, concrete):
        specs = self.specs.pop(id(graph), [])
        for spec in specs:
            out = concrete.get(id(spec.output._node))
            if out is None:
                continue
            saved = [_saved_value(concrete, graph, n) for n in spec.recorder.saved]
            sources = [graph.sources[i] for i in spec.targets]
            runner = _BackwardRunner(self, spec, saved, session.segment_index)
            autograd.attach_custom(out, sources, runner, "compiled")

    def wait(self, timeout=None):
        for e in self.entries.values():
            for p in e.programs.values():
                p.wait(timeout)

    def pending(self) -> bool:
        """Whether a faster tier of any program is still compiling in the background."""
        return any(p.pending() for e in self.entries.values() for p in e.programs.values())

    def jit_seconds(self) -> float:
        """Seconds spent turning generated source into machine code (numba, Triton) so far,
        background compiles included: what a compile cost besides tracing and codegen."""
        return sum(p.jit_total() for e in self.entries.values() for p in e.programs.values())


def _layouts(session) -> dict:
    """{input name: layout class} that this trace's view-or-copy decisions read (views.py)."""
    return {name: cls for name, _, cls in getattr(session, "layout_reads", {}).values()}


def _layout_reason(previous, layouts, reason):
    """A recompile whose input changed layout says so first: the graph differs because a
    reshape of it became a copy (or a view), which its shapes and dtypes do not show."""
    for old in reversed(previous):
        moved = [f"`{n}`'s layout: {old.layouts[n]} → {c}" for n, c in layouts.items()
                 if old.layouts.get(n, c) != c]
        if moved:
            return f"{', '.join(moved)} (NumPy's reshape of it is a view or a copy by its strides); {reason}"
    return reason


def _saved_value(concrete, graph, n):
    if n.is_placeholder:
        return graph.sources[n.index]._data
    return concrete[id(n)]._data


class _BackwardRunner:
    """The grad_fn body of a compiled output: runs the compiled backward graph."""

    def __init__(self, cache, spec, saved, segment):
        self.cache = cache
        self.spec = spec
        self.saved = saved
        self.segment = segment
        self.out_index = spec.output._node.index   # (tracers become concrete after the call)

    def __call__(self, g):
        grad = g._value("backward of a compiled graph needs the incoming gradient")
        rec = self.spec.recorder
        slot = ("bwd", self.segment, self.out_index)
        entry, event, _ = self.cache.lookup(rec, slot)
        if event != "hit":
            self.cache.cf.stats["backward_compiles"] += 1
        prog, consts, _ = entry.program(rec)
        saved = iter(self.saved)
        inputs = [grad if p.index == 0 else rec.constants[p.index] if p.index in rec.constants else next(saved)
                  for p in rec.placeholders]
        outs = prog.run(inputs + consts)
        it = iter(outs)
        result = []
        for i, has in zip(self.spec.targets, self.spec.has_grad):
            if has:
                a = next(it)
                result.append(Tensor._wrap(a, D.dtype(a.dtype), g.device, g._np))
            else:
                result.append(None)
        return tuple(result)


def _event(cache, tier, graph, prog, seconds, _unused, eager, breakdown=None):
    device = graph_device(graph)      # 'cuda:0' kernels show it, and cuBLAS behind matmul
    return {"cache": cache, "tier": tier, "pending": bool(prog and prog.pending()),
            "breakdown": breakdown or {"capture": 0.0, "lowering": 0.0, "codegen": 0.0, "jit": 0.0},
            "seconds": seconds, "kernels": label_kernels(prog.kernels() if prog else [], device),
            "refused": list(prog.schedule.refused) if prog else [],
            "graph": graph.__str__, "code": prog.code if prog else str, "device": device, "eager": eager}


def _limit():
    return config["recompile_limit"]


def _warn_limit(cf, reason):
    msg = (f"nbaccel: {cf.name} recompiled {cf.stats['compiles']} times (limit "
           f"{cf.recompile_limit or config['recompile_limit']}); running it eagerly from now on. "
           f"Last reason: {reason}")
    # point at the user's code (the calling line, else the compiled function), not at nbaccel
    fn, line, _ = user_frame()
    code = getattr(cf.fn, "__code__", None)
    if not line and code is not None:
        fn, line = code.co_filename, code.co_firstlineno
    warnings.warn_explicit(msg, RuntimeWarning, fn, line or 1, module="nbaccel")
