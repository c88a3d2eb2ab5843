"""What runs inside Dask tasks, on a worker: stage source in, NumPy blocks out.

A task carries the stage's generated source, its cache key and the backend (plain strings).
The first task of a stage on a worker thread rebuilds the function from the source and wraps
it in ``nb.compile``; its kernels compile on first use or load from the worker's own disk
cache. Later tasks reuse it. One compiled function per thread: Dask runs tasks on several
threads at once, and each keeps its own trace state.

The combine and aggregate steps of the reductions are small NumPy functions over the chunks'
partial results (structured arrays for (count, mean, M2) and for (value, index)).
"""
from __future__ import annotations

import threading

import numpy as np

from ..dispatch import apply
from ..ops.registry import OPS
from ..convert import asarray
from ..tensor import Tensor
from .. import dtypes as D
from ..compiler import api as compiler_api

MOMENTS = np.dtype([("n", "f8"), ("mean", "f8"), ("m2", "f8")])
_local = threading.local()


def _op(name, *args, **params):
    if any(isinstance(a, Tensor) for a in args):
        return apply(OPS[name], args, params)
    # the stage called plainly (the compiler also times a function's plain run): NumPy in and out
    out = apply(OPS[name], tuple(asarray(a) if isinstance(a, np.ndarray) else a for a in args), params)
    return out._data if isinstance(out, Tensor) else out


def compiled(source, key, backend):
    """The nb.compile'd stage function for ``source`` on this thread (built once per key)."""
    fns = getattr(_local, "fns", None)
    if fns is None:
        fns = _local.fns = {}
    cf = fns.get(key)
    if cf is None:
        scope = {"op": _op, "dt": D.dtype, "np": np}
        exec(compile(source, f"<nbaccel dask stage {key}>", "exec"), scope)
        # chunks differ in size (edge blocks, uneven chunks): sizes are symbols from the start
        # a stage is pure (its inputs in, arrays out): "reduce-overhead" replays it on a chunk of
        # known metadata without tracing again, and never times a plain run of it
        cf = fns[key] = compiler_api.compile(scope["stage"], backend=backend, dynamic=True, mode="reduce-overhead")
        cf.recompile_limit = 64
    return cf


def _run(source, key, backend, blocks):
    outs = compiled(source, key, backend)(*blocks)
    return [np.asarray(o) for o in outs]


def run_block(source, key, backend, dtype, *blocks):
    """An elementwise stage on one block."""
    out = _run(source, key, backend, blocks)[0]
    out = out if out.dtype == dtype else out.astype(dtype)
    return out[()] if out.ndim == 0 else out      # a 0-d block is a NumPy scalar, as in Dask


def _block_size(blocks, places):
    """A dim's size in this block: the largest size among the inputs that carry it."""
    return max((blocks[i].shape[ax] for i, ax in places), default=1)


def run_partial(source, key, backend, kind, layout, *blocks):
    """A reduction stage's partial result on one block (keepdims shape).

    ``kind``: "simple" (the stage returns the partial), "moments" (it returns the block's mean
    and M2; the count comes from the block sizes), "arg" (it returns the block's extreme value and
    local index; the index is made global with the offsets of the dims, passed as trailing
    ``arange`` blocks, one per reduced dim).
    """
    if kind == "simple":
        return _run(source, key, backend, blocks)[0]
    if kind == "moments":
        n_inputs, reduced = layout
        mean, m2 = _run(source, key, backend, blocks[:n_inputs])
        count = 1
        for places in reduced:
            count *= _block_size(blocks[:n_inputs], places)
        out = np.empty(mean.shape, MOMENTS)
        out["n"], out["mean"], out["m2"] = count, mean, m2
        return out
    n_inputs, axes, all_dims, full_shape, dtype = layout
    vals, local = _run(source, key, backend, blocks[:n_inputs])
    offsets = [int(b[0]) if b.size else 0 for b in blocks[n_inputs:]]
    if len(axes) == 1:
        glob = local.reshape(vals.shape) + offsets[0]
    else:                        # argmax over every axis of an N-D array: a flat global index
        shape = tuple(_block_size(blocks[:n_inputs], places) for places in all_dims)
        idx = np.unravel_index(int(local), shape) if all(shape) else (0,) * len(shape)
        glob = np.ravel_multi_index(tuple(i + o for i, o in zip(idx, offsets)), full_shape)
        glob = np.full(vals.shape, glob)
    out = np.empty(vals.shape, [("v", dtype), ("i", "i8")])
    out["v"], out["i"] = vals, glob
    return out


# -- combine and aggregate (da.reduction calls them with axis= and keepdims=) ---------------------
def keep(x, axis=None, keepdims=True, computing_meta=False):
    """The partials are already per chunk. Dask asks this step for a metadata guess by calling it
    on an empty array and casting that to the output dtype: a structured empty array cannot be
    cast, so an empty one is answered with plain floats (the real partials never are empty
    structured arrays in combine: ``_fields`` mends the case of a zero-size block)."""
    if x.dtype.names and x.size == 0:
        return np.zeros(x.shape)
    return x


def _fields(x, dtype):
    return x if x.dtype.names else np.zeros(x.shape, dtype)


def simple(name, x, axis=None, keepdims=True, dtype=None):
    r = getattr(np, name)(x, axis=axis, keepdims=keepdims)
    # a 0-d result is a NumPy scalar, as Dask's own reductions give
    return np.asarray(r, dtype=dtype)[()] if dtype is not None else r


def moments_combine(x, axis=None, keepdims=True):
    x = _fields(x, MOMENTS)
    n = x["n"]
    total = n.sum(axis=axis, keepdims=True)
    means = np.where(n > 0, x["mean"], 0.0)
    mean = (n * means).sum(axis=axis, keepdims=True) / np.where(total > 0, total, 1)
    dev = np.where(n > 0, means - mean, 0.0)
    m2 = np.where(n > 0, x["m2"], 0.0).sum(axis=axis, keepdims=True) + (n * dev * dev).sum(axis=axis, keepdims=True)
    out = np.empty(mean.shape, MOMENTS)
    out["n"], out["mean"], out["m2"] = total, np.where(total > 0, mean, np.nan), m2
    return out if keepdims else out.squeeze(axis)


def moments_stat(stat, correction, out_dtype, m):
    """mean, var or std from combined (count, mean, M2) (NumPy's divisor: max(n - ddof, 0))."""
    if stat == "mean":
        r = m["mean"]
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            r = m["m2"] / np.maximum(m["n"] - correction, 0)
        if stat == "std":
            r = np.sqrt(r)
    return np.asarray(r, dtype=out_dtype)[()]


def arg_combine(pick, x, axis=None, keepdims=True):
    """The first extreme value's (value, index) over ``axis`` (NaN first, as NumPy's argmax)."""
    axes = tuple(a % x.ndim for a in (axis if isinstance(axis, tuple) else (axis,)))
    rest = [d for d in range(x.ndim) if d not in axes]
    y = x.transpose(rest + list(axes)).reshape([x.shape[d] for d in rest] + [-1])
    where = getattr(np, pick)(y["v"], axis=-1)
    out = np.take_along_axis(y, where[..., None], axis=-1)[..., 0]
    return np.expand_dims(out, axes) if keepdims else out


def arg_aggregate(pick, x, axis=None, keepdims=True):
    return arg_combine(pick, _fields(x, [("v", "f8"), ("i", "i8")]), axis=axis,
                       keepdims=keepdims)["i"].astype(np.int64)[()]


def ping():
    """A worker's answer to "can you run nbaccel's stages?" (client.run calls it there)."""
    return True
