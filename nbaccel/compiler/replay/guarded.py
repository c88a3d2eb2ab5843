"""Guarded replay, the default for ``nb.compile``: trace once, then check guards and replay.

A call is keyed by its arguments' structure and metadata (:func:`call_key`: types, shapes,
dtypes, strides, devices, ``requires_grad``, the values of Python and NumPy scalars). The
first call with a key traces as always, under a
:class:`~nbaccel.compiler.replay.readset.ReadRecorder`; if the trace was one graph with no
break, no in-place update of an input, no backward and no random draw, and every read of the
code could be guarded (:mod:`readset`), the call's program is recorded as a
:class:`ReplayEntry`. A later call with the same key checks the entry's guards and runs the
program directly: no Python of the user's function runs.

Whether a call runs plain or compiled at all is the function's decision (decision.py), made
in ``CompiledFunction.__call__`` per argument signature: a replay is one of its compiled runs.
"""
from __future__ import annotations

import numpy as np

from ... import autograd
from ...tensor import Tensor
from .read_recorder import ReadRecorder
from .readset import Unguardable, analyse, describe, guard_array_values
from .entries import compile_for_outputs
from .replay import record, scalar_part
from . import train_step   # Snapshot: the modules and optimizers a step reaches
from ..schedule.views import layout_class

MAX_ENTRIES = 32        # replay entries kept per function (one per argument signature)
ATTEMPTS = 3            # traces that may fail to record before the function stops trying


class NotReplayable(Exception):
    pass


def call_key(args, kwargs):
    """(key, array leaves) of a call, or None when an argument is not plain data."""
    if not kwargs and all(type(a) is np.ndarray for a in args):
        # the common call, NumPy arrays only: a cheaper key of the same facts
        if len(set(map(id, args))) != len(args):
            return None
        return (autograd.is_grad_enabled(),) + tuple([(a.shape, a.dtype, a.strides) for a in args]), list(args)
    leaves, parts = [], [autograd.is_grad_enabled()]

    def walk(o):
        t = type(o)
        if t is np.ndarray:
            leaves.append(o)
            parts.append((t, o.shape, o.dtype, o.strides))
        elif t is Tensor or isinstance(o, Tensor):
            if o._node is not None:
                raise NotReplayable
            leaves.append(o)
            parts.append((t, o.shape, o.dtype, o.device, o.requires_grad, o._np))
        elif t is tuple or t is list:
            parts.append((t, len(o)))
            for x in o:
                walk(x)
        elif t is dict:
            parts.append((t, tuple(o)))
            for x in o.values():
                walk(x)
        elif o is None or t is bool or t is int or t is str:
            parts.append((t, o))
        elif t is float or t is complex or isinstance(o, np.generic) and o.dtype.kind in "biufc":
            # a NumPy scalar: its type is its dtype, so a np.float32 never shares a replay with a
            # np.float64 or a Python float (NumPy promotes each differently); its value, as a
            # Python scalar's (the trace makes it a constant of the graph), and a zero's sign
            parts.append(scalar_part(o))
        else:
            raise NotReplayable
    try:
        walk(args)
        parts.append("|")
        walk(kwargs)
    except (NotReplayable, TypeError):     # TypeError: an unhashable part
        return None
    if len({id(x) for x in leaves}) != len(leaves):
        return None        # one array passed twice: tracing keeps the aliasing right
    return tuple(parts), leaves


def layout_guard(session, leaf_index) -> tuple:
    """The layouts a trace's view-or-copy decisions read (schedule/views.py: a reshape is a
    view only where the strides allow one), as ((leaf index, strides, class, name), ...): a
    replay for other strides of one of these inputs would reuse a decision NumPy makes
    otherwise, so it traces again. Empty where no decision read a layout (the usual call)."""
    reads = getattr(session, "layout_reads", None)
    if not reads:
        return ()
    out = []
    for src_id, (name, strides, cls) in reads.items():
        i = leaf_index.get(src_id)
        if i is not None:               # (a global array's strides are guarded by readset)
            out.append((i, strides, cls, name))
    return tuple(out)


def layout_failure(layouts, leaves):
    """Why these leaves' layouts are not the ones a decision read, or None (a few tuple
    compares, only for a program whose decisions read a layout)."""
    for i, strides, cls, name in layouts:
        x = leaves[i]
        a = x if type(x) is np.ndarray else x._data
        if a.strides != strides:
            return (f"guard failed: `{name}`'s layout is now {layout_class(a)} (strides {a.strides}, "
                    f"was {cls} {strides}): NumPy's reshape of it is a view or a copy by its strides")
    return None


class ReplayEntry:
    """One recorded program with its guards, and the plain-or-compiled measurement."""

    def __init__(self, replay, reads, snapshot, numpy_io):
        self.replay = replay
        self.reads = reads
        # the nn.Modules / Optimizers reached (train_step.Snapshot): the objects are fixed (the
        # read guards hold them), their parameters, buffers and flags are keyed on every call
        self.snapshot = snapshot
        self.numpy_io = numpy_io                # NumPy in, NumPy out
        self.reported = False                   # the report shows this entry's replay state
        self.layouts = ()                       # layout_guard: the strides a decision read

    def failing_guard(self, env=None, leaves=None):
        if self.layouts and leaves is not None:
            why = layout_failure(self.layouts, leaves)
            if why is not None:
                return why
        g = self.reads.failing(env)
        if g is not None:
            return f"guard failed: `{g.desc}` is now {describe(g.value())}"
        if self.snapshot is not None and self.snapshot.state_key() != self.snapshot.key:
            return ("guard failed: a module's parameters, buffers or training flag changed (or an "
                    "optimizer's state, or which gradients exist)")
        return None

    def run(self, cf, args, kwargs, leaves):
        before = self.replay.fell_back
        out = self.replay.run(leaves)
        if self.replay.fell_back is not before:   # its program failed (replay.run_program):
            cf.stats["eager_fallbacks"] += 1     # it replays eagerly now, and the report says so
            self.reported = False
        return out


class GuardedReplays:
    """The replay entries of one compiled function and why it re-traces, when it does."""

    def __init__(self, cf):
        self.cf = cf
        self.entries: dict[tuple, ReplayEntry] = {}
        self.refusal: str | None = None     # why calls re-trace (None: they replay)
        self.failures = 0
        self.last_guard_failure: str | None = None

    @property
    def active(self) -> bool:
        return self.failures < ATTEMPTS

    def lookup(self, key, env=None, leaves=None):
        """The entry to replay for this call, or None (then the call traces). ``env``: a
        %%compile cell's inputs object (its values are guarded too); ``leaves``: the call's
        arrays (a decision that read their strides guards them)."""
        entry = self.entries.get(key)
        if entry is None:
            return entry
        why = entry.failing_guard(env, leaves)
        if why is not None:
            del self.entries[key]
            self.last_guard_failure = why
            return None
        return entry

    def _analyse(self, recorder, session, env=None):
        reads = analyse(self.cf.fn, recorder, env)
        buffers = set()
        for src in session.last_run[2].sources:
            a = getattr(src, "_data", None)
            buffers.update((id(a), id(getattr(a, "base", None))))
        guard_array_values(reads, buffers, recorder.array_calls)
        return reads

    def reads_of(self, recorder, session):
        """``mode="reduce-overhead"``: the guards of a pure function's reads, or None where its
        reads cannot be guarded (it then replays on input metadata alone, as declared)."""
        if recorder is None or getattr(session, "last_run", None) is None:
            return None
        try:
            return self._analyse(recorder, session)
        except Unguardable:
            return None

    def state(self, entry=None) -> dict:
        """What the report shows about replay: its state and why."""
        if entry is not None and entry.replay.fell_back:
            return {"state": "replayed", "reason": "replayed on guards, eagerly: its compiled program "
                    f"failed at run time ({entry.replay.fell_back})", "guards": len(entry.reads.guards),
                    "last_guard_failure": self.last_guard_failure}
        if entry is not None:
            return {"state": "replayed", "reason": "replayed on guards: no Python of the function runs",
                    "guards": len(entry.reads.guards), "last_guard_failure": self.last_guard_failure}
        if self.refusal:
            return {"state": "re-traces", "reason": f"re-traces every call: {self.refusal}",
                    "guards": 0, "last_guard_failure": self.last_guard_failure}
        return {"state": "traced", "reason": self.last_guard_failure or "traced: first call with these argument types",
                "guards": 0, "last_guard_failure": self.last_guard_failure}

    def programs(self):
        """The programs the entries replay (a step's is its own, built beside the trace's)."""
        return [e.replay.prog for e in self.entries.values() if getattr(e.replay, "prog", None) is not None]

    def recorder(self):
        return ReadRecorder() if self.active else None

    def record(self, key, recorder, session, leaf_index, out, numpy_out, input_tracers=(), env=None,
               snap=None):
        """After a traced call: keep its program for replay, or say why it cannot replay.
        ``snap``: the train_step.Snapshot taken before the call (a training step's guard)."""
        why = None
        rp = None
        if recorder is None:
            return
        if session.breaks:
            why = f"its trace has {len(session.breaks)} graph break(s)"
        elif getattr(session, "value_reads", None):
            why = value_read_reason(session)
        elif getattr(session, "no_replay", None):
            why = session.no_replay
        elif snap is not None and env is None and _is_training_step(session, snap):
            # a training step: its Python reads are guarded as a function's are, and its modules'
            # and optimizers' state by the snapshot's key, taken before the call (train_step.py)
            try:
                rp = train_step.build_step(self.cf, session, leaf_index, out, numpy_out, key, snap)
                reads = self._analyse(recorder, session, env)
                missed = snap.covers(reads.modules)
                if missed is not None:
                    raise Unguardable(f"reaches a {type(missed).__name__} through an attribute "
                                      "chain, whose state its guard does not follow")
            except (train_step.NotRecorded, Unguardable) as e:
                why, rp = str(e), None
            else:
                self._keep(key, ReplayEntry(rp, reads, snap, False), session, leaf_index)
                return
        elif getattr(session, "writes", None) or session.concrete_targets or \
                any(id(t) in input_tracers for t in session.assigned.values()):
            why = "it updates an input, a global or a closure's array in place"
        elif getattr(session, "had_backward", False) or session.grad_escapes or \
                getattr(session, "grad_writes", None):
            why = "it records autograd history (its gradients escape the step)"
        else:
            rp = record(session, leaf_index, out, numpy_out, key, local_writes_ok=True,
                        prune=lambda g, outs: compile_for_outputs(self.cf, g, outs))
            if rp is None:
                why = "its result cannot be rebuilt from the compiled program's outputs"
        if rp is not None:
            try:
                reads = self._analyse(recorder, session, env)
            except Unguardable as e:
                why, rp = str(e), None
        if rp is None:
            self.failures += 1
            self.refusal = why
            return
        snap = None
        if reads.modules:
            snap = train_step.Snapshot(self.cf.fn)
        # a cell's plain run is the magic's business (plain_runs.py): no plain probes here
        self._keep(key, ReplayEntry(rp, reads, snap, numpy_out is True and env is None), session, leaf_index)

    def _keep(self, key, entry, session, leaf_index):
        if len(self.entries) >= MAX_ENTRIES:
            self.entries.pop(next(iter(self.entries)))
        self.entries[key] = entry
        entry.layouts = layout_guard(session, leaf_index)
        self.refusal = None
        self.failures = 0


def value_read_reason(session) -> str:
    """Why a trace that read an input's value into Python never replays."""
    return (f"it reads a tensor's value into Python ({session.value_reads[0] or 'a concrete value'}): "
            "what it computes from that value is a constant of the graph")


def _is_training_step(session, snap) -> bool:
    """Whether a trace is a training step: it set gradients (backward inside) or updated in
    place a tensor of a module or optimizer it reaches (parameters, buffers, optimizer state)."""
    if getattr(session, "grad_writes", None):
        return True
    owned = {id(t) for t in snap.owned_tensors()}
    return any(id(target) in owned for _, target in getattr(session, "writes", ()))

