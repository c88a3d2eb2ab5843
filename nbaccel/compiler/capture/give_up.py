"""When a trace stops early because finishing it cannot pay (docs/cheap-path.md, "A compile is a
bet worth one compile, never more"). Each raises a :class:`TraceTooCostly`, and the caller runs
the code plainly (a %%compile cell, and its later runs) or eagerly (a compiled function).

* :meth:`GivingUp._check_deadline`: the trace ran past the budget the cell's decision gave it
  (``TraceSession.deadline``), or would once its pending graph compiled.
* :meth:`GivingUp.note_inline`: the traced code calls a compiled function again after a graph
  break since its last call.

(The graph-break limit, ``TooManyGraphBreaks``, is checked where a break is recorded.)
"""
from __future__ import annotations

import time

from ...tensor import active_trace
from .user_code import TraceLoopsCompiled, TraceOverBudget

_BUDGET_EVERY = 256     # ops between two looks at the clock (a look costs ~0.1 µs per op)
# what compiling a graph is expected to cost per node, for the deadline's look before a flush:
# a 34,000-op graph (256 unrolled grads) took 16 s to schedule and build, ~0.5 ms a node
_COMPILE_SECONDS_PER_NODE = 0.25e-3


class GivingUp:
    """A TraceSession's give-ups (it provides ``deadline``, ``t_start``, ``_recorded``,
    ``breaks`` and ``inlined``)."""

    def _check_deadline(self, compiling=0):
        """Past the deadline (or, before a flush, expected past it once the ``compiling`` nodes
        have compiled): give up."""
        now = time.perf_counter()
        if now + compiling * _COMPILE_SECONDS_PER_NODE > self.deadline:
            start = getattr(self, "t_start", now)
            todo = f", {compiling:,} graph nodes to compile" if compiling else ""
            raise TraceOverBudget(
                f"tracing would cost more than its budget of {self.deadline - start:.3g} s, several "
                f"plain runs ({now - start:.3g} s so far: {self._recorded:,} ops traced{todo}); a "
                f"Python loop unrolls into a long trace, so it runs plainly")

    def note_inline(self, fn):
        """The traced code calls ``fn``, a compiled function, which the trace inlines. Called
        again after a graph break since its last call (a training loop reading the loss every
        round, ``float(step(x, y))``), the trace would trace ``fn`` once more and compile a
        segment on every round, and a trace with breaks never replays, while the plain code
        runs ``fn`` compiled (replayed). A trace with a budget (a %%compile cell the decision
        bet on) gives up at once rather than at its budget; a compile asked for by name
        (``--now``, ``nb.compile``: no budget) goes on."""
        seen = self.inlined.get(id(fn))
        self.inlined[id(fn)] = len(self.breaks)
        if seen is None or len(self.breaks) == seen or self.deadline is None:
            return
        why = self.breaks[-1]
        name = getattr(fn, "name", None) or getattr(fn, "__name__", "it")
        raise TraceLoopsCompiled(
            f"it calls the compiled function {name} again after a graph break at line "
            f"{why['lineno']} ({why['reason']}): a Python loop that the trace would unroll, "
            f"tracing {name} again every round, where the plain cell runs it compiled; it runs "
            "plainly")


def note_inline(fn):
    """``fn``, a compiled function, is called inside the active trace: tell its session."""
    session = getattr(active_trace(), "session", None)
    if isinstance(session, GivingUp):
        session.note_inline(fn)
