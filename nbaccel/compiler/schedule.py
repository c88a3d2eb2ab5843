"""Scheduling (the TorchInductor role, first half): group primitive nodes into kernels.

A *fused kernel* iterates a 2-D domain (R rows × C columns) made from an element shape S
(C = S[-1], R = the product of the rest). Each value in it is an *element* value (shape S)
or a *row* value (one per row: the result of a reduction over the last axis, kept as
S[:-1] + (1,)). So one kernel holds an elementwise chain, or a row reduction together with
its elementwise producers and same-shaped consumers: softmax and layer_norm over the last
dimension become one kernel each.

Everything else is an *extern* step run by the op's own implementation (matmul → BLAS,
indexing, concatenation, reductions over other axes) and *views* (reshape, permute) run as
zero-copy NumPy calls between kernels. Every fusion that was refused is recorded with why.
"""
from __future__ import annotations

import math

from .ir import Graph, Node

VIEW_OPS = {"reshape", "permute"}
IDENTITY_OPS = {"broadcast_to", "detach", "clone"}
ROW_REDUCTIONS = {"sum", "amax", "amin", "prod"}


def is_pointwise(n: Node) -> bool:
    op = n.op
    return (op.kind in ("unary", "binary", "ternary") and op.scalar is not None) \
        or op.name in IDENTITY_OPS or op.name == "full_like"


def is_row_reduction(n: Node) -> bool:
    if n.op.name not in ROW_REDUCTIONS:
        return False
    x = n.args[0]
    axis = n.params.get("axis")
    nd = len(x.shape)
    return nd >= 1 and (axis == (nd - 1,) or (axis is None and nd == 1)) and "dtype" not in n.params


class FusedKernel:
    def __init__(self, index, domain):
        self.index = index
        self.domain = tuple(domain)
        self.C = domain[-1] if domain else 1
        self.R = math.prod(domain[:-1]) if len(domain) > 1 else 1
        self.nodes: list[Node] = []
        self.kind: dict[int, str] = {}       # id(node) -> 'elem' | 'row'
        self.input_cls: dict[int, str] = {}  # id(external node) -> 'elem' | 'row' | 'col' | 'scalar'
        self.inputs: list[Node] = []
        self.outputs: list[Node] = []
        self.name = f"k{index}"

    @property
    def row_shape(self):
        return self.domain[:-1] + (1,) if self.domain else (1,)

    def op_names(self):
        return [n.op.name for n in self.nodes]

    def __repr__(self):
        return f"<FusedKernel {self.name} {self.domain} {self.op_names()}>"


class ExternStep:
    def __init__(self, index, node, why=""):
        self.index = index
        self.node = node
        self.name = f"{node.op.name}_{index}"
        self.why = why

    def op_names(self):
        return [self.node.op.name]


class ViewStep(ExternStep):
    pass


class Schedule:
    def __init__(self, graph: Graph):
        self.graph = graph
        self.steps: list = []
        self.refused: list[dict] = []
        self.owner: dict[int, object] = {}   # id(node) -> step

    @property
    def kernels(self):
        return [s for s in self.steps if isinstance(s, FusedKernel)]

    def describe(self):
        return [{"name": s.name, "ops": s.op_names(),
                 "kind": "fused" if isinstance(s, FusedKernel) else "view" if isinstance(s, ViewStep) else "extern"}
                for s in self.steps]


def input_class(shape, domain):
    """How an external buffer of ``shape`` broadcasts over a kernel domain."""
    nd = len(domain)
    if len(shape) > nd:
        return None
    s = (1,) * (nd - len(shape)) + tuple(shape)
    if s == tuple(domain):
        return "elem"
    if nd and s[-1] == 1 and s[:-1] == tuple(domain[:-1]):
        return "row"
    if nd and all(d == 1 for d in s[:-1]) and s[-1] == domain[-1]:
        return "col"
    if all(d == 1 for d in s):
        return "scalar"
    return "other"


def schedule(graph: Graph) -> Schedule:
    sch = Schedule(graph)
    users: dict[int, list[Node]] = {}
    for n in graph.nodes:
        for a in n.args:
            if isinstance(a, Node):
                users.setdefault(id(a), []).append(n)

    def try_place(k, n):
        """('elem' | 'row', None) if n can run inside k, else (None, why not)."""
        if is_row_reduction(n):
            x = n.args[0]
            if x.shape != k.domain:
                return None, f"it reduces a {x.shape} value, the kernel iterates {k.domain}"
            if sch.owner.get(id(x)) is k:
                if k.kind[id(x)] != "elem":
                    return None, "its input is a per-row value"
            elif k.input_cls.get(id(x), "elem") != "elem":
                return None, f"input {x.ref()} is already read per-row"
            else:
                k.input_cls[id(x)] = "elem"
            return "row", None
        as_kind = "elem" if n.shape == k.domain else \
            "row" if n.shape in (k.row_shape, k.domain[:-1]) and k.domain else None
        if as_kind is None:
            return None, f"shape {n.shape} differs from the kernel domain {k.domain}"
        classes = {}
        why = can_join(k, n, as_kind, classes)
        if why is None:
            k.input_cls.update(classes)
            return as_kind, None
        return None, why

    def new_kernel(domain):
        k = FusedKernel(len(sch.steps), domain)
        sch.steps.append(k)
        return k

    def can_join(k, n, as_kind, classes):
        """None if node n can run inside kernel k as an 'elem' or 'row' op, else why not.
        Fills ``classes`` with how each external input would be read."""
        for a in n.args:
            if not isinstance(a, Node):
                continue
            if sch.owner.get(id(a)) is k:
                kind = k.kind[id(a)]
                if as_kind == "elem":
                    ok = (kind == "elem" and a.shape == k.domain) or (kind == "row" and a.shape == k.row_shape)
                else:
                    ok = kind == "row" and a.shape == n.shape
                if not ok:
                    return f"{a.ref()} (shape {a.shape}) is not read the same way in {k.name}"
                continue
            if as_kind == "elem":
                cls = input_class(a.shape, k.domain)
                if cls in (None, "other"):
                    return f"input {a.ref()} of shape {a.shape} does not broadcast simply over {k.domain}"
            elif a.shape == n.shape:
                cls = "row"
            elif len(a.shape) <= len(n.shape) and all(d == 1 for d in a.shape):
                cls = "scalar"
            else:
                return f"input {a.ref()} of shape {a.shape} is not per-row"
            # one buffer is read one way per kernel (a (C,) vector of a C×C domain could be
            # either a column or a row vector)
            if k.input_cls.get(id(a), cls) != cls or classes.get(id(a), cls) != cls:
                return f"input {a.ref()} would be read both per-row and per-column"
            classes[id(a)] = cls
        return None

    for n in graph.nodes:
        if n.op.name in VIEW_OPS:
            step = ViewStep(len(sch.steps), n)
            sch.steps.append(step)
            sch.owner[id(n)] = step
            continue
        if is_pointwise(n) or is_row_reduction(n):
            # candidates: fused kernels that run after every producer of n, newest first
            after = max((sch.owner[id(a)].index for a in n.args
                         if isinstance(a, Node) and id(a) in sch.owner), default=-1)
            placed = False
            for k in reversed(sch.steps):
                if k.index < after:
                    break
                if not isinstance(k, FusedKernel):
                    continue
                kind, why = try_place(k, n)
                if kind is not None:
                    k.nodes.append(n)
                    k.kind[id(n)] = kind
                    sch.owner[id(n)] = k
                    placed = True
                    break
                if k.index == after:
                    sch.refused.append({"node": n.ref(), "op": n.op.name, "kernel": k.name, "why": why})
            if not placed:
                k = new_kernel(n.args[0].shape if is_row_reduction(n) else n.shape)
                kind, why = try_place(k, n)     # also records how it reads its inputs
                if kind is None:
                    raise AssertionError(f"internal: {n} cannot start a kernel: {why}")
                k.kind[id(n)] = kind
                k.nodes.append(n)
                sch.owner[id(n)] = k
            continue
        step = ExternStep(len(sch.steps), n)
        sch.steps.append(step)
        sch.owner[id(n)] = step

    # wire kernel inputs and outputs
    outset = {id(o) for o in graph.outputs}
    for k in sch.kernels:
        seen = set()
        for n in k.nodes:
            for a in n.args:
                if isinstance(a, Node) and sch.owner.get(id(a)) is not k and id(a) not in seen:
                    seen.add(id(a))
                    k.inputs.append(a)
        for n in k.nodes:
            outside = [u for u in users.get(id(n), []) if sch.owner.get(id(u)) is not k]
            if id(n) in outset or outside:
                k.outputs.append(n)
        names = [n.op.name for n in k.nodes if n.op.name not in IDENTITY_OPS]
        k.name = f"k{k.index}_" + "_".join(dict.fromkeys(names))[:48] if names else f"k{k.index}_copy"
    return sch
