"""The short path of a ``%%compile`` cell that replays (docs/cheap-path.md, "What a replayed
cell costs").

A cell whose last run replayed its compiled program (its guards held: no Python of the cell
ran) usually replays again, and everything the magic works out before the call is the same
as last time: the options, the cell's transform, its entry (which names are traced, which are
handed in), its decision, its placement, the per-element check. Each of those is a function
of the cell's text, the magic's settings and the *kinds* of the values the cell reads (an
array's type, shape and dtype; an int's value; a module itself), so a :class:`Plan` keeps
them, and one comparison, of the tuple of those kinds now against the tuple then, stands
for every check. Values of other kinds (functions, containers, objects, tensors) make no
plan: their checks look at more than their kind.

The call is then replay-only: the compiled function calls ``before_trace`` where it would
run the cell's Python (a guard failed), which stops the short path before anything ran. So
neither the safety net's snapshot, nor the capture of printed output, nor NumPy's method
meanings, nor the scan for untraced aliases is needed: a replay runs the program on the
inputs and writes only fresh outputs. A call that would trace, a decision that wants a plain
run, an exception of any kind: the short path has changed nothing the user can see, and the
full path (extension.py) runs the cell, looking the guards up again.
"""
from __future__ import annotations

import time
import types

import numpy as np

from . import cellfunc, run_result
from .cellrun import _fix_containers, _fix_qualname
from ..gpu import placement as gpu_placement

NOT_TAKEN = object()            # the short path did not run the cell: the full path does
_MISSING = object()


class _NoReplay(Exception):
    """The call would run the cell's Python (raised by ``before_trace``, before it does)."""


def _stop():
    raise _NoReplay


class _Unguarded(Exception):
    """A value whose checks look at more than its kind."""


_SCALARS = frozenset({float, complex, type(None)})


def _kind(v):
    """What about ``v`` the full path's checks read (``_entry``'s traced or handed-in choice,
    the decision's input signature, the per-element check, the CPU placement)."""
    t = type(v)
    if t is np.ndarray:
        return (t, v.shape, v.dtype)
    if t is int or t is bool:
        return (t, v)
    if t in _SCALARS or issubclass(t, np.generic):
        return t
    if t is str or t is bytes:
        return (t, len(v))
    if t is types.ModuleType or v is _MISSING:
        return v                # itself (the plan holds it: no other object can take its id)
    raise _Unguarded


class Plan:
    """What the runs of one cell text reuse while the kinds of its values stay the same."""

    __slots__ = ("config", "opts", "entry", "cf", "names", "kinds", "traced", "decision", "dkey",
                 "place", "outputs")

    def __init__(self, ext, opts, entry, decision, place, kinds):
        self.config = tuple(ext.config_.items())
        self.opts, self.entry, self.cf, self.place = opts, entry, entry.cf.built(), place
        self.names = cellfunc.read_names(entry)
        self.kinds = kinds
        self.traced = tuple(self.names.index(n) for n in entry.traced)
        self.decision = decision
        self.dkey = next((k for k, d in ext.decisions.items() if d is decision), None)
        self.outputs = tuple(sorted(entry.outputs - entry.shared))


def remember(ext, line, cell, opts, entry, decision, place):
    """After a run that replayed: keep what the next run of the same text may reuse."""
    if place.device != "cpu" or ext._verifying or \
            (opts.device != "cpu" and gpu_placement.gpu_available()[0]):
        return                  # (auto placement on a machine with a GPU looks at the values)
    ns = ext.shell.user_ns
    try:
        kinds = tuple(_kind(ns.get(n, _MISSING)) for n in cellfunc.read_names(entry))
    except _Unguarded:
        return
    plan = Plan(ext, opts, entry, decision, place, kinds)
    if plan.dkey is None:
        return
    if len(ext.plans) > 256:
        ext.plans.clear()
    ext.plans[(line, cell)] = plan


def run(ext, line, cell, t_enter):
    """The cell's run when it replays with the prelude of its last run, else NOT_TAKEN."""
    __tracebackhide__ = True  # noqa: F841
    plan = ext.plans.get((line, cell))
    if plan is None or ext.verify_all or ext._verifying:
        return NOT_TAKEN
    entry = plan.entry
    ns = ext.shell.user_ns
    vals = [ns.get(n, _MISSING) for n in plan.names]
    try:
        kinds = tuple(_kind(v) for v in vals)
    except _Unguarded:
        kinds = None
    decision = plan.decision
    if kinds != plan.kinds or plan.config != tuple(ext.config_.items()) \
            or ext.entries.get(entry.key) is not entry or entry.plain_reason is not None \
            or entry.probe is not None or ext.decisions.get(plan.dkey) is not decision:
        del ext.plans[(line, cell)]
        return NOT_TAKEN
    decision.last_used = time.perf_counter()
    if decision.next_path() != "compiled":      # (the full path asks again: the answer is the same)
        return NOT_TAKEN
    ext.last_fallback = None
    count = ext._cell_number()
    cf = plan.cf
    cf.name = cellfunc.cell_label(count, entry.src)
    args = [vals[i] for i in plan.traced]
    env = ext._env(entry, ns)
    cf.before_trace = _stop
    try:
        outs, value = cf(*args, env)
    except _NoReplay:
        cf.stats["calls"] -= 1                  # (the full path's call is this run's call)
        del ext.plans[(line, cell)]             # (it traces now: the full path remembers anew)
        return NOT_TAKEN
    except Exception:
        # nothing was written: the full path runs the cell (and says what went wrong, if the
        # error is the cell's own)
        cf.stats["calls"] -= 1
        del ext.plans[(line, cell)]
        return NOT_TAKEN
    finally:
        cf.before_trace = None
    return run_result.finish(ext, entry, plan.opts, outs, value, plan.place, args, decision, count, None,
                             t_enter, 0.0, lambda: _settle_outputs(entry, ns, plan.outputs))


def _settle_outputs(entry, ns, outputs):
    """What the full path's ``_settle`` does that a replay needs: the written-back values'
    containers and names (the cell's Python did not run, so the containers it reads and the
    values handed in are as the last run left them)."""
    prefix = entry.qualprefix
    for k in outputs:
        v = ns.get(k, _MISSING)
        if v is not _MISSING and type(v) is not np.ndarray:
            _fix_qualname(v, prefix)
            _fix_containers(v, prefix=prefix)
