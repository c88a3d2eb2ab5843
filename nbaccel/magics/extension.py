"""``%%compile`` and ``%nbaccel``: the IPython magics (see docs/magics.md).

The cell is turned into a function (``cellfunc``), compiled once per cell source + options
with ``nbaccel.compile``, and called with the cell's inputs; its outputs are written to the
user namespace when the call returns (after a user exception: the names bound before it, as
in the plain cell). ``cellrun`` holds the write-back, the plain path and the safety net.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import hashlib
import io
import keyword
import os
import sys
import time

import numpy as np
from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from . import (boundary, cell_clock, cellfunc, cellnames, ipython_calls, options, per_element, plain_runs,
               raw_aliases, replay_path, run_result, snapshot, verify)
from .cell_entry import CellEntry, Deferred
from .cell_values import _Env, _swap_in, _swap_out, _traceable
from .cellrun import (CellRuns, _as_name_error, _from_cell, _settled, framed_as_module,
                      graph_break_as_shown, safety_net_disabled)
from .commands import NbaccelCommands, _in_notebook
from .. import ndarray_methods, numpy_api
from ..compiler import api as capi
from ..compiler import GraphBreakError
from ..compiler.capture.capture import TraceTooCostly
from ..daskbridge.bridge import DaskFallback
from ..gpu import placement as gpu_placement
from ..convert import asarray
from ..tensor import Tensor

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
MODES = capi.MODES
BACKENDS = capi.BACKENDS
DEVICES = options.DEVICES
REPORTS = options.REPORTS
OPTIONS_HELP = options.help_texts(MODES, BACKENDS, DEVICES, REPORTS)


@magics_class
class NbaccelMagics(CellRuns, NbaccelCommands, Magics):
    """``%%compile`` (a cell as a compiled function) and ``%nbaccel`` (status, reports, config)."""

    def __init__(self, shell):
        super().__init__(shell)
        self.config_ = {"mode": "default", "backend": "auto", "device": "auto", "report": "auto"}
        self.clock = cell_clock.CellClock(shell)     # cells timed as the user sees them
        self.verify_all = False                     # %nbaccel verify on: every cell --verify
        self._verifying = False
        self.last_verify = None
        self.reset_state()

    def reset_state(self):
        self.entries: dict[str, CellEntry] = {}
        self.decisions: dict = {}                   # plain or compiled, per cell and inputs (plain_runs.py)
        self.plans: dict = {}                       # (line, cell) -> what its replays reuse (replay_path.py)
        self.compile_costs: dict = {}               # cell version -> its compile's cost (plain_runs.py)
        self.analysed: dict = {}                    # cell source -> its analysis (_analyse)
        self._entry_keys: dict = {}                 # a cell version (source, options, inputs) -> its key
        self.by_count: dict[int, tuple] = {}     # execution count -> (entry, report)
        self.last: tuple | None = None
        self.runs = 0

    # -- %%compile ------------------------------------------------------------------------------
    @magic_arguments()
    @argument("--mode", default=None, help="default | reduce-overhead | max-autotune")
    @argument("--backend", default=None, help="auto | numba | numpy | eager")
    @argument("--device", default=None, help="auto | cpu | cuda")
    @argument("--dynamic", action="store_true", help="compile every dimension symbolic from the start")
    @argument("--static", action="store_true", help="never make dimensions dynamic")
    @argument("--fullgraph", action="store_true", help="a graph break is an error")
    @argument("--report", default=None, help="auto | widget | text | none")
    @argument("-o", "--output", default=None, metavar="NAME",
              help="store the CompileReport in the user namespace as NAME")
    @argument("--explain", action="store_true", help="print the captured graph and generated code")
    @argument("--verify", action="store_true", help="also run the plain cell on copies and compare")
    @argument("--now", action="store_true", help="compile on this run (not only once compiling pays off)")
    @cell_magic
    # (IPython would expand {name} and $name in the options line: it copies the whole user
    # namespace to do so, on every run; no option takes a variable)
    @no_var_expand
    def compile(self, line, cell):
        """Run the cell as a compiled function; its NumPy code runs as written."""
        if not self._verifying and (self.verify_all or "--verify" in line.split()):
            self._verifying = True         # the compiled run, then the plain shadow (verify.py)
            try:
                return verify.run(self, lambda: self.compile(line, cell), line, cell)
            finally:
                self._verifying = False
        t_enter = time.perf_counter()
        shown = replay_path.run(self, line, cell, t_enter)   # a replay, its prelude remembered
        if shown is not replay_path.NOT_TAKEN:
            return shown
        opts = self._parse(line)
        ns = self.shell.user_ns
        src = self._transformed(cell)
        count = self._cell_number()
        __tracebackhide__ = True  # noqa: F841  (IPython hides this frame in tracebacks)
        entry, traced_vals = self._entry(src, opts, ns, count)
        place = self._place(opts, traced_vals)
        if place.device != opts.placed:      # auto chose the GPU: another compiled version
            opts.placed = place.device
            entry, traced_vals = self._entry(src, opts, ns, count)
        self.last_fallback = None
        if entry.plain_reason is not None:          # known to run better plainly
            self.last_fallback = entry.plain_reason
            return self._run_plain(entry, count, opts, entry.plain_reason, fresh=False)
        per_call = per_element.reason(ns, cellfunc.read_names(entry))   # vectorize made anywhere
        if per_call is not None:
            self.last_fallback = per_call
            return self._run_plain(entry, count, opts, per_call, fresh=False)
        if entry.probe is not None:                 # the last run was slow and broke often
            return self._probe_plain(entry, count, opts)
        decision = plain_runs.decision_for(self, line, cell, entry, opts)
        if decision.next_path() == "plain":          # the plain cell: compiling does not pay (yet)
            traced_vals = None                       # (the plain cell holds its inputs only in ns)
            return plain_runs.run(self, entry, opts, decision, count, t_enter)
        env = self._env(entry, ns)
        entry.cf.name = cellfunc.cell_label(count, src)
        entry.cf.trace_budget = decision.trace_budget()   # a trace that costs more runs plainly
        args, t_in = gpu_placement.timed_sync(lambda: [self._to_device(v, place.device) for v in traced_vals],
                                              sync=place.device == "cuda")
        progress = self._progress(entry, opts, count)
        printed = io.StringIO()                     # shown once the attempt is known to stand
        before = snapshot.take(entry.src, ns, cellfunc.read_names(entry), entry.traced)
        # arrays the cell reaches untraced that share a traced input's memory (raw_aliases.py)
        aliases = raw_aliases.find(ns, cellfunc.read_names(entry), entry.traced)
        entry.cf.raw_aliases = aliases.arrays
        failure = self.last_fallback = aliases.unchecked
        try:
            with contextlib.redirect_stdout(printed), ndarray_methods.numpy_code(), before.watching():
                if failure is None:
                    outs, value = entry.cf(*args, env)
        except (KeyboardInterrupt, SystemExit):     # interrupted: show what it printed so far
            sys.stdout.write(printed.getvalue())
            for k in entry.shared & set(ns):        # shared names hold NumPy's own objects again
                ns[k] = _swap_out(_settled(ns[k]))
            if progress is not None:
                progress.close()
            raise
        except DaskFallback as e:                   # Dask arrays that are not chunk work: the plain cell
            failure = self.last_fallback = e.reason
        except Exception as e:
            if progress is not None:
                progress.close()
            reason = self._internal_failure(e, entry)
            if reason is None or isinstance(e, GraphBreakError):
                sys.stdout.write(printed.getvalue())
                self._write_partial(e, entry, ns)
                if isinstance(e, GraphBreakError):  # name the cell, not IPython's temporary file
                    graph_break_as_shown(e, entry, self.shell, count,
                                         ("cell " if count > 0 else "") + cellfunc.cell_label(count, src))
                raise _from_cell(_as_name_error(e, entry), entry.filename, self.shell, count)
            if safety_net_disabled() and not isinstance(e, TraceTooCostly):   # (a decision, not a failure)
                sys.stdout.write(printed.getvalue())
                raise
            before.restore()                         # random state, options, containers, figures
            undo = getattr(entry.cf, "last_undo", None)
            if undo:
                undo()                               # inputs as they were before the attempt
            if isinstance(e, TraceTooCostly):
                entry.plain_reason = reason          # later runs of this cell go plain too
            self.last_fallback = failure = reason
        if failure is not None:                      # (outside the handler: no chained traceback)
            return self._run_plain(entry, count, opts, failure)
        sys.stdout.write(printed.getvalue())
        # the cell completed: write its outputs back (never before, so a failure changes nothing)
        replayed = entry.last_report is not None and getattr(entry.cf, "_report", None) is entry.last_report
        shown = run_result.finish(self, entry, opts, outs, value, place, traced_vals, decision, count, progress,
                                  t_enter, t_in, lambda: self._settle(entry, ns, env, before.tensors))
        if replayed:                                 # the next run of it may well replay too
            replay_path.remember(self, line, cell, opts, entry, decision, place)
        return shown

    def _cell_number(self):
        """The running cell's In[n] (IPython counts the cell before running it: Out[n] uses n)."""
        return max(self.shell.displayhook.prompt_count, 0)

    def _parse(self, line):
        """The cell's options (argparse and shlex cost ~0.1 ms a run: the same line with the same
        defaults parses once; each run gets its own copy, which the run may change)."""
        memo = self.__dict__.setdefault("_parse_memo", {})
        key = (line, tuple(self.config_.items()))
        known = memo.get(key)
        if known is None:
            if len(memo) > 256:
                memo.clear()
            known = memo[key] = self._parse_line(line)
        return argparse.Namespace(**vars(known))

    def _parse_line(self, line):
        try:
            opts = parse_argstring(self.compile, line)
        except UsageError as e:
            raise UsageError(f"%%compile: {options.parse_error(str(e).splitlines()[-1] if str(e) else '', OPTIONS_HELP)}") from None
        except ValueError as e:           # shlex: an unbalanced quote
            raise UsageError(f"%%compile: cannot read the options ({e}); the options are {OPTIONS_HELP}") from None
        explicit_device = opts.device is not None
        for key, allowed in (("mode", MODES), ("backend", BACKENDS), ("device", DEVICES),
                             ("report", REPORTS)):
            val = getattr(opts, key)
            if val is None:
                setattr(opts, key, self.config_[key])
            elif val not in allowed:
                raise UsageError(f"%%compile: --{key} must be one of {', '.join(allowed)}, got {val!r}")
        if opts.backend == "triton":      # no GPU (and no interpreter asked for): say what to install
            # lazy: Triton's tier and renderer stay out of %load_ext
            from ..compiler.runtime.triton_runtime import run_mode
            try:
                run_mode()
            except RuntimeError as e:
                raise UsageError(f"%%compile: {e}") from None
        if opts.dynamic and opts.static:
            raise UsageError("%%compile: give --dynamic or --static, not both")
        if opts.output is not None and (not opts.output.isidentifier() or keyword.iskeyword(opts.output)):
            raise UsageError(f"%%compile: -o needs a variable name, got {opts.output!r}")
        opts.device_explicit = explicit_device or opts.device != "auto"
        opts.placed = "cuda" if opts.device == "cuda" else "cpu"    # auto: decided per call
        if opts.device == "cuda":
            self._place(opts, ())                 # no GPU: a UsageError that says what is missing
        return opts

    @staticmethod
    def _place(opts, values):
        """Where the cell runs (see nbaccel/gpu/placement.py); --device cuda without a GPU is a
        UsageError naming what is missing."""
        try:
            return gpu_placement.decide(opts.device, values)
        except RuntimeError as e:
            raise UsageError(f"%%compile --device cuda: {e}") from None

    def _entry(self, src, opts, ns, count):
        """The compiled function for this cell source + options + input kinds (cached)."""
        known = self.analysed.get(src)      # the analysis depends on the source only
        if known is None:
            known = self.analysed[src] = self._analyse(src)
        loads, stores, dels, shared = (set(x) for x in known[:4])
        plain_reason, analysed_tree = known[4], known[5]
        traced, boxed = [], []
        for n in sorted(loads):
            if n not in ns or n.startswith("__nbaccel") or n in shared:
                continue
            v = ns[n]
            if _traceable(v):
                traced.append(n)
            elif n in stores or n in dels or _swap_in(v) is not v:
                boxed.append(n)
        # a name the cell binds (or deletes) that the namespace already has starts as that value
        # (_env): a branch not taken, or a `del`, sees it as the plain cell would
        # (names the namespace lacks start unbound: the function is the same either way)
        maybe = [n for n in sorted((set(stores) | set(dels)) - set(traced) - set(boxed) - shared)
                 if not n.startswith("__nbaccel")]
        dynamic = True if opts.dynamic else False if opts.static else None
        placed = getattr(opts, "placed", "cpu")
        version = (src, opts.mode, opts.backend, placed, dynamic, opts.fullgraph,
                   tuple(traced), tuple(boxed), tuple(maybe), tuple(sorted(shared)))
        key = self._entry_keys.get(version)   # (hashing the cell's text on every run cost ~10 µs)
        if key is None:
            if len(self._entry_keys) > 4096:
                self._entry_keys.clear()
            key = self._entry_keys[version] = hashlib.sha256(repr(version).encode()).hexdigest()
        entry = self.entries.get(key)
        if entry is None:
            filename = self.shell.compile.cache(src, count)
            if analysed_tree is None:   # IPython's parse says what is wrong (raises SyntaxError)
                analysed_tree = self.shell.compile.ast_parse(src, filename, "exec")
            outputs = set(stores) | set(dels)
            name = f"cell_{count}"
            renamed = cellnames.local_names(analysed_tree, traced + boxed)

            def make_cf():
                if plain_reason is None:
                    # a parse of its own: the builder's rewriters change the tree they are given
                    tree = self.shell.compile.ast_parse(src, filename, "exec")
                    mod = cellfunc.build(tree, name, traced, boxed, shared, maybe=maybe, renamed=renamed)
                    code = compile(mod, filename, "exec", dont_inherit=True)
                    scope: dict = {}
                    exec(code, ns, scope)          # defines __nbaccel_make__ only; ns untouched
                    fn = scope["__nbaccel_make__"](numpy_api, boundary.call, boundary.setmask,
                                                   boundary.sync, ipython_calls.call)
                    framed_as_module(fn)           # its frames show as the plain cell's
                else:                              # it runs plainly (`from m import *` cannot be
                    def fn(*args):                 # compiled inside a function at all)
                        raise AssertionError("a cell that runs plainly is never called compiled")
                cf = capi.CompiledFunction(fn, mode=opts.mode, dynamic=dynamic,
                                           backend=gpu_placement.backend_for(opts.backend, placed, BACKENDS),
                                           fullgraph=opts.fullgraph, name=cellfunc.cell_label(count, src))
                cf._in_cell = True
                return cf
            entry = CellEntry(key, Deferred(make_cf), traced, boxed, outputs, set(dels),
                              cellfunc.ends_quiet(src), filename, shared=shared, src=src, fname="<module>",
                              qualprefix=f"__nbaccel_make__.<locals>.{name}.<locals>.",
                              plain_reason=plain_reason, local_of=renamed, maybe=maybe,
                              reads=known[0], tree=analysed_tree)
            self.entries[key] = entry
        return entry, [ns[n] for n in traced]

    @staticmethod
    def _env(entry, ns):
        """What the cell function receives besides its traced arrays: the values of its boxed
        inputs and of the names it binds that the namespace has. Built for a compiled run only:
        it holds the previous values of the cell's outputs, which the plain cell frees as it
        rebinds them (kept alive through a plain run, a 2048² cell's rebinds page-faulted fresh
        memory, and its plain runs timed 20-60% slower than the same cell outside the magic)."""
        values = {n: _swap_in(ns[n]) for n in entry.boxed if n in ns}
        values.update((n, _swap_in(ns[n])) for n in entry.maybe if n in ns)
        return _Env(values, entry.slots)

    @staticmethod
    def _analyse(src):
        """(loads, stores, dels, shared, plain_reason, tree) of a cell source (cached by
        ``_entry``: parsing and walking the tree was a tenth of a millisecond on every run). The
        tree is the plain run's too (plain_runs.PlainCode compiles it and changes nothing; the
        cell function is built from a parse of its own, which its rewriters change)."""
        try:
            tree = ast.parse(src)
            loads, stores, dels = cellfunc.analyse(tree)
        except cellfunc.CellError as e:
            raise UsageError(str(e)) from None
        except SyntaxError:
            tree = None                        # let IPython's own compile report it below
            loads = stores = dels = set()
        shared, plain_reason = set(), None
        if tree is not None:
            loads = cellfunc.read_first(tree)
            shared = cellfunc.shared_names(tree, stores)
            plain_reason = cellfunc.needs_plain(tree)
        return frozenset(loads), frozenset(stores), frozenset(dels), frozenset(shared), plain_reason, tree

    # devices ---------------------------------------------------------------------------------------
    @staticmethod
    def _to_device(v, device):
        if device != "cuda":
            return v
        return asarray(v).to("cuda")

    @staticmethod
    def _from_device(v, device, inputs):
        """Results go back to where the inputs came from: NumPy arrays for NumPy inputs, CPU
        tensors for CPU tensors; a cell whose inputs were already on the GPU keeps them there."""
        if device != "cuda" or not isinstance(v, Tensor) or v.device.type != "cuda":
            return v
        if any(isinstance(x, Tensor) and x.device.type == "cuda" for x in inputs):
            return v
        v = v.cpu()
        if inputs and all(isinstance(x, np.ndarray) for x in inputs):
            return v.numpy()
        return v

    # reports ----------------------------------------------------------------------------------------
    def _report_dict(self, report, entry):
        d = report.to_dict()
        for b in d.get("graph_breaks", []):        # the cell's temp file name means nothing to users
            if b.get("filename") == entry.filename:
                b["filename"] = d.get("name", "cell")
        return d

    def _progress(self, entry, opts, count):
        """A "compiling…" indicator for a first run that waits for numba (the numba backend or
        max-autotune; the auto backend never waits): it turns into the report when done."""
        waits = opts.backend == "numba" or opts.mode == "max-autotune"
        if entry.calls or not waits or opts.report not in ("auto", "widget") or not _in_notebook(self.shell):
            return None
        # (imported only here: the widget's modules cost ~0.15 s to import, which the first
        # compiled cell of a session paid even where nothing is shown, report=none or a terminal)
        import nbaccel_ext
        if nbaccel_ext.stable_output():     # stable output (tests) has no transient parts
            return None
        return nbaccel_ext.Progress(f"compiling {cellfunc.cell_label(count, entry.src)} with numba…")

    def _transformed(self, cell):
        """IPython's transform of the cell text (``!cmd``, ``%magic`` lines): a function of the
        text alone, remembered, since tokenising it again cost as much as a replayed run. Text
        with none of IPython's syntax is its own transform (ipython_calls.plain_python: a new cell's
        first run skipped a third of a millisecond of tokenising)."""
        memo = self.__dict__.setdefault("_transform_memo", {})
        src = memo.get(cell)
        if src is None:
            src = (cell if ipython_calls.plain_python(cell) else self.shell.transform_cell(cell)).rstrip() + "\n"
            if len(memo) > 256:
                memo.clear()
            memo[cell] = src
        return src

    def _show(self, report, how, entry, progress=None):
        if how == "none":
            if progress is not None:
                progress.close()
            return
        t0 = time.perf_counter()
        with verify.not_the_cells_output():       # the report is nbaccel's output, not the cell's
            self._show_report(report, how, entry, progress)
        self.clock.shown(time.perf_counter() - t0)

    def _show_report(self, report, how, entry, progress):
        import nbaccel_ext
        d = self._report_dict(report, entry)
        if how == "text" or (how == "auto" and not _in_notebook(self.shell)):
            print(nbaccel_ext.render_text(d, stable=nbaccel_ext.stable_output()))
        else:
            if progress is not None:
                progress.finish(d)        # the indicator becomes the report, in place
                return
            self.runs += 1   # a fresh display per run: a re-run cell's old output is already cleared
            did = f"nbaccel-{entry.key[:12]}-{self.runs}"
            # one widget per notebook cell (the front end names it in the request's metadata):
            # a cell run again updates its widget; the same text in another cell has its own
            meta = (getattr(self.shell, "parent_header", None) or {}).get("metadata") or {}
            cell_id = meta.get("cellId")
            nbaccel_ext.display_report(d, display_id=did,
                                       model_key=f"{entry.key}:{cell_id}" if cell_id else None)

    def _explain_text(self, report):
        lines = [f"=== {report.name}: {report.graphs} graph(s), {len(report.graph_breaks)} graph break(s)"]
        for b in report.graph_breaks:
            lines.append(f"  break at line {b.get('lineno')}: `{b.get('line')}` — {b.get('reason')}")
        for k in report.kernels:
            lines.append(f"  kernel {k.get('name')}: {', '.join(map(str, k.get('ops', [])))} "
                         f"[{k.get('device')}/{k.get('backend')}]")
        lines += ["--- graph", report.graph or "(empty)", "--- code", report.code or "(none)"]
        return "\n".join(lines)

    # -- %nbaccel --------------------------------------------------------------------------------
    @line_magic
    def nbaccel(self, line):
        """%nbaccel help lists the commands (nbaccel/magics/commands.py COMMANDS)."""
        return self._run_command(line)


__all__ = ["NbaccelMagics", "UsageError"]
