"""Convolutions: ``conv2d``, its input gradient ``conv_transpose2d`` and its weight gradient
``conv2d_weight_grad``, three primitives run whole by the kernels in ``nbaccel_kernels.conv``
(CPU: im2col + BLAS or direct numba loops; CUDA: Triton). ``conv1d`` / ``conv_transpose1d``
are the 2-D ops on a height of 1.

The three ops are each other's derivatives (the gradient of a convolution is a transposed
convolution and a weight gradient, and so on), so gradients of any order exist. The bias is
not part of the ops: the fronts add it as a broadcast ``add``, so that in a compiled graph the
bias, a BatchNorm in eval mode and the activation after the convolution fuse into one
pointwise kernel behind the extern convolution.

Params are hashable: ``stride`` (sh, sw), ``padding`` ((top, bottom), (left, right)),
``dilation`` (dh, dw), ``groups``, and for the gradient ops the spatial size they produce.
"""
from __future__ import annotations

from nbaccel_kernels.conv import Conv2dGeometry

from .. import dtypes as D
from ..autograd import needs_input_grad as need
from .batching import with_batch
from . import kernel_modules
from .fronts import apply, as_tensor
from .nn import ShapeError
from .registry import ALIASES, OPS, defop


def _kernels(xp):
    return kernel_modules.kernels("conv", xp)


def _run(xp, fn_name, a, b, size, p):
    """Call the kernel in float32/float64 (float16 and bfloat16 compute in float32 on the CPU,
    as PyTorch's CPU kernels accumulate)."""
    dt = a.dtype
    cpu = getattr(xp, "__name__", "") == "numpy"
    if cpu and dt not in (xp.float32, xp.float64):
        a, b = a.astype(xp.float32), b.astype(xp.float32)
    fn = getattr(_kernels(xp), fn_name)
    args = (a, b) + ((size,) if size is not None else ())
    out = fn(*args, p["stride"], p["padding"], p["dilation"], p["groups"])
    return out.astype(dt, copy=False)


def _geometry(x_shape, w_shape, p, what):
    try:
        return Conv2dGeometry(x_shape, w_shape, p["stride"], p["padding"], p["dilation"], p["groups"])
    except ValueError as e:
        raise ShapeError(f"{what}: {e} (input {tuple(x_shape)}, weight {tuple(w_shape)})") from None


def _float_dtype(a, b, what):
    if a.dtype != b.dtype:
        raise RuntimeError(f"{what}: input type ({a.dtype}) and weight type ({b.dtype}) should be "
                           "the same")
    if a.dtype.kind != "f":
        raise RuntimeError(f"{what}: needs floating point tensors, got {a.dtype}")
    return a.dtype


def _check_4d(t, what, name):
    if t.ndim != 4:
        raise ShapeError(f"{what}: expected a 4-D {name}, got shape {tuple(t.shape)}")


# ---- the three primitives ----------------------------------------------------------------------

def _conv2d_infer(args, p):
    x, w = args
    _check_4d(x, "conv2d", "input (N, C, H, W)")
    _check_4d(w, "conv2d", "weight (O, C/groups, KH, KW)")
    return _geometry(x.shape, w.shape, p, "conv2d").out_shape, _float_dtype(x, w, "conv2d")


def _transpose_infer(args, p):
    gy, w = args
    _check_4d(gy, "conv_transpose2d", "input")
    _check_4d(w, "conv_transpose2d", "weight")
    g = _geometry((gy.shape[0], w.shape[1] * p["groups"]) + tuple(p["size"]), w.shape, p,
                  "conv_transpose2d")
    if tuple(gy.shape) != g.out_shape:
        raise ShapeError(f"conv_transpose2d: input of shape {tuple(gy.shape)} does not give an "
                         f"output of spatial size {tuple(p['size'])} with weight {tuple(w.shape)}")
    return g.x_shape, _float_dtype(gy, w, "conv_transpose2d")


def _weight_grad_infer(args, p):
    x, gy = args
    g = _geometry(x.shape, (gy.shape[1], x.shape[1] // p["groups"]) + tuple(p["size"]), p,
                  "conv2d_weight_grad")
    if tuple(gy.shape) != g.out_shape:
        raise ShapeError(f"conv2d_weight_grad: gradient of shape {tuple(gy.shape)}, the "
                         f"convolution's output is {g.out_shape}")
    return g.w_shape, _float_dtype(x, gy, "conv2d_weight_grad")


def _same(p, size):
    return dict(p, size=tuple(size))


def _conv_params(p):
    return {k: p[k] for k in ("stride", "padding", "dilation", "groups", "kernel")}


def _conv2d_grad(g, out, x, w, **p):
    gx = apply(conv_transpose2d, (g, w), _same(p, x.shape[2:])) if need(0) else None
    gw = apply(conv2d_weight_grad, (x, g), _same(p, w.shape[2:])) if need(1) else None
    return gx, gw


def _transpose_grad(g, out, gy, w, **p):
    # out = C^T(gy, w): <out, g> = <gy, C(g, w)>, so d/dgy = C(g, w) and d/dw = wgrad(g, gy)
    dgy = apply(conv2d, (g, w), _conv_params(p)) if need(0) else None
    dw = apply(conv2d_weight_grad, (g, gy), _same(p, w.shape[2:])) if need(1) else None
    return dgy, dw


def _weight_grad_grad(g, out, x, gy, **p):
    # <wgrad(x, gy), g> = <C(x, g), gy> = <x, C^T(gy, g)>
    dx = apply(conv_transpose2d, (gy, g), _same(p, x.shape[2:])) if need(0) else None
    dgy = apply(conv2d, (x, g), _conv_params(p)) if need(1) else None
    return dx, dgy


def _label(p):
    return "conv-" + p.get("kernel", "cpu")


# ---- fronts (PyTorch's F.conv2d & co.) -----------------------------------------------------------

def _pair(v, name, n=2):
    if isinstance(v, int):
        return (int(v),) * n
    v = tuple(int(a) for a in v)
    if len(v) == 1:
        return v * n
    if len(v) != n:
        raise ValueError(f"{name} must be an int or a tuple of {n} ints, got {v}")
    return v


def _kernel_name(t):
    return "cpu" if t.device.type == "cpu" else "triton"


def _padding(padding, kernel, dilation, stride, what):
    """PyTorch's padding argument as ((top, bottom), (left, right))."""
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0), (0, 0))
        if padding != "same":
            raise ValueError(f"{what}: padding must be 'valid', 'same', an int or a tuple, got "
                             f"{padding!r}")
        if any(s != 1 for s in stride):
            raise ValueError(f"{what}: padding='same' is not supported for strided convolutions")
        # the total padding d*(k-1), the extra one (for even kernels) at the end, as PyTorch
        totals = [d * (k - 1) for d, k in zip(dilation, kernel)]
        return tuple((t // 2, t - t // 2) for t in totals)
    ph, pw = _pair(padding, "padding")
    if ph < 0 or pw < 0:
        raise ValueError(f"{what}: negative padding is not supported, got {padding}")
    return ((ph, ph), (pw, pw))


def _add_bias(y, bias, channels, what):
    if bias is None:
        return y
    bias = as_tensor(bias)
    if tuple(bias.shape) != (channels,):
        raise ShapeError(f"{what}: bias of shape {tuple(bias.shape)}, expected ({channels},)")
    return y + bias.reshape((1, channels) + (1,) * (y.ndim - 2))


def _batched(x, spatial, what):
    """(x with a batch dim, whether one was added): PyTorch takes unbatched (C, *spatial) input."""
    if x.ndim == spatial + 1:
        return x.reshape((1,) + tuple(x.shape)), True
    if x.ndim != spatial + 2:
        raise ShapeError(f"{what}: expected a {spatial + 1}-D (unbatched) or {spatial + 2}-D "
                         f"(batched) input, got shape {tuple(x.shape)}")
    return x, False


def _conv2d_front(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """PyTorch's ``F.conv2d``: (N, C, H, W) input, (O, C/groups, KH, KW) weight, optional (O,)
    bias; ``padding`` an int, a pair, ``'valid'`` or ``'same'``.

    >>> import nbaccel as nb
    >>> nb.nn.functional.conv2d(nb.ones(1, 1, 4, 4), nb.ones(1, 1, 3, 3), padding=1)[0, 0, 0]
    tensor([4., 6., 6., 4.])
    """
    x, w = as_tensor(input), as_tensor(weight)
    x, unbatched = _batched(x, 2, "conv2d")
    if w.ndim != 4:
        raise ShapeError(f"conv2d: expected a 4-D weight (O, C/groups, KH, KW), got {tuple(w.shape)}")
    stride, dilation = _pair(stride, "stride"), _pair(dilation, "dilation")
    p = {"stride": stride, "padding": _padding(padding, w.shape[2:], dilation, stride, "conv2d"),
         "dilation": dilation, "groups": int(groups), "kernel": _kernel_name(x)}
    y = _add_bias(apply(conv2d, (x, w), p), bias, w.shape[0], "conv2d")
    return y.reshape(tuple(y.shape[1:])) if unbatched else y


def _conv1d_front(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """PyTorch's ``F.conv1d``: (N, C, L) input, (O, C/groups, K) weight (a conv2d of height 1)."""
    x, w = as_tensor(input), as_tensor(weight)
    x, unbatched = _batched(x, 1, "conv1d")
    if w.ndim != 3:
        raise ShapeError(f"conv1d: expected a 3-D weight (O, C/groups, K), got {tuple(w.shape)}")
    if not isinstance(padding, str):
        padding = (0, _pair(padding, "padding", 1)[0])
    n, c, length = x.shape
    y = _conv2d_front(x.reshape((n, c, 1, length)), w.reshape(tuple(w.shape[:2]) + (1, w.shape[2])),
                      bias, (1, _pair(stride, "stride", 1)[0]), padding,
                      (1, _pair(dilation, "dilation", 1)[0]), groups)
    y = y.reshape((n, y.shape[1], y.shape[3]))
    return y.reshape(tuple(y.shape[1:])) if unbatched else y


def _transposed_size(n_in, k, s, p, op, d):
    return (n_in - 1) * s - 2 * p + d * (k - 1) + op + 1


def _conv_transpose2d_front(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                            groups=1, dilation=1):
    """PyTorch's ``F.conv_transpose2d``: (N, C_in, H, W) input, (C_in, C_out/groups, KH, KW)
    weight; the output is (H - 1) * stride - 2 * padding + dilation * (KH - 1) +
    output_padding + 1 high (and likewise wide)."""
    x, w = as_tensor(input), as_tensor(weight)
    x, unbatched = _batched(x, 2, "conv_transpose2d")
    if w.ndim != 4:
        raise ShapeError(f"conv_transpose2d: expected a 4-D weight (C_in, C_out/groups, KH, KW), "
                         f"got {tuple(w.shape)}")
    if isinstance(padding, str):
        raise ValueError("conv_transpose2d: padding must be an int or a tuple (PyTorch takes no "
                         "'same' or 'valid' here)")
    stride, dilation = _pair(stride, "stride"), _pair(dilation, "dilation")
    pad, out_pad = _pair(padding, "padding"), _pair(output_padding, "output_padding")
    for o, s, d in zip(out_pad, stride, dilation):
        if o < 0 or (o >= s and o >= d):
            raise ValueError(f"conv_transpose2d: output_padding {out_pad} must be smaller than "
                             f"stride {stride} or dilation {dilation}")
    size = tuple(_transposed_size(x.shape[2 + a], w.shape[2 + a], stride[a], pad[a], out_pad[a],
                                  dilation[a]) for a in range(2))
    if min(size) < 1:
        raise ShapeError(f"conv_transpose2d: the output would be {size} for input {tuple(x.shape)}")
    p = {"stride": stride, "padding": tuple((q, q) for q in pad), "dilation": dilation,
         "groups": int(groups), "kernel": _kernel_name(x), "size": size}
    y = _add_bias(apply(conv_transpose2d, (x, w), p), bias, w.shape[1] * int(groups),
                  "conv_transpose2d")
    return y.reshape(tuple(y.shape[1:])) if unbatched else y


def _conv_transpose1d_front(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                            groups=1, dilation=1):
    """PyTorch's ``F.conv_transpose1d`` (a conv_transpose2d of height 1)."""
    x, w = as_tensor(input), as_tensor(weight)
    x, unbatched = _batched(x, 1, "conv_transpose1d")
    one = lambda v, name: (0 if name != "s" else 1, _pair(v, name, 1)[0])  # noqa: E731
    n, c, length = x.shape
    y = _conv_transpose2d_front(x.reshape((n, c, 1, length)),
                                w.reshape(tuple(w.shape[:2]) + (1, w.shape[2])), bias,
                                (1, _pair(stride, "stride", 1)[0]), one(padding, "padding"),
                                one(output_padding, "output_padding"), groups,
                                (1, _pair(dilation, "dilation", 1)[0]))
    y = y.reshape((n, y.shape[1], y.shape[3]))
    return y.reshape(tuple(y.shape[1:])) if unbatched else y


def _weight_grad_front(input, grad_output, kernel_size, stride=1, padding=0, dilation=1, groups=1):
    x, gy = as_tensor(input), as_tensor(grad_output)
    stride, dilation, k = _pair(stride, "stride"), _pair(dilation, "dilation"), _pair(kernel_size, "kernel_size")
    p = {"stride": stride, "padding": _padding(padding, k, dilation, stride, "conv2d_weight_grad"),
         "dilation": dilation, "groups": int(groups), "kernel": _kernel_name(x), "size": k}
    return apply(conv2d_weight_grad, (x, gy), p)


conv2d = defop(
    "conv2d", kind="nn", infer=_conv2d_infer, grad=_conv2d_grad, front=_conv2d_front,
    impl=lambda xp, x, w, **p: _run(xp, "conv2d_forward", x, w, None, p), extern_backend=_label,
    doc="2-D convolution (cross-correlation, as PyTorch) of (N, C, H, W) input with "
        "(O, C/groups, KH, KW) weight: stride, padding (int, pair, 'valid', 'same'), dilation, "
        "groups; an extern kernel in compiled graphs.")

conv_transpose2d = defop(
    "conv_transpose2d", kind="nn", infer=_transpose_infer, grad=_transpose_grad,
    front=_conv_transpose2d_front,
    impl=lambda xp, gy, w, **p: _run(xp, "conv2d_backward_input", gy, w, p["size"], p),
    extern_backend=_label,
    doc="Transposed 2-D convolution (the gradient of conv2d with respect to its input); "
        "PyTorch's output_padding, groups and dilation.")

conv2d_weight_grad = defop(
    "conv2d_weight_grad", kind="nn", infer=_weight_grad_infer, grad=_weight_grad_grad,
    front=_weight_grad_front,
    impl=lambda xp, x, gy, **p: _run(xp, "conv2d_backward_weight", x, gy, p["size"], p),
    extern_backend=_label,
    doc="The gradient of conv2d with respect to its weight, from the input and the output "
        "gradient (PyTorch's ``torch.nn.grad.conv2d_weight``).")

def _conv3d_front(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """PyTorch's ``F.conv3d``: (N, C, D, H, W) input, (O, C/groups, KD, KH, KW) weight. One
    ``conv2d`` over (H, W): the KD depth taps of each output depth are stacked into the
    channels (group by group), the weight's KD taps likewise, so gradients are conv2d's."""
    x, w = as_tensor(input), as_tensor(weight)
    x, unbatched = _batched(x, 3, "conv3d")
    if w.ndim != 5:
        raise ShapeError(f"conv3d: expected a 5-D weight (O, C/groups, KD, KH, KW), got "
                         f"{tuple(w.shape)}")
    stride, dilation = _pair(stride, "stride", 3), _pair(dilation, "dilation", 3)
    if isinstance(padding, str):
        pads = _padding(padding, w.shape[2:], dilation, stride, "conv3d")
        if pads == ((0, 0), (0, 0)):
            pads = ((0, 0),) * 3
    else:
        pads = tuple((q, q) for q in _pair(padding, "padding", 3))
        if min(pads)[0] < 0:
            raise ValueError(f"conv3d: negative padding is not supported, got {padding}")
    n, c, d = x.shape[:3]
    o, cg, kd = w.shape[:3]
    g = int(groups)
    if g <= 0 or c != cg * g or o % g:
        raise RuntimeError(f"conv3d: expected input {tuple(x.shape)} to have {cg * g} channels "
                           f"and {o} output channels divisible by groups={g}")
    _float_dtype(x, w, "conv3d")
    if pads[0] != (0, 0):                       # zero depth padding: concatenated zeros
        z = [ALIASES["zeros"]((n, c, q) + tuple(x.shape[3:]), dtype=x.dtype, device=x.device)
             for q in pads[0]]
        x = OPS["concat"].front([t for t, q in zip((z[0], x, z[1]), (pads[0][0], 1, pads[0][1])) if q],
                            axis=2)
    sd, dd = stride[0], dilation[0]
    od = (x.shape[2] - dd * (kd - 1) - 1) // sd + 1
    if od < 1:
        raise ShapeError(f"conv3d: input depth {d} (padding {pads[0]}) is smaller than the "
                         f"dilated kernel depth {dd * (kd - 1) + 1}")
    h, wd = x.shape[3], x.shape[4]
    taps = ALIASES["stack"]([x[:, :, i * dd:i * dd + sd * (od - 1) + 1:sd] for i in range(kd)], 2)
    taps = taps.reshape((n, g, cg, kd, od, h, wd)).permute((0, 4, 1, 3, 2, 5, 6))
    taps = taps.reshape((n * od, g * kd * cg, h, wd))
    w2 = w.permute((0, 2, 1, 3, 4)).reshape((o, kd * cg) + tuple(w.shape[3:]))
    p = {"stride": stride[1:], "padding": tuple(pads[1:]), "dilation": dilation[1:],
         "groups": g, "kernel": _kernel_name(x)}
    y = apply(conv2d, (taps, w2), p)
    y = y.reshape((n, od) + tuple(y.shape[1:])).permute((0, 2, 1, 3, 4))
    y = _add_bias(y, bias, o, "conv3d")
    return y.reshape(tuple(y.shape[1:])) if unbatched else y


from .registry import defalias  # noqa: E402

conv1d = defalias("conv1d", _conv1d_front)
conv_transpose1d = defalias("conv_transpose1d", _conv_transpose1d_front)
conv3d = defalias("conv3d", _conv3d_front)


# ---- vmap: the vmapped dim folds into the batch (shared weights) or into the groups -------------

def _permute(x, axes):
    return apply(OPS["permute"], (x,), {"axes": tuple(axes)})


def _to_groups(t):
    """(B, N, C, ...) -> (N, B*C, ...): each vmapped example becomes its own channel groups."""
    t = _permute(t, (1, 0) + tuple(range(2, t.ndim)))
    return t.reshape((t.shape[0], t.shape[1] * t.shape[2]) + tuple(t.shape[3:]))


def _from_groups(t, size):
    """(N, B*C, ...) -> (B, N, C, ...)."""
    t = t.reshape((t.shape[0], size, t.shape[1] // size) + tuple(t.shape[2:]))
    return _permute(t, (1, 0) + tuple(range(2, t.ndim)))


def _conv_batch_rule(op_name):
    """vmap for the three convolution ops. With only the image argument batched, the vmapped
    dim folds into N (one call, the shared weight). Otherwise each example's channels become
    groups of their own: groups * B in one call."""
    def rule(args, batched, params, size):
        op = OPS[op_name]
        a, b = args
        if op_name != "conv2d_weight_grad" and batched[0] and not batched[1]:
            out = apply(op, (a.reshape((size * a.shape[1],) + tuple(a.shape[2:])), b), params)
            return out.reshape((size, a.shape[1]) + tuple(out.shape[1:]))
        a, b = with_batch(a, batched[0], size), with_batch(b, batched[1], size)
        p = dict(params, groups=params["groups"] * size)
        if op_name == "conv2d_weight_grad":
            out = apply(op, (_to_groups(a), _to_groups(b)), p)
            return out.reshape((size, out.shape[0] // size) + tuple(out.shape[1:]))
        w = b.reshape((size * b.shape[1],) + tuple(b.shape[2:]))
        return _from_groups(apply(op, (_to_groups(a), w), p), size)
    rule.__name__ = f"{op_name}_batch_rule"
    return rule


for _op in (conv2d, conv_transpose2d, conv2d_weight_grad):
    _op.batch_rule = _conv_batch_rule(_op.name)
