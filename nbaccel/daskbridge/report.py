"""The Dask side of a compiled call's report: stages, task counts against plain Dask, chunks.

The plain graph's task count is measured by running the captured graph op by op with Dask's
own NumPy functions (the same ops the plain call makes), built lazily and never computed.
"""
from __future__ import annotations

import sys


from ..compiler.report.report import CompileReport
from .twins import dask_twin


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


def plain_outputs(graph, inputs, nodes):
    """The plain Dask arrays for ``nodes``: the graph op by op with Dask's own NumPy calls."""
    vals = {p: inputs[p.index] for p in graph.placeholders}
    for n in graph.nodes:
        vals[n] = dask_twin(n, [vals[a] if hasattr(a, "graph") and hasattr(a, "op") else a for a in n.args])
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
                         "stages": sum(k["kind"] != _KINDS["dask"] for k in self.kernels),
                         "chunks": [[list(c) for c in a.chunks] for a in outs if hasattr(a, "chunks")],
                         "dashboard": _dashboard()}
            self.path_reason = _reason_text(self.dask)
        super().measure_eager()

    def to_dict(self):
        d = super().to_dict()
        d["dask"] = getattr(self, "dask", {})
        return d


_KINDS = {"blockwise": "blockwise", "reduction": "reduction (partial per chunk, combine, aggregate)",
          "dask": "Dask's own, between compiled stages"}


def dask_report(cf, plan, lowering, inputs, outs, seconds):
    rep = DaskReport(name=cf.name, backend=cf.backend, mode=cf.mode, tier="dask", path="dask")
    rep.graphs = len(lowering.stages)
    rep.graph = str(plan.graph)
    rep.code = "\n".join(s["source"] for s in lowering.stages)
    rep.kernels = [{"name": f"stage{i}", "ops": s["ops"], "device": "dask",
                    "backend": "dask" if s["kind"] == "dask" else _backend(cf),
                    "kind": _KINDS[s["kind"]], "key": s["key"]} for i, s in enumerate(lowering.stages)]
    rep.compile_seconds = seconds
    rep.call_seconds = seconds
    rep.first_call_seconds = seconds
    rep.path_reason = "Dask"
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
