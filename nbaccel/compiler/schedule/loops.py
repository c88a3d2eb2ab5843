"""The loop-nest IR: a fused kernel as loops over N-D ranges with strided loads and stores.

A kernel iterates a *domain* D (an N-D shape); a subset A of its axes may be *reduction
ranges* (any set of axes). Every value in the kernel is an expression over the loop index
``i ∈ D`` whose leaves are

* ``load``   element ``offset + Σ_d stride[d] · i[d]`` of a flat buffer (a :class:`Layout`);
             a broadcast axis has stride 0, a reversed slice a negative stride; an axis of a
             roll, pad or tile reads a wrapped, clamped or masked index instead of ``i[d]``
             (an index map, ``index_maps.py``);
* ``acc``    the result of one of this kernel's reductions (a :class:`Reduction`), read at the
             kept part of ``i`` (during scheduling its layout maps into the reduction's output);
* ``const``  a Python scalar or a typed constant.

Movement ops are not steps: slicing with steps, transposes, ``broadcast_to``, ``[None]``,
squeeze and every reshape that strides can express are folded into the layouts of the
leaves (pointwise ops commute with movement, so a view of an expression is the expression
of the views). Only a reshape that strides cannot express materialises a buffer.

Worked example: ``((X[:, None, :] - C[None, :, :]) ** 2).sum(-1)`` with X (N, 8), C (M, 8):

    kernel k0  ranges (N, M | 8)                 # '|' separates the reduction ranges
      r0 = sum[2]((load X[8·i0 + i2] - load C[8·i1 + i2]) ** 2)
      store out[M·i0 + i1] = r0                  # one value per kept index
"""
from __future__ import annotations

import math

from . import index_maps


def contiguous_strides(shape):
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc if s != 1 else 0)
        acc *= s
    return tuple(reversed(strides))


class Layout:
    """A strided view of a flat buffer, in elements. Strides of size-1 axes are 0 (they never
    matter), so equal views compare equal. ``maps`` (None, or per axis None or an index map of
    ``index_maps.py``) makes an axis read a wrapped, clamped or masked source index: the loads
    of roll, pad and tile; ``fill`` is what a masked-out position reads."""

    __slots__ = ("shape", "strides", "offset", "maps", "fill")

    def __init__(self, shape, strides, offset=0, maps=None, fill=None):
        self.shape = tuple(int(s) for s in shape)
        offset = int(offset)
        if maps is not None:
            strides, offset, maps = index_maps.normalise(self.shape, [int(s) for s in strides], offset, maps)
        self.strides = tuple(0 if s == 1 else int(st) for s, st in zip(self.shape, strides))
        self.offset = offset
        self.maps = maps
        self.fill = fill if maps is not None and any(m and m[0] == index_maps.MASK for m in maps) else None

    @classmethod
    def contiguous(cls, shape):
        return cls(shape, contiguous_strides(shape), 0)

    @staticmethod
    def mapped(shape, strides, offset, maps, fill):
        """A layout with index maps, or None when one axis would read only fill values (the
        scheduler then materialises: renderers never see such an axis)."""
        try:
            return Layout(shape, strides, offset, maps, fill)
        except ValueError:
            return None

    def key(self):
        return (self.shape, self.strides, self.offset) + \
            (() if self.maps is None else (self.maps, type(self.fill).__name__, repr(self.fill)))

    def __eq__(self, other):
        return isinstance(other, Layout) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())

    def __repr__(self):
        extra = "" if self.maps is None else f", {self.maps}, {self.fill!r}"
        return f"Layout({self.shape}, {self.strides}, {self.offset}{extra})"

    def is_contiguous(self):
        return self == Layout.contiguous(self.shape)

    def map_of(self, axis):
        return None if self.maps is None else self.maps[axis]

    def varies(self, axis):
        """Does the value read change along ``axis`` (a stride, or a mask)?"""
        return self.strides[axis] != 0 or self.map_of(axis) is not None

    def _maps(self):
        return list(self.maps) if self.maps is not None else [None] * len(self.shape)

    # -- movement ------------------------------------------------------------------------------
    def permute(self, axes):
        maps = None if self.maps is None else [self.maps[a] for a in axes]
        return Layout.mapped([self.shape[a] for a in axes], [self.strides[a] for a in axes],
                             self.offset, maps, self.fill)

    def slice(self, slices):
        shape, strides, maps, off = [], [], [], self.offset
        for (start, stop, step), st, m in zip(slices, self.strides, self._maps()):
            n = len(range(start, stop, step))
            shape.append(n)
            if m is not None:           # the source index moves, not the address
                maps.append(index_maps.sliced(m, start, step))
                strides.append(st)
                continue
            if n:
                off += start * st
            strides.append(st * step)
            maps.append(None)
        return Layout.mapped(shape, strides, off, maps if self.maps else None, self.fill)

    def broadcast_to(self, shape):
        shape = tuple(shape)
        lead = len(shape) - len(self.shape)
        strides = [0] * lead
        for s, st, t in zip(self.shape, self.strides, shape[lead:]):
            strides.append(st if s == t else 0)
        maps = None if self.maps is None else [None] * lead + list(self.maps)
        return Layout.mapped(shape, strides, self.offset, maps, self.fill)

    def reshape(self, shape):
        """The same elements in C order under a new shape, or None when strides cannot say it.
        A mapped axis survives only as one whole axis of the new shape."""
        shape = tuple(int(s) for s in shape)
        if math.prod(shape) == 0 or math.prod(self.shape) == 0:
            return Layout(shape, contiguous_strides(shape), self.offset)
        maps = self._maps()
        old = [(s, st, maps[d]) for d, (s, st) in enumerate(zip(self.shape, self.strides)) if s != 1]
        new = [(k, s) for k, s in enumerate(shape) if s != 1]
        strides, new_maps = [0] * len(shape), [None] * len(shape)
        i = j = 0
        while i < len(old) and j < len(new):
            po, pn, i2, j2 = old[i][0], new[j][1], i + 1, j + 1
            while po != pn:
                if po < pn:
                    po *= old[i2][0]
                    i2 += 1
                else:
                    pn *= new[j2][1]
                    j2 += 1
            if any(old[k][2] is not None for k in range(i, i2)):
                if i2 - i != 1 or j2 - j != 1:      # a wrap cannot be split or merged
                    return None
                new_maps[new[j][0]] = old[i][2]
            for k in range(i, i2 - 1):             # the merged old axes must be one run
                if old[k][1] != old[k + 1][1] * old[k + 1][0]:
                    return None
            st = old[i2 - 1][1]
            for k in range(j2 - 1, j - 1, -1):
                strides[new[k][0]] = st
                st *= new[k][1]
            i, j = i2, j2
        if self.maps is None:
            return Layout(shape, strides, self.offset)
        return Layout.mapped(shape, strides, self.offset, new_maps, self.fill)

    # -- index arithmetic: roll, tile, pad (index_maps.py) -------------------------------------
    def roll(self, shifts):
        """np.roll with one shift per axis: output i reads input (i - shift) mod n."""
        maps = self._maps()
        for d, s in enumerate(shifts):
            n = self.shape[d]
            if n and s % n:
                maps[d] = index_maps.rolled(maps[d], s, n)
                if maps[d] is None:
                    return None
        return Layout.mapped(self.shape, self.strides, self.offset, maps, self.fill)

    def tile(self, reps):
        """np.tile with ``reps`` as long as the output's ndim (>= this layout's)."""
        lay = self if len(reps) == len(self.shape) else \
            self.reshape((1,) * (len(reps) - len(self.shape)) + self.shape)
        if lay is None:
            return None
        maps, shape = lay._maps(), []
        for d, (r, n) in enumerate(zip(reps, lay.shape)):
            shape.append(r * n)
            if r != 1 and n > 1:
                maps[d] = index_maps.tiled(maps[d], n)
                if maps[d] is None:
                    return None
        return Layout.mapped(shape, lay.strides, lay.offset, maps, lay.fill)

    def pad(self, widths, mode, value):
        """np.pad with (before, after) per axis, mode 'constant', 'edge' or 'wrap'."""
        kind = index_maps.PAD_MODES[mode]
        if kind == index_maps.MASK and self.fill is not None and \
                (type(self.fill), repr(self.fill)) != (type(value), repr(value)):
            return None          # one fill per load
        maps, shape = self._maps(), list(self.shape)
        for d, (lo, hi) in enumerate(widths):
            if lo == 0 and hi == 0:
                continue
            maps[d] = index_maps.padded(maps[d], lo, kind, self.shape[d])
            if maps[d] is None:
                return None
            shape[d] = self.shape[d] + lo + hi
        fill = value if kind == index_maps.MASK else self.fill
        return Layout.mapped(shape, self.strides, self.offset, maps, fill)


class Expr:
    """One node of a kernel expression (a DAG; equal sub-expressions are shared by value)."""

    __slots__ = ("kind", "op", "params", "dtype", "args", "buf", "layout", "red", "value", "node",
                 "shape", "_key", "_size")

    def __init__(self, kind, *, op=None, params=None, dtype=None, args=(), buf=None, layout=None,
                 red=None, value=None, node=None, shape=None):
        self.kind = kind          # 'load' | 'acc' | 'const' | 'op'
        self.op = op              # OpDef, for 'op'
        self.params = params or {}
        self.dtype = dtype        # the value's DType (None: a weak Python scalar constant)
        self.args = tuple(args)
        self.buf = buf            # graph Node whose buffer a 'load' reads
        self.layout = layout      # Layout for 'load' / 'acc'
        self.red = red            # Reduction for 'acc'
        self.value = value        # for 'const'
        self.node = node          # the graph node an 'op' came from (names in generated code)
        # the index space it is defined over (None: a scalar constant, valid anywhere)
        self.shape = layout.shape if layout is not None else shape if shape is not None else \
            next((a.shape for a in self.args if a.shape is not None), None)
        self._key = None
        self._size = None

    def key(self):
        if self._key is None:
            if self.kind == "load":
                self._key = ("load", id(self.buf), self.layout.key())
            elif self.kind == "acc":
                self._key = ("acc", id(self.red), self.layout.key())
            elif self.kind == "const":
                self._key = ("const", type(self.value).__name__, repr(self.value),
                             self.dtype.name if self.dtype else None)
            else:
                self._key = ("op", self.op.name, repr(sorted(self.params.items())), self.dtype.name,
                             tuple(a.key() for a in self.args))
        return self._key

    def __eq__(self, other):
        return isinstance(other, Expr) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())

    def size(self):
        """Operations counted with multiplicity: what inlining would recompute."""
        if self._size is None:
            self._size = (1 if self.kind == "op" else 0) + sum(a.size() for a in self.args)
        return self._size

    def leaves(self):
        seen, out, stack = set(), [], [self]
        while stack:
            e = stack.pop()
            if id(e) in seen:
                continue
            seen.add(id(e))
            if e.kind in ("load", "acc"):
                out.append(e)
            stack.extend(e.args)
        return out

    def subexprs(self):
        """Every distinct sub-expression, itself first, in order of first use."""
        return first_use_order([self])

    def map_layouts(self, fn, memo=None):
        """The same expression with every leaf layout replaced by fn(layout) (None: fail)."""
        def leaf(e):
            lay = fn(e.layout)
            return None if lay is None else e if lay == e.layout else \
                Expr(e.kind, dtype=e.dtype, buf=e.buf, layout=lay, red=e.red)
        return self._rebuild(leaf, None, {} if memo is None else memo)

    def substitute(self, table, memo=None):
        """The same expression with every sub-expression whose key is in ``table`` replaced."""
        return self._rebuild(None, table, {} if memo is None else memo)

    def replace_leaves(self, fn, memo=None):
        """The same expression with each leaf e replaced by fn(e)."""
        return self._rebuild(fn, None, {} if memo is None else memo)

    def _rebuild(self, leaf, table, memo):
        """The one rewrite under the three above: each load/acc leaf through ``leaf`` (None
        fails the whole expression), each op whose key is in ``table`` replaced; unchanged
        parts stay the same objects (shared sub-expressions stay shared, through ``memo``)."""
        if id(self) in memo:
            return memo[id(self)]
        if self.kind in ("load", "acc"):
            out = leaf(self) if leaf is not None else self
        elif self.kind == "const":
            out = self
        else:
            out = table.get(self.key()) if table else None
            if out is None:
                args = [a._rebuild(leaf, table, memo) for a in self.args]
                out = None if any(a is None for a in args) else \
                    self if all(a is b for a, b in zip(args, self.args)) else \
                    Expr("op", op=self.op, params=self.params, dtype=self.dtype, args=args, node=self.node)
        memo[id(self)] = out
        return out

    def __repr__(self):
        return f"<Expr {self.text()}>"

    def text(self, names=None):
        names = names or {}
        if self.kind == "load":
            return f"{names.get(id(self.buf), self.buf.ref())}{_index_text(self.layout)}"
        if self.kind == "acc":
            return f"r{self.red.index}"
        if self.kind == "const":
            return repr(self.value)
        return f"{self.op.name}({', '.join(a.text(names) for a in self.args)})"


def first_use_order(roots):
    """The distinct expressions under ``roots``, depth first and left to right (the order a
    renderer meets them in)."""
    seen, out, stack = set(), [], list(reversed(roots))
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        out.append(e)
        stack.extend(reversed(e.args))
    return out


def _index_text(lay: Layout):
    def idx(d):
        m = lay.map_of(d)
        return f"i{d}" if m is None else f"{m[0]}({m[1]}*i{d}{m[2]:+d}, {m[3]})"
    terms = [f"{st}*{idx(d)}" if st != 1 else idx(d) for d, st in enumerate(lay.strides) if st]
    if lay.offset or not terms:
        terms.insert(0, str(lay.offset))
    return "[" + " + ".join(terms) + "]"


def load(buf, layout, dtype):
    return Expr("load", buf=buf, layout=layout, dtype=dtype)


def const(value, dtype=None):
    return Expr("const", value=value, dtype=dtype)


class Reduction:
    """``op`` over the kernel's reduction axes of ``src`` (an expression over the domain)."""

    def __init__(self, op_name, node, src, domain, axes):
        self.op = op_name         # the reduction op's name (the report and the code show it)
        self.rule = node.op.reduce  # what it means: identity, combine, arg, empty error (ops/registry.py)
        self.node = node          # the graph node of its result
        self.src = src
        self.domain = tuple(domain)
        self.axes = tuple(sorted(axes))
        self.dtype = node.dtype
        self.kernel = None
        self.stored = False       # its result is written to the node's buffer
        self.index = node.index

    def canonical_layout(self):
        """How a consumer over the domain reads this result when it can stay in the kernel."""
        keep = tuple(1 if a in self.axes else s for a, s in enumerate(self.domain))
        return Layout.contiguous(keep).broadcast_to(self.domain)


class Store:
    """``node``'s value written to its buffer: an expression over the kernel domain. A store
    is *per-outer* when its value does not vary along the reduction ranges (it has the
    reduced shape: one value per kept index)."""

    def __init__(self, node, expr, layout, per_outer):
        self.node = node
        self.expr = expr
        self.layout = layout      # where element i of the domain goes in node's buffer
        self.per_outer = per_outer


class Kernel:
    def __init__(self, index, domain, axes=()):
        self.index = index
        self.domain = tuple(domain)
        self.axes = tuple(axes)
        self.reductions: list[Reduction] = []
        self.stores: list[Store] = []
        self.inputs: list = []      # graph nodes whose buffers it loads, in argument order
        self.outputs: list = []     # graph nodes whose buffers it writes, in argument order
        self.name = f"k{index}"

    # -- what the report and the renderers read ----------------------------------------------
    def kept_axes(self):
        return tuple(a for a in range(len(self.domain)) if a not in self.axes)

    def roots(self):
        """The expressions the kernel computes: its reductions' sources, then its stores'."""
        return [r.src for r in self.reductions] + [st.expr for st in self.stores]

    def ops(self):
        """Every distinct op expression of the kernel (what a renderer checks it can express
        before it writes anything)."""
        return [e for e in first_use_order(self.roots()) if e.kind == "op"]

    def loads(self):
        """Every distinct load of the kernel, in order of first use (the order in which the
        renderers declare their index variables)."""
        return [e for e in first_use_order(self.roots()) if e.kind == "load"]

    def ranges_text(self):
        kept = [str(self.domain[a]) for a in self.kept_axes()]
        red = [str(self.domain[a]) for a in self.axes]
        return "(" + ", ".join(kept) + (" | " + ", ".join(red) if red else "") + ")"

    def output_layout(self, node):
        for st in self.stores:
            if st.node is node:
                return st.layout
        for r in self.reductions:
            if r.node is node:
                return r.canonical_layout()
        raise KeyError(node)

    def op_names(self):
        names = []
        seen = set()

        def walk(e):
            if e.key() in seen:
                return
            seen.add(e.key())
            for a in e.args:
                walk(a)
            if e.kind == "op":
                names.append(e.op.name)
        for r in self.reductions:
            walk(r.src)
            names.append(r.op)
        for st in self.stores:
            walk(st.expr)
        return names

    def __repr__(self):
        return f"<Kernel {self.name} {self.ranges_text()} {self.op_names()}>"

