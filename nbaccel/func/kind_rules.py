"""Batching rules derived from an op's kind, and the lookup vmap uses.

Most primitives need no rule of their own: an elementwise op (unary, binary, ternary) batches
by giving each batched operand as many logical dims as the result has (size-1 dims after the
batch dim) and letting broadcasting do the rest; a reduction shifts its axes past the batch
dim; ``full_like`` follows its argument's shape. Ops whose kind says nothing (movement,
indexing, matrix, extern kernels) carry an explicit ``batch_rule`` beside their ``defop``;
the few that have none are listed in :data:`LOOPING` and run once per example.
"""
from __future__ import annotations

import math

from ..dispatch import apply
from ..ops.batching import logical_ndim, pad_batched, reshape

ELEMENTWISE_KINDS = ("unary", "binary", "ternary")

# primitives vmap runs as a loop over the batch (with a warning): their output shape depends
# on the values (argwhere, unique), or they are extern kernels without a batched form yet
LOOPING = frozenset({
    "argwhere", "unique", "searchsorted", "embedding_backward", "solve",
    "flash_attention", "flash_attention_backward",
    "sparse24_to_dense", "sparse24_gather", "dequantize_weight",
})

# primitives that take no tensor argument: vmap never hands them a batched one
NO_TENSOR_INPUTS = frozenset({"full", "arange", "linspace", "eye"})


def elementwise(op):
    def rule(args, batched, params, size):
        n = max((logical_ndim(a, b) for a, b in zip(args, batched)), default=0)
        args = tuple(pad_batched(a, n) if b else a for a, b in zip(args, batched))
        return apply(op, args, params)
    return rule


def reduction(op):
    def rule(args, batched, params, size):
        x = args[0]
        if any(batched[1:]):
            return NotImplemented
        n = x.ndim - 1
        axis = params.get("axis")
        if axis is None:
            # NumPy's axis=None is "all of it" (argmax: of the flattened array): flatten the
            # logical dims and reduce the one left
            flat = apply(op, (reshape(x, (size, math.prod(x.shape[1:]))),) + tuple(args[1:]),
                         dict(params, axis=(1,), keepdims=False))
            return reshape(flat, (size,) + (1,) * n) if params.get("keepdims") else flat
        return apply(op, args, dict(params, axis=tuple(a + 1 for a in axis)))
    return rule


def like_first(op):
    """``full_like``: the result has its argument's (physical) shape."""
    def rule(args, batched, params, size):
        return apply(op, args, params)
    return rule


_DERIVED = {"unary": elementwise, "binary": elementwise, "ternary": elementwise,
            "reduce": reduction}
_cache: dict = {}


def rule_for(op):
    """The batching rule of a primitive: its own, else its kind's, else None (loop)."""
    if op.batch_rule is not None:
        return op.batch_rule
    r = _cache.get(op.name)
    if r is None and op.name not in _cache:
        make = _DERIVED.get(op.kind)
        if op.name == "full_like":
            make = like_first
        r = _cache[op.name] = make(op) if make is not None else None
    return r


def coverage(ops) -> dict:
    """How each primitive batches: ``{name: "explicit" | "derived" | "looping" |
    "no tensor inputs" | "missing"}`` (the test asserts nothing is missing)."""
    out = {}
    for op in ops:
        if op.batch_rule is not None:
            out[op.name] = "explicit"
        elif op.name in LOOPING:
            out[op.name] = "looping"
        elif op.name in NO_TENSOR_INPUTS:
            out[op.name] = "no tensor inputs"
        elif op.kind in _DERIVED or op.name == "full_like":
            out[op.name] = "derived"
        else:
            out[op.name] = "missing"
    return out
