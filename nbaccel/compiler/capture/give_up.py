"""When a trace stops early because finishing it cannot pay (docs/cheap-path.md, "A compile is a
bet worth one compile, never more"). Each raises a :class:`TraceTooCostly`, and the caller runs
the code plainly (a %%compile cell, and its later runs) or eagerly (a compiled function).

* :meth:`GivingUp._check_deadline`: the trace ran past the budget the cell's decision gave it
  (``TraceSession.deadline``), or would once its pending graph compiled.
* :meth:`GivingUp.note_view_not_shared`: a view the code hands back cannot share its base's
  memory after the compiled run (views.py's ``share_views``), so it would be a quiet copy.
* :meth:`GivingUp.note_inline`: the traced code calls a compiled function again after a graph
  break since its last call.
* :meth:`GivingUp.note_input_write`: the traced code writes into an input whose memory another
  input shares, or an array the code reaches untraced (``raw_aliases``: a %%compile cell's view
  held in a list); not a cost: the trace cannot keep the two in step, and the plain code can.

(The graph-break limit, ``TooManyGraphBreaks``, is checked where a break is recorded.)
"""
from __future__ import annotations

import time

import numpy as np

from ...dispatch import active_trace
from .user_code import TraceAliasedInputs, TraceLoopsCompiled, TraceOverBudget, TraceViewNotShared

_BUDGET_EVERY = 256     # ops between two looks at the clock (a look costs ~0.1 µs per op)
# what compiling a graph is expected to cost per node, for the deadline's look before a flush:
# a 34,000-op graph (256 unrolled grads) took 16 s to schedule and build, ~0.5 ms a node
_COMPILE_SECONDS_PER_NODE = 0.25e-3


def arrays_share_memory(a, b) -> bool:
    """Whether arrays ``a`` and ``b`` share memory (True where NumPy cannot tell cheaply; the
    magics' scan for arrays a cell reaches untraced asks it too: magics/raw_aliases.py)."""
    if not np.may_share_memory(a, b):
        return False
    try:
        return bool(np.shares_memory(a, b, max_work=10_000))
    except np.exceptions.TooHardError:
        return True


class GivingUp:
    """A TraceSession's give-ups (it provides ``deadline``, ``t_start``, ``_recorded``,
    ``breaks``, ``inlined``, ``names``, ``placeholders_made``, ``raw_aliases``, ``kept_outside``,
    ``view_of`` and ``_keep``)."""

    def note_input_write(self, source):
        """The traced code writes into ``source``, a concrete array the trace reads as an input.
        Another input that shares its memory (``b = a[:2]`` bound in an earlier cell, then
        ``a[0] = 5; print(b)``) is a separate value to the graph, which would read its old value
        after the write: give up, and the code runs plainly, where NumPy's memory is shared."""
        data = getattr(source, "_data", None)
        if not isinstance(data, np.ndarray) or not data.size:
            return
        for _, other in self.placeholders_made:
            o = getattr(other, "_data", None)
            if other is source or o is data or not isinstance(o, np.ndarray) or not o.size:
                continue
            if arrays_share_memory(data, o):
                names = [self.names.get(id(t), "an input") for t in (source, other)]
                raise TraceAliasedInputs(
                    f"it writes into {names[0]}, which shares memory with {names[1]} (a view and "
                    "its base): the compiled code would hold them apart; it runs plainly")
        for raw, desc, name, _ in self.raw_aliases:
            # an array the code reads untraced (held in a list, say): a plain read of it after
            # the write would run before the trace computed the write
            if arrays_share_memory(data, raw):
                raise TraceAliasedInputs(
                    f"it writes into {self.names.get(id(source), name)}, which shares memory with "
                    f"{desc}, an array it reaches untraced: the compiled code would hold them "
                    "apart; it runs plainly")

    def check_raw_writes(self):
        """After the last flush: give up where an array the code reached untraced and that shares
        an input's memory changed (``raw_aliases``: ``lst[0][0] = 9`` with ``lst = [a[:2]]``). The
        plain write went to memory at once, before the trace computed its pending reads of the
        input (``c = a * 2`` above it), which may have seen the new values."""
        for raw, desc, name, saved in self.raw_aliases:
            if raw.tobytes() != saved.tobytes():
                raise TraceAliasedInputs(
                    f"it writes into {desc}, an array it reaches untraced, which shares memory "
                    f"with {name}: the compiled code would hold them apart; it runs plainly")

    def note_kept_outside(self, t, who):
        """Tracer ``t``'s NumPy array was handed to ``who``, code outside NumPy's namespace that
        kept it or views of it (``rows = list(x)``). A later write into ``t`` (or the array it
        views) would go to the graph's new array, which the kept one never sees: give up then
        (``check_kept_write``)."""
        kept = self.kept_outside
        kept[id(t)] = who
        info = self.view_of.get(id(t))
        if info is not None:
            kept[id(info[0])] = who
            self._keep.append(info[0])
        self._keep.append(t)

    def check_kept_write(self, target):
        """Give up on a write into a tracer whose array code outside the trace kept."""
        who = self.kept_outside.get(id(target))
        if who is not None:
            raise TraceAliasedInputs(
                f"it writes into an array it handed to {who}, which kept it: the compiled code "
                "would write a new array, which the kept one never sees; it runs plainly")

    def note_view_not_shared(self, view, why):
        """A view the call hands back cannot share its base's final memory (``why``, from
        views.py's ``_share``): handed back as its own array, a later write into either side
        would not show in the other, as it does plainly. Give up: the code runs plainly."""
        root = self.view_of.get(id(view), (None,))[0]
        of = self.names.get(id(self.sources.get(id(root), root)), "a value it computes")
        raise TraceViewNotShared(
            f"a view of {of} that it hands back cannot share that array's memory after the "
            f"compiled run ({why}); it runs plainly")

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
