"""One call of a compiled function on Dask arrays: trace, plan, lower; else plainly on Dask.

The function is traced once with the export's strict capture (one full graph, no random draws,
no in-place updates of inputs) on zero-stride stand-ins of the inputs' full shapes, so tracing
reads and allocates nothing. Any reason it cannot become chunk work (a graph break, an op that
is not chunk work, unknown chunk sizes, a dtype the kernels lack) runs the call plainly: the
user's own function on the Dask arrays, lazy as ever, with the reason in the report.
"""
from __future__ import annotations

import time

import numpy as np

from .. import dtypes as D
from ..tensor import Tensor, _Size
from .detect import is_dask_array
from .cluster import check_workers, current_client
from .lower import Lowering
from .errors import NotChunkWork
from .plan import Plan
from .report import dask_report, fallback_report
from ..export.dims import ExportError
from ..export.trace import trace


class DaskFallback(Exception):
    """A %%compile cell on Dask arrays must run plainly: the magic runs the cell itself."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


class _Runner:
    """The trace's engine protocol: the one segment is recorded, never run (outputs are
    zero-stride stand-ins: nothing is allocated however large the arrays are)."""

    def run_segment(self, session, graph, live):
        return [np.broadcast_to(np.zeros((), n.dtype.np), n.shape) for n in graph.outputs]

    def link_autograd(self, session, graph, live, concrete):
        pass


def call(cf, args, kwargs):
    t0 = time.perf_counter()
    try:
        result, lowering, plan, inputs, outs = _compiled_call(cf, args, kwargs)
    except NotChunkWork as e:
        return _plain(cf, args, kwargs, str(e), t0)
    client = current_client()
    if client is not None:              # a worker without nbaccel: one clear error, before compute
        check_workers(client)
    cf._report = dask_report(cf, plan, lowering, inputs, outs, time.perf_counter() - t0)
    cf.stats["dask_calls"] = cf.stats.get("dask_calls", 0) + 1
    return result


def _plain(cf, args, kwargs, reason, t0):
    cf._report = fallback_report(cf, reason, time.perf_counter() - t0)
    cf.stats["dask_plain"] = cf.stats.get("dask_plain", 0) + 1
    if cf._in_cell:
        raise DaskFallback(reason)
    return cf.fn(*args, **kwargs)


def _leaves(args, kwargs):
    """(path, value) of every array leaf, one container deep, in call order."""
    out = []
    for path, v in [(("a", i), a) for i, a in enumerate(args)] + [(("k", k), v) for k, v in kwargs.items()]:
        if _is_array(v):
            out.append((path, v))
        elif type(v) in (list, tuple):
            if any(is_dask_array(x) for x in v):
                out += [((*path, j), x) for j, x in enumerate(v) if _is_array(x)]
        elif type(v) is dict and any(is_dask_array(x) for x in v.values()):
            out += [((*path, k), x) for k, x in v.items() if _is_array(x)]
    return out


def _is_array(v):
    return is_dask_array(v) or isinstance(v, (np.ndarray, Tensor))


def _rebuild(args, kwargs, leaves, values):
    args, kwargs = list(args), dict(kwargs)
    for (path, _), val in zip(leaves, values):
        top = args if path[0] == "a" else kwargs
        if len(path) == 2:
            top[path[1]] = val
        else:
            box = top[path[1]]
            box = list(box) if type(box) is tuple else dict(box) if type(box) is dict else list(box)
            box[path[2]] = val
            top[path[1]] = tuple(box) if type(top[path[1]]) is tuple else box
    return args, kwargs


def _check_input(name, a):
    if isinstance(a, Tensor):
        raise NotChunkWork(f"{name} is an nbaccel Tensor beside Dask arrays: the call runs plainly")
    if a.dtype.kind not in "biuf":
        raise NotChunkWork(f"{name} has dtype {a.dtype}, which nbaccel's kernels do not cover")
    try:
        D.dtype(a.dtype)
    except TypeError:
        raise NotChunkWork(f"{name} has dtype {a.dtype}, which nbaccel's kernels do not cover") from None
    if is_dask_array(a) and any(c != c for cs in a.chunks for c in cs):
        raise NotChunkWork(f"{name} has chunks of unknown size (after boolean indexing, for "
                           "example): call .compute_chunk_sizes() to compile it")


def _names(cf, args, kwargs, leaves):
    bound = {}
    if cf._sig is not None:
        try:
            b = cf._sig.bind(*args, **kwargs)
            pos = list(b.arguments)
            bound = {("a", i): pos[i] for i in range(min(len(args), len(pos)))}
        except TypeError:
            pass
    names = []
    for path, _ in leaves:
        base = bound.get(path[:2]) or (path[1] if path[0] == "k" else f"arg{path[1]}")
        names.append(str(base) + "".join(f"[{p!r}]" for p in path[2:]))
    return names


def _compiled_call(cf, args, kwargs):
    import dask.array as da
    leaves = _leaves(args, kwargs)
    names = _names(cf, args, kwargs, leaves)
    for n, (_, a) in zip(names, leaves):
        _check_input(n, a)
    stand_ins = [np.broadcast_to(np.zeros((), a.dtype), a.shape) if is_dask_array(a) else a
                 for _, a in leaves]
    holder = {}

    def traced(*arrays):
        a, k = _rebuild(args, kwargs, leaves, arrays)
        out = cf.fn(*a, **k)
        holder["out"] = out
        found = []
        _tensors(out, found, 0)
        holder["tensors"] = found
        return tuple(found)

    try:
        tr = trace(traced, stand_ins, names, {}, runner=_Runner())
    except ExportError as e:
        raise NotChunkWork(_short(str(e))) from None
    except NotChunkWork:
        raise
    except Exception as e:   # noqa: BLE001 - the plain call will raise it, or not, as plain Dask does
        raise NotChunkWork(f"tracing raised {type(e).__name__}: {e}") from None
    g = tr.graph
    inputs = [a if is_dask_array(a) else da.asarray(a) for _, a in leaves]
    for src in tr.sources[tr.n_inputs:]:                # constants the function read
        data = src._data if isinstance(src, Tensor) else np.asarray(src)
        if not isinstance(data, np.ndarray) or data.dtype.kind not in "biuf":
            raise NotChunkWork("the function reads a constant that is not a NumPy array")
        inputs.append(da.asarray(data))
    plan = Plan(g, [a.chunks for a in inputs])
    lowering = Lowering(plan, inputs, _backend(cf))
    plan.build(lowering.between)
    by_id = {}
    for t, leaf in zip(holder["tensors"], tr.leaves):
        node = leaf["node"]
        if node.is_placeholder and node.index < len(leaves):
            by_id[id(t)] = leaves[node.index][1]      # an input returned as it is
        else:
            by_id[id(t)] = lowering.value(node)
    result = _substitute(holder["out"], by_id, 0)
    return result, lowering, plan, inputs, list(by_id.values())


def _backend(cf):
    return cf.backend if cf.backend in ("numba", "numpy") else "auto"


def _tensors(v, out, depth):
    if isinstance(v, Tensor):
        if all(t is not v for t in out):
            out.append(v)
    elif depth < 4 and isinstance(v, (list, tuple)) and (type(v) in (list, tuple) or hasattr(v, "_fields")):
        for x in v:
            _tensors(x, out, depth + 1)
    elif depth < 4 and type(v) is dict:
        for x in v.values():
            _tensors(x, out, depth + 1)


def _substitute(v, by_id, depth):
    if isinstance(v, Tensor):
        return by_id[id(v)]
    if type(v) is _Size:
        return int(v)
    if isinstance(v, tuple) and hasattr(v, "_fields"):
        return type(v)(*(_substitute(x, by_id, depth + 1) for x in v))
    if depth < 4 and type(v) in (list, tuple):
        return type(v)(_substitute(x, by_id, depth + 1) for x in v)
    if depth < 4 and type(v) is dict:
        return {k: _substitute(x, by_id, depth + 1) for k, x in v.items()}
    return v


def _short(msg):
    return msg.replace("nb.export needs one full graph, but there is a graph break", "a graph break")

