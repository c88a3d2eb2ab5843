"""NumPy's memory semantics inside a functional graph: which 0-d results NumPy holds as
scalars, and views.

NumPy views share memory; the graph does not. A view made by basic indexing, ``strided_slice``,
``reshape`` (where NumPy's strides allow a view: ``np.ravel(a.T)`` is a copy), ``permute`` or
``detach`` remembers its root and the view ops from it. A write
through it becomes a scatter into the root (a new version of the root), and a view read after
its root changed is derived again from the root's new value. NumPy's scalar copies (``a[()]``,
``v[0]``, a scalar's ``.T``) are not views. A broadcast view is re-derived but read-only.
"""
from __future__ import annotations

import numpy as np

from ...tensor import Tensor
from ...ops.registry import OPS

_ARRAY_OPS = {"clone", "copy"}
# a view, cast or part of a 0-d value has its type: a NumPy scalar's .T, .reshape(()),
# .astype(...) and .real are scalars, a 0-d array's are arrays
_SAME_TYPE_OPS = {"reshape", "permute", "detach", "astype", "real", "imag"}


def numpy_gives_array(node) -> bool:
    """Whether NumPy's result of the op that made a 0-d value is a 0-d array (copies,
    creation, where, ``a[...]``, a view or cast of an array) rather than a NumPy scalar (ufuncs,
    reductions, ``a[()]``, ``v[0]``, ``v @ v``, a view or cast of a scalar)."""
    if node is None or node.op is None:   # an input returned as it came, or a scalar
        return node is None or not node.params.get("scalar")   # realized at a graph break
    if node.array_result:                 # np.where, np.copy, ...
        return True
    op = node.op
    if op.name == "getitem":              # a[()], v[0]: a scalar; a[...], a[None]: an array
        return any(e[0] != "i" for e in node.params.get("index", ()))
    if op.name in _SAME_TYPE_OPS:
        src = node.args[0] if node.args else None
        if hasattr(src, "shape") and tuple(src.shape) == ():
            return numpy_gives_array(src)
        return True
    return op.kind in ("creation", "random", "movement") or op.view or op.name in _ARRAY_OPS


COPY = "copy"    # what _note_view says of a view op whose result NumPy copies (no view base)


def layout_class(a) -> str:
    """What a guard on a layout names: C-contiguous, F-contiguous or strided."""
    f = a.flags
    return "C-contiguous" if f.c_contiguous else "F-contiguous" if f.f_contiguous else "strided"


# ops whose NumPy result is laid out as NumPy lays it out for their operands, found by running
# the op's impl (NumPy's own function) on small stand-ins: elementwise ops and reductions
# (order="K": np.exp(a.T) is F order), and the copies of the movement ops (np.concatenate,
# np.roll and np.pad of F-ordered operands are F order, np.tile's repeats C order); any other
# op's result is C order (np.matmul, creation), or taken as C order where the stand-ins cannot
# say (a reshape)
_LAYOUT_KINDS = ("unary", "binary", "ternary", "reduce", "movement")
_LAYOUT_VIEWS = ("permute", "detach", "getitem", "strided_slice")
# ops of no such kind whose NumPy result is laid out as their operand (np.sort and np.cumsum of an
# F-ordered array are F order: taken as C, their ravel was a view where NumPy copies)
_LAYOUT_OTHERS = ("sort", "argsort", "cumsum", "cumprod")


def _small_shape(shape):
    return tuple(min(n, 2) for n in shape)


def _strided(dtype, shape, strides):
    """An array with these strides over one element's memory (only its strides are read)."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape, strides)


def _spread(small, shape, itemsize):
    """Contiguous strides for ``shape`` with the axes in the order of ``small``'s strides: a
    computed array is contiguous, in the axis order NumPy chose for the small one."""
    order = sorted(range(len(shape)), key=lambda d: -abs(small.strides[d]))   # ties: C order
    strides, step = [0] * len(shape), itemsize
    for d in reversed(order):
        strides[d] = step
        step *= max(shape[d], 1)
    return tuple(strides)


def _no_copy_reshape(a, shape):
    """``a`` reshaped without a copy (ValueError where NumPy's reshape would copy)."""
    try:
        return np.reshape(a, shape, copy=False)
    except TypeError:                                   # NumPy 2.0: no copy= yet
        v = a.view()
        try:
            v.shape = shape
        except AttributeError as e:
            raise ValueError(str(e)) from None
        return v


def view_by_chain(a, chain):
    """NumPy's view of array ``a`` by a view chain (``(op, params, extra args)`` each), as the
    user's code made it; ValueError where a reshape in it would have to copy."""
    for op, params, extra in chain:
        a = (_no_copy_reshape(a, params["shape"]) if op.name == "reshape"
             else op.impl(np, a, *extra, **params))
    return a


class ViewTracking:
    """The view bookkeeping of a TraceSession (which provides ``record``, ``lift``, ``graph``,
    ``_keep``, the dicts ``view_of``, ``view_tensors``, ``version``, ``realized_as``,
    ``materialized``, ``sources`` and ``written_into``, ``shared_views`` and ``no_replay``, and
    ``note_view_not_shared``)."""

    # NumPy views share memory; the graph is functional. A view remembers its root and the view
    # ops from it: a write through a view becomes a scatter into the root (and a new version of
    # it), and a view read after its root changed is derived again from the root's new value.
    # (.real and .imag of a complex array: a write through one is the root rebuilt from the new
    # part and the other, old part; before, `r = z.real; r += 1` wrote r alone and z kept its values)
    _INVERTIBLE = {"getitem", "strided_slice", "reshape", "permute", "detach", "real", "imag"}
    _DERIVED = _INVERTIBLE | {"broadcast_to"}   # re-read after a write to the root

    def _note_view(self, t, op, params, args):
        extra = tuple(args[1:])
        if op.name not in self._DERIVED or any(isinstance(a, Tensor) for a in extra):
            return                                  # a copy (advanced indexing) or not invertible
        src = args[0]._node
        if tuple(args[0].shape) == () and src is not None and not numpy_gives_array(src) \
                and op.name != "broadcast_to":      # (a broadcast scalar is a read-only view)
            return COPY                             # NumPy holds a scalar there: t0[None] is a new array
        if not t.shape and not numpy_gives_array(t._node):
            return COPY                             # a[()], v[0]: NumPy gives a scalar copy
        base = self.realized_as.get(id(args[0]), args[0])   # past a graph break: the user's tensor
        parent = self.view_of.get(id(base))
        if parent is not None:
            root, chain, ver = parent
            if self.version.get(id(root), 0) != ver:
                return
            # (a view of a broadcast view is one too, read-only as NumPy's; a reshape of it is
            # a copy where the zero strides allow no view: _reshape_is_view below)
        else:
            root, chain = base, []
        if op.name == "reshape" and not self._reshape_is_view(root, chain, params["shape"]):
            return COPY                             # NumPy copies: the strides allow no view
        self.view_of[id(t)] = (root, chain + [(op, dict(params), extra)], self.version.get(id(root), 0))
        self.view_tensors[id(t)] = t
        self._keep.append(root)

    # -- NumPy's layout of a value: what a reshape's view-or-copy decision reads ------------------

    def _reshape_is_view(self, root, chain, shape) -> bool:
        """Whether NumPy's reshape of the view ``chain`` of ``root`` is a view: it copies when the
        strides do not allow one (``np.ravel(a.T)``, ``np.ravel(np.exp(a.T))``), and a write into
        the copy leaves ``a`` alone."""
        try:
            _no_copy_reshape(view_by_chain(self._numpy_layout(root), chain), shape)
        except ValueError:
            return False
        return True

    def c_contiguous(self, t) -> bool:
        """Whether NumPy's array of tracer ``t`` is C-contiguous: ``np.ravel`` gives a view of
        it only then (``reshape(-1)`` wherever the strides allow one: ``a[::2]``)."""
        layout = self.numpy_layout(t)
        return layout is not None and bool(layout.flags.c_contiguous)

    def numpy_layout(self, t):
        """An array with the shape and strides of NumPy's array of tracer ``t`` (only those are
        read: ``ravel(order="K")`` reads the elements in its strides' order), or None where its
        chain's reshape has no view of the layout."""
        info = self.view_of.get(id(t))
        root, chain = (info[0], info[1]) if info is not None else (t, [])
        try:
            return view_by_chain(self._numpy_layout(root), chain)
        except ValueError:
            return None

    def _numpy_layout(self, root):
        """An array with the strides of NumPy's array for ``root``: an input's own strides, a
        computed value's as NumPy lays it out (:meth:`_small`). Every input whose strides this
        read is noted in ``layout_reads``: a replay for another layout of it must trace again."""
        node = root._node
        if node is None or node.is_placeholder:
            data = root._data
            if isinstance(data, np.ndarray):
                if node is not None:
                    self._read_layout(node, data)
                return _strided(data.dtype, data.shape, data.strides)
        dt = root.dtype.np
        shape = tuple(root.shape)
        small = self._small(node, {}) if node is not None else np.zeros(_small_shape(shape))
        return _strided(dt, shape, _spread(small, shape, np.dtype(dt).itemsize))

    def _read_layout(self, node, data):
        reads = self.__dict__.setdefault("layout_reads", {})
        src = self.ph_sources[node.index] if node.graph is self.graph else None
        if src is not None:
            reads[id(src)] = (node.name, data.strides, layout_class(data))

    def _small(self, node, memo, depth=0):
        """A small array (each size above 2 made 2) laid out as NumPy lays out ``node``'s value:
        the op run on its operands' small arrays, an input's first elements with its own
        strides; C order where that cannot be had (``memo`` holds None while it is made)."""
        if id(node) in memo:
            return memo[id(node)]
        memo[id(node)] = None
        shape = _small_shape(node.shape)
        out = None
        written = self.written_into.get(id(node))
        if written is not None:
            # the value an in-place write left in a buffer: laid out as the buffer (NumPy writes
            # into it), whatever op the graph computes the new value with
            out = self._small(written, memo, depth + 1)
        elif node.is_placeholder:
            src = self.ph_sources[node.index] if node.graph is self.graph else None
            data = getattr(src, "_data", None)
            if isinstance(data, np.ndarray) and data.ndim:
                self._read_layout(node, data)
                out = data[tuple(slice(0, 2) for _ in data.shape)]
                # contiguous as the input is: an op that reads the flags, not only the stride
                # order (np.pad's F order for an F-contiguous operand), sees what NumPy sees
                if data.flags.c_contiguous:
                    out = np.ascontiguousarray(out)
                elif data.flags.f_contiguous:
                    out = np.asfortranarray(out)
        elif depth < 64 and (node.op.kind in _LAYOUT_KINDS or node.op.name in _LAYOUT_VIEWS
                             or node.op.name in _LAYOUT_OTHERS):
            # (64 ops deep is far enough: past it, C order, as Python's stack needs a bound)
            args = [self._small(a, memo, depth + 1) if hasattr(a, "op") else a for a in node.args]
            if all(s is not None for a, s in zip(node.args, args) if hasattr(a, "op")):
                try:
                    with np.errstate(all="ignore"):
                        # (np.sort sorts a copy laid out as its operand, order "K"; the op's
                        # impl gathers, whose result is C order)
                        out = np.copy(args[0], order="K") if node.op.name == "sort" else \
                            node.op.impl(np, *args, **node.params)
                except Exception:       # noqa: BLE001 (a stand-in it refuses: C order)
                    out = None
        if isinstance(out, np.ndarray) and out.ndim == len(shape) and out.shape != shape and \
                all(o >= s for o, s in zip(out.shape, shape)):
            out = out[tuple(slice(0, s) for s in shape)]     # (a pad's or concat's: its axis order)
        if not isinstance(out, np.ndarray) or out.shape != shape:
            out = np.zeros(shape, getattr(node.dtype, "np", np.float64))     # C order
        memo[id(node)] = out
        return out

    def _replay(self, root, chain):
        val = root
        for op, params, extra in chain:
            val = self.record(op, (val,) + extra, params)
        return val

    def _rederive(self, a, info):
        root, chain, _ = info
        val = self._replay(root, chain)
        a._node = val._node
        self.view_of[id(a)] = (root, chain, self.version.get(id(root), 0))

    def _refresh_views(self):
        """Every view whose root was written since it was made gets its new value (a graph
        break or the function's end reads them all)."""
        for vid, info in list(self.view_of.items()):
            root, chain, ver = info
            if self.version.get(id(root), 0) != ver:
                view = self.view_tensors[vid]
                if view._node is not None and view._node.graph is self.graph:
                    self._rederive(view, info)

    # -- nb.from_numpy of a traced array: one memory for two flavours ------------------------------

    def note_shared_view(self, t):
        """``t`` is ``nb.from_numpy`` of a traced array: a view whose writes the tracking above
        carries to its root and back. None, or why it cannot be tracked (a view of a value
        written since, or through ops that are not invertible)."""
        info = self.view_of.get(id(t))
        if info is None:
            return "the array is not a view the trace can follow (its base was written since)"
        if any(op.name not in self._INVERTIBLE for op, _, _ in info[1]):
            names = ", ".join(sorted({op.name for op, _, _ in info[1]} - self._INVERTIBLE))
            return f"the array is a {names} view, which a write cannot go back through"
        self.shared_views.append(t)
        self._keep.append(t)
        return None

    def share_views(self, final):
        """After the last flush: the views the call hands back share their base's final memory,
        as NumPy's and ``torch.from_numpy``'s do, so that a write through either after the call
        (in a later cell) shows through the other. The graph computed each view as a value of
        its own; here it becomes the root's final array viewed by the chain. ``final``: the
        returned tensors (a cell's bound names, also inside its lists, tuples and dicts). Each
        tensor ``nb.from_numpy`` made gets its array's memory whether returned or not, and a
        call that returns one never replays (a replay's fresh arrays would share nothing; raises
        RuntimeError when the memory cannot be shared). A returned NumPy view is noted in
        ``returned_views`` (id -> (root, chain)), which a replay rebuilds from the root's array
        (replay.record). One that cannot share its root's memory gives up
        (``note_view_not_shared``): its own array would be a copy, which a later write into
        either side would not reach, so the code runs plainly (a function eagerly) instead."""
        returned = {id(t) for t in final}
        self.returned_views = {}
        for t in self.shared_views:
            if isinstance(self._share(t), str):
                raise RuntimeError("nbaccel.from_numpy: the tensor's array was replaced inside the "
                                   "trace, or its view is a copy in NumPy's layout, so it cannot "
                                   "share its final memory")
            if id(t) in returned and self.no_replay is None:
                self.no_replay = ("it returns a tensor nb.from_numpy made from an array, which "
                                  "shares the array's memory; a replay's new arrays would not")
        done = {id(t) for t in self.shared_views}
        for t in final:
            if id(t) in done or id(t) not in self.view_of:
                continue
            done.add(id(t))
            hit = self.materialized.get(id(t))
            if hit is None or hit[0] is not t or hit[1].requires_grad:
                continue                            # (autograd's views keep their own values)
            if id(t) in getattr(self, "kept_outside", ()):
                # its array went to code that kept it (`L = list(a)` at a graph break): that array
                # stays the one the name holds; a value handed back sharing its root cannot
                root = self.view_of[id(t)][0]
                if any(o is not t and (o is root or self.view_of.get(id(o), (None,))[0] is root)
                       for o in final):
                    self.note_view_not_shared(t, "code outside the trace kept its own array")
                continue
            shared = self._share(t, hit[1]._data)
            if isinstance(shared, str):
                self.note_view_not_shared(t, shared)
            elif shared is not None:
                root, chain, _ = self.view_of[id(t)]
                self.returned_views[id(t)] = (root, chain)

    def _share(self, t, value=None):
        """Give view ``t`` its root's final array viewed by its chain (``materialized``): the
        array; None where there is no memory to share (an empty view, a root whose final value
        is not a NumPy array: a GPU's); else why NumPy's view cannot be had (the root has no
        final value or was written since, the final buffer's layout allows no view by the chain, the view's own
        final value differs from it). ``value``: the view's own final array, which the shared
        one must equal; it would differ where code at a graph break wrote into the view's
        realized array without the trace carrying the write to the root (as
        ``np.negative(v, out=v)`` did before numpy_routing._write_into_outs)."""
        root, chain, ver = self.view_of.get(id(t), (None, (), None))
        base = self._final_concrete(root) if root is not None else None
        if base is None:
            return "its base has no final array"
        if not isinstance(base._data, np.ndarray) or (value is not None and getattr(value, "size", 1) == 0):
            return None
        if self.version.get(id(root), 0) != ver:
            return "its base was written after the view was last derived from it"
        if id(t) in self.version and any(op.name not in self._INVERTIBLE for op, _, _ in chain):
            return "it was written through a part that does not lead back to its base"
        try:
            a = view_by_chain(base._data, chain)
        except ValueError:
            return "its base's final layout allows no view by the same reshape"
        if a.size and not np.may_share_memory(a, base._data):
            return "NumPy's view of its base's final array is a copy"
        if value is not None and not (a.shape == value.shape and
                                      np.array_equal(a, value, equal_nan=a.dtype.kind in "fc")):
            return "its own final value differs from its base's view"
        self.materialized[id(t)] = (t, Tensor._wrap(a, t.dtype, t.device, t._np, base._version))
        return a

    def _final_concrete(self, root):
        """The concrete tensor that holds ``root``'s value after the last flush, or None."""
        if root._node is None:
            return root
        hit = self.materialized.get(id(root))
        if hit is not None:
            return hit[1]
        return self.sources.get(id(root))

    def _scatter(self, base, chain, new):
        """The value of ``base`` after its view ``chain`` was set to ``new``."""
        if not chain:
            return new
        op, params, extra = chain[0]
        sub = self.record(op, (base,) + extra, params)
        sub_new = self._scatter(sub, chain[1:], new)
        name = op.name
        if name == "getitem":
            return self.record(OPS["setitem"], (base, sub_new), {"index": params["index"], "accumulate": False})
        if name == "strided_slice":
            return self.record(OPS["slice_scatter"], (base, sub_new), {"slices": params["slices"]})
        if name == "reshape":
            return self.record(OPS["reshape"], (sub_new,), {"shape": tuple(base.shape)})
        if name == "permute":
            axes = params["axes"]
            inv = tuple(sorted(range(len(axes)), key=lambda i: axes[i]))
            return self.record(OPS["permute"], (sub_new,), {"axes": inv})
        if name in ("real", "imag"):               # the complex root from both parts
            other = self.record(OPS["imag" if name == "real" else "real"], (base,), {})
            parts = (sub_new, other) if name == "real" else (other, sub_new)
            return self.record(OPS["complex"], parts, {})
        return sub_new                              # detach
