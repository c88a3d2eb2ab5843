"""Scheduling (the TorchInductor role, first half): primitive graph → loop-nest kernels.

Each node gets a *lazy value*: an expression of the loop IR (``loops.py``) over the node's
own index space. Pointwise ops build expressions, movement ops rewrite the layouts of their
leaves, a reduction becomes a :class:`Reduction` whose result is an ``acc`` leaf. A value is
*realised* into a buffer only when something needs memory: a graph output, an argument of an
extern op (matmul → BLAS, indexing, ...), a reshape that strides cannot express, or a value
shared by several consumers that is too costly to recompute.

Every realised value and every reduction is a *root*. Roots group into kernels by one rule:
a kernel has one domain D and one set of reduction axes A; a root joins the newest kernel
that runs after everything it reads when

* it is a reduction over D with axes A (or the kernel has no reductions yet), or
* it is a store of shape D (an element output), or of D reduced over A (one value per kept
  index: ``mean = s / n``),

and every reduction result it reads from that kernel is read at the kept index (the
canonical broadcast). Otherwise it reads the reduction's stored buffer from an earlier
kernel. Every refusal is recorded with why. Softmax and layer_norm over any axis, and
``x - x.mean(axis=0)``, are one kernel each.
"""
from __future__ import annotations

from .ir import Graph, Node
from .loops import Expr, Kernel, Layout, Reduction, Store, const, load
from .passes import prune
from ...ops.registry import ELEMENTWISE_KINDS, OPS

SHARE_LIMIT = 24        # a value with several consumers is recomputed while this cheap
INLINE_LIMIT = 400      # an expression larger than this is realised (bounds code size)


def is_pointwise(n: Node) -> bool:
    """An elementwise primitive (the op table's ``elementwise`` group) or a fill constant."""
    op = n.op
    return (op.primitive and op.kind in ELEMENTWISE_KINDS and op.layout is None) or op.fill is not None


def is_fusable_reduction(n: Node) -> bool:
    rule = n.op.reduce
    if rule is None or len(n.args[0].shape) == 0 or n.params.get("axis") == ():
        return False     # a reduction over no axes is a cast: its own implementation runs it
    # argmax/argmin: over one axis, or over all of them (the flat index), as NumPy allows
    return not rule.arg or n.params.get("axis") is None or len(n.params["axis"]) == 1


class ExternStep:
    """A node run whole by its op's eager implementation (BLAS, indexing, an extern kernel).
    ``views`` maps each array argument to the (buffer node, Layout) it is read through."""

    def __init__(self, index, node, views):
        self.index = index
        self.node = node
        self.views = views
        self.name = f"{node.op.name}_{index}"

    def op_names(self):
        return [self.node.op.name]


class Schedule:
    def __init__(self, graph: Graph):
        self.graph = graph
        self.steps: list = []
        self.refused: list[dict] = []
        self.outputs: list = []        # per graph output: (buffer node, Layout) or the placeholder

    @property
    def kernels(self):
        return [s for s in self.steps if isinstance(s, Kernel)]

    def describe(self):
        return [{"name": s.name, "ops": s.op_names(),
                 "kind": "fused" if isinstance(s, Kernel) else "extern",
                 **({"ranges": s.ranges_text()} if isinstance(s, Kernel) else {})}
                for s in self.steps]


class _Scheduler:
    def __init__(self, graph: Graph):
        self.graph = graph
        self.sch = Schedule(graph)
        self.val: dict[int, Expr] = {}
        self.producer: dict[int, object] = {}   # id(buffer node) -> step that writes it
        self.realized: set[int] = set()
        self.nodes, self.rep, self.users = prune(graph)
        self.stored_exprs: dict = {}             # key of a stored value's expression -> its load
        self.outset = {id(self.rep.get(id(o), o)) for o in graph.outputs}

    # -- lazy values ---------------------------------------------------------------------------
    def arg(self, a):
        return self.val[id(self.rep.get(id(a), a))] if isinstance(a, Node) else a

    def buffer_value(self, n: Node):
        self.realized.add(id(n))
        return load(n, Layout.contiguous(n.shape), n.dtype)

    def movement(self, n: Node, e: Expr):
        """A movement op folded into the layouts of e's leaves (the op's own layout function)."""
        layout, params, shape = n.op.layout, n.params, n.shape

        def fn(lay):
            return layout(lay, params, shape)
        out = e.map_layouts(fn)
        if out is not None and out.kind != "load" and (_masks(out) > _masks(e) or
                                                       not out.leaves() and _adds_fill(n)):
            out = None      # a fill is the padded value, not f(fill): mask only a bare load
        if out is None:     # a reshape strides cannot express (or a wrap of a wrap): materialise
            src = n.args[0]
            e = self.realize(self.rep.get(id(src), src))
            out = e.map_layouts(fn)
        if out is None:     # not even the stored value reads that way: run the op itself
            return self.extern(n)
        return out

    def broadcast(self, e, shape):
        if not isinstance(e, Expr):
            return const(e)
        if e.shape is None or e.shape == tuple(shape):
            return e
        return e.map_layouts(lambda lay: lay.broadcast_to(shape))

    def visit(self, n: Node):
        op = n.op
        if op.layout is not None:
            return self.movement(n, self.arg(n.args[0]))
        if op.fill is not None:
            return const(op.fill(n.params), n.dtype)
        if is_pointwise(n):
            args = [self.broadcast(self.arg(a), n.shape) for a in n.args]
            e = Expr("op", op=op, params=n.params, dtype=n.dtype, args=args, node=n, shape=n.shape)
            if e.size() > INLINE_LIMIT or (e.size() > SHARE_LIMIT and len(self.users.get(id(n), ())) > 1):
                self.val[id(n)] = e
                return self.realize(n)
            return e
        if is_fusable_reduction(n):
            x = n.args[0]
            src = self.broadcast(self.arg(x), x.shape)
            nd = len(x.shape)
            axis = n.params.get("axis")
            axes = tuple(range(nd)) if axis is None else tuple(sorted(a % nd for a in axis))
            if "dtype" in n.params and n.params["dtype"] is not None:
                src = _cast(src, n.dtype)
            r = Reduction(op.name, n, src, x.shape, axes)
            self.place(r)
            return Expr("acc", red=r, layout=Layout.contiguous(n.shape), dtype=n.dtype)
        return self.extern(n)

    def extern(self, n: Node):
        views = []
        for a in n.args:
            if isinstance(a, Node):
                a = self.rep.get(id(a), a)
                e = self.val[id(a)]
                if not _is_view(e):
                    e = self.stored_view(a) or self.realize(a)
                views.append((e.buf, e.layout))
        step = ExternStep(len(self.sch.steps), n, views)
        self.sch.steps.append(step)
        self.producer[id(n)] = step
        return self.buffer_value(n)

    def stored_view(self, a: Node):
        """An extern argument that is a transpose/reshape of a computed value: store the value
        once in its own order and pass a strided view (BLAS reads transposes for free), instead
        of recomputing the whole expression in the view's order. None if it is no such view."""
        chain, b = [], a
        while not b.is_placeholder and b.op.bijective:
            chain.append(b)
            b = self.rep.get(id(b.args[0]), b.args[0])
            if not isinstance(b, Node):
                return None
        if not chain:
            return None
        e = self.val[id(b)]
        if e.kind != "load":
            e = self.realize(b)
        for m in reversed(chain):
            e = self.movement(m, e)
        return e if _is_view(e) else None

    # -- realising values into buffers -----------------------------------------------------------
    def realize(self, n: Node, keep_lazy=False) -> Expr:
        """Write n's value to its buffer. Consumers then read the buffer, except with
        ``keep_lazy`` (an output): consumers in the same kernel keep computing it inline, and
        a consumer that starts a new kernel reads the stored buffer instead of recomputing."""
        e = self.val[id(n)]
        if e.kind == "load" and e.buf is n and e.layout.maps is None:
            return e
        if id(n) in self.realized:
            return load(n, Layout.contiguous(n.shape), n.dtype)
        if e.kind == "acc" and e.layout == Layout.contiguous(e.red.node.shape) and e.red.node.shape == n.shape:
            self.store_reduction(e.red)
            v = load(e.red.node, e.layout, e.red.dtype)
            self.val[id(n)] = v
            return v
        self.place(Store(n, e, Layout.contiguous(n.shape), False))
        v = self.buffer_value(n)
        # only an expression that reads something: a key is made of ops, params and leaves,
        # and the leaves' layouts carry the shape. A constants-only expression (Adam's first
        # step count, 0 + 1) has one key at every shape, so its stored 0-d value stood in for
        # the same constants inside a (4, 16, 4, 4) kernel: a 0-d load in a 4-d kernel (the
        # NumPy renderer's IndexError). Constants are recomputed for free anyway.
        if e.kind == "op" and e.size() > 1 and e.leaves():
            self.stored_exprs[e.key()] = v
        if not keep_lazy:
            self.val[id(n)] = v
        return v

    def store_reduction(self, r: Reduction):
        if not r.stored:
            r.stored = True
            self.producer[id(r.node)] = r.kernel
            self.realized.add(id(r.node))
            r.kernel.outputs.append(r.node)

    # -- grouping roots into kernels ----------------------------------------------------------
    def place(self, root):
        """Put a Reduction or a Store into the newest kernel it may join, else a new one."""
        if isinstance(root, Reduction):
            shape, exprs = root.domain, [root.src]
        else:
            shape, exprs = root.node.shape, [root.expr]
        deps = self.load_deps(exprs)
        floor = max((s.index for s in deps), default=-1)
        chosen, why_not = None, None
        for k in reversed(self.sch.steps):
            if k.index < floor:
                break
            if not isinstance(k, Kernel):
                continue
            how = self.fits(k, root, shape, deps)
            if isinstance(how, str):
                if why_not is None and (k.domain == tuple(shape) or isinstance(root, Store)):
                    why_not = (k, how)
                continue
            chosen = (k, how)
            break
        if chosen is None:
            if why_not is not None:
                k, how = why_not
                n = root.node
                self.sch.refused.append({"node": n.ref(), "op": n.op.name if n.op else "input",
                                         "kernel": k.name, "why": how})
            k = Kernel(len(self.sch.steps), shape, root.axes if isinstance(root, Reduction) else ())
            self.sch.steps.append(k)
            if self.stored_exprs:       # a new kernel reads stored values instead of recomputing
                if isinstance(root, Reduction):
                    root.src = root.src.substitute(self.stored_exprs)
                else:
                    root.expr = root.expr.substitute(self.stored_exprs)
            how = self.fits(k, root, shape, deps)
            assert not isinstance(how, str), how    # a fresh kernel takes any root
        k, expr = chosen if chosen else (k, how)
        self.join(k, root, expr)

    def load_deps(self, exprs):
        deps = set()
        for e in exprs:
            for leaf in e.leaves():
                if leaf.kind == "load" and id(leaf.buf) in self.producer:
                    deps.add(self.producer[id(leaf.buf)])
        return deps

    def fits(self, k: Kernel, root, shape, deps):
        """The root's expression over k's domain if root can run inside k, else why not."""
        if k in deps:
            return f"it reads a buffer that {k.name} writes"
        if isinstance(root, Reduction):
            if k.domain != root.domain:
                return f"it reduces a {root.domain} value, {k.name} iterates {k.domain}"
            if k.axes and k.axes != root.axes:
                return f"it reduces axes {root.axes}, {k.name} reduces {k.axes}"
            expr = root.src
            axes = root.axes
        else:
            shape = tuple(shape)
            if shape == k.domain:
                expr, axes = root.expr, k.axes
            elif k.axes and shape in _reduced_shapes(k.domain, k.axes):
                keep = tuple(1 if a in k.axes else s for a, s in enumerate(k.domain))
                expr = root.expr.map_layouts(lambda lay: lay.reshape(keep).broadcast_to(k.domain))
                if expr is None:
                    return "its layout does not map onto the kernel's kept ranges"
                axes = k.axes
            else:
                return f"shape {shape} differs from the kernel domain {k.domain}"
        for leaf in expr.leaves():
            if leaf.kind != "acc":
                continue
            r = leaf.red
            if r.kernel is k:
                if k.axes and axes != k.axes:
                    return "it mixes reduction axes"
                if leaf.layout != r.canonical_layout():
                    return f"it reads r{r.index} at other indices than the kernel's kept ranges"
            elif r.kernel is not None and r.kernel.index > k.index:
                return f"it reads r{r.index}, computed later in {r.kernel.name}"
        return expr

    def join(self, k: Kernel, root, expr):
        # reduction results from other kernels are read from their stored buffers
        def resolve(leaf):
            if leaf.kind == "acc" and leaf.red.kernel is not k:
                self.store_reduction(leaf.red)
                return load(leaf.red.node, leaf.layout, leaf.dtype)
            return leaf
        expr = expr.replace_leaves(resolve)
        if isinstance(root, Reduction):
            root.src = expr
            root.kernel = k
            if not k.axes:
                k.axes = root.axes
            k.reductions.append(root)
        else:
            per_outer = tuple(root.node.shape) != k.domain
            if per_outer:
                keep = tuple(1 if a in k.axes else s for a, s in enumerate(k.domain))
                layout = Layout.contiguous(keep).broadcast_to(k.domain)
            else:
                layout = Layout.contiguous(k.domain)
            root.expr, root.layout, root.per_outer = expr, layout, per_outer
            k.stores.append(root)
            k.outputs.append(root.node)
            self.producer[id(root.node)] = k

    # -- the whole graph ----------------------------------------------------------------------
    def run(self) -> Schedule:
        g = self.graph
        for p in g.placeholders:
            self.val[id(p)] = self.buffer_value(p)
        for n in self.nodes:
            self.val[id(n)] = self.visit(n)
            if id(n) in self.outset and not _is_view(self.val[id(n)]):   # a view stays a view
                self.realize(n, keep_lazy=True)
        for o in g.outputs:
            o = self.rep.get(id(o), o)
            if o.is_placeholder:
                self.sch.outputs.append(o)
                continue
            e = self.val[id(o)]
            if not _is_view(e):          # a view (only movement ops) stays a view, as in NumPy
                e = self.realize(o)
            self.sch.outputs.append((e.buf, e.layout))
        for k in self.sch.kernels:
            self.finish(k)
        return self.sch

    def finish(self, k: Kernel):
        seen = {}
        for e in [r.src for r in k.reductions] + [st.expr for st in k.stores]:
            for leaf in e.leaves():
                if leaf.kind == "load" and id(leaf.buf) not in seen:
                    seen[id(leaf.buf)] = leaf.buf
        k.inputs = sorted(seen.values(), key=lambda b: (not b.is_placeholder, b.index))
        names = [nm for nm in k.op_names() if nm not in ("astype",)] or ["copy"]
        k.name = f"k{k.index}_" + "_".join(dict.fromkeys(names))[:48]


def _is_view(e: Expr) -> bool:
    """A value that is a strided view of one buffer: no computation, no index map (a roll or a
    pad is a copy, as in NumPy, and outside a kernel nothing reads index maps)."""
    return e.kind == "load" and e.layout.maps is None


def _adds_fill(n: Node) -> bool:
    """Whether movement op ``n`` reads a fill value somewhere (np.pad's constant mode): an
    expression without loads (a constant, np.ones) has no layout to carry that mask."""
    src = n.args[0]
    lay = n.op.layout(Layout.contiguous(src.shape), n.params, n.shape) if isinstance(src, Node) else None
    return lay is None or lay.fill is not None


def _masks(e: Expr) -> int:
    return sum(1 for leaf in e.leaves() if leaf.layout.fill is not None
               for m in leaf.layout.maps if m and m[0] == "mask")


def _reduced_shapes(domain, axes):
    keep = tuple(1 if a in axes else s for a, s in enumerate(domain))
    squeezed = tuple(s for a, s in enumerate(domain) if a not in axes)
    return {keep, squeezed}


def _cast(e: Expr, dtype):
    return Expr("op", op=OPS["astype"], params={"dtype": dtype}, dtype=dtype, args=[e])


def schedule(graph: Graph) -> Schedule:
    return _Scheduler(graph).run()

