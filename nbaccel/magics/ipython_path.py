"""IPython's own work around a ``%%compile`` cell, made smaller and measured (docs/cheap-path.md,
"What a replayed cell costs").

Before IPython runs a cell it transforms its text: the static transforms tokenize it (a
``%%compile`` cell becomes one line, ``get_ipython().run_cell_magic('compile', line, body)``,
and that line is tokenized again), and ``should_run_async`` compiles the result to look for a
top-level ``await``. For a replayed 256² cell that was ~130 µs of the ~900 µs a run took from
outside (loaded machine), as much as the magic's own work. Both are functions of the text
alone, and a cell is run again with the same text, so for ``%%compile`` cells:

* the static transform (``input_transformer_manager.transform_cell``) is remembered per text
  and per list of transformers (IPython's dynamic transforms, the prefilter and
  ``input_transformers_post``, still run every time: they may depend on the namespace);
* ``should_run_async``'s answer is remembered per transformed text (it compiles the text and
  reads a flag of the code object).

That work happens before IPython's ``pre_run_cell`` event, where the cell clock used to start
(cell_clock.py): a stopwatch around ``run_cell`` sees it, so the clock now starts where the
transform of a ``%%compile`` cell starts (:func:`started`). And the plain cell that a plain run
stands for costs IPython more than the one-line magic call does (its whole text tokenized,
parsed and compiled, statement by statement): :func:`extra_cost` measures that difference
once per cell, so that the headline's plain side is the plain cell as ``run_cell`` runs it.
"""
from __future__ import annotations

import ast
import time

_PREFIX = "%%compile"
_MAGIC_LINE = "get_ipython().run_cell_magic('compile'"
_LIMIT = 256


class _Path:
    """The wrappers installed on one shell, and what they saw last."""

    def __init__(self, shell):
        self.shell = shell
        self.mgr = shell.input_transformer_manager
        self.transform = self.mgr.transform_cell          # IPython's own (bound) method
        self.should_run_async = shell.should_run_async
        self.transformed: dict = {}
        self.asynchronous: dict = {}
        self.last = (None, 0.0)                           # (raw %%compile cell, when its transform began)
        self.costs: dict = {}

    def transform_cell(self, cell):
        if not cell.startswith(_PREFIX):
            return self.transform(cell)
        self.last = (cell, time.perf_counter())
        mgr = self.mgr
        key = (cell, tuple(mgr.cleanup_transforms), tuple(mgr.line_transforms), tuple(mgr.token_transformers))
        try:
            out = self.transformed.get(key)
        except TypeError:                   # (a transformer that cannot be hashed: not remembered)
            return self.transform(cell)
        if out is None:
            out = self.transform(cell)
            if len(self.transformed) >= _LIMIT:
                self.transformed.clear()
            self.transformed[key] = out
        return out

    def should_run(self, raw_cell, *, transformed_cell=None, preprocessing_exc_tuple=None):
        if transformed_cell is None or preprocessing_exc_tuple is not None or \
                not transformed_cell.startswith(_MAGIC_LINE) or not self.shell.autoawait:
            return self.should_run_async(raw_cell, transformed_cell=transformed_cell,
                                         preprocessing_exc_tuple=preprocessing_exc_tuple)
        known = self.asynchronous.get(transformed_cell)
        if known is None:
            known = self.should_run_async(raw_cell, transformed_cell=transformed_cell,
                                          preprocessing_exc_tuple=None)
            if len(self.asynchronous) >= _LIMIT:
                self.asynchronous.clear()
            self.asynchronous[transformed_cell] = known
        return known


def install(shell):
    """Wrap the shell's static transform and async check (``%load_ext nbaccel``); a shell
    without them (not IPython's InteractiveShell) is left as it is."""
    if getattr(shell, "_nbaccel_path", None) is not None:
        return shell._nbaccel_path
    mgr = getattr(shell, "input_transformer_manager", None)
    if mgr is None or not callable(getattr(mgr, "transform_cell", None)) or \
            not callable(getattr(shell, "should_run_async", None)):
        return None
    path = _Path(shell)
    mgr.transform_cell = path.transform_cell
    shell.should_run_async = path.should_run
    shell._nbaccel_path = path
    return path


def uninstall(shell):
    path = getattr(shell, "_nbaccel_path", None)
    if path is None:
        return
    if path.mgr.__dict__.get("transform_cell") == path.transform_cell:
        del path.mgr.transform_cell
    if shell.__dict__.get("should_run_async") == path.should_run:
        del shell.should_run_async
    shell._nbaccel_path = None


def started(shell, raw_cell):
    """When IPython began transforming ``raw_cell`` (a ``%%compile`` cell being run now), or None."""
    path = getattr(shell, "_nbaccel_path", None)
    if path is None or raw_cell is None:
        return None
    cell, t = path.last
    return t if cell is raw_cell or cell == raw_cell else None


def extra_cost(shell, plain_text, magic_cell) -> float:
    """Seconds IPython spends on ``plain_text`` as a cell of its own beyond what it spends on
    ``magic_cell`` (the same body under ``%%compile``): the transform, the async check, the
    parse and the compile of each top-level statement, as ``run_cell`` does them. Measured
    once per pair of texts, the median of five rounds of both (on a loaded machine a single
    round can be off by its whole size)."""
    path = getattr(shell, "_nbaccel_path", None)
    costs = path.costs if path is not None else {}
    key = (plain_text, magic_cell)
    known = costs.get(key)
    if known is None:
        last = path.last if path is not None else None
        rounds = sorted(_text_cost(shell, plain_text) - _text_cost(shell, magic_cell) for _ in range(5))
        known = max(rounds[2], 0.0)
        if path is not None:
            path.last = last                # (the measuring transforms are not a cell being run)
        if len(costs) >= _LIMIT:
            costs.clear()
        costs[key] = known
    return known


def _text_cost(shell, raw):
    t0 = time.perf_counter()
    try:
        cell = shell.transform_cell(raw)
        shell.should_run_async(raw, transformed_cell=cell, preprocessing_exc_tuple=None)
        tree = shell.compile.ast_parse(cell)
        nodes = tree.body
        for i, node in enumerate(nodes):
            last = i == len(nodes) - 1 and isinstance(node, ast.Expr)
            mod = ast.Interactive([node]) if last else ast.Module([node], [])
            compile(mod, "<nbaccel-cost>", "single" if last else "exec", dont_inherit=True)
    except Exception:           # (a text IPython cannot run: its cost is not the question)
        pass
    return time.perf_counter() - t0
