"""CompileReport: what one compiled call did, as plain JSON-serialisable data."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field


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

    def measure_eager(self):
        """Finish the report when it is first read: render the graph and code text, and run the
        captured graphs op by op through the reference interpreter (once) for the baseline."""
        texts = self.__dict__.pop("_text_thunks", None)
        if texts:
            self.graph = "\n\n".join(g() for g, _ in texts)
            self.code = "\n\n".join(c() for _, c in texts)
        thunks = self.__dict__.pop("_eager_thunks", None)
        if thunks:
            times = [t() for t in thunks]
            if all(x is not None for x in times):
                self.eager_seconds = sum(times)
                if self.compiled_seconds > 0:
                    self.speedup = self.eager_seconds / self.compiled_seconds
            if self.history:
                self.history[-1]["eager_seconds"] = self.eager_seconds

    def to_dict(self) -> dict:
        self.measure_eager()
        d = asdict(self)
        return json.loads(json.dumps(d, default=str))

    def summary(self) -> str:
        sp = f"{self.speedup:.1f}x" if self.speedup else "n/a"
        return (f"{self.name}: {sp} speedup ({self.cache}, {self.tier} tier, "
                f"{len(self.kernels)} kernels, {len(self.recompiles)} recompiles, "
                f"{len(self.graph_breaks)} graph breaks)")

    def __repr__(self):
        return f"<CompileReport {self.summary()}>"
