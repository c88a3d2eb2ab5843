"""A cell's time as the user sees it: from IPython's ``pre_run_cell`` event to its
``post_run_cell``, so that a decision's medians (compiler/replay/decision.py) include IPython's own
work around the cell on both sides, as a stopwatch around ``run_cell`` would.

A compiled run counts whole (the magic's snapshot and write-back are what the user pays) but
for the report's display, which a plain run made by the magic shows too (in a kernel it costs
5-25 ms: a comm message and the flush of the output streams), so it is left out of both
sides. A plain run made by the magic counts as the plain cell would: the magic's work around
the user's code is taken out. The decision has the magic's own measurement at once; the
cell's is known only when the cell has ended, and amends it (``Decision.amend``).
"""
from __future__ import annotations

import time


class CellClock:
    def __init__(self, shell):
        self.t0 = None
        self.pending = None
        self.display = 0.0                            # seconds the report's display took
        shell.events.register("pre_run_cell", self.pre)
        shell.events.register("post_run_cell", self.post)

    def unregister(self, shell):
        for name, fn in (("pre_run_cell", self.pre), ("post_run_cell", self.post)):
            try:
                shell.events.unregister(name, fn)
            except ValueError:
                pass

    def pre(self, info=None):
        self.t0, self.pending, self.display = time.perf_counter(), None, 0.0

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
