"""The numba loops of the CPU convolution: direct loops for convolutions with little work per
output (depthwise, where a GEMM would be tiny); the others go through im2col and BLAS.

Each loop runs on one thread over the images it is given: cpu.py splits a large call over the
kernels' own threads by images (``_tasks``: the caller takes a share, no OpenMP workers to
wake; numba's parallel loops took 7.8 ms for 0.6 ms of work beside another process's load).
Every iteration writes its own plane ((image, channel) or (output channel, input channel)), so
there are no races. Column ranges whose input index falls in the padding are computed once
per row (``_span``) instead of tested per element, which leaves the innermost loop a plain
strided copy or multiply-add.
"""
from __future__ import annotations

from numba import njit, prange

_JIT = dict(nogil=True, cache=True, boundscheck=False)   # (prange is range without parallel)


@njit(inline="always")
def _span(j, dw, pl, sw, width, out_w):
    """Output columns [lo, hi) whose input column q*sw - pl + j*dw lies inside [0, width)."""
    lo = max(0, -((j * dw - pl) // sw))
    hi = min(out_w, -((j * dw - pl - width) // sw))
    return lo, max(lo, hi)


@njit(**_JIT)
def direct_forward(x, w, y, cg, og, sh, sw, pt, pl, dh, dw):
    """y = conv(x, w) by loops, one (image, output channel) plane per iteration."""
    n_img, n_out, out_h, out_w = y.shape
    height, width = x.shape[2], x.shape[3]
    kh, kw = w.shape[2], w.shape[3]
    for no in prange(n_img * n_out):
        n, o = no // n_out, no % n_out
        y[n, o] = 0
        for c in range(cg):
            ci = (o // og) * cg + c
            for i in range(kh):
                for j in range(kw):
                    wv = w[o, c, i, j]
                    lo, hi = _span(j, dw, pl, sw, width, out_w)
                    for r in range(out_h):
                        ih = r * sh - pt + i * dh
                        if 0 <= ih < height:
                            for q in range(lo, hi):
                                y[n, o, r, q] += wv * x[n, ci, ih, q * sw - pl + j * dw]


@njit(**_JIT)
def direct_backward_input(gy, w, gx, cg, og, sh, sw, pt, pl, dh, dw):
    """gx (zeroed) += the transposed convolution of gy, one (image, input channel) plane each."""
    n_img, n_ch, height, width = gx.shape
    out_h, out_w = gy.shape[2], gy.shape[3]
    kh, kw = w.shape[2], w.shape[3]
    for nc in prange(n_img * n_ch):
        n, ci = nc // n_ch, nc % n_ch
        grp, c = ci // cg, ci % cg
        for oo in range(og):
            o = grp * og + oo
            for i in range(kh):
                for j in range(kw):
                    wv = w[o, c, i, j]
                    lo, hi = _span(j, dw, pl, sw, width, out_w)
                    for r in range(out_h):
                        ih = r * sh - pt + i * dh
                        if 0 <= ih < height:
                            for q in range(lo, hi):
                                gx[n, ci, ih, q * sw - pl + j * dw] += wv * gy[n, o, r, q]


@njit(**_JIT)
def direct_backward_weight(x, gy, gw, cg, og, sh, sw, pt, pl, dh, dw):
    """gw[o, c, i, j] = sum over images and output pixels, one (output, input channel) each."""
    n_out, _, kh, kw = gw.shape
    n_img, _, out_h, out_w = gy.shape
    height, width = x.shape[2], x.shape[3]
    for oc in prange(n_out * cg):
        o, c = oc // cg, oc % cg
        ci = (o // og) * cg + c
        for i in range(kh):
            for j in range(kw):
                lo, hi = _span(j, dw, pl, sw, width, out_w)
                s = gw.dtype.type(0)
                for n in range(n_img):
                    for r in range(out_h):
                        ih = r * sh - pt + i * dh
                        if 0 <= ih < height:
                            for q in range(lo, hi):
                                s += gy[n, o, r, q] * x[n, ci, ih, q * sw - pl + j * dw]
                gw[o, c, i, j] = s
