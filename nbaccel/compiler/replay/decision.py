"""What the user gets: one decision, for a ``%%compile`` cell, an ``nb.compile``'d function or a
training step alike, whether a run goes plain or compiled, and one verdict that says so.

The baseline is always the user's own plain code (the plain cell, the uncompiled function),
timed on the same inputs as the compiled runs, never nbaccel's interpreter. Every run is a
real run of the user's code (it runs exactly once), so measuring costs nothing extra:

1. **Renting before buying.** Compiling costs once; running plainly costs every time. A
   :class:`Decision` that starts plain (``first="plain"``, a cell's default) runs plainly until
   the plain runs together have cost what a compile is expected to cost (the ski-rental rule:
   whatever the number of runs, the total is never more than twice the better choice's), then
   compiles. A notebook run once top to bottom therefore costs what it costs plainly, and a
   cell whose work is smaller than its compile never compiles. ``first="compiled"`` (functions,
   ``%%compile --now``) compiles on the first run.
2. **Measuring.** Once compiled, runs alternate between plain and compiled until each side has
   :data:`PROBES` steady timings (a run that compiled is not steady: its compile is counted
   apart).
3. **Deciding.** The faster side by median runs from then on. A compiled choice keeps being
   timed; when its recent median falls behind the plain median the decision flips to plain and
   says why. The plain side is timed again now and then, after 8, 16, 32, ... compiled runs
   (a cost that vanishes as runs accumulate): twice, and only the second run is a sample, since
   the first plain run after a streak of compiled runs is cold. The plain median is of the last
   :data:`PLAIN_WINDOW` samples, so the first ones, which a notebook's start and the compile
   itself make slow (cold caches, a heap reshaped by the compile, nbaccel's background compiles
   sharing the CPU), leave it as the retimed runs arrive. A code's very first plain run is never
   in the medians either: it pays one-time costs the next runs do not (it still counts as rent
   paid). Symmetrically, a plain choice made by measurement times the compiled side again after
   8, 16, 32, ... plain runs (twice, the second sampled), and turns compiled when that run is
   faster than the plain median by the flip margin: a few probes that a busy machine slowed
   (8-14 ms spikes against 0.3 ms runs were seen), or that the heap's first rounds after a
   compile slowed (a 256² cell's second replay faulted in fresh pages: 6 ms against 0.6 ms),
   do not settle it for good.
4. **Giving up on a compiled side that never settles.** A compiled run that re-traces or still
   waits for its machine code is not a median sample, so a cell whose every run re-traces (it
   reads the clock, say) or whose kernels keep compiling would run compiled forever, unmeasured.
   What such runs cost beyond the plain median (a recompile included: only the first compile
   was the bet) is summed; once that sum exceeds what the first compile cost (at least the
   expected compile, and at least :data:`COMPILE_ESTIMATE`), the code runs plainly and the
   verdict says why: compiling was a bet worth one compile, never more. (A notebook's cell
   that looped ``grad`` 256 times and timed it ran 77 s compiled against 1 s plainly, every
   run.) A trace the decision chose has a budget too (:meth:`Decision.trace_budget`).

:meth:`Decision.verdict` is the one record every renderer shows (the text report, the HTML
fallback, the widget, ``%nbaccel status``): the path and why, plain and compiled medians with
their spread, the ratio or an honest "within noise", the compile cost and the time saved so far.
No renderer computes a ratio or a saving itself.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

PROBES = 3                  # steady runs of each side before the decision
WINDOW = 9                  # recent steady compiled runs kept for the compiled median
# recent plain runs kept for the plain median: once compiled wins, the plain side runs only
# when it is timed again (after 8, 16, 32, ... compiled runs), so a longer window would keep
# the probes, made right after the compile, for hundreds of runs (a 2048² cell's probes ran
# 330-370 ms against 230-245 ms a few runs later: the heap's first rounds after a compile)
PLAIN_WINDOW = PROBES
RESOLUTION_SECONDS = 20e-6  # below this on both sides a ratio is not resolved ("too short to measure")
# what a first compile is expected to cost until one was measured: a cell's first compile with
# a cold disk cache cost 0.3-1 s here (trace and codegen on the cell's thread, numba's machine
# code in the background, on the same 2 cores and GIL); the session's measured compiles replace it
COMPILE_ESTIMATE = 0.5
FLIP_MARGIN = 1.10          # a compiled choice flips to plain when 10% slower than plain
RECHECK_AFTER = 8           # a measured plain choice times the compiled side again after 8, 16, ... runs
# a trace that the decision started on its own (the plain code was timed, nobody asked for the
# compile) may take this many times the plain run, or the expected compile, and at least
# TRACE_BUDGET_MIN, before it gives up and the code runs plainly: a Python loop over 256 grads
# traced for 20 s and ran 33 s compiled, where the plain cell took 0.9 s. The bet stays about
# the size of the rent paid before it (the ski-rental rule): a notebook whose cell gives up
# loses about one more plain run, never tens of them
TRACE_BUDGET_RATIO = 2.0
TRACE_BUDGET_MIN = 1.0


def _fmt(s: float) -> str:
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if s >= scale:
            v = s / scale
            return f"{v:.3g} {unit}"
    return f"{s * 1e9:.3g} ns"


def fmt_ratio(x: float) -> str:
    """'12.3×', '1.52×', '0.043×': two significant digits at least, never '0.0×'."""
    if x >= 10:
        return f"{x:.1f}×"
    if x >= 0.1:
        return f"{x:.2f}×"
    return f"{x:.2g}×"


@dataclass
class Verdict:
    """What a run got, against the user's plain code (JSON-ready through ``to_dict``)."""
    path: str                         # plain | compiled: what this run was
    choice: str                       # plain | compiled | measuring: what runs from now on
    why: str                          # why the choice is what it is
    headline: str                     # the one sentence every renderer shows
    label: str = ""                   # the headline's words beside its ratio (the widget's big number)
    plain_seconds: float | None = None       # median of recent plain runs
    plain_spread: list | None = None         # [fastest, slowest] of those runs
    compiled_seconds: float | None = None
    compiled_spread: list | None = None
    ratio: float | None = None        # plain / compiled; None unmeasured or within noise
    note: str | None = None           # "within noise", "too short to measure", "measuring 2 of 3", ...
    compile_seconds: float = 0.0      # every compile this decision paid
    saved_seconds: float | None = None   # sum over compiled runs of (plain - compiled) - compile
    runs: dict = field(default_factory=lambda: {"plain": 0, "compiled": 0})
    changed: str | None = None        # set on the run where the choice changed: why

    def to_dict(self) -> dict:
        # (by hand: dataclasses.asdict deep-copies field by field, 0.15 ms on every cell run)
        d = dict(self.__dict__)
        d["runs"] = dict(self.runs)
        return d


def output_signature(out):
    """The types, shapes and dtypes of a result: a plain run whose result differs from the
    compiled runs' cannot stand in for them."""
    if isinstance(out, (tuple, list)):
        return (type(out), tuple(output_signature(o) for o in out))
    if isinstance(out, dict):
        return (dict, tuple((k, output_signature(v)) for k, v in out.items()))
    if hasattr(out, "shape") and hasattr(out, "dtype") and not isinstance(out, type):
        return (type(out), tuple(out.shape), str(out.dtype))
    return (type(out), out) if isinstance(out, type) else (type(out),)


class Decision:
    """Plain or compiled for one piece of user code on one kind of input (see the module doc)."""

    def __init__(self, first: str = "plain", compile_estimate: float | None = None,
                 what: str = "cell"):
        if first not in ("plain", "compiled"):
            raise ValueError(f"first must be 'plain' or 'compiled', got {first!r}")
        self.first = first
        self.what = what                              # "cell" | "function" | "step": for the words
        self.compile_estimate = COMPILE_ESTIMATE if compile_estimate is None else compile_estimate
        self.plain: deque = deque(maxlen=PLAIN_WINDOW)  # recent plain run times
        self.compiled: deque = deque(maxlen=WINDOW)   # recent steady compiled run times
        self.plain_total = 0.0                        # all plain time so far (the rent paid)
        self.plain_runs = 0
        self.compiled_runs = 0
        self.compiled_total = 0.0                     # compiled run time, compiles excluded
        self.compile_seconds = 0.0
        self.has_compiled = False
        self.choice: str | None = None                # None: not decided yet
        self.reason = ""
        self._changed: str | None = None
        self._last_path = "plain"
        self._last_steady = False
        self.cell = None                              # the owner's key (a cell's source), for status
        self.last_used = 0.0
        self._plain_stands_in = True                  # False: only the compiled path may run
        self._retime_at = None                        # compiled runs after which plain runs again
        # plain runs left in a retime: two, and only the second is a sample (the first plain
        # run after a streak of compiled runs is cold: a 2048² Game of Life's took 273 ms
        # against 133-138 ms for the next ones and for the plain cell timed from outside)
        self._retime_left = 0
        # what the compiled runs that were not median samples cost beyond the plain median
        # (recompiles included): past what the first compile cost, the compiled side is given
        # up (4.)
        self.unsettled_excess = 0.0
        self.first_compile_seconds = 0.0
        # a plain choice made by measurement times the compiled side again after 8, 16, 32, ...
        # plain runs (two runs, the second sampled): a few noisy probes must not settle it for
        # good. A compiled side given up (it failed, did not settle) is not timed again
        self._recheck_at = None
        self._recheck_left = 0
        self._rechecked: float | None = None       # the last recheck's sampled time
        # the samples a plain choice was made on (and last re-examined on): its headline shows
        # them, not the live median of every plain run since, so that the headline holds still
        # while the choice does (one 64² cell's plain choice read 0.42×, "within noise" and
        # 0.64× on consecutive runs)
        self._shown: tuple | None = None
        # what the plain code costs beyond its timed runs, on every run: a %%compile cell's plain
        # run is timed inside the magic's one-line call, and IPython spends more on the plain
        # cell's own text (magics/cell_clock.py). None: not measured (a function: nothing)
        self.plain_extra: float | None = None
        self.plain_text: str | None = None        # a cell's text without the magic's line

    # -- what runs next -----------------------------------------------------------------------
    def next_path(self) -> str:
        if self._retime_left:
            return "plain"                            # the retime's second, measured run
        if self._recheck_left:
            return "compiled"                         # the recheck's second, measured run
        if self.choice == "plain" and self._recheck_at is not None and \
                self.plain_runs >= self._recheck_at:
            self._recheck_at = 2 * self.plain_runs
            self._recheck_left = 2
            return "compiled"                         # the compiled side, timed again
        if self.choice == "compiled" and self._retime_at is not None and \
                self.compiled_runs >= self._retime_at:
            self._retime_at = 2 * self.compiled_runs
            self._retime_left = 2
            return "plain"                            # the plain side, timed again
        if self.choice is not None:
            return self.choice
        if not self.has_compiled:
            if self.first == "compiled" or self.plain_total >= self.compile_estimate:
                return "compiled"
            return "plain"
        # measuring: alternate, compiled first, until each side has PROBES steady timings
        return "compiled" if len(self.compiled) <= len(self.plain) else "plain"

    def trace_budget(self) -> float | None:
        """How long the next trace may take (None: no limit). Only a compile this decision chose
        is limited (``first="plain"``): one the user asked for (``--now``, a backend, a
        function) traces as long as it takes."""
        if self.first != "plain" or not self.plain_runs:
            return None
        ref = self._median(self.plain) or self.plain_total / self.plain_runs
        return max(TRACE_BUDGET_MIN, TRACE_BUDGET_RATIO * ref, self.compile_estimate)

    def compile_failed(self, why: str):
        """The compiled path cannot run this code (a capture error, too many graph breaks): it
        runs plainly from now on."""
        self._set("plain", why)

    def keep_compiled(self, why: str):
        """The plain code cannot stand in for the compiled runs (it returns other types): the
        compiled runs go on, unmeasured against it."""
        self._plain_stands_in = False
        self._set("compiled", why)
        self.plain.clear()

    # -- what a run took ------------------------------------------------------------------------
    def record(self, path: str, seconds: float, compile_seconds: float = 0.0, steady: bool = True):
        """One run: ``path`` took ``seconds`` of wall time, ``compile_seconds`` of them compiling.
        ``steady=False``: a run that is not yet what later runs will be (this code's faster
        tier still compiling in the background, taking the CPU and the GIL); it counts for the
        time saved and the rent paid, not for the medians."""
        self._changed = None
        self._last_path = path
        if path == "plain":
            cold = self._retime_left == 2                # (a retime's first run is cold too)
            if self._retime_left:
                self._retime_left -= 1
            self._last_steady = steady and not cold and bool(self.plain_runs or self.has_compiled)
            if self._last_steady:                    # (the first plain run is cold too)
                self.plain.append(seconds)
            self.plain_total += seconds
            self.plain_runs += 1
        else:
            run = max(seconds - compile_seconds, 0.0)
            self.compiled_runs += 1
            self.compiled_total += run
            self.compile_seconds += max(compile_seconds, 0.0)
            cold = self._recheck_left == 2               # (a recheck's first run is cold)
            rechecking = bool(self._recheck_left)
            if rechecking:
                self._recheck_left -= 1
            self._last_steady = steady and compile_seconds <= 0 and self.has_compiled and not cold
            if self._last_steady:
                self.compiled.append(seconds)        # steady: nothing compiled on this run
                if rechecking:
                    self._rechecked = seconds
            elif not rechecking:
                self._note_unsettled(run if not self.has_compiled else seconds)
            if not self.has_compiled:
                self.first_compile_seconds = max(compile_seconds, 0.0)
            self.has_compiled = True
        self._decide()

    def add_compile(self, seconds: float):
        """A compile finished in the background (numba's machine code) and cost ``seconds``
        more: it counts against the time saved as the rest of the compile does."""
        self.compile_seconds += max(seconds, 0.0)

    def amend(self, path: str, seconds: float):
        """The last run of ``path`` took ``seconds`` after all: the cell as the user sees it,
        IPython's own work around it included (cell_clock.py), known only once the cell ended."""
        if path == "plain" and self._last_path == "plain" and self._last_steady and self.plain:
            self.plain_total += seconds - self.plain[-1]
            self.plain[-1] = seconds
        elif path == "compiled" and self._last_path == "compiled" and self._last_steady and self.compiled:
            self.compiled_total += seconds - self.compiled[-1]
            self.compiled[-1] = seconds
        else:
            return
        if self.choice is not None or (len(self.plain) >= PROBES and len(self.compiled) >= PROBES):
            self._decide()

    def _note_unsettled(self, run):
        """A compiled run that is not a median sample cost ``run`` seconds (the first compile
        aside, a later one included)."""
        ref = self._plain_median(self.plain)
        if ref is None and self.plain_runs:          # (only the cold first run so far: a
            ref = self.plain_total / self.plain_runs   # generous reference)
        if ref is not None and self._plain_stands_in:
            self.unsettled_excess += max(run - ref, 0.0)

    def _decide(self):
        p, c = self._plain_median(self.plain), self._median(self.compiled)
        # (at least the default estimate: a session of warm caches estimates compiles at tens
        # of ms, while a new cell's machine code still takes seconds in the background)
        budget = max(self.first_compile_seconds, self.compile_estimate, COMPILE_ESTIMATE)
        if self.choice != "plain" and self._plain_stands_in and self.unsettled_excess > budget:
            self._set("plain", f"the compiled {self.what} did not settle (it re-traced or its "
                               f"kernels were still compiling): its runs cost {_fmt(self.unsettled_excess)} "
                               f"more than plain runs, more than its compile ({_fmt(budget)}): "
                               f"it runs plainly")
            return
        if self.choice is None:
            if len(self.plain) >= PROBES and len(self.compiled) >= PROBES:
                if c < p:
                    self._set("compiled", f"the compiled {self.what} measured faster than the plain "
                                          f"one ({_fmt(c)} against {_fmt(p)})")
                else:
                    self._set("plain", f"the plain {self.what} measured as fast or faster "
                                       f"({_fmt(p)} against {_fmt(c)} compiled): it runs plainly",
                              recheck=True)
        elif self.choice == "compiled" and len(self.compiled) >= PROBES and p is not None \
                and c > FLIP_MARGIN * p:
            self._set("plain", f"the compiled {self.what} became slower than the plain one "
                               f"({_fmt(c)} against {_fmt(p)}): it runs plainly from now on",
                      recheck=True)
        elif self.choice == "plain" and self._rechecked is not None:
            fresh, self._rechecked = self._rechecked, None
            if p is not None and FLIP_MARGIN * fresh < p:
                self.compiled.clear()                # (the probes that chose plain are stale)
                self.compiled.append(fresh)
                self._set("compiled", f"the compiled {self.what}, timed again, measured faster "
                                      f"than the plain one ({_fmt(fresh)} against {_fmt(p)})")
            else:
                self._shown = (tuple(self.plain), tuple(self.compiled))   # re-examined: still plain

    def _set(self, choice, why, recheck=False):
        """``recheck``: a plain choice made by measurement, so the compiled side is timed again
        now and then (a compiled side that failed or did not settle is not)."""
        if choice != self.choice:
            self._changed = why
        self.choice, self.reason = choice, why
        self._shown = (tuple(self.plain), tuple(self.compiled)) if choice == "plain" and recheck \
            else None
        self._retime_at = max(8, 2 * self.compiled_runs) if choice == "compiled" and \
            self._plain_stands_in else None
        self._recheck_at = max(RECHECK_AFTER, 2 * self.plain_runs) if choice == "plain" and recheck \
            else None

    @staticmethod
    def _median(xs):
        if not xs:
            return None
        s = sorted(xs)        # (statistics.median's own arithmetic, without its checks: a
        n = len(s)            # replayed cell asks for medians on every run)
        return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2

    def _plain_median(self, xs):
        p = self._median(xs)
        return p + self.plain_extra if p is not None and self.plain_extra else p

    # -- what the user is told -------------------------------------------------------------------
    def saved_seconds(self) -> float | None:
        """Sum over compiled runs of (plain median - that run), minus every compile: None until
        the plain code was timed."""
        p = self._plain_median(self.plain)
        if p is None:
            return None
        return self.compiled_runs * p - self.compiled_total - self.compile_seconds

    def frozen(self) -> "Decision":
        """A copy of the state a verdict reads, as it is now (~1 µs): its ``verdict()`` later says
        what ``verdict()`` says now (a replayed cell's report computes it only when read)."""
        snap = object.__new__(Decision)
        snap.__dict__.update(self.__dict__)
        snap.plain, snap.compiled = tuple(self.plain), tuple(self.compiled)
        return snap

    def verdict(self) -> Verdict:
        plain, compiled = self._shown if self._shown and self.choice == "plain" else \
            (self.plain, self.compiled)
        p, c = self._plain_median(plain), self._median(compiled)
        extra = self.plain_extra or 0.0
        v = Verdict(path=self._last_path, choice=self.choice or "measuring", why=self.reason,
                    headline="", plain_seconds=p, compiled_seconds=c,
                    plain_spread=[min(plain) + extra, max(plain) + extra] if plain else None,
                    compiled_spread=[min(compiled), max(compiled)] if compiled else None,
                    compile_seconds=self.compile_seconds, saved_seconds=self.saved_seconds(),
                    runs={"plain": self.plain_runs, "compiled": self.compiled_runs},
                    changed=self._changed)
        plain_word = f"plain {self.what}"
        if p is not None and c is not None:
            noise = (p - extra - min(plain)) + (c - min(compiled))
            if max(p, c) < RESOLUTION_SECONDS:
                v.note = "too short to measure"
            elif abs(p - c) <= noise:
                v.note = "within noise"
            else:
                v.ratio = p / c
        if not self.has_compiled:
            v.choice = self.choice or "plain"
            v.why = v.why or (f"the {self.what} runs plainly until its runs have cost what compiling "
                              f"it is expected to ({_fmt(self.plain_total)} of ~{_fmt(self.compile_estimate)})")
            v.label = "ran plainly (not compiled yet: compiling would not pay off so far)"
        elif v.ratio is not None:
            v.label = f"{'faster' if v.ratio >= 1 else 'slower'} than the {plain_word}"
        elif v.note == "too short to measure":
            v.label = f"too short to measure (both under {_fmt(RESOLUTION_SECONDS)})"
        elif v.note == "within noise":
            v.label = f"same speed as the {plain_word} (within noise)"
        else:
            v.label = f"not compared with the {plain_word} yet"
        if self.choice is None and self.has_compiled:
            n = min(len(self.plain), len(self.compiled))
            v.note = (v.note + "; " if v.note else "") + f"measuring, {n} of {PROBES} runs each"
            v.why = v.why or f"timing the plain and the compiled {self.what} on these inputs"
        if self.choice == "plain" and self.has_compiled:
            v.label += " · runs plainly"
        v.headline = f"{fmt_ratio(v.ratio)} {v.label}" if v.ratio is not None else v.label
        return v
