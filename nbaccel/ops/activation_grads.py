"""The gradients of tanh and relu as one op each, as ATen has ``tanh_backward`` and
``threshold_backward``.

Their rules were expressions of two and three ops (relu's ``where(out > 0, g, 0)``, tanh's
``g * (1 - out * out)``), each op a dispatch and a temporary on every node of a backward walk:
about a third of the 100-op chain's backward (issue 36). Each op here is a composite: its
decomposition is that expression, which a compiled graph traces and a double backward
differentiates; eagerly its impl runs the same ufuncs on the arrays (tanh's in place in one
buffer), so the same bits.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as D, ops
from .elementwise_xp import where_impl
from .fronts import apply
from .meta import broadcast_shapes
from .registry import defop


def _relu_backward_impl(xp, g, out):
    return where_impl(xp, xp.greater(out, 0), g, 0)


def _tanh_backward_impl(xp, g, out):
    t = out * out
    if xp is np and t.shape == g.shape and t.dtype == np.result_type(g, t):
        np.subtract(1, t, out=t)
        return np.multiply(g, t, out=t)
    return g * (1 - t)


def _shape_of(args, dtype):
    return broadcast_shapes(tuple(args[0].shape), tuple(args[1].shape)), dtype


relu_backward = defop(
    "relu_backward", kind="nn", impl=_relu_backward_impl, infer_memo=True,
    infer=lambda args, p: _shape_of(args, args[0].dtype),    # (where's dtype: g's, 0 is weak)
    decomp=lambda g, out: ops.where(out > 0, g, 0),
    front=lambda g, out: apply(relu_backward, (g, out), {}),
    doc="relu's gradient from its output: g where out > 0, else 0 (ATen's threshold_backward).")

tanh_backward = defop(
    "tanh_backward", kind="nn", impl=_tanh_backward_impl, infer_memo=True,
    infer=lambda args, p: _shape_of(args, D.result_type(*args)),
    decomp=lambda g, out: g * (1 - out * out),
    front=lambda g, out: apply(tanh_backward, (g, out), {}),
    doc="tanh's gradient from its output: g * (1 - out * out).")
