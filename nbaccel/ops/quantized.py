"""Quantized ops: the quantized linear (an extern kernel) and weight dequantization.

``quantized_linear(x, qdata, scale[, zero_point][, bias], mode=..., group_size=..., layout=...)``
is ``x @ W.T + bias`` where ``W`` is stored quantized (formats in ``nbaccel_kernels.quant.packing``):

* ``mode="int8"``          int8 weight, per-output-channel scale (weight-only)
* ``mode="int4"``          packed int4 weight, group-wise scale, optional zero point (weight-only)
* ``mode="int8-dynamic"``  int8 weight; activations quantized per token at run time, int8 x int8
                            products summed in int32

The op is a primitive without a per-element rendering: the compiler's scheduler runs it whole
as one extern step through its eager ``impl`` (numba kernels on the CPU, Triton on CUDA), and
the report labels it with the mode. ``layout`` is the int4 codes' byte order: ``"rows"``
(row-major) or ``"rows4x64"`` (4-row blocks interleaved, what the CPU's SIMD GEMV reads in one
stream); the CPU kernel reads either, everything else (dequantization, Triton) reads a
row-major copy. The derivative flows to ``x`` only (through the
dequantized weight): quantized weights are frozen.
"""
from __future__ import annotations

import math

from .. import dtypes as D
from .batching import leading_dims_rule
from . import kernel_modules
from .fronts import apply, as_tensor
from .registry import defop
from nbaccel_kernels.quant import packing

MODES = ("int8", "int4", "int8-dynamic")
ACTIVATION_DTYPES = (D.float32, D.float64)


def _kernels(xp):
    """The kernel module for an array module: numba on NumPy arrays, Triton on CuPy ones."""
    return kernel_modules.kernels("quant", xp)


def _split_rest(rest, zeros, bias):
    it = iter(rest)
    z = next(it) if zeros else None
    b = next(it) if bias else None
    return z, b


def _row_major(xp, qdata, layout):
    """int4 codes in row-major order: a copy when they are interleaved (``"rows4x64"``). On
    NumPy or CuPy arrays alike (the same reshape as ``packing.deinterleave_int4``)."""
    if layout == "rows":
        return qdata
    n, k2 = qdata.shape
    blocks = qdata.reshape(n // packing.INT4_IL_ROWS, k2 // packing.INT4_IL_BYTES,
                           packing.INT4_IL_ROWS, packing.INT4_IL_BYTES)
    return xp.ascontiguousarray(blocks.transpose(0, 2, 1, 3)).reshape(n, k2)


def _check_layout(mode, layout, qdata):
    if mode != "int4":
        if layout != "rows":
            raise ValueError(f"quantized op: only int4 codes have a layout, got {layout!r} "
                             f"for {mode}")
        return
    n, k2 = qdata.shape
    packing.check_int4_layout(layout, n, 2 * k2)


def _weight_shape(qdata, mode):
    n, k = qdata.shape
    return (n, 2 * k) if mode == "int4" else (n, k)


# ---- dequantize_weight -----------------------------------------------------------------------

def _dequant_infer(args, params):
    return _weight_shape(args[0], params["mode"]), D.float32


def _dequant_impl(xp, qdata, scale, *rest, mode, group_size, zeros, layout="rows"):
    # (layout defaults to "rows": graphs exported before layouts existed have no such param)
    import numpy as np
    to_np = (lambda a: a) if xp is np else (lambda a: a.get())
    z, _ = _split_rest(rest, zeros, False)
    if mode == "int4":
        qdata = _row_major(xp, qdata, layout)
        w = packing.dequantize_int4(to_np(qdata), to_np(scale), None if z is None else to_np(z),
                                    group_size)
    else:
        w = packing.dequantize_int8(to_np(qdata), to_np(scale))
    return xp.asarray(w)


def _dequant_front(qdata, scale, zero_point=None, *, mode, group_size=None, layout="rows"):
    """The float32 weight of int8 / int4 quantized data (int4 codes in ``layout``)."""
    args = (as_tensor(qdata), as_tensor(scale)) + (() if zero_point is None else (as_tensor(zero_point),))
    mode = "int8" if mode == "int8-dynamic" else mode
    _check_layout(mode, layout, args[0])
    return apply(dequantize_weight, args, {"mode": mode,
                                           "group_size": group_size if mode == "int4" else None,
                                           "zeros": zero_point is not None, "layout": layout})


dequantize_weight = defop(
    "dequantize_weight", kind="other", impl=_dequant_impl, infer=_dequant_infer,
    differentiable=False, front=_dequant_front,
    doc="The float32 weight of quantized data (``QuantizedTensor.dequantize``).")


# ---- quantized_linear ------------------------------------------------------------------------

def _linear_infer(args, params):
    x, qdata = args[0], args[1]
    n, k = _weight_shape(qdata, params["mode"])
    if x.ndim < 1 or x.shape[-1] != k:
        raise ValueError(f"quantized linear: input of shape {tuple(x.shape)} doesn't match "
                         f"in_features={k}")
    if x.dtype not in ACTIVATION_DTYPES:
        raise TypeError(f"quantized linear needs float32 or float64 input, got {x.dtype}")
    return tuple(x.shape[:-1]) + (n,), x.dtype


def _linear_impl(xp, x, qdata, scale, *rest, mode, group_size, zeros, bias, layout="rows"):
    z, b = _split_rest(rest, zeros, bias)
    kern = _kernels(xp)
    on_cpu = getattr(xp, "__name__", "") == "numpy"
    lead = x.shape[:-1]
    x2 = x if x.ndim == 2 else x.reshape(math.prod(lead), x.shape[-1])
    if mode == "int8":
        y = kern.int8_weight_only_matmul(x2, qdata, scale, b)
    elif mode == "int4":
        if on_cpu:      # the numba kernel reads both layouts (the SIMD GEMV rows4x64 as it is)
            y = kern.int4_weight_only_matmul(x2, qdata, scale, z, group_size, b, layout=layout)
        else:           # the Triton kernel reads row-major codes only
            y = kern.int4_weight_only_matmul(x2, _row_major(xp, qdata, layout), scale, z,
                                             group_size, b)
    else:
        y = kern.int8_dynamic_matmul(x2, qdata, scale, b)
    return y if x.ndim == 2 else y.reshape(lead + (y.shape[-1],))


def _linear_grad(g, out, x, qdata, scale, *rest, mode, group_size, zeros, bias, layout="rows"):
    z, b = _split_rest(rest, zeros, bias)
    w = _dequant_front(qdata, scale, z, mode=mode, group_size=group_size, layout=layout)
    gx = g @ w.astype(x.dtype)
    return (gx, None, None) + ((None,) if zeros else ()) + ((None,) if bias else ())


def _linear_front(input, qdata, scale, zero_point=None, bias=None, *, mode, group_size=None,
                  layout="rows"):
    """``input @ W.T + bias`` with a quantized ``W`` (see the module docstring)."""
    if mode not in MODES:
        raise ValueError(f"quantized_linear: mode must be one of {MODES}, got {mode!r}")
    if mode == "int4" and group_size is None:
        raise ValueError("quantized_linear: int4 needs a group_size")
    args = (as_tensor(input), as_tensor(qdata), as_tensor(scale))
    _check_layout(mode, layout, args[1])
    args += (() if zero_point is None else (as_tensor(zero_point),))
    args += (() if bias is None else (as_tensor(bias),))
    params = {"mode": mode, "group_size": group_size if mode == "int4" else None,
              "zeros": zero_point is not None, "bias": bias is not None, "layout": layout}
    return apply(quantized_linear, args, params)


quantized_linear = defop(
    "quantized_linear", kind="linalg", impl=_linear_impl, infer=_linear_infer,
    grad=_linear_grad, front=_linear_front, extern_backend=lambda params: params["mode"],
    batch_rule=leading_dims_rule("quantized_linear"),   # a batched input, the same weight
    doc="x @ W.T + bias with an int8 / int4 quantized weight (an extern kernel; "
        "see ``nbaccel.quant``).")
