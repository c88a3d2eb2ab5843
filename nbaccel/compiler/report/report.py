"""CompileReport: what one compiled call did, as plain JSON-serialisable data."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from ..config import config


@dataclass
class CompileReport:
    name: str = ""
    cache: str = "miss"                 # miss | hit | disk
    tier: str = "numpy"                 # numpy | numba | eager
    pending_tier: str | None = None     # a faster tier still compiling in the background
    backend: str = "auto"
    mode: str = "default"
    device: str = "cpu"
    compile_seconds: float = 0.0
    compile_breakdown: dict = field(default_factory=lambda: {"capture": 0.0, "lowering": 0.0,
                                                             "codegen": 0.0, "jit": 0.0})
    jit_breakdown: dict = field(default_factory=dict)   # jit split: numba typing, lowering, llvm, ...
    eager_seconds: float | None = None
    compiled_seconds: float = 0.0
    speedup: float | None = None
    recompiles: list = field(default_factory=list)
    dynamic_dims: list = field(default_factory=list)
    graph_breaks: list = field(default_factory=list)
    kernels: list = field(default_factory=list)
    refused_fusions: list = field(default_factory=list)
    graph: str = ""
    code: str = ""
    graphs: int = 1
    history: list = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    cache_problem: str | None = None    # why the disk cache is not (fully) used, and the fix
    speedup_note: str | None = None     # "too short to measure": no ratio is shown
    first_call_seconds: float | None = None   # wall time of the first call, compile included
    call_seconds: float | None = None   # wall time of this call (tracing included)
    fallback: str | None = None         # why the call ran plainly (None: it ran compiled)
    transfer_seconds: float | None = None   # %%compile --device cuda: host<->GPU copies of this call
    device_note: str | None = None      # --device auto: why the cell ran where it did
    path: str | None = None             # compiled | cheap | mixed | plain (cheap_path.py)
    path_reason: str | None = None      # why that path ran
    eager_estimate_seconds: float | None = None   # the graphs' eager cost estimated from sizes
    # the headline's baseline: "plain" (the user's own function or cell, timed from the same
    # calls as the compiled run: guarded.py) or "eager" (nbaccel's interpreter on the captured
    # graphs, shown only until plain timings exist, and labelled as such)
    baseline: str = "eager"
    plain_seconds: float | None = None
    replay: dict = field(default_factory=dict)   # guarded replay: state, reason, last failed guard
    # what the user got against their own plain code (decision.py): the one headline every
    # renderer shows; None where no decision ran (an nb.compile'd function before replay)
    verdict: dict | None = None

    def tier_arrived(self, pending: bool):
        """The faster tier that was compiling at the trace (``pending_tier``) is the tier now,
        once nothing is ``pending`` any more."""
        if self.pending_tier and not pending:
            self.tier, self.pending_tier = self.pending_tier, None

    def set_breakdowns(self, compile_breakdown, jit_breakdown=None):
        """The compile time's four parts and, when known, the jit split beside them. (A method,
        not a ``__setattr__`` hook: that made every field write of every report pay a call,
        ~20 µs a report, and a plain run of a cell makes one.)"""
        self.compile_breakdown = compile_breakdown
        if jit_breakdown is not None:
            self.jit_breakdown = jit_breakdown
        self._nest_jit_split()

    def _nest_jit_split(self):
        """``compile_breakdown["jit_split"]``: the ``jit`` seconds split into numba typing,
        numba lowering, llvm, cache save and other (jit_split.py), a copy of ``jit_breakdown``
        kept beside the four parts (it is not a fifth part: the four still add up to the
        compile time). A new dict, so that a caller holding the old one sums plain floats."""
        jb = self.__dict__.get("jit_breakdown")
        bd = self.__dict__.get("compile_breakdown")
        if jb and isinstance(bd, dict) and bd.get("jit_split") != jb:
            object.__setattr__(self, "compile_breakdown", {**bd, "jit_split": dict(jb)})

    def measure_eager(self):
        """Finish the report when it is first read: render the graph and code text, and run the
        captured graphs op by op through the reference interpreter (once) for the baseline."""
        texts = self.__dict__.pop("_text_thunks", None)
        if texts:
            self.graph = "\n\n".join(g() for g, _ in texts)
            self.code = "\n\n".join(c() for _, c in texts)
        thunks = self.__dict__.pop("_eager_thunks", None)
        if thunks and self.baseline != "plain":
            # each thunk times its graph warm, best of several runs, eager and compiled alike
            pairs = [_baseline(t) for t in thunks]
            if all(p is not None for p in pairs):
                eager = [p[0] if isinstance(p, tuple) else p for p in pairs]
                comp = [p[1] if isinstance(p, tuple) else None for p in pairs]
                self.eager_seconds = sum(e[0] if isinstance(e, list) else e for e in eager)
                if all(c is not None for c in comp):
                    self.compiled_seconds = sum(c[0] for c in comp)
                    # the spread of the runs: median minus best, on both sides
                    noise = sum(c[len(c) // 2] - c[0] for c in comp) + sum(
                        e[len(e) // 2] - e[0] for e in eager if isinstance(e, list))
                else:
                    noise = 0.0
                self._set_speedup(noise)
            if self.history:
                self.history[-1]["eager_seconds"] = self.eager_seconds
                self.history[-1]["compiled_seconds"] = self.compiled_seconds

    def _set_speedup(self, noise=0.0):
        """The ratio, or "too short to measure" below what a timer resolves (tens of µs) or
        when the spread of the runs exceeds the difference."""
        e, c = self.eager_seconds, self.compiled_seconds
        self.speedup, self.speedup_note = None, None
        if e is None or not c or c <= 0:
            return
        if max(e, c) < RESOLUTION_SECONDS or (noise and abs(e - c) < noise):
            self.speedup_note = "too short to measure"
            return
        self.speedup = e / c

    def set_plain(self, plain, compiled, noise, choice):
        """The headline from the user's plain function against the compiled run (guarded.py)."""
        self.baseline = "plain"
        self.plain_seconds, self.compiled_seconds = plain, compiled
        self.eager_seconds = plain
        self.speedup, self.speedup_note = None, None
        if abs(plain - compiled) <= max(noise, TIMER_SECONDS):
            self.speedup_note = "too short to measure" if max(plain, compiled) < RESOLUTION_SECONDS \
                else "same speed as plain (within noise)"
            return
        self.speedup = plain / compiled
        if choice == "plain":
            self.speedup_note = "running plainly from now on"

    def set_verdict(self, v):
        """The decision's verdict (decision.Verdict) is this report's headline."""
        self.__dict__.pop("_verdict_due", None)
        self.verdict = v.to_dict()
        self.baseline = "plain"
        self.plain_seconds = v.plain_seconds
        self.speedup = v.ratio
        self.speedup_note = None if v.ratio is not None else (v.note or v.headline)
        if v.path == "compiled" and v.compiled_seconds is not None:
            self.compiled_seconds = v.compiled_seconds
        self.eager_seconds = v.plain_seconds      # (the bars' baseline side: the plain code)

    def to_dict(self) -> dict:
        self.measure_eager()
        d = asdict(self)
        return json.loads(json.dumps(d, default=str))

    def summary(self) -> str:
        self.measure_eager()
        if self.fallback:
            return f"{self.name}: ran plainly ({self.fallback})"
        if self.speedup:
            base = "vs plain" if self.baseline == "plain" else "vs nbaccel eager (captured graphs only)"
            sp = f"{fmt_ratio(self.speedup)} speedup {base}" + (f", {self.speedup_note}" if self.speedup_note else "")
        else:
            sp = self.speedup_note or "speedup n/a"
        return (f"{self.name}: {sp} ({self.cache}, {self.tier} tier, "
                f"{len(self.kernels)} kernels, {len(self.recompiles)} recompiles, "
                f"{len(self.graph_breaks)} graph breaks)")

    def __repr__(self):
        return f"<CompileReport {self.summary()}>"

    def _repr_mimebundle_(self, include=None, exclude=None, **kwargs):
        """In a notebook, the report widget (with text/html and text/plain fallbacks)."""
        try:
            import nbaccel_ext
            d = self.to_dict()
            if nbaccel_ext.widgets_available():
                from nbaccel_ext.widget import _in_kernel
                if _in_kernel():
                    return nbaccel_ext.ReportWidget(d)._repr_mimebundle_(**kwargs)
            return nbaccel_ext.ReportView(d)._repr_mimebundle_()
        except Exception:   # pragma: no cover - the front end must never break a repr
            return {"text/plain": repr(self)}


def _set_verdict_later(self, decision):
    """The verdict of ``decision`` (a ``Decision.frozen()`` copy) is this report's headline, worked
    out when one of the fields it sets is first read: a replayed cell's report is rewritten on
    every run and read on few (the magic's report=none, a widget shown now and then), and
    working it out cost a replay ~10 µs."""
    self.__dict__["_verdict_due"] = decision


def _verdict_field(name):
    """A field that ``set_verdict`` writes: reading or writing it first applies a verdict due."""
    def get(self):
        due = self.__dict__.pop("_verdict_due", None)
        if due is not None:
            self.set_verdict(due.verdict())
        return self.__dict__[name]

    def put(self, value):
        due = self.__dict__.pop("_verdict_due", None)
        if due is not None:
            self.set_verdict(due.verdict())
        self.__dict__[name] = value
    return property(get, put)


CompileReport.set_verdict_later = _set_verdict_later
for _name in ("verdict", "baseline", "plain_seconds", "speedup", "speedup_note", "compiled_seconds",
              "eager_seconds"):
    setattr(CompileReport, _name, _verdict_field(_name))


RESOLUTION_SECONDS = 20e-6
TIMER_SECONDS = 1e-6        # differences below this are not resolved by repeated perf_counter runs


def _baseline(thunk):
    """One graph's (eager, compiled) timings, or None when the baseline cannot run (the report
    then shows no ratio): reading a report must never raise. Tests raise instead
    (``config["strict"]``)."""
    try:
        return thunk()
    except Exception:
        if config.get("strict"):
            raise
        return None


def fmt_ratio(x: float) -> str:
    """'12.3x', '1.52x', '0.043x': two significant digits at least, never '0.0x'."""
    if x >= 10:
        return f"{x:.1f}x"
    if x >= 0.1:
        return f"{x:.2f}x"
    return f"{x:.2g}x"
