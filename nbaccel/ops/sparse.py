"""2:4 semi-structured sparse ops: the product with a compressed weight and the two maps
between the compressed values and the dense layout.

A 2:4 weight ``W`` (``rows x cols``) travels as two tensors (format in
``nbaccel_kernels/sparse/reference.py``): ``values`` (``rows x cols/2``, float) and ``meta``
(``rows x ceil(cols/8)``, uint8, 2-bit positions). All three ops are primitives that the
compiler runs whole, as extern kernels labelled ``sparse24`` in the report; the eager
implementations call the numba kernels on the CPU and the Triton kernels on CUDA.

Derivatives close over the three ops: ``sparse24_to_dense`` and ``sparse24_gather`` are each
other's transposes, so the weight's gradient is the dense gradient gathered at the kept
positions (the masked dense gradient, stored compressed), and the input's gradient goes
through the decompressed weight.
"""
from __future__ import annotations

import math

from .. import dtypes as D
from .batching import leading_dims_rule
from . import kernel_modules
from .fronts import apply
from .registry import defop


def _kernels(xp):
    """The kernel module for an array module: numba on NumPy, Triton on CuPy."""
    return kernels_for(xp.__name__ == "numpy")


def kernels_for(on_cpu):
    """The kernel module: numba on the CPU, Triton on a GPU (``sparse.semi_structured`` too)."""
    return kernel_modules.kernels("sparse", on_cpu=on_cpu)


def _meta_cols(cols):
    return (cols // 4 + 1) // 2


def _check_compressed(values, meta, cols, op):
    if values.ndim != 2 or meta.ndim != 2 or tuple(values.shape) != (meta.shape[0], cols // 2) \
            or meta.shape[1] != _meta_cols(cols) or cols % 4:
        raise ValueError(f"{op}: values of shape {tuple(values.shape)} and metadata of shape "
                         f"{tuple(meta.shape)} don't describe a 2:4 weight with {cols} columns")
    if meta.dtype is not D.uint8:
        raise TypeError(f"{op}: metadata must be uint8, got {meta.dtype}")
    if values.dtype not in (D.float32, D.float64):
        raise TypeError(f"{op}: 2:4 values must be float32 or float64, got {values.dtype}")


# ---- sparse24_linear: x @ W.T (+ bias) ----------------------------------------------------------

def _linear_infer(args, p):
    x, values, meta = args[:3]
    cols = p["cols"]
    _check_compressed(values, meta, cols, "sparse linear")
    if x.ndim < 1 or x.shape[-1] != cols:
        raise ValueError(f"sparse linear: input of shape {tuple(x.shape)} doesn't match a 2:4 "
                         f"weight of shape {(values.shape[0], cols)} (need input [*, {cols}])")
    if len(args) > 3 and tuple(args[3].shape) not in ((values.shape[0],), ()):
        raise ValueError(f"sparse linear: bias of shape {tuple(args[3].shape)} doesn't match "
                         f"{values.shape[0]} output features")
    dt = D.result_type(*([x, values] + list(args[3:])))
    if dt not in (D.float32, D.float64):
        raise TypeError(f"sparse linear needs float32 or float64 tensors, got {x.dtype} and "
                        f"{values.dtype}")
    return tuple(x.shape[:-1]) + (values.shape[0],), dt


def _linear_impl(xp, x, values, meta, *b, cols, bias):
    dt = xp.result_type(x, values, *b)
    rows = values.shape[0]
    x2 = x.reshape(-1, cols) if x.ndim != 1 else x
    out = _kernels(xp).linear(x2.astype(dt, copy=False), values.astype(dt, copy=False), meta, cols)
    out = out.reshape(tuple(x.shape[:-1]) + (rows,))
    return out + b[0] if b else out


def _linear_grad(g, out, x, values, meta, *b, cols, bias):
    rows = values.shape[0]
    n = math.prod(x.shape[:-1])
    g2 = g.reshape((n, rows))
    gx = g @ to_dense.front(values, meta, cols)
    gw = gather.front(g2.T @ x.reshape((n, cols)), meta)
    return (gx, gw, None) + ((g2.sum(axis=0),) if b else ())


def _linear_front(input, values, meta, bias=None, *, cols):
    args = (input, values, meta) + (() if bias is None else (bias,))
    return apply(linear, args, {"cols": int(cols), "bias": bias is not None})


linear = defop("sparse24_linear", kind="linalg", impl=_linear_impl, infer=_linear_infer,
               grad=_linear_grad, front=_linear_front, extern_backend=lambda p: "sparse24",
               batch_rule=leading_dims_rule("sparse24_linear"),   # a batched input, one weight
               doc="``x @ W.T + bias`` for a 2:4 weight W given compressed as (values, meta); "
                   "reads only the kept values and their 2-bit positions.")


# ---- sparse24_to_dense: (values, meta) -> W ------------------------------------------------------

def _to_dense_infer(args, p):
    values, meta = args
    _check_compressed(values, meta, p["cols"], "sparse to_dense")
    return (values.shape[0], p["cols"]), values.dtype


to_dense = defop(
    "sparse24_to_dense", kind="linalg", infer=_to_dense_infer,
    impl=lambda xp, values, meta, cols: _kernels(xp).decompress(values, meta, cols),
    grad=lambda g, out, values, meta, cols: (gather.front(g, meta), None),
    front=lambda values, meta, cols: apply(to_dense, (values, meta), {"cols": int(cols)}),
    extern_backend=lambda p: "sparse24",
    doc="The dense 2:4 weight from its compressed values and metadata (zeros where pruned).")


# ---- sparse24_gather: dense -> the entries at the kept positions ------------------------------------

def _gather_infer(args, p):
    dense, meta = args
    if dense.ndim != 2 or dense.shape[1] % 4 or tuple(meta.shape) != (dense.shape[0], _meta_cols(dense.shape[1])):
        raise ValueError(f"sparse gather: a dense tensor of shape {tuple(dense.shape)} and "
                         f"metadata of shape {tuple(meta.shape)} don't match")
    if dense.dtype not in (D.float32, D.float64):
        raise TypeError(f"sparse gather: needs float32 or float64, got {dense.dtype}")
    return (dense.shape[0], dense.shape[1] // 2), dense.dtype


def _gather_impl(xp, dense, meta):
    if xp.__name__ == "numpy":
        return _kernels(xp).gather(dense, meta)
    rows, cols = dense.shape   # on CuPy: the reference's index arithmetic, on the device
    nib = xp.stack([meta & 15, meta >> 4], axis=-1).reshape(rows, -1)[:, :cols // 4].astype(xp.int64)
    pos = xp.stack([nib & 3, nib >> 2], axis=-1) + 4 * xp.arange(cols // 4)[None, :, None]
    return xp.take_along_axis(dense, pos.reshape(rows, cols // 2), axis=1)


gather = defop(
    "sparse24_gather", kind="linalg", infer=_gather_infer, impl=_gather_impl,
    grad=lambda g, out, dense, meta: (to_dense.front(g, meta, dense.shape[1]), None),
    front=lambda dense, meta: apply(gather, (dense, meta), {}),
    extern_backend=lambda p: "sparse24",
    doc="The entries of a dense (rows, cols) tensor at a 2:4 pattern's kept positions "
        "(rows, cols/2): how a dense weight gradient becomes the compressed values' gradient.")
