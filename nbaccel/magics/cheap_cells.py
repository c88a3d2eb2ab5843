"""The ``%%compile`` magic's cheap path for small cells.

After a compiled run, :func:`after` asks ``compiler/cheap_path.cell_choice`` whether the cell's
NumPy work (estimated from its graphs' sizes) is smaller than what tracing and guarding it
costs. If so, later runs of the same cell text with the same options and the same kind of
inputs (types, shapes and dtypes of arrays, values of ints and bools, lengths of containers)
run the cell plainly at once (:func:`lookup`, :func:`run`): its body and trailing expression
compiled once and executed in the user namespace, as IPython runs a plain cell. Nothing is
traced, so the run *is* the plain cell. The report says ``path: plain`` with the reason, and
the extension's ``last_fallback`` holds it too. Inputs of another kind go through the
compiled path again (which may decide again). A cell in between (its work under
``probe_factor`` times the overhead) is measured instead: after a steady compiled run (a cache
hit with nothing compiling in the background) the next run is the plain cell, timed; if the
compiled run was slower, the cell runs plainly from then on, otherwise it stays compiled.
"""
from __future__ import annotations

import ast
import time

import numpy as np

from . import cellfunc
from .cellrun import _from_cell
from ..compiler import cheap_path
from ..compiler.config import config
from ..tensor import Tensor
from ..compiler.report import CompileReport

_MISSING = object()


class PlainCell:
    """A cell decided cheap: its code, the kind of inputs it was decided for, and why. With
    ``compiled`` set it is a probe: run plainly once, timed, to compare with that compiled run."""

    __slots__ = ("entry", "opts", "reason", "names", "signature", "body", "last", "compiled", "probes")

    def __init__(self, entry, opts, reason, names, signature, compiled=None):
        self.entry, self.opts, self.reason, self.compiled = entry, opts, reason, compiled
        self.probes: list[float] = []      # a probe's plain run times
        self.names, self.signature = names, signature
        tree = ast.parse(entry.src)
        last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        body = tree.body[:-1] if last is not None else tree.body
        self.body = compile(ast.Module(body, []), entry.filename, "exec", dont_inherit=True)
        self.last = None if last is None else compile(ast.Expression(last.value), entry.filename, "eval",
                                                      dont_inherit=True)


def _store(ext) -> dict:
    store = getattr(ext, "cheap_cells", None)
    if store is None:
        store = ext.cheap_cells = {}
    return store


def _key(ext, line, cell):
    return (line, cell, tuple(ext.config_.values()))


def _kind(v):
    """What about an input decides the cell's work: enough to tell a bigger input apart."""
    t = type(v)
    if t is np.ndarray or isinstance(v, Tensor):
        return (t, v.shape, str(v.dtype))
    if t is int or t is bool:
        return (t, v)
    if t in (list, tuple, dict, str, bytes, range):
        return (t, len(v))
    return t


def signature(ns, names) -> tuple:
    return tuple(_kind(ns.get(n, _MISSING)) for n in names)


def _names(entry) -> tuple:
    """Every name the cell reads from the namespace (cached on first use)."""
    names = getattr(entry, "_cheap_names", None)
    if names is None:
        try:
            reads = cellfunc.read_first(ast.parse(entry.src))
        except SyntaxError:
            reads = set()
        names = tuple(sorted(set(reads) | set(entry.traced) | set(entry.boxed)))
        entry._cheap_names = names
    return names


def candidate(opts) -> bool:
    return (config["cheap_enabled"] and opts.backend == "auto" and opts.mode == "default"
            and not opts.fullgraph and not opts.explain and opts.device in ("auto", "cpu"))


def before(ext, entry, opts):
    """The inputs' signature before a compiled run that may be decided cheap, else None."""
    if not candidate(opts) or entry.plain_reason is not None:
        return None
    names = _names(entry)
    return names, signature(ext.shell.user_ns, names)


class _CompiledWins:
    """Measured once: the compiled run beat the plain cell for inputs of this kind."""

    __slots__ = ("signature", "plain")

    def __init__(self, signature, plain=None):
        self.signature = signature
        self.plain = plain          # the plain cell's measured best (the headline's baseline)


PROBE_REASON = "ran plainly once to compare with the compiled run (cheap path)"


PROBE_RUNS = 2     # plain runs a probe times (the best counts: a first run pays page faults)


def after(ext, line, cell, entry, opts, report, pre, seconds=None):
    """After a compiled run: remember the cell as cheap when its work is small; when it is
    neither clearly small nor clearly large, measure the plain cell once on the next run."""
    if pre is None or report is None:
        return
    names, sig = pre
    store, key = _store(ext), _key(ext, line, cell)
    known = store.get(key)
    if isinstance(known, _CompiledWins) and known.signature == sig:
        if known.plain and seconds:     # the headline: this run against the measured plain cell
            report.set_plain(known.plain, seconds, 0.0, "compiled")
        return
    est = report.eager_estimate_seconds
    if est is None and report.graphs == 0:
        est = 0.0                 # nothing was captured: the cell's work is all plain Python
    if est is None:
        return
    why = cheap_path.cell_choice(report, est)
    try:
        if why is not None:
            store[key] = PlainCell(entry, opts, why, names, sig)
        elif (report.cache == "hit" and report.pending_tier is None and not report.fallback
              and est < config["cheap_probe_factor"] * cheap_path.overhead_seconds(report)):
            # a steady compiled run (nothing compiling in the background) of a middling cell
            compiled = seconds if seconds is not None else (report.call_seconds or 0.0)
            store[key] = PlainCell(entry, opts, PROBE_REASON, names, sig, compiled=compiled)
    except SyntaxError:
        pass


def _settle_probe(ext, pc, plain_seconds):
    """After the probe's plain run: plain from now on if the compiled run was slower."""
    key = next((k for k, v in ext.cheap_cells.items() if v is pc), None)
    if key is None:
        return
    pc.probes.append(plain_seconds)
    if len(pc.probes) < PROBE_RUNS:
        return
    plain_seconds = min(pc.probes)
    if pc.compiled > plain_seconds:
        reason = (f"cheap path: measured, the compiled run took {cheap_path._fmt(pc.compiled)} and the plain "
                  f"cell {cheap_path._fmt(plain_seconds)}: the cell runs plainly while its inputs keep their "
                  f"types and shapes")
        ext.cheap_cells[key] = PlainCell(pc.entry, pc.opts, reason, pc.names, pc.signature)
    else:
        ext.cheap_cells[key] = _CompiledWins(pc.signature, plain_seconds)


def lookup(ext, line, cell):
    """The PlainCell to run for this cell now, or None (the compiled path runs)."""
    store = getattr(ext, "cheap_cells", None)
    if not store:
        return None
    pc = store.get(_key(ext, line, cell))
    if not isinstance(pc, PlainCell) or pc.entry.plain_reason is not None:
        return None
    if signature(ext.shell.user_ns, pc.names) != pc.signature:
        return None
    return pc


def run(ext, pc):
    """Run the cell plainly (IPython's way: the body, then the trailing expression's value)."""
    __tracebackhide__ = True  # noqa: F841
    ns = ext.shell.user_ns
    count = ext._cell_number()
    ext.last_fallback = pc.reason
    value = None
    t0 = time.perf_counter()
    try:
        exec(pc.body, ns)         # noqa: S102 - the user's own cell
        if pc.last is not None:
            value = eval(pc.last, ns)
    except Exception as e:
        if pc.compiled is not None:          # (a probe that raised decides nothing)
            ext.cheap_cells[next(k for k, v in ext.cheap_cells.items() if v is pc)] = _CompiledWins(pc.signature)
        raise _from_cell(e, pc.entry.filename)
    finally:
        seconds = time.perf_counter() - t0
        _show(ext, pc, count, seconds)
    if pc.compiled is not None:
        _settle_probe(ext, pc, seconds)
    return None if pc.entry.quiet else value


def _show(ext, pc, count, seconds):
    opts = pc.opts
    rep = CompileReport(name=cellfunc.cell_label(count, pc.entry.src), tier="plain", backend=opts.backend, mode=opts.mode,
                        compiled_seconds=seconds, graphs=0, fallback=pc.reason, path="plain",
                        path_reason=pc.reason)
    rep.first_call_seconds = seconds
    entry = pc.entry
    entry.reports.append(rep)
    del entry.reports[:-3]
    ext.by_count[count] = (entry, rep)
    ext.last = (entry, rep)
    ext._show(rep, opts.report, entry)
    if opts.output:
        ns = ext.shell.user_ns
        ns[opts.output] = rep
