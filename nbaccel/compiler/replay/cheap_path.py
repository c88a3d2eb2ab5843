"""The cheap path: small graphs are not worth compiling into kernels.

A graph over a few thousand elements costs NumPy a microsecond or two per op. Scheduling it
into kernels, and then running each kernel's views, chunk buffers and calls, costs more than
that on every call, so a compiled small cell was 0.06×–0.7× the plain cell. The cheap path
avoids it:

* **A cheap graph** (:func:`graph_choice`): a graph whose eager cost, estimated from its sizes
  (:func:`estimate_eager_seconds`), is below ``config["cheap_graph_seconds"]`` runs as one
  generated straight-line NumPy function (:class:`CheapProgram`): each op's eager
  implementation called once, in order — the reference interpreter's semantics without its
  per-op bookkeeping, no decomposition, no scheduling, no kernels.

The choice is made from sizes, never by re-running user code; ``report.path`` names the path
that ran, ``report.path_reason`` why. Whether a ``%%compile`` cell runs plainly at all is not
decided here: that is the one decision of ``decision.py``, from measured runs of the user's
plain cell.
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..config import PrefixView, config
from ..runtime.runtime import KernelFreeProgram

# NumPy's cost, measured on the dev box (NumPy 2.4, AVX2): ~0.5 us per call, and per byte of
# the larger of an op's output and inputs ~0.03 ns (float32 add: 0.1 ns an element, float64
# 0.25); transcendental functions ~4x that; a matmul by its multiply-adds; the ops that run
# scalar code per element by their price per element (ELEMENT_SECONDS)
OP_SECONDS = 0.5e-6
BYTE_SECONDS = 0.03e-9
HEAVY_OPS = {"exp", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "tanh", "asin", "acos",
             "atan", "asinh", "acosh", "atanh", "erf", "power", "atan2", "sqrt", "sigmoid", "gelu",
             "softplus", "softmax", "log_softmax", "logsumexp", "sort", "argsort", "median", "cumsum",
             "cumprod", "remainder", "floor_divide", "fmod"}
HEAVY_WEIGHT = 4.0
# ops whose NumPy loop is scalar libm code, priced per element at their worst case over the
# values (an estimate from sizes cannot see the values; measured at 256², loaded machine):
# a float power with an exponent outside NumPy's fast ones (POWER_FAST) runs pow() per element,
# 1-3 ns for a positive base, 7-13 ns for a negative base and a fractional exponent and 53-116 ns
# for a negative base and an integral one (`h ** 3` of a GELU: 220 µs at 64², 7.4 ms at 256²,
# float32 or float64 alike, where an add costs 0.7 µs and 12 µs); a float remainder or
# floor_divide (NumPy's divmod) 18 ns, an integer one 8 ns; cumsum / cumprod 2.7 ns
ELEMENT_SECONDS = {"power": 50e-9, "remainder": 15e-9, "floor_divide": 15e-9, "fmod": 3e-9,
                   "cumsum": 2.5e-9, "cumprod": 2.5e-9}
# float64 sin / cos have no SIMD loop without AVX-512 (9 ns an element; float32's: 0.6 ns)
F64_ELEMENT_SECONDS = {"sin": 8e-9, "cos": 8e-9}
POWER_FAST = (0, 1, 2, -1)      # exponents NumPy's power turns into a copy, a square or 1/x
MATMUL_OPS = {"matmul", "linear", "tensordot", "einsum", "bmm", "mm", "dot", "inner", "outer"}
MAC_SECONDS = 0.25e-9
# what tracing costs per captured op (docs/benchmarks.md: a few microseconds)

# the settings are config keys ("cheap_enabled", "cheap_graph_seconds", ...: config.py);
# SETTINGS[k] is the deprecated spelling of config["cheap_" + k]
SETTINGS = PrefixView("cheap_", "nbaccel.compiler.replay.cheap_path.SETTINGS")


def _numel(shape) -> int:
    return math.prod(shape) if shape else 1


def estimate_eager_seconds(graph) -> float:
    """What running ``graph`` op by op with NumPy would cost, from its sizes only."""
    total = 0.0
    for n in graph.nodes:
        name = n.op.name
        arrays = [a for a in n.args if hasattr(a, "shape") and hasattr(a, "op")]
        if name in MATMUL_OPS:
            k = max([a.shape[-1] for a in arrays if a.shape] or [1])
            total += OP_SECONDS + MAC_SECONDS * _numel(n.shape) * k
            continue
        nbytes = max([_numel(n.shape) * _itemsize(n)] + [_numel(a.shape) * _itemsize(a) for a in arrays])
        weight = HEAVY_WEIGHT if name in HEAVY_OPS else 1.0
        total += OP_SECONDS + max(BYTE_SECONDS * weight * nbytes, _element_seconds(n) * _numel(n.shape))
    return total


def _element_seconds(n) -> float:
    """The per-element price of an op whose NumPy loop is scalar code (ELEMENT_SECONDS), else 0."""
    name = n.op.name
    kind = getattr(getattr(n.dtype, "np", None), "kind", "f")
    if name == "power":
        if kind not in "fc":
            return 0.0              # an integer power: repeated multiplication, as cheap as an add
        exp = n.args[1] if len(n.args) > 1 else None
        if not hasattr(exp, "op") and isinstance(exp, (int, float, np.number)) and exp in POWER_FAST:
            return 0.0
        base = n.args[0] if n.args else None
        if not hasattr(base, "op") and isinstance(base, (int, float, np.integer, np.floating)) and base > 0:
            return 0.0              # 2 ** x: pow() with a positive base, an exp's cost
    if name in F64_ELEMENT_SECONDS and _itemsize(n) == 8 and kind == "f":
        return F64_ELEMENT_SECONDS[name]
    return ELEMENT_SECONDS.get(name, 0.0)


def _itemsize(n) -> int:
    try:
        return int(n.dtype.np.itemsize)
    except Exception:
        return 8


def _fmt(s: float) -> str:
    return f"{s * 1e6:.0f} µs" if s < 1e-3 else f"{s * 1e3:.2f} ms"


def graph_choice(cf, graph):
    """(use the cheap path?, estimated eager seconds, why) for one captured graph."""
    est = estimate_eager_seconds(graph)
    if not config["cheap_enabled"]:
        return False, est, "compiled: the cheap path is switched off"
    if cf.backend != "auto" or cf.mode != "default":   # a backend or mode asked for by name is honoured
        return False, est, f"compiled: backend={cf.backend}, mode={cf.mode} asked for by name"
    if not (getattr(cf, "_in_cell", False) or config["cheap_functions"]):
        return False, est, "compiled (the cheap path is for %%compile cells)"
    # a primitive with its own kernel; a composite that merely keeps its fused eager kernel
    # (LayerNorm, BatchNorm, GELU: decompose.py) is no reason to skip the cheap path
    kernel_op = next((n.op.name for n in graph.nodes
                      if n.op.extern_backend is not None and n.op.primitive), None)
    if kernel_op is not None:   # flash attention, int8/int4, 2:4: the dedicated kernel is the point
        return False, est, f"compiled: the graph calls {kernel_op}, which has its own kernel"
    limit = config["cheap_graph_seconds"]
    if est >= limit:
        return False, est, f"compiled: estimated {_fmt(est)} eagerly, above the cheap path's {_fmt(limit)}"
    elems = max((_numel(n.shape) for n in graph.nodes), default=0)
    why = (f"cheap path: {len(graph.nodes)} ops, at most {elems:,} elements, estimated {_fmt(est)} "
           f"eagerly (below {_fmt(limit)}): one NumPy function instead of kernels")
    return True, est, why


def report_path(events):
    """(path, why) for a report from its graph events: 'compiled', 'cheap' (every graph on the
    cheap graph path) or 'mixed'."""
    if not events:
        return None, None
    cheap = [e for e in events if e.get("tier") == "cheap"]
    whys = [e.get("path_reason") for e in events if e.get("path_reason")]
    if len(cheap) == len(events):
        return "cheap", whys[0] if whys else None
    if cheap:
        return "mixed", f"{len(cheap)} of {len(events)} graphs on the cheap path; " + (whys[-1] or "")
    return "compiled", whys[0] if whys else None


class CheapProgram(KernelFreeProgram):
    """One captured graph as a single generated NumPy function (the cheap graph path). Same
    interface as :class:`~nbaccel.compiler.runtime.runtime.Program`."""

    def __init__(self, graph, estimate: float, why: str):
        t0 = time.perf_counter()
        self.graph = graph
        self.estimate = estimate
        self.why = why
        self.schedule = type("NoSchedule", (), {"refused": [], "steps": []})()
        self.source, ns = _render(graph)
        exec(compile(self.source, "<nbaccel cheap path>", "exec"), ns)   # noqa: S102 - our own code
        self.run_fn = ns["run"]
        self.lowering_seconds = 0.0
        self.codegen_seconds = time.perf_counter() - t0
        self.last_seconds = 0.0

    def run(self, arrays):
        t0 = time.perf_counter()
        out = self.run_fn(arrays)
        self.last_seconds = time.perf_counter() - t0
        return out

    def kernels(self, device="cpu"):
        return [{"name": "cheap", "ops": [n.op.name for n in self.graph.nodes], "device": device,
                 "backend": "numpy", "seconds": self.last_seconds, "note": self.why}]

    def code(self):
        return f"# {self.why}\n{self.source}"

    def tier(self):
        return "cheap"


def _render(graph):
    """``run(inputs) -> outputs``: each node's eager implementation called in order, its result
    made an array of the node's dtype (what the reference interpreter does, unrolled)."""
    ns = {"np": np, "asarray": np.asarray}
    lines = ["def run(inputs):"]
    for p in graph.placeholders:
        lines.append(f"    {_ref(p)} = inputs[{p.index}]")
    for n in graph.nodes:
        ns[f"F{n.index}"] = n.op.impl
        ns[f"D{n.index}"] = n.dtype.np
        args = []
        for j, a in enumerate(n.args):
            if hasattr(a, "op") and hasattr(a, "index"):
                args.append(_ref(a))
            else:
                ns[f"C{n.index}_{j}"] = a
                args.append(f"C{n.index}_{j}")
        call = f"F{n.index}(np{''.join(', ' + x for x in args)}"
        if n.params:
            ns[f"P{n.index}"] = dict(n.params)
            call += f", **P{n.index}"
        lines.append(f"    t = asarray({call}))")
        lines.append(f"    {_ref(n)} = t if t.dtype == D{n.index} else t.astype(D{n.index})")
    lines.append("    return [" + ", ".join(_ref(o) for o in graph.outputs) + "]")
    return "\n".join(lines) + "\n", ns


def _ref(n):
    return f"p{n.index}" if n.is_placeholder else f"v{n.index}"
