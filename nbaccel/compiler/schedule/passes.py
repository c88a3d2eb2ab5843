"""Graph passes before scheduling: dead-code elimination and common-subexpression elimination.

* DCE keeps what the outputs need (and random draws, whose order is visible in later draws):
  a value computed and never used costs nothing and generates no kernel.
* CSE maps a node to an earlier node with the same op, params and (already merged)
  arguments: the demo's GELU computes ``x*w+b`` three times in the user's code and once here.

Python-scalar operands are already constants in the graph (tracing evaluates Python
arithmetic), so folding them needs no pass of its own.
"""
from __future__ import annotations

from .ir import Graph, Node

_KEEP_KINDS = {"random"}


def _hashable(v):
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    if isinstance(v, float) and v != v:
        return ("nan",)
    try:
        hash(v)
        return (type(v).__name__, v)
    except TypeError:
        return ("id", id(v))


def prune(graph: Graph):
    """(live nodes in order, {id(node): representative}, {id(node): [users]})."""
    rep: dict[int, Node] = {}
    seen: dict[tuple, Node] = {}

    def canon(a):
        return rep.get(id(a), a) if isinstance(a, Node) else a

    for n in graph.nodes:
        if n.op.kind in _KEEP_KINDS:
            continue
        key = (n.op.name,
               tuple(("n", id(canon(a))) if isinstance(a, Node) else ("s", type(a).__name__, repr(a))
                     for a in n.args),
               _hashable(n.params))
        if key in seen:
            rep[id(n)] = seen[key]
        else:
            seen[key] = n

    live: set[int] = set()
    stack = [canon(o) for o in graph.outputs]
    stack += [n for n in graph.nodes if n.op.kind in _KEEP_KINDS]
    while stack:
        n = stack.pop()
        if id(n) in live or n.is_placeholder:
            continue
        live.add(id(n))
        stack.extend(canon(a) for a in n.args if isinstance(a, Node))
    nodes = [n for n in graph.nodes if id(n) in live and id(n) not in rep]
    users: dict[int, list[Node]] = {}
    for n in nodes:
        for a in n.args:
            if isinstance(a, Node):
                users.setdefault(id(canon(a)), []).append(n)
    return nodes, rep, users
