"""The NumPy reference: the convolution written as plainly as NumPy allows.

The padded input is viewed as windows (N, C, KH, KW, OH, OW) (a strided view, no copy) and
each group is one ``einsum``. The input gradient scatters each kernel tap's contribution
into the padded input with a strided slice (one slice per tap never overlaps itself).

>>> import numpy as np
>>> x = np.ones((1, 1, 3, 3)); w = np.ones((1, 1, 2, 2))
>>> conv2d_forward(x, w, (1, 1), ((0, 0), (0, 0)), (1, 1), 1)[0, 0]
array([[4., 4.],
       [4., 4.]])
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .geometry import Conv2dGeometry


def _pad(x, g):
    return np.pad(x, ((0, 0), (0, 0), (g.pt, g.pb), (g.pl, g.pr)))


def _windows(xp, g):
    """(N, C, KH, KW, OH, OW): element [n, c, i, j, oh, ow] = padded x[n, c, oh*sh + i*dh, ow*sw + j*dw]."""
    sn, sc, s_h, s_w = xp.strides
    return as_strided(xp, (g.n, g.c, g.kh, g.kw, g.oh, g.ow),
                      (sn, sc, s_h * g.dh, s_w * g.dw, s_h * g.sh, s_w * g.sw), writeable=False)


def _groups(g):
    return [(slice(k * g.cg, (k + 1) * g.cg), slice(k * g.og, (k + 1) * g.og)) for k in range(g.groups)]


def conv2d_forward(x, w, stride, padding, dilation, groups):
    """y[n, o, oh, ow] = sum over c, i, j of w[o, c, i, j] * x[n, g*Cg + c, oh*sh - top + i*dh, ...]."""
    g = Conv2dGeometry(x.shape, w.shape, stride, padding, dilation, groups)
    win = _windows(_pad(x, g), g)
    y = np.empty(g.out_shape, np.result_type(x, w))
    for cs, os_ in _groups(g):
        y[:, os_] = np.einsum("ncijhw,ocij->nohw", win[:, cs], w[os_])
    return y


def conv2d_backward_input(gy, w, input_hw, stride, padding, dilation, groups):
    """The gradient of conv2d_forward with respect to x (of spatial size ``input_hw``); also
    the transposed convolution of ``gy`` with ``w``."""
    n, c = gy.shape[0], w.shape[1] * groups
    g = Conv2dGeometry((n, c) + tuple(input_hw), w.shape, stride, padding, dilation, groups)
    if tuple(gy.shape) != g.out_shape:
        raise ValueError(f"conv2d_backward_input: gradient of shape {tuple(gy.shape)}, "
                         f"the convolution's output is {g.out_shape}")
    hp, wp = g.padded_hw
    gxp = np.zeros((g.n, g.c, hp, wp), np.result_type(gy, w))
    for cs, os_ in _groups(g):
        for i in range(g.kh):
            for j in range(g.kw):
                tap = np.einsum("nohw,oc->nchw", gy[:, os_], w[os_, :, i, j])
                rows = slice(i * g.dh, i * g.dh + g.sh * (g.oh - 1) + 1, g.sh)
                cols = slice(j * g.dw, j * g.dw + g.sw * (g.ow - 1) + 1, g.sw)
                gxp[:, cs, rows, cols] += tap
    return np.ascontiguousarray(gxp[:, :, g.pt:g.pt + g.h, g.pl:g.pl + g.w])


def conv2d_backward_weight(x, gy, kernel_hw, stride, padding, dilation, groups):
    """The gradient of conv2d_forward with respect to w (of spatial size ``kernel_hw``)."""
    o = gy.shape[1]
    g = Conv2dGeometry(x.shape, (o, x.shape[1] // groups) + tuple(kernel_hw), stride, padding,
                       dilation, groups)
    if tuple(gy.shape) != g.out_shape:
        raise ValueError(f"conv2d_backward_weight: gradient of shape {tuple(gy.shape)}, "
                         f"the convolution's output is {g.out_shape}")
    win = _windows(_pad(x, g), g)
    gw = np.empty(g.w_shape, np.result_type(x, gy))
    for cs, os_ in _groups(g):
        gw[os_] = np.einsum("ncijhw,nohw->ocij", win[:, cs], gy[:, os_])
    return gw
