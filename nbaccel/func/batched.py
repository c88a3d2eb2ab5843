"""vmap's interpreter: batched tensors ride the engine's tracing protocol.

Inside ``vmap`` every input is a *batched tensor*: an ordinary :class:`~nbaccel.Tensor` whose
``_node`` is a :class:`BatchNode`. It shows its *logical* (per-example) shape, and holds the
*physical* tensor, the whole batch with the vmapped dim at the front. ``dispatch.apply`` hands
any op on a batched tensor to its level's :meth:`BatchLevel.record` (the same protocol the
compiler's tracer uses), which runs the op's batching rule on the physical tensors and wraps
the result. The physical ops go through ``apply`` again, so they are taped by autograd when
the physical tensors require grad, interpreted by an outer vmap when they are batched too, and
captured by ``nb.compile`` when they are tracers: one graph, whatever the nesting.

Autograd *inside* vmap (``vmap(grad(f))``) runs on the logical tensors: the tape's nodes hold
batched tensors and the backward rules run on them, so each example gets its own gradient.
"""
from __future__ import annotations

import threading
import warnings

from ..tensor import Tensor
from .kind_rules import rule_for
from ..ops.batching import pad_batched, with_batch
from .. import ops
from ..dispatch import apply

__all__ = ["BatchLevel", "BatchNode", "wrap", "is_batched_at", "active_levels"]

_state = threading.local()


def active_levels() -> list:
    """This thread's running vmap levels, innermost last (level numbers start at 1: the
    compiler's trace counts as 0)."""
    levels = getattr(_state, "levels", None)
    if levels is None:
        levels = _state.levels = []
    return levels


class BatchNode:
    """What a batched tensor's ``_node`` holds: its level, physical tensor and logical shape."""

    __slots__ = ("graph", "physical", "shape", "np_flavour")
    # like a traced temporary, the tape refers to it weakly: a strong reference would make a
    # cycle (tensor -> grad_fn -> output shell -> tensor) that keeps a compiled trace's
    # intermediates alive until the garbage collector runs, so the compiler would have to
    # return them all as outputs
    is_placeholder = False

    def __init__(self, graph, physical):
        self.graph = graph
        self.physical = physical
        self.shape = tuple(physical.shape[1:])
        self.np_flavour = False


def wrap(physical, level) -> Tensor:
    """A batched tensor of ``level`` over ``physical`` (batch dim at the front)."""
    return Tensor._tracer(BatchNode(level, physical), physical.dtype, physical.device, physical._np)


def is_batched_at(t, level) -> bool:
    return isinstance(t, Tensor) and isinstance(t._node, BatchNode) and t._node.graph is level


def _without_logical_grad(t, level):
    """The same batched value, off the logical tape (the physical one keeps its own)."""
    return wrap(t._node.physical, level) if t.requires_grad else t


class BatchLevel:
    """One active ``vmap``: the 'graph' that ops on its batched tensors are handed to."""

    def __init__(self, size: int, randomness: str):
        self.size = size
        self.randomness = randomness
        self.level = len(active_levels()) + 1

    # -- the tracing protocol (see nbaccel/ops/registry.py) ------------------------------------
    def lift_args(self, args):
        return args

    def track(self, shell):
        pass

    def record(self, op, args, params):
        if not op.primitive:
            # a composite runs as its decomposition; the caller's apply puts the composite
            # itself on the logical tape, so its parts must not be taped there again
            plain = tuple(_without_logical_grad(a, self) if is_batched_at(a, self) else a for a in args)
            return op.decomp(*plain, **params)
        batched = tuple(is_batched_at(a, self) for a in args)
        phys = tuple(a._node.physical if b else a for a, b in zip(args, batched))
        rule = rule_for(op)
        out = NotImplemented if rule is None else rule(phys, batched, params, self.size)
        if out is NotImplemented:
            out = loop_over_batch(op, phys, batched, params, self.size)
        if isinstance(out, (tuple, list)):
            return type(out)(self._wrap_result(op, o) for o in out)
        return self._wrap_result(op, out)

    def _wrap_result(self, op, out):
        if not isinstance(out, Tensor) or out.ndim == 0 or out.shape[0] != self.size:
            raise RuntimeError(f"vmap: the batching rule of {op.name} gave a result of shape "
                               f"{getattr(out, 'shape', None)} (expected the batch of "
                               f"{self.size} at the front); this is a bug in nbaccel")
        return wrap(out, self)

    def realize(self, t, reason):
        raise RuntimeError(
            "vmap: a concrete value of a batched tensor is needed here "
            f"({reason}). Data-dependent control flow, .item(), printing and NumPy conversion "
            "of values that vary over the batch are not supported inside vmap; compute them "
            "outside, or use nbaccel.where instead of if/else.")

    def assign(self, target, new):
        """In-place writes inside vmap: a batched target takes the new value (broadcast over
        the batch when it does not vary); an unbatched one cannot hold batched values."""
        if not is_batched_at(target, self):
            raise RuntimeError(
                "vmap: inplace arithmetic(self, *extra_args) is not possible because there "
                "exists a Tensor `other` in extra_args that has more elements than `self`. "
                "This happened due to `other` being vmapped over but `self` not being vmapped "
                "over in a vmap. Please try to use out-of-place operators instead.")
        if is_batched_at(new, self):
            p = pad_batched(new._node.physical, target.ndim)
        else:
            p = with_batch(new, False, self.size)
        p = p.broadcast_to((self.size,) + tuple(target.shape))
        if p.dtype is not target.dtype:
            p = p.astype(target.dtype)
        target._node = BatchNode(self, p)

    def note_grad(self, t):
        raise RuntimeError("vmap: .backward() inside a vmapped function would accumulate "
                           "per-example gradients into one .grad; use nbaccel.func.grad "
                           "(vmap(grad(f))) instead")


def loop_over_batch(op, args, batched, params, size):
    """The fallback for an op without a batching rule: one call per example, then a stack."""
    # Python's default filter shows it once per op and call site
    warnings.warn(f"vmap: there is no batching rule for the op {op.name!r}; falling back to "
                  f"a Python loop over the batch (slow). See docs/func.md.", UserWarning,
                  stacklevel=4)
    outs = [apply(op, tuple(a[i] if b else a for a, b in zip(args, batched)), params)
            for i in range(size)]
    if isinstance(outs[0], (tuple, list)):
        return type(outs[0])(ops.stack([o[k] for o in outs]) for k in range(len(outs[0])))
    return ops.stack(outs)
