"""``F.conv_transpose3d`` as a composition of ops (``nbaccel.nn.functional`` re-exports it).

A transposed 3-D convolution is a sum over the kernel's depth taps of transposed 2-D ones:
input depth i, tap k adds ``conv_transpose2d(x[:, :, i], w[:, :, k])`` at output depth
``i * stride + k * dilation - padding``. So it is one ``conv_transpose2d`` over (H, W), the
input depth folded into the batch and the KD taps stacked into the output channels (group by
group), then the depth placement: each tap's slab spread to every stride-th depth, shifted by
its tap offset, summed and cropped. The forward and every gradient (of any order) are then
those of the op table's ``conv_transpose2d`` and of movement ops, as ``conv3d``'s are those of
``conv2d``.

>>> import nbaccel as nb
>>> import nbaccel.nn.functional as F
>>> F.conv_transpose3d(nb.ones(1, 1, 2, 2, 2), nb.ones(1, 1, 2, 2, 2), stride=2).shape
(1, 1, 4, 4, 4)
"""
from __future__ import annotations

from .. import ops
from ..ops.conv import _add_bias, _batched, _pair
from ..ops.fronts import as_tensor
from ..ops.nn import ShapeError
from ..ops.pooling import pad_constant
from ..ops.registry import OPS


def _spread(y, axis, stride):
    """y with stride - 1 zero slabs inserted between its slabs along ``axis``."""
    if stride == 1:
        return y
    shape = tuple(y.shape)
    zeros = ops.zeros(shape, dtype=y.dtype, device=y.device)
    z = ops.stack([y] + [zeros] * (stride - 1), axis + 1)
    z = z.reshape(shape[:axis] + (shape[axis] * stride,) + shape[axis + 1:])
    return z[(slice(None),) * axis + (slice(0, (shape[axis] - 1) * stride + 1),)]


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """PyTorch's ``F.conv_transpose3d``: (N, C_in, D, H, W) or (C_in, D, H, W) input,
    (C_in, C_out/groups, KD, KH, KW) weight, optional (C_out,) bias; each output size is
    (n - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1."""
    x, w = as_tensor(input), as_tensor(weight)
    x, unbatched = _batched(x, 3, "conv_transpose3d")
    if w.ndim != 5:
        raise ShapeError(f"conv_transpose3d: expected a 5-D weight (C_in, C_out/groups, KD, KH, "
                         f"KW), got {tuple(w.shape)}")
    if isinstance(padding, str):
        raise ValueError("conv_transpose3d: padding must be an int or a tuple (PyTorch takes no "
                         "'same' or 'valid' here)")
    s, p = _pair(stride, "stride", 3), _pair(padding, "padding", 3)
    op, d = _pair(output_padding, "output_padding", 3), _pair(dilation, "dilation", 3)
    g = int(groups)
    n, cin, depth, h, wd = x.shape
    _, cog, kd, kh, kw = w.shape
    if g <= 0 or cin != w.shape[0] or cin % g:
        raise RuntimeError(f"conv_transpose3d: input {tuple(x.shape)} and weight "
                           f"{tuple(w.shape)} do not match with groups={g} (the weight's first "
                           f"dim is the input's {cin} channels, divisible by groups)")
    if op[0] < 0 or (op[0] >= s[0] and op[0] >= d[0]):
        raise ValueError(f"conv_transpose3d: output_padding {op} must be smaller than stride "
                         f"{s} or dilation {d}")
    if p[0] < 0:
        raise ValueError(f"conv_transpose3d: negative padding is not supported, got {padding}")
    full = (depth - 1) * s[0] + d[0] * (kd - 1) + 1          # depth before padding is cropped
    out_d = full - 2 * p[0] + op[0]
    if out_d < 1:
        raise ShapeError(f"conv_transpose3d: the output depth would be {out_d} for input "
                         f"{tuple(x.shape)}")
    x2 = x.permute((0, 2, 1, 3, 4)).reshape((n * depth, cin, h, wd))
    w2 = w.permute((0, 2, 1, 3, 4)).reshape((cin, kd * cog, kh, kw))
    y = OPS["conv_transpose2d"].front(x2, w2, None, s[1:], p[1:], op[1:], g, d[1:])
    oh, ow = y.shape[2], y.shape[3]
    y = _spread(y.reshape((n, depth, g, kd, cog, oh, ow)), 1, s[0])
    length = max(full, p[0] + out_d)        # output_padding may reach past the last tap
    span = (depth - 1) * s[0] + 1
    out = None
    for k in range(kd):
        lo = k * d[0]
        tap = pad_constant(y[:, :, :, k], ((lo, length - lo - span),) + ((0, 0),) * 4, 0.0)
        out = tap if out is None else out + tap
    out = out[:, p[0]:p[0] + out_d].permute((0, 2, 3, 1, 4, 5))
    out = _add_bias(out.reshape((n, g * cog, out_d, oh, ow)), bias, g * cog, "conv_transpose3d")
    return out.reshape(tuple(out.shape[1:])) if unbatched else out
