"""Building blocks for the batching rules (``vmap``) that live beside their ops.

A batching rule is ``rule(args, batched, params, size) -> result``. ``args`` are the op's
*physical* arguments: ``batched[i]`` says whether argument i carries the vmapped dimension,
which is always at the front (vmap moves it there on entry), and ``size`` is its length. The
rule returns the physical result, its batch dimension at the front, or ``NotImplemented`` for a
case it does not cover (vmap then loops over the batch for that call). Rules call ``apply`` on
physical tensors, so one rule serves eager code, autograd, an outer vmap and a compiled trace.

Only ops whose kind says nothing about how they batch need a rule of their own (movement,
indexing, matrix ops): ``nbaccel.func.kind_rules`` derives the rules of the elementwise and
reduction kinds. This module imports nothing from ``nbaccel.func`` (the engine is below it).
"""
from __future__ import annotations

import math

import numpy as np

from .fronts import ENGINE, apply, as_tensor
from .registry import OPS
from ..tensor_meta import is_tensor


def logical_ndim(a, batched: bool) -> int:
    """The rank an argument has inside the vmapped function (0 for a Python scalar)."""
    if not is_tensor(a):
        return 0
    return a.ndim - 1 if batched else a.ndim


def reshape(x, shape):
    shape = tuple(shape)
    return x if tuple(x.shape) == shape else apply(OPS["reshape"], (x,), {"shape": shape})


def pad_batched(x, ndim: int):
    """A batched ``x`` with size-1 dims inserted after the batch dim, up to ``ndim`` logical
    dims: it then broadcasts against unbatched operands the way its logical self would."""
    extra = ndim - (x.ndim - 1)
    if extra <= 0:
        return x
    return reshape(x, (x.shape[0],) + (1,) * extra + tuple(x.shape[1:]))


def with_batch(x, batched: bool, size: int):
    """``x`` with a batch dim at the front: as it is when batched, broadcast when not."""
    if batched:
        return x
    if not is_tensor(x):
        x = as_tensor(x)
    return apply(OPS["broadcast_to"], (x,), {"shape": (size,) + tuple(x.shape)})


def leading_dims_rule(op_name: str, position: int = 0):
    """A rule for an op that broadcasts over the leading dims of argument ``position``: that
    argument may be batched, the others must not be (they fall back to the loop)."""
    def rule(args, batched, params, size):
        if any(b for i, b in enumerate(batched) if i != position):
            return NotImplemented
        return apply(OPS[op_name], tuple(args), params)
    rule.__name__ = f"{op_name}_batch_rule"
    return rule


def axis_param_rule(op_name: str, key: str = "axis"):
    """A rule for an op of one tensor argument whose ``key`` param names one axis (scans,
    argsort): the axis moves past the batch dim; None (NumPy: the flattened array) flattens
    the logical dims first."""
    def rule(args, batched, params, size):
        x = args[0]
        if any(batched[1:]):
            return NotImplemented
        n = x.ndim - 1
        axis = params[key]
        if axis is None:
            x = reshape(x, (size, math.prod(x.shape[1:])))
            axis = 1
        else:
            axis = axis % max(n, 1) + 1
        return apply(OPS[op_name], (x,) + tuple(args[1:]), dict(params, **{key: axis}))
    rule.__name__ = f"{op_name}_batch_rule"
    return rule


def batched_index_key(x, bx, arrays, barrays, axes, size):
    """``(x, arrays, axes)`` that index the whole batch at once, the batch dim staying at the
    front; None where NumPy's placement of advanced-index dims would move it (the loop)."""
    axes = tuple(axes)
    x = with_batch(x, bx, size)
    if not any(barrays):
        if axes != tuple(range(axes[0], axes[0] + len(axes))):
            return None      # separated index arrays: NumPy puts their dims first
        return x, tuple(arrays), tuple(a + 1 for a in axes)
    if axes != tuple(range(len(axes))):
        return None
    k = max(logical_ndim(a, b) for a, b in zip(arrays, barrays))
    rows = ENGINE.asarray(np.arange(size).reshape((size,) + (1,) * k), device=x.device)
    arrays = tuple(pad_batched(a, k) if b else a for a, b in zip(arrays, barrays))
    return x, (rows,) + arrays, (0,) + tuple(a + 1 for a in axes)
