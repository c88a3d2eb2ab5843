"""``nb.export``: trace a function or module once into one full graph, symbolic where asked.

The program it builds is plain data (see ``program.py``): values are numbered inputs first,
then weights (parameters, buffers and constants the function read), then nodes; each node
names its op by its op-table name. Dynamic dims come from traces at other sizes (``dims.py``).
"""
from __future__ import annotations

import os

import numpy as np

from ..compiler.capture.capture import display_filename
from ..tensor import Tensor
from .dims import ExportError, Poly, fit, parse_dynamic_shapes, probe_points, symbols_of
from .serialize import Ref
from .trace import arg_names, trace
from . import call_path
from ..nn import Module
from .program import ExportedProgram


def export(fn_or_module, *example_args, dynamic_shapes=None):
    """Capture ``fn_or_module(*example_args)`` as one full graph: an :class:`ExportedProgram`.

    ``dynamic_shapes`` marks dims symbolic in PyTorch's spelling, by argument name or by
    position: ``{"x": {0: nb.export.Dim("batch", min=1, max=4096)}}``. A graph break, an
    in-place update of an input or a weight, or random numbers are errors (:class:`ExportError`).
    Non-array arguments are baked in: the program checks that later calls pass the same value.
    """
    api = call_path.compiler()[0]
    CompiledFunction, CompiledModule = api.CompiledFunction, api.CompiledModule
    target = fn_or_module
    if isinstance(target, CompiledModule):
        target = target._orig_mod
    elif isinstance(target, CompiledFunction):
        target = target.fn
    kinds = {}
    if isinstance(target, Module):
        fn = target.forward
        for n, p in target.named_parameters():
            kinds.setdefault(id(p), (n, "parameter"))
        for n, b in target.named_buffers():
            kinds.setdefault(id(b), (n, "buffer"))
        for prefix, mod in target.named_modules():
            for attr, val in vars(mod).items():     # QuantizedTensor weights: their stored parts
                parts = getattr(val, "tensors", None)
                if callable(parts) and not isinstance(val, (Tensor, Module)):
                    for part, t in parts().items():
                        kinds.setdefault(id(t), (f"{prefix + '.' if prefix else ''}{attr}.{part}", "buffer"))
    elif callable(target):
        fn = target
    else:
        raise ExportError(f"nb.export needs a function or an nn.Module, got {type(target).__name__}")
    names = arg_names(fn, len(example_args))
    arrays = [isinstance(a, (Tensor, np.ndarray)) for a in example_args]
    for a, name in zip(example_args, names):
        if not (isinstance(a, (Tensor, np.ndarray)) or a is None or isinstance(a, (bool, int, float, str))):
            if isinstance(a, (tuple, list)) and len(example_args) == 1:
                raise ExportError("nb.export takes the example arguments unpacked: nb.export(model, x, y), "
                                  "not torch.export's nb.export(model, (x, y))")
            raise ExportError(f"nb.export: argument {name!r} is a {type(a).__name__}; pass arrays, "
                              "tensors or Python scalars")
    shapes = [tuple(a.shape) if is_arr else () for a, is_arr in zip(example_args, arrays)]
    marks = parse_dynamic_shapes(dynamic_shapes, names, shapes)
    for i in marks:
        if not arrays[i]:
            raise ExportError(f"dynamic_shapes marks {names[i]!r}, which is not an array")
    dims, sizes = symbols_of(marks, shapes, names)
    weight_names = {k: n for k, (n, _) in kinds.items()}
    main = trace(fn, example_args, names, weight_names)
    raws = [_raw(main, kinds)]
    points = None
    if dims:
        sym_names, fit_points, check_point = probe_points(dims, sizes)
        points = fit_points + [check_point]
        for pt in points[1:]:
            args = [_probe_arg(a, marks.get(i, {}), pt) for i, a in enumerate(example_args)]
            try:
                tr = trace(fn, args, names, weight_names)
            except ExportError:
                raise
            except Exception as e:   # noqa: BLE001 - the user's code rejects another size
                at = ", ".join(f"{k}={v}" for k, v in sorted(pt.items()))
                raise ExportError(f"nb.export traces the function again at other sizes of its dynamic "
                                  f"dims to find how the graph depends on them, and at {at} it raised "
                                  f"{type(e).__name__}: {e}. A dynamic dim must work at every size in its "
                                  "range: narrow the range, or make the dim static") from e
            raws.append(_raw(tr, kinds))
        _check_same_length(raws, dims)
    spec = _merge_all(raws, points, len(points) - 1 if points else 1)
    for w in spec["weights"]:
        if any(isinstance(s, Poly) for s in w["shape"]):
            raise ExportError(f"nb.export: the constant {w['name']!r} has a shape that depends on a dynamic "
                              f"dim ({_fmt_shape(w['shape'])}): NumPy made it outside the graph. Create it with nbaccel "
                              "from the input's shape (nb.arange(x.shape[0]), nb.zeros(x.shape)) so that "
                              "it is part of the graph")
    spec["dims"] = {n: {"min": d.min, "max": d.max, "example": sizes[n]} for n, d in sorted(dims.items())}
    spec["args"] = []
    k = 0
    for name, a, is_arr in zip(names, example_args, arrays):
        if is_arr:
            spec["args"].append({"name": name, "kind": "input", "input": k})
            k += 1
        else:
            spec["args"].append({"name": name, "kind": "value", "value": a})
    weights = [_host(t) for t in raws[0]["_sources"]]
    return ExportedProgram(spec, weights)


def _probe_arg(a, marked, point):
    if not isinstance(a, (Tensor, np.ndarray)):
        return a
    shape = tuple(point[marked[d].name] if d in marked else s for d, s in enumerate(a.shape))
    if isinstance(a, np.ndarray):
        return np.zeros(shape, a.dtype)
    return Tensor._wrap(np.zeros(shape, a.dtype.np), a.dtype, a.device, a._np)


def _host(t):
    data = t._data
    if not isinstance(data, np.ndarray):
        data = data.get()                       # a CuPy array
    return np.array(data, copy=True, order="C")


def _where(node):
    """The user's line that made a node, for messages (a file's base name: no home paths)."""
    w = node.where
    if not w:
        return "<unknown>"
    name = display_filename(w[0])
    return f"{os.path.basename(name) if os.sep in name else name}:{w[1]}"


def _raw(tr, kinds):
    """One trace as a program (unmerged): live nodes only, values renumbered."""
    g = tr.graph
    need, stack = set(), [leaf["node"] for leaf in tr.leaves]
    while stack:
        n = stack.pop()
        if n.is_placeholder or id(n) in need:
            continue
        need.add(id(n))
        stack.extend(a for a in n.args if hasattr(a, "is_placeholder"))
    used_ph = set(range(tr.n_inputs))
    for n in g.nodes:
        if id(n) in need:
            used_ph.update(a.index for a in n.args if hasattr(a, "is_placeholder") and a.is_placeholder)
    used_ph.update(leaf["node"].index for leaf in tr.leaves if leaf["node"].is_placeholder)
    number, inputs, weights, sources = {}, [], [], []
    taken = set()
    for p in g.placeholders:
        if p.index not in used_ph:
            continue
        number[id(p)] = len(number)
        entry = {"name": p.name, "dtype": p.dtype, "shape": tuple(p.shape), "np": bool(p.params.get("np"))}
        if p.index < tr.n_inputs:
            inputs.append(entry)
            continue
        src = tr.sources[p.index]
        name, kind = kinds.get(id(src), (None, "constant"))
        if name is None:
            name = f"constant_{len(weights)}"
        while name in taken:
            name += "_"
        taken.add(name)
        entry.update(name=name, kind=kind)
        weights.append(entry)
        sources.append(src)
    nodes = []
    for n in g.nodes:
        if id(n) not in need:
            continue
        number[id(n)] = len(number)
        nodes.append({"op": n.op.name,
                      "args": [Ref(number[id(a)]) if hasattr(a, "is_placeholder") else a for a in n.args],
                      "params": dict(n.params), "dtype": n.dtype, "shape": tuple(n.shape),
                      "np_flavour": bool(n.np_flavour), "where": _where(n)})
    outputs = [{"ref": Ref(number[id(leaf["node"])]), "np": leaf["np"], "gives_array": leaf["gives_array"]}
               for leaf in tr.leaves]
    return {"inputs": inputs, "weights": weights, "nodes": nodes, "outputs": outputs,
            "tree": tr.tree, "_sources": sources}


def _check_same_length(raws, dims):
    n0 = len(raws[0]["nodes"])
    for r in raws[1:]:
        if len(r["nodes"]) != n0 or [n["op"] for n in r["nodes"]] != [n["op"] for n in raws[0]["nodes"]]:
            first = next((a, b) for a, b in zip(raws[0]["nodes"] + [None], r["nodes"] + [None])
                         if a is None or b is None or a["op"] != b["op"])
            at = (first[0] or first[1])["where"]
            raise ExportError(f"nb.export: the graph's structure depends on the size of "
                              f"{', '.join(sorted(dims))} (at {at}: a Python branch on a shape, or a "
                              "loop over one); the traces at other sizes took another path. Make "
                              "the dim static, or remove the shape-dependent branch")


def _merge_all(raws, points, n_fit):
    merger = _Merger(points, n_fit)
    spec = {}
    for key in ("inputs", "weights", "outputs"):
        spec[key] = merger.merge([r[key] for r in raws], key)
    spec["tree"] = merger.merge([r["tree"] for r in raws], "the output structure")
    nodes = []
    for i, n0 in enumerate(raws[0]["nodes"]):
        what = f"{n0['op']} at {n0['where']}"
        nodes.append({k: (n0["where"] if k == "where" else merger.merge([r["nodes"][i][k] for r in raws], what))
                      for k in n0})
    spec["nodes"] = nodes
    return spec


class _Merger:
    """Zips the same value from every trace: equal leaves stay, changing ints become Polys."""

    def __init__(self, points, n_fit):
        self.points, self.n_fit = points, n_fit

    def merge(self, vals, what):
        v0 = vals[0]
        if len(vals) == 1:
            return v0
        if isinstance(v0, bool) or v0 is None or isinstance(v0, str):
            return self._same(vals, what)
        if isinstance(v0, int) and not isinstance(v0, np.integer):
            if not all(isinstance(v, int) and not isinstance(v, (bool, np.integer)) for v in vals):
                return self._same(vals, what)
            if all(v == v0 for v in vals):
                return int(v0) if type(v0) is not int else v0
            names = sorted(self.points[0])
            poly = fit(names, self.points[:self.n_fit], [int(v) for v in vals[:self.n_fit]])
            if poly is None or any(poly(p) != int(v) for p, v in zip(self.points, vals)):
                raise ExportError(
                    f"nb.export: {what} uses a value computed from {', '.join(names)} that is not a "
                    f"product or sum of dims ({', '.join(str(int(v)) for v in vals)} at the traced sizes, "
                    "e.g. n // 2); make the dim static, or compute it from shapes inside nbaccel ops")
            return poly
        if type(v0) is float:
            if all(type(v) is float and (v == v0 or (v != v and v0 != v0)) for v in vals):
                return v0
            raise ExportError(f"nb.export: {what} uses a float computed from a dynamic dim "
                              f"({', '.join(repr(v) for v in vals)} at the traced sizes, e.g. "
                              "1 / x.shape[0]); use x.mean() or divide by the size inside nbaccel ops")
        if isinstance(v0, (tuple, list)) and not isinstance(v0, np.ndarray):
            if not all(type(v) is type(v0) and len(v) == len(v0) for v in vals):
                return self._same(vals, what)
            return type(v0)(self.merge([v[i] for v in vals], what) for i in range(len(v0)))
        if isinstance(v0, dict):
            if not all(isinstance(v, dict) and list(v) == list(v0) for v in vals):
                return self._same(vals, what)
            return {k: self.merge([v[k] for v in vals], what) for k in v0}
        if isinstance(v0, slice):
            if not all(isinstance(v, slice) for v in vals):
                return self._same(vals, what)
            parts = self.merge([(v.start, v.stop, v.step) for v in vals], what)
            return slice(*parts)
        return self._same(vals, what)

    @staticmethod
    def _same(vals, what):
        v0 = vals[0]
        for v in vals[1:]:
            if not (type(v) is type(v0) and (v is v0 or repr(v) == repr(v0) or _eq(v, v0))):
                raise ExportError(f"nb.export: {what} changes with the size of a dynamic dim "
                                  f"({v0!r} vs {v!r}); the graph must not depend on it")
        return v0


def _eq(a, b):
    try:
        return bool(a == b)
    except Exception:   # noqa: BLE001 - arrays and other odd values: compare by text only
        return False


def _fmt_shape(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"
