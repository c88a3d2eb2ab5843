"""Guards: cache keys, recompile reasons and automatic dynamic shapes.

Because the function is traced again on every call, the trace itself is the guard: the
key is the graph's structural fingerprint (ops, params, wiring, input dtypes and shapes).
Correctness never depends on guessing which globals a function reads.

Automatic dynamic shapes: the first compile is static. When a later trace misses and
differs from the closest earlier entry *only* in some input sizes, those dims become
symbols and one dynamic entry is compiled; later calls that differ only there hit it.
Sizes 0 and 1 stay specialised (they change broadcasting and emptiness).
"""
from __future__ import annotations

from ..schedule.ir import Graph

SPECIALISED_SIZES = (0, 1)


def _sym(pi, d):
    return f"s{pi}_{d}"


def dynamic_spec(graph: Graph, dims: dict[int, set]) -> dict | None:
    """{placeholder index: {dim: symbol}} for this graph, or None when a marked size is 0/1."""
    spec = {}
    for pi, ds in dims.items():
        if pi >= len(graph.placeholders):
            return None
        p = graph.placeholders[pi]
        for d in ds:
            if d >= len(p.shape):
                return None
            if p.shape[d] in SPECIALISED_SIZES:
                return None
            spec.setdefault(pi, {})[d] = _sym(pi, d)
    return spec


def all_dims(graph: Graph) -> dict[int, set]:
    return {p.index: {d for d, s in enumerate(p.shape) if s not in SPECIALISED_SIZES}
            for p in graph.placeholders}


def shape_only_diff(new: Graph, old_structure) -> dict[int, set] | None:
    """If ``new`` differs from an earlier structure only in input sizes, the dims that differ."""
    ins_new, body_new, outs_new = new.structure({})
    ins_old, body_old, outs_old = old_structure
    if body_new != body_old or outs_new != outs_old or len(ins_new) != len(ins_old):
        return None
    dims: dict[int, set] = {}
    for i, ((dt_n, sh_n), (dt_o, sh_o)) in enumerate(zip(ins_new, ins_old)):
        if dt_n != dt_o or len(sh_n) != len(sh_o):
            return None
        for d, (a, b) in enumerate(zip(sh_n, sh_o)):
            if a != b:
                if isinstance(b, str):      # already symbolic in the old entry
                    continue
                if a in SPECIALISED_SIZES or b in SPECIALISED_SIZES:
                    return None
                dims.setdefault(i, set()).add(d)
    return dims


def explain_miss(new: Graph, old_structure, old_names) -> str:
    """A readable reason: the first difference from the closest earlier entry."""
    ins_new, body_new, outs_new = new.structure({})
    ins_old, body_old, outs_old = old_structure
    names = [p.name for p in new.placeholders]
    reasons = []
    if len(ins_new) != len(ins_old):
        reasons.append(f"number of inputs: {len(ins_old)} → {len(ins_new)}")
    for i, ((dt_n, sh_n), (dt_o, sh_o)) in enumerate(zip(ins_new, ins_old)):
        nm = names[i]
        if dt_n != dt_o:
            reasons.append(f"{nm}.dtype: {dt_o} → {dt_n}")
        if len(sh_n) != len(sh_o):
            reasons.append(f"{nm}.ndim: {len(sh_o)} → {len(sh_n)}")
            continue
        for d, (a, b) in enumerate(zip(sh_n, sh_o)):
            if a != b and not isinstance(b, str):
                reasons.append(f"{nm}.shape[{d}]: {b} → {a}")
    if reasons:
        return ", ".join(reasons[:4]) + (f" (+{len(reasons) - 4} more)" if len(reasons) > 4 else "")
    for i, (bn, bo) in enumerate(zip(body_new, body_old)):
        if bn != bo:
            node = new.nodes[i]
            where = f" at line {node.where[1]}" if getattr(node, "where", None) else ""
            if bn[0] != bo[0]:
                return f"a different branch was taken{where}: {bo[0]} → {bn[0]}"
            if bn[2] != bo[2]:
                changed = [f"{k}: {_short(dict(bo[2]).get(k))} → {_short(v)}" for k, v in bn[2]
                           if dict(bo[2]).get(k) != v]
                return f"a constant changed{where} ({node.op.name}: {', '.join(changed)})"
            consts = [(a[1], b[1]) for a, b in zip(bn[1], bo[1]) if a != b and a[0] != "%" and a[0] != "$"]
            if consts and len(bn[1]) == len(bo[1]):
                changed = ", ".join(f"{_short(o)} → {_short(v)}" for v, o in consts)
                return f"a constant changed{where} ({node.op.name}: {changed})"
            return f"the graph changed{where} ({node.op.name} reads different inputs)"
    if len(body_new) != len(body_old):
        return f"a different path through the code: {len(body_old)} → {len(body_new)} ops"
    return "different outputs"


def _short(v):
    if isinstance(v, tuple) and len(v) == 2 and v[0] == "dtype":
        return v[1]
    return repr(v)


def similarity(new: Graph, old_structure) -> tuple:
    ins_new, body_new, _ = new.structure({})
    ins_old, body_old, _ = old_structure
    same_ops = sum(1 for a, b in zip(body_new, body_old) if a[0] == b[0])
    same_in = sum(1 for a, b in zip(ins_new, ins_old) if a == b)
    return (same_ops - abs(len(body_new) - len(body_old)), same_in)
