"""``nbaccel.nn.utils``: gradient clipping and parameter/vector conversion (PyTorch's names).

>>> import nbaccel as nb
>>> w = nb.nn.Parameter(nb.ones(4))
>>> (w * 10).sum().backward()
>>> float(nb.nn.utils.clip_grad_norm_([w], max_norm=1.0))
20.0
>>> round(float(nb.linalg.vector_norm(w.grad)), 4)
1.0
"""
from __future__ import annotations

import math

from .. import autograd, ops
from ..tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_",
           "parameters_to_vector", "vector_to_parameters", "rnn"]


def _grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite: bool = False, foreach=None):
    """The ``norm_type``-norm of all ``tensors`` together (as if concatenated)."""
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    tensors = list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return ops.zeros(())
    with autograd.no_grad():
        if math.isinf(norm_type):
            norms = [ops.amax(ops.abs(g)).astype("float32") if g.dtype.itemsize <= 4 else
                     ops.amax(ops.abs(g)) for g in tensors]
            total = norms[0] if len(norms) == 1 else ops.amax(ops.stack(norms))
        else:
            norms = [ops.vector_norm(g, ord=norm_type) for g in tensors]
            total = norms[0] if len(norms) == 1 else ops.vector_norm(ops.stack(norms), ord=norm_type)
    if error_if_nonfinite and not bool(ops.isfinite(total)):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from "
                           "`parameters` is non-finite, so it cannot be clipped. To disable "
                           "this error and scale the gradients by the non-finite norm anyway, "
                           "set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients by ``min(1, max_norm / (total_norm + 1e-6))`` in place."""
    grads = _grads(parameters)
    with autograd.no_grad():
        coef = ops.clamp(max_norm / (total_norm + 1e-6), max=1.0)
        for g in grads:
            g._assign(g * coef.astype(g.dtype))


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite: bool = False,
                    foreach=None):
    """Rescale the gradients so that their total ``norm_type``-norm is at most ``max_norm``
    (PyTorch's formula: ``g *= min(1, max_norm / (total + 1e-6))``). Returns the total norm
    before clipping, a 0-d tensor. Runs as tensor ops, so a compiled training step keeps it
    in its graph."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    parameters = list(parameters)
    grads = _grads(parameters)
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    if grads:
        clip_grads_with_norm_(parameters, max_norm, total)
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient element to ``[-clip_value, clip_value]`` in place."""
    clip_value = float(clip_value)
    with autograd.no_grad():
        for g in _grads(parameters):
            g._assign(ops.clamp(g, -clip_value, clip_value))


def parameters_to_vector(parameters):
    """All parameters flattened and concatenated into one 1-d tensor."""
    return ops.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of ``vec`` into the parameters (in place)."""
    start = 0
    with autograd.no_grad():
        for p in parameters:
            n = p.numel()
            p.copy_(vec[start:start + n].reshape(tuple(p.shape)))
            start += n


from . import rnn_utils as rnn  # noqa: E402,F401  (nn.utils.rnn: pad / pack sequences)
import sys as _sys  # noqa: E402
_sys.modules.setdefault(__name__ + ".rnn", rnn)
