"""A ``%%compile`` cell's plain runs, and the :class:`~nbaccel.compiler.replay.decision.Decision` that
chooses between them and compiled runs.

One decision per cell text, options and kind of inputs (:func:`signature`: the type, shape and
dtype of every array the cell reads, the value of every int and bool, the length of every
container). A bigger array, another dtype or another loop count is another kind of input, with
a decision of its own. A plain run *is* the plain cell: its body and trailing expression,
compiled once (:class:`PlainCode`), executed in the user namespace as IPython runs a cell.
Nothing is traced. Its time is the baseline of the compiled runs' headline (docs/report.md).
"""
from __future__ import annotations

import ast
import time

import numpy as np

from . import cellfunc
from .cellrun import _from_cell
from ..compiler.config import config
from ..compiler.replay.decision import Decision
from ..compiler.report.report import CompileReport
from ..daskbridge import is_dask_array
from ..tensor import Tensor

_MISSING = object()


class PlainCode:
    """The cell's body and trailing expression as code objects (compiled once per cell)."""

    __slots__ = ("body", "last")

    def __init__(self, entry):
        tree = entry.tree if entry.tree is not None else ast.parse(entry.src)
        last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        body = tree.body[:-1] if last is not None else tree.body
        self.body = compile(ast.Module(body, []), entry.filename, "exec", dont_inherit=True)
        self.last = None if last is None else compile(ast.Expression(last.value), entry.filename, "eval",
                                                      dont_inherit=True)


def _kind(v):
    """What about an input decides the cell's work: enough to tell a bigger input apart."""
    t = type(v)
    if t is np.ndarray or isinstance(v, Tensor):
        return (t, v.shape, v.dtype)                # (a dtype hashes and compares: no str())
    if t is int or t is bool:
        return (t, v)
    if t in (list, tuple, dict, str, bytes, range):
        return (t, len(v))
    return t


def signature(ns, names) -> tuple:
    return tuple(_kind(ns.get(n, _MISSING)) for n in names)


def decision_for(ext, line, cell, entry, opts) -> Decision:
    """This cell's decision for the inputs it has now. A backend or mode asked for by name,
    --fullgraph, --explain, --now and a GPU are compiled at once (the user asked for the
    compiled run); otherwise the first run's path is ``config["cell_first_run"]``."""
    store = ext.__dict__.setdefault("decisions", {})
    # (how the report is shown does not change what runs: a new report mode keeps the decision)
    setting = tuple(v for k, v in ext.config_.items() if k != "report")
    key = (line, cell, setting, signature(ext.shell.user_ns, cellfunc.read_names(entry)))
    d = store.get(key)
    if d is not None and not d.has_compiled and d.first == "plain":
        d.compile_estimate = _compile_estimate(ext) or d.compile_estimate   # what compiles cost by now
    if d is None:
        asked = (opts.backend != "auto" or opts.mode != "default" or opts.fullgraph or opts.explain
                 or getattr(opts, "now", False) or opts.device == "cuda" or not config["cheap_enabled"])
        first = "compiled" if asked else config["cell_first_run"]
        d = store[key] = Decision(first=first, compile_estimate=_compile_estimate(ext))
        if any(is_dask_array(ext.shell.user_ns.get(n)) for n in cellfunc.read_names(entry)):
            # a Dask cell's run only builds its lazy graph: its time is not the work, and the
            # compiled graph (one fused task per chunk) is the point (daskbridge/)
            d.first = "compiled"
            d.keep_compiled("Dask inputs: the compiled cell builds the fused chunk graph (its run "
                            "builds a lazy graph, whose time says nothing about the work)")
        d.cell = entry.key                          # (%nbaccel status groups decisions by cell)
        d.plain_text = cell                         # (the plain cell: cell_clock.py's plain_extra)
        if len(store) > 4096:                       # a notebook that never repeats its inputs
            store.pop(next(iter(store)))
    d.last_used = time.perf_counter()
    return d


def _compile_estimate(ext) -> float | None:
    """What a cell's compile is expected to cost: the median of this session's measured
    compiles (the numba/Triton compile of their kernels included, which runs in the
    background but takes the CPU and the GIL all the same), or the decision module's default
    before any."""
    seen = sorted(ext.__dict__.get("compile_costs", {}).values())
    return seen[len(seen) // 2] if seen else None


def note_compile(ext, key, seconds, add=False):
    """A compile of the cell version ``key`` cost ``seconds`` (``add``: its background
    machine-code compile finished, and cost this much more)."""
    costs = ext.__dict__.setdefault("compile_costs", {})
    if add and key in costs:
        costs[key] += seconds
        return
    costs.pop(key, None)
    costs[key] = seconds
    while len(costs) > 64:
        costs.pop(next(iter(costs)))


def run(ext, entry, opts, decision, count, t_enter=None):
    """Run the cell plainly (IPython's way: the body, then the trailing expression's value),
    timed for its decision."""
    __tracebackhide__ = True  # noqa: F841
    ns = ext.shell.user_ns
    code = getattr(entry, "_plain_code", None)
    if code is None:
        code = entry._plain_code = PlainCode(entry)
    value = None
    failed = True
    t0 = time.perf_counter()
    try:
        exec(code.body, ns)         # noqa: S102 - the user's own cell
        if code.last is not None:
            value = eval(code.last, ns)
        failed = False
    except Exception as e:
        raise _from_cell(e, entry.filename, ext.shell, count)
    finally:
        seconds = time.perf_counter() - t0
        if not failed:                  # (a run that raised measures nothing)
            # (timed while this cell's numba compiles in the background: not a median sample)
            decision.record("plain", seconds, steady=not (entry.cf.is_built and entry.cf.pending()))
        _show(ext, entry, opts, decision, count, seconds)
        if not failed and t_enter is not None and not ext._verifying:
            ext.clock.note(decision, "plain", time.perf_counter() - t_enter, seconds)
    return None if entry.quiet else value


def _show(ext, entry, opts, decision, count, seconds):
    v = decision.verdict()
    ext.last_fallback = f"ran plainly: {v.why}"
    rep = CompileReport(name=cellfunc.cell_label(count, entry.src), tier="plain", backend=opts.backend,
                        mode=opts.mode, compiled_seconds=seconds, graphs=0, path="plain",
                        path_reason=v.why, cache="")
    rep.call_seconds = seconds
    rep.set_verdict(v)
    entry.reports.append(rep)
    del entry.reports[:-3]
    ext.by_count[count] = (entry, rep)
    ext.last = (entry, rep)
    ext._show(rep, opts.report, entry)
    if opts.output:
        ext.shell.user_ns[opts.output] = rep
