"""Which nodes of a captured graph are chunk work, and which reductions cross chunks.

Every dim of every value gets an index class (a union-find over dims): broadcasting ties the
dims it lines up, a reduction drops (or, with keepdims, replaces by a fresh size-1 dim) the dims
it reduces. A class is *chunked* when some Dask input has more than one block along it. A
reduction over a chunked class of size > 1 crosses chunks: it becomes a Dask reduction stage
(a compiled partial per chunk, then a combine and an aggregate); every other supported node is
local to a chunk and fuses into the compiled function of the stage that needs it.
"""
from __future__ import annotations

from . import twins   # the ops that run as Dask's own between stages
from .errors import NotChunkWork

# elementwise kinds of the op table, less the ops that are not plain chunk work here
_ELEMENTWISE_KINDS = ("unary", "binary", "ternary")
_NOT_CHUNK_WORK = {"dropout": "draws random numbers", "complex": "complex dtypes run plainly",
                   "real": "complex dtypes run plainly", "imag": "complex dtypes run plainly",
                   "conj": "complex dtypes run plainly", "angle": "complex dtypes run plainly"}
# shape-preserving ops over an axis: chunk work when the axis is one chunk
AXIS_OPS = {"softmax", "log_softmax"}
# reductions and how their partial results combine across chunks
SIMPLE = {"sum": "sum", "prod": "prod", "amax": "max", "amin": "min", "any": "any", "all": "all"}
MOMENTS = {"mean", "var", "std"}
ARGS = {"argmax", "argmin"}
REDUCTIONS = set(SIMPLE) | MOMENTS | ARGS


class _Classes:
    """Union-find over dims; each class root keeps the most blocks any input has along it."""

    def __init__(self):
        self.parent = []
        self.blocks = {}

    def fresh(self, blocks=1):
        self.parent.append(len(self.parent))
        self.blocks[len(self.parent) - 1] = blocks
        return len(self.parent) - 1

    def find(self, i):
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            keep, gone = min(ra, rb), max(ra, rb)
            self.parent[gone] = keep
            self.blocks[keep] = max(self.blocks[keep], self.blocks.pop(gone))


def reduced_axes(node):
    """The axes a reduction node reduces, normalised and sorted."""
    operand = node.args[0]
    nd = len(operand.shape)
    axis = node.params.get("axis")
    if axis is None:
        return tuple(range(nd))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(sorted({a % nd for a in axes})) if nd else ()


class Plan:
    """Index classes of a graph's values, the reductions that cross chunks, and the nodes that
    run as Dask's own between the compiled stages (``foreign``).

    ``input_chunks``: for each placeholder, its chunks (a tuple of tuples), as Dask gives them.
    ``between(node)`` gives Dask's own result for a node that is not chunk work (or raises
    NotChunkWork); the plan is built in graph order, so it may lower the nodes before it.
    """

    def __init__(self, graph, input_chunks):
        self.graph = graph
        self.classes = _Classes()
        self.dims = {}                       # node -> [class id per dim]
        self.cross = set()
        self.foreign = {}                    # node -> its Dask array (Dask's own implementation)
        for p, chunks in zip(graph.placeholders, input_chunks):
            self.dims[p] = [self.classes.fresh(len(c) if p.shape[d] != 1 else 1)
                            for d, c in enumerate(chunks)]

    def build(self, between=None):
        for n in self.graph.nodes:
            try:
                self.dims[n] = self._dims_of(n)
            except NotChunkWork:
                if between is None or n.op.name not in twins.BETWEEN_STAGES:
                    raise
                arr = between(n)
                self.foreign[n] = arr
                self.dims[n] = [self.classes.fresh(len(c) if n.shape[d] != 1 else 1)
                                for d, c in enumerate(arr.chunks)]
                continue
            # decided in graph order: a later broadcast may chunk a class that was one chunk here;
            # the stage that reduces it then still has that class in one chunk among its inputs
            if n.op.name in REDUCTIONS and self._crosses(n):
                self.cross.add(n)
            if n.op.name in AXIS_OPS and self._crosses(n):
                raise NotChunkWork(f"{n.op.name} over an axis split into several chunks "
                                   f"({_where(n)}): rechunk that axis into one chunk to compile it")
        return self

    def letter(self, dim_id):
        return f"i{self.classes.find(dim_id)}"

    def letters(self, node):
        return tuple(self.letter(d) for d in self.dims[node])

    def chunked(self, dim_id):
        return self.classes.blocks[self.classes.find(dim_id)] > 1

    def _crosses(self, n):
        operand = n.args[0]
        axes = reduced_axes(n) if n.op.name in REDUCTIONS else \
            ((n.params.get("axis", -1) % max(len(operand.shape), 1)),)
        return any(operand.shape[a] != 1 and self.chunked(self.dims[operand][a]) for a in axes)

    def _dims_of(self, n):
        name, kind = n.op.name, n.op.kind
        if name in _NOT_CHUNK_WORK:
            raise NotChunkWork(f"{name} ({_where(n)}): {_NOT_CHUNK_WORK[name]}")
        if kind in _ELEMENTWISE_KINDS or name in AXIS_OPS:
            return self._broadcast(n)
        if name in REDUCTIONS:
            operand = n.args[0]
            if not hasattr(operand, "shape") or not hasattr(operand, "op"):
                raise NotChunkWork(f"{name} of a Python value ({_where(n)})")
            axes = reduced_axes(n)
            keep = bool(n.params.get("keepdims", False))
            dims = self.dims[operand]
            return [self.classes.fresh() if a in axes else dims[a] for a in range(len(dims))
                    if keep or a not in axes]
        raise NotChunkWork(f"{name} ({_where(n)}) is not chunk work yet: the call runs plainly on Dask "
                           "(Dask's own implementation)")

    def _broadcast(self, n):
        operands = [a for a in n.args if hasattr(a, "shape") and hasattr(a, "graph")]
        rank = len(n.shape)
        out = []
        for d, size in enumerate(n.shape):
            members = []
            for a in operands:
                k = d - (rank - len(a.shape))
                if k >= 0 and a.shape[k] == size and size != 1:
                    members.append(self.dims[a][k])
            if size == 1 or not members:
                if size != 1:
                    raise NotChunkWork(f"{n.op.name} ({_where(n)}) makes a dim of size {size} that no "
                                       "input has")
                out.append(self.classes.fresh())
                continue
            for m in members[1:]:
                self.classes.union(members[0], m)
            out.append(members[0])
        return out


def _where(n):
    w = getattr(n, "where", None)
    if not w:
        return "the function"
    return f"line {w[1]}"

