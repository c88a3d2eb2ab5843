"""The Dask side of a compiled call's report: stages, task counts against plain Dask, chunks.

The plain graph's task count is measured by running the captured graph op by op with Dask's
own NumPy functions (the same ops the plain call makes), built lazily and never computed.
"""
from __future__ import annotations

import sys

import numpy as np

from ..compiler.report import CompileReport


def task_count(arrays) -> int:
    """Tasks of the graph that computes ``arrays`` together, after Dask's own optimisation
    (blockwise fusion), which is what a ``compute`` runs."""
    import dask
    arrays = [a for a in arrays if hasattr(a, "__dask_graph__")]
    if not arrays:
        return 0
    opt = dask.optimize(*arrays)
    keys = set()
    for a in opt:
        keys.update(dict(a.__dask_graph__()).keys())
    return len(keys)


_NUMPY_NAMES = {"amax": "max", "amin": "min", "asin": "arcsin", "acos": "arccos", "atan": "arctan",
                "asinh": "arcsinh", "acosh": "arccosh", "atanh": "arctanh", "atan2": "arctan2",
                "bitwise_invert": "invert", "bitwise_left_shift": "left_shift",
                "bitwise_right_shift": "right_shift", "pow": "power"}


def plain_outputs(graph, inputs, nodes):
    """The plain Dask arrays for ``nodes`` (None when an op has no NumPy twin here)."""
    vals = {}
    for p in graph.placeholders:
        vals[p] = inputs[p.index]

    def get(a):
        return vals[a] if hasattr(a, "graph") and hasattr(a, "op") else a

    for n in graph.nodes:
        name = n.op.name
        args = [get(a) for a in n.args]
        params = {k: (v.np if hasattr(v, "np") and k == "dtype" else v) for k, v in n.params.items()
                  if k != "device"}
        if name == "astype":
            vals[n] = args[0].astype(params["dtype"]) if hasattr(args[0], "astype") else np.asarray(args[0])
            continue
        if name in ("var", "std"):
            params["ddof"] = params.pop("correction", 0.0)
        if name in ("softmax", "log_softmax"):
            x, ax = args[0], params["axis"]
            s = x - x.max(axis=ax, keepdims=True)
            lse = np.log(np.exp(s).sum(axis=ax, keepdims=True))
            vals[n] = np.exp(s - lse) if name == "softmax" else s - lse
            continue
        fn = getattr(np, _NUMPY_NAMES.get(name, name), None)
        if fn is None:
            return None
        if name in ("argmax", "argmin") and isinstance(params.get("axis"), tuple):
            params["axis"] = params["axis"][0]
        vals[n] = fn(*args, **params)
    return [vals[n] for n in nodes]


def _client():
    mod = sys.modules.get("distributed")
    if mod is None:
        return None
    try:
        return mod.default_client()
    except ValueError:
        return None


class DaskReport(CompileReport):
    """A CompileReport whose Dask facts (task counts, chunks, dashboard) are measured when the
    report is first read, never on the call (building the plain graph costs milliseconds)."""

    def measure_eager(self):
        pending = self.__dict__.pop("_dask_pending", None)
        if pending is not None:
            outs, plain = pending
            self.dask = {"tasks": task_count(outs), "plain_tasks": _plain_count(plain),
                         "stages": len(self.kernels),
                         "chunks": [[list(c) for c in a.chunks] for a in outs if hasattr(a, "chunks")],
                         "dashboard": _dashboard()}
            self.path_reason = _reason_text(self.dask)
        super().measure_eager()

    def to_dict(self):
        d = super().to_dict()
        d["dask"] = getattr(self, "dask", {})
        return d


def dask_report(cf, plan, lowering, inputs, outs, seconds):
    rep = DaskReport(name=cf.name, backend=cf.backend, mode=cf.mode, tier="dask", path="dask")
    rep.graphs = len(lowering.stages)
    rep.graph = str(plan.graph)
    rep.code = "\n".join(s["source"] for s in lowering.stages)
    kinds = {"blockwise": "blockwise", "reduction": "reduction (partial per chunk, combine, aggregate)"}
    rep.kernels = [{"name": f"stage{i}", "ops": s["ops"], "device": "dask", "backend": _backend(cf),
                    "kind": kinds[s["kind"]], "key": s["key"]} for i, s in enumerate(lowering.stages)]
    rep.compile_seconds = seconds
    rep.call_seconds = seconds
    rep.first_call_seconds = seconds
    rep.path_reason = f"Dask: {len(rep.kernels)} compiled stages"
    rep._dask_pending = (outs, (plan.graph, inputs, _output_nodes(plan, lowering, outs)))
    rep.stats = dict(cf.stats)
    return rep


def _dashboard():
    client = _client()
    return getattr(client, "dashboard_link", None) if client is not None else None


def _output_nodes(plan, lowering, outs):
    by_arr = {id(a): n for n, a in lowering.memo.items()}
    return [by_arr[id(a)] for a in outs if id(a) in by_arr]


def _plain_count(plain):
    """The plain Dask graph's task count for the same outputs (None when unknown)."""
    graph, inputs, nodes = plain
    try:
        outs = plain_outputs(graph, inputs, nodes)
        return None if outs is None else task_count(outs)
    except Exception:   # noqa: BLE001 - an op whose NumPy twin takes other arguments: unknown
        return None


def _reason_text(d):
    stages = d["stages"]
    text = f"Dask: {stages} compiled stage{'s' * (stages != 1)}, {d['tasks']} tasks"
    if d["plain_tasks"]:
        text += f" (plain Dask: {d['plain_tasks']})"
    if d["dashboard"]:
        text += f"; dashboard {d['dashboard']}"
    return text


def fallback_report(cf, reason, seconds):
    rep = CompileReport(name=cf.name, backend=cf.backend, mode=cf.mode, tier="dask", path="plain")
    rep.fallback = f"ran plainly on Dask: {reason}"
    rep.path_reason = rep.fallback
    rep.graph_breaks = [{"reason": reason, "line": None}]
    rep.call_seconds = seconds
    rep.stats = dict(cf.stats)
    return rep


def _backend(cf):
    return cf.backend if cf.backend in ("numba", "numpy") else "auto"
