"""What a compiled ``%%compile`` run leaves behind once the call returned: the outputs written
back to the namespace, the run's time given to the cell's decision, and its report (see
docs/magics.md). The full path (extension.py) and the short replay path (replay_path.py)
both end here."""
from __future__ import annotations

import time

import numpy as np

from . import boundary, plain_runs, verify
from .cell_values import _swap_out
from .cellrun import _settled
from ..compiler import api as capi


def finish(ext, entry, opts, outs, value, place, inputs, decision, count, progress, t_enter, t_in,
           settle):
    """Write the run's outputs back (never before the call returned, so a failure changes
    nothing), ``settle()`` what the namespace holds, and record and show the report. Returns
    the cell's shown value."""
    ns = ext.shell.user_ns
    t_out = time.perf_counter()
    device = place.device
    for k in entry.outputs:
        if k in entry.shared:
            continue
        if k in outs:
            v = outs[k]
            if type(v) is not np.ndarray:       # (an ndarray is what the plain cell holds already)
                v = _swap_out(_settled(ext._from_device(v, device, inputs)))
            ns[k] = v
        elif k in entry.dels:
            ns.pop(k, None)
    shown = None if entry.quiet else boundary.to_numpy(_swap_out(ext._from_device(value, device, inputs)))
    t_out = time.perf_counter() - t_out
    settle()
    entry.calls += 1
    # (the report's eager baseline is measured when it is shown or stored, never otherwise)
    report = getattr(entry.cf, "_report", None)
    if report is not None:
        report.name = entry.cf.name              # a replayed run reuses the report: this run's label
        if device == "cuda":
            report.transfer_seconds = t_in + t_out
        if place.reason and (opts.device_explicit or device == "cuda"):
            report.device_note = place.reason
        ext._maybe_probe(entry, report)
        record(ext, entry, report, decision, time.perf_counter() - t_enter)
        if opts.output:
            report.measure_eager()
        entry.reports.append(report)
        del entry.reports[:-3]
        ext.by_count[count] = (entry, report)
        ext.last = (entry, report)
        ext._show(report, opts.report, entry, progress)
        if opts.output:
            ns[opts.output] = report
        if opts.explain:
            with verify.not_the_cells_output():
                print(ext._explain_text(report))
    elif opts.output:
        ns[opts.output] = None
    return shown


def record(ext, entry, report, decision, seconds):
    """The compiled run's time for the cell's decision, and the verdict on its report. A run
    that made a new report traced; it compiled unless every graph came from memory. A
    replayed run reuses the last report: nothing compiled, and its time joins the history."""
    fresh = report is not entry.last_report
    entry.last_report = report
    compiling = report.compile_seconds if fresh and report.cache != "hit" else 0.0
    cf = entry.cf.built() if hasattr(entry.cf, "built") else entry.cf
    pending = cf.pending()
    report.tier_arrived(pending)
    # (an entry's first replay is no sample, as for a function: api.CompiledFunction.__call__)
    decision.record("compiled", seconds, compiling, steady=not pending and not cf._cold_replay)
    if not ext._verifying:                           # (--verify's shadow run is not the cell's)
        ext.clock.note(decision, "compiled", seconds, seconds)
    if compiling:
        plain_runs.note_compile(ext, entry.key, compiling)
    entry.jit_due = entry.jit_due or bool(compiling) or pending
    if entry.jit_due and not pending:                # machine code compiled since: its cost too
        entry.jit_due = False
        jit = cf.jit_seconds()
        if jit > entry.jit_noted:
            plain_runs.note_compile(ext, entry.key, jit - entry.jit_noted, add=True)
            decision.add_compile(jit - entry.jit_noted)
            entry.jit_noted = jit
    if not fresh:
        # (in place: copying the list on every run cost a replay a few µs more each time)
        report.history.append({"compiled_seconds": seconds, "cache": "hit", "tier": report.tier})
        del report.history[:-capi.config["history"]]
    report.call_seconds = seconds
    report.set_verdict_later(decision.frozen())      # (worked out when the report is read)
