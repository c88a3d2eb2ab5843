"""From a planned graph to a Dask graph: one compiled stage per output and per crossing reduction.

A stage's body is every node between its inputs (the graph's inputs, and the results of
reductions that cross chunks) and its target, fused into one generated function. Elementwise
targets become ``da.blockwise``; a crossing reduction becomes a blockwise partial per chunk
(keepdims shape, one element per block along the reduced dims) followed by ``da.reduction``
with a combine and an aggregate step. ``blockwise`` unifies differently chunked operands as
Dask's own elementwise ops do, so chunks come out as the plain run's.
"""
from __future__ import annotations

import functools

import numpy as np

from . import worker
from .errors import NotChunkWork
from .plan import ARGS, MOMENTS, SIMPLE, reduced_axes
from .source import StageSource, key_of
from .twins import dask_twin
from .. import dtypes as D


def _is_node(a):
    return hasattr(a, "graph") and hasattr(a, "op")


class Lowering:
    def __init__(self, plan, inputs, backend):
        self.plan = plan
        self.inputs = inputs                # a Dask array per placeholder
        self.backend = backend
        self.memo = {}
        self.stages = []                    # for the report

    def value(self, node):
        arr = self.memo.get(node)
        if arr is None:
            if node.is_placeholder:
                arr = self.inputs[node.index]
            elif node in self.plan.foreign:
                arr = self.plan.foreign[node]
            elif node in self.plan.cross:
                arr = self._reduction(node)
            else:
                arr = self._blockwise(node)
            self.memo[node] = arr
        return arr

    def between(self, node):
        """A node that is not chunk work, as Dask's own op on the stages before it."""
        args = [self.value(a) if _is_node(a) else a for a in node.args]
        try:
            arr = dask_twin(node, args)
        except NotChunkWork:
            raise
        except Exception as e:   # noqa: BLE001 - Dask refuses it: the plain run raises it to the user
            raise NotChunkWork(f"Dask's own {node.op.name} refused it ({type(e).__name__})") from None
        self.stages.append({"kind": "dask", "ops": [node.op.name], "key": "", "source": ""})
        return arr

    # -- stages ---------------------------------------------------------------------------------
    def _collect(self, root):
        body, inputs, seen, stack = [], [], set(), [root]
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            if n.is_placeholder or n in self.plan.foreign or (n in self.plan.cross and n is not root):
                inputs.append(n)
                continue
            body.append(n)
            stack.extend(a for a in n.args if _is_node(a))
        inputs.sort(key=lambda n: (not n.is_placeholder, n.index))
        body.sort(key=lambda n: n.index)
        return body, inputs

    def _index(self, node):
        letters = self.plan.letters(node)
        if len(set(letters)) != len(letters):
            raise NotChunkWork("broadcasting ties two dims of one array together (as in "
                               "x.sum(0) + x.sum(1)): the call runs plainly on Dask")
        return letters

    def _operands(self, inputs):
        args, seen = [], set()
        for n in inputs:
            ind = self._index(n)
            args += [self.value(n), ind]
            seen.update(ind)
        return args, seen

    def _blockwise(self, node):
        import dask.array as da
        body, inputs = self._collect(node)
        src = StageSource(inputs)
        for n in body:
            src.node(n)
        source = src.text([src.ref(node)])
        key = key_of(source, self.backend)
        args, have = self._operands(inputs)
        out = self._index(node)
        new_axes = {L: 1 for L in out if L not in have}
        dtype = node.dtype.np
        self.stages.append({"kind": "blockwise", "ops": [n.op.name for n in body], "key": key,
                            "source": source})
        fn = functools.partial(worker.run_block, source, key, self.backend, dtype)
        return da.blockwise(fn, out, *args, dtype=dtype, concatenate=True, new_axes=new_axes,
                            meta=np.empty((0,) * len(out), dtype), name=f"nbaccel-{key[:10]}-" + _token(args))

    def _reduction(self, node):
        import dask.array as da
        name = node.op.name
        v = node.args[0]
        axes = reduced_axes(node)
        body, inputs = self._collect(v)
        src = StageSource(inputs)
        for n in body:
            src.node(n)
        vr = src.ref(v)
        keepdims = bool(node.params.get("keepdims", False))
        v_ind = self._index(v)
        args, have = self._operands(inputs)
        places = [[(i, k) for i, n in enumerate(inputs) for k, L in enumerate(self.plan.letters(n))
                   if L == letter] for letter in v_ind]
        out_dtype = node.dtype.np
        ops = [n.op.name for n in body]
        if name in SIMPLE:
            params = dict(node.params, axis=axes, keepdims=True)
            rets = [src.line("p", name, [vr], params)]
            kind, layout, pdtype = "simple", None, out_dtype
            combine = functools.partial(worker.simple, SIMPLE[name])
            aggregate = functools.partial(worker.simple, SIMPLE[name], dtype=out_dtype)
        elif name in MOMENTS:
            return self._moment(node, v, axes, keepdims, body, inputs, src, vr, v_ind, args, have, places)
        elif name in ARGS:
            extreme = "amax" if name == "argmax" else "amin"
            if len(axes) == 1:
                rets = [src.line("e", extreme, [vr], {"axis": axes, "keepdims": True}),
                        src.line("k", name, [vr], {"axis": axes, "keepdims": True})]
            else:
                rets = [src.line("e", extreme, [vr], {"axis": None, "keepdims": True}),
                        src.line("k", name, [vr], {"axis": None, "keepdims": False})]
            kind = "arg"
            layout = (len(inputs), axes, places, tuple(v.shape), v.dtype.np)
            pdtype = np.dtype([("v", v.dtype.np), ("i", "i8")])
            for a in axes:                  # each block's offset along the reduced dims
                args += [da.arange(v.shape[a], chunks=max(v.shape[a], 1)), (v_ind[a],)]
            combine = functools.partial(worker.arg_combine, name)
            aggregate = functools.partial(worker.arg_aggregate, name)
        else:   # pragma: no cover - plan.py lets only these through
            raise NotChunkWork(f"{name} over chunks")
        source = src.text(rets)
        key = key_of(source, self.backend)
        self.stages.append({"kind": "reduction", "ops": ops + [name], "key": key, "source": source})
        fn = functools.partial(worker.run_partial, source, key, self.backend, kind, layout)
        partials = self._partials(fn, v_ind, args, have, axes, pdtype, key)
        out_nd = len(node.shape)
        return da.reduction(partials, worker.keep, aggregate, axis=axes, keepdims=keepdims,
                            dtype=out_dtype, combine=combine, concatenate=True,
                            meta=np.empty((0,) * out_nd, out_dtype), name=f"nbaccel-{name}-{key[:10]}",
                            output_size=1)

    def _moment(self, node, v, axes, keepdims, body, inputs, src, vr, v_ind, args, have, places):
        """mean, var and std of one operand over the same axes share one pass: the combined
        (count, mean, M2) per output block, then each statistic from it."""
        import dask.array as da
        memo_key = ("moments", v, axes, keepdims)
        moments = self.memo.get(memo_key)
        if moments is None:
            # (count, mean, M2) per chunk, in float64; the count comes from the block sizes
            f = vr if v.dtype.np == np.float64 else src.line("f", "astype", [vr], {"dtype": _f64()})
            m = src.line("m", "mean", [f], {"axis": axes, "keepdims": True})
            d = src.line("d", "subtract", [f, m], {})
            q = src.line("q", "multiply", [d, d], {})
            source = src.text([m, src.line("m2", "sum", [q], {"axis": axes, "keepdims": True})])
            key = key_of(source, self.backend)
            layout = (len(inputs), [places[a] for a in axes])
            self.stages.append({"kind": "reduction", "ops": [n.op.name for n in body] + ["mean", "var"],
                                "key": key, "source": source})
            fn = functools.partial(worker.run_partial, source, key, self.backend, "moments", layout)
            partials = self._partials(fn, v_ind, args, have, axes, worker.MOMENTS, key)
            moments = da.reduction(partials, worker.keep, worker.moments_combine, axis=axes,
                                   keepdims=keepdims, dtype=worker.MOMENTS, combine=worker.moments_combine,
                                   concatenate=True, meta=np.empty((0,) * len(node.shape), worker.MOMENTS),
                                   name=f"nbaccel-moments-{key[:10]}")
            self.memo[memo_key] = moments
        out_dtype = node.dtype.np
        fn = functools.partial(worker.moments_stat, node.op.name, float(node.params.get("correction", 0.0)),
                               out_dtype)
        return moments.map_blocks(fn, dtype=out_dtype, meta=np.empty((0,) * len(node.shape), out_dtype))

    def _partials(self, fn, v_ind, args, have, axes, pdtype, key):
        import dask.array as da
        reduced = {v_ind[a] for a in axes}
        adjust = {L: 1 for L in reduced if L in have}
        new_axes = {L: 1 for L in v_ind if L not in have}
        return da.blockwise(fn, v_ind, *args, dtype=pdtype, concatenate=True, new_axes=new_axes,
                            adjust_chunks=adjust, meta=np.empty((0,) * len(v_ind), pdtype),
                            name=f"nbaccel-partial-{key[:10]}-" + _token(args))

def _f64():
    return D.dtype("float64")


def _token(args):
    from dask.base import tokenize
    return tokenize(*[a.name if hasattr(a, "name") else a for a in args])
