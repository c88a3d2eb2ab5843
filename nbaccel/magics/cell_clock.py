"""A cell's time as the user sees it: from the moment IPython starts transforming a
``%%compile`` cell's text (ipython_path.py; for other cells, its ``pre_run_cell`` event) to its
``post_run_cell``, so that a decision's medians (compiler/replay/decision.py) include
IPython's own work around the cell on both sides, as a stopwatch around ``run_cell`` would.

A compiled run counts whole (the magic's snapshot and write-back are what the user pays) but
for the report's display, which a plain run made by the magic shows too (in a kernel it costs
5-25 ms: a comm message and the flush of the output streams), so it is left out of both
sides. A plain run made by the magic counts as the plain cell would: the magic's work around
the user's code is taken out, and what IPython spends on the plain cell's text beyond the
one-line magic call (tokenizing, parsing and compiling it statement by statement) is the
decision's ``plain_extra``, measured once per cell (``ipython_path.extra_cost``): a 64²
gelu-softmax cell's plain runs under the magic took ~450 µs against ~800 µs for the same cell
run plainly, and its headline read 1.39× where ``run_cell`` measured 1.19×. The decision has
the magic's own measurement at once; the cell's is known only when the cell has ended, and
amends it (``Decision.amend``).
"""
from __future__ import annotations

import time

from . import ipython_path


class CellClock:
    def __init__(self, shell):
        self.shell = shell
        self.t0 = None
        self.raw = None
        self.pending = None
        self.display = 0.0                            # seconds the report's display took
        shell.events.register("pre_run_cell", self.pre)
        shell.events.register("post_run_cell", self.post)
        ipython_path.install(shell)     # (the clock starts where its transform of a cell starts)

    def unregister(self, shell):
        ipython_path.uninstall(shell)
        for name, fn in (("pre_run_cell", self.pre), ("post_run_cell", self.post)):
            try:
                shell.events.unregister(name, fn)
            except ValueError:
                pass

    def pre(self, info=None):
        now = time.perf_counter()
        self.raw = getattr(info, "raw_cell", None)
        self.t0 = ipython_path.started(self.shell, self.raw) or now
        self.pending, self.display = None, 0.0

    def shown(self, seconds):
        """The report was displayed in ``seconds`` (not the cell's work, on either side)."""
        self.display += seconds

    def note(self, decision, path, magic_seconds, user_seconds):
        """The magic ran ``path`` for ``decision`` in ``magic_seconds``, ``user_seconds`` of them
        the user's own code (a plain run; for a compiled run both are the same)."""
        if self.t0 is not None:
            self.pending = (decision, path, magic_seconds - user_seconds)

    def post(self, result=None):
        pending, self.pending = self.pending, None
        if pending is None or self.t0 is None:
            return
        if result is not None and not getattr(result, "success", True):
            return                                    # a run that raised measures nothing
        decision, path, magic_overhead = pending
        seconds = time.perf_counter() - self.t0
        if path == "plain":
            seconds -= magic_overhead                 # the plain cell has no magic around it
        else:
            seconds -= self.display                   # (the plain side's display is in its overhead)
        decision.amend(path, max(seconds, 0.0))
        plain_text = getattr(decision, "plain_text", None)    # (the cell without the magic's line)
        if plain_text is not None and decision.has_compiled and decision.plain_extra is None \
                and self.raw is not None:
            # (once the plain side is compared with a compiled one: a cell that stays plain
            # never pays for the measurement)
            decision.plain_extra = ipython_path.extra_cost(self.shell, plain_text, self.raw)
