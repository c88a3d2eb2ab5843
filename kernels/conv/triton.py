"""The convolution in Triton (GPU; tested on the CPU with ``TRITON_INTERPRET=1``).

Direct kernels, one per direction. Each program computes ``BLOCK`` elements of its result
(flattened NCHW / OCKK index) and walks the reduction in blocks of ``BLOCK_R``: a
(BLOCK, BLOCK_R) tile of gathered inputs (masked where the index falls in the padding or, for
the transposed direction, between strides) times the matching weights or gradients, summed
into a float32 accumulator. Simple and exact rather than fast: no tensor cores yet.

Arrays are NumPy (under the interpreter) or CuPy; the wrappers make them contiguous,
allocate the result with the input's array module and launch.
"""
from __future__ import annotations

import functools

import numpy as np

from .._triton_args import array_module, as_triton_arg
from .geometry import Conv2dGeometry

BLOCK = 64
BLOCK_R = 32


@functools.lru_cache(maxsize=None)
def _kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def forward(x_ptr, w_ptr, y_ptr, N, C, H, W, O, CG, OG, KH, KW, SH, SW, PT, PL, DH, DW,
                OH, OW, BLOCK: tl.constexpr, BLOCK_R: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        ok = offs < N * O * OH * OW
        ow = offs % OW
        t = offs // OW
        oh = t % OH
        t = t // OH
        o = t % O
        n = t // O
        red = CG * KH * KW
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for r0 in range(0, red, BLOCK_R):
            r = r0 + tl.arange(0, BLOCK_R)
            r_ok = r < red
            j = r % KW
            i = (r // KW) % KH
            c = r // (KW * KH)
            ih = oh[:, None] * SH - PT + i[None, :] * DH
            iw = ow[:, None] * SW - PL + j[None, :] * DW
            ci = (o // OG)[:, None] * CG + c[None, :]
            both = ok[:, None] & r_ok[None, :]
            inside = both & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            xv = tl.load(x_ptr + ((n[:, None] * C + ci) * H + ih) * W + iw, mask=inside, other=0.0)
            wv = tl.load(w_ptr + o[:, None] * red + r[None, :], mask=both, other=0.0)
            acc += tl.sum(xv.to(tl.float32) * wv.to(tl.float32), axis=1)
        tl.store(y_ptr + offs, acc.to(y_ptr.dtype.element_ty), mask=ok)

    @triton.jit
    def backward_input(gy_ptr, w_ptr, gx_ptr, N, C, H, W, O, CG, OG, KH, KW, SH, SW, PT, PL,
                       DH, DW, OH, OW, BLOCK: tl.constexpr, BLOCK_R: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        ok = offs < N * C * H * W
        iw = offs % W
        t = offs // W
        ih = t % H
        t = t // H
        ci = t % C
        n = t // C
        grp = ci // CG
        c = ci % CG
        red = OG * KH * KW
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for r0 in range(0, red, BLOCK_R):
            r = r0 + tl.arange(0, BLOCK_R)
            r_ok = r < red
            j = r % KW
            i = (r // KW) % KH
            o = grp[:, None] * OG + (r // (KW * KH))[None, :]
            th = ih[:, None] + PT - i[None, :] * DH      # = oh * SH when output row oh read it
            tw = iw[:, None] + PL - j[None, :] * DW
            oh = th // SH
            ow = tw // SW
            hit = (ok[:, None] & r_ok[None, :] & (th >= 0) & (tw >= 0) & (th % SH == 0)
                   & (tw % SW == 0) & (oh < OH) & (ow < OW))
            gv = tl.load(gy_ptr + ((n[:, None] * O + o) * OH + oh) * OW + ow, mask=hit, other=0.0)
            wv = tl.load(w_ptr + ((o * CG + c[:, None]) * KH + i[None, :]) * KW + j[None, :],
                         mask=hit, other=0.0)
            acc += tl.sum(gv.to(tl.float32) * wv.to(tl.float32), axis=1)
        tl.store(gx_ptr + offs, acc.to(gx_ptr.dtype.element_ty), mask=ok)

    @triton.jit
    def backward_weight(x_ptr, gy_ptr, gw_ptr, N, C, H, W, O, CG, OG, KH, KW, SH, SW, PT, PL,
                        DH, DW, OH, OW, BLOCK: tl.constexpr, BLOCK_R: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        ok = offs < O * CG * KH * KW
        j = offs % KW
        i = (offs // KW) % KH
        c = (offs // (KW * KH)) % CG
        o = offs // (KW * KH * CG)
        ci = (o // OG) * CG + c
        red = N * OH * OW
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for r0 in range(0, red, BLOCK_R):
            r = r0 + tl.arange(0, BLOCK_R)
            r_ok = r < red
            ow = r % OW
            oh = (r // OW) % OH
            n = r // (OW * OH)
            ih = oh[None, :] * SH - PT + i[:, None] * DH
            iw = ow[None, :] * SW - PL + j[:, None] * DW
            both = ok[:, None] & r_ok[None, :]
            inside = both & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            xv = tl.load(x_ptr + ((n[None, :] * C + ci[:, None]) * H + ih) * W + iw,
                         mask=inside, other=0.0)
            gv = tl.load(gy_ptr + ((n[None, :] * O + o[:, None]) * OH + oh[None, :]) * OW
                         + ow[None, :], mask=both, other=0.0)
            acc += tl.sum(xv.to(tl.float32) * gv.to(tl.float32), axis=1)
        tl.store(gw_ptr + offs, acc.to(gw_ptr.dtype.element_ty), mask=ok)

    return {"forward": forward, "backward_input": backward_input,
            "backward_weight": backward_weight}


def _launch(name, a, b, out, g):
    if out.size:
        grid = (-(-out.size // BLOCK),)
        _kernels()[name][grid](
            as_triton_arg(a), as_triton_arg(b), as_triton_arg(out), g.n, g.c, g.h, g.w, g.o,
            g.cg, g.og, g.kh, g.kw, g.sh, g.sw, g.pt, g.pl, g.dh, g.dw, g.oh, g.ow,
            BLOCK=BLOCK, BLOCK_R=BLOCK_R)
    return out


def _prepare(a, b):
    xp = array_module(a)
    if a.dtype != b.dtype or np.dtype(a.dtype).kind != "f":
        raise TypeError(f"conv kernels take floating point arrays of one dtype, got {a.dtype}, {b.dtype}")
    return xp, xp.ascontiguousarray(a), xp.ascontiguousarray(b)


def conv2d_forward(x, w, stride, padding, dilation, groups):
    """y = conv2d(x, w); arguments as :func:`nbaccel_kernels.conv.reference.conv2d_forward`."""
    g = Conv2dGeometry(x.shape, w.shape, stride, padding, dilation, groups)
    xp, x, w = _prepare(x, w)
    return _launch("forward", x, w, xp.empty(g.out_shape, x.dtype), g)


def conv2d_backward_input(gy, w, input_hw, stride, padding, dilation, groups):
    """dL/dx (the transposed convolution of gy with w)."""
    g = Conv2dGeometry((gy.shape[0], w.shape[1] * groups) + tuple(input_hw), w.shape, stride,
                       padding, dilation, groups)
    if tuple(gy.shape) != g.out_shape:
        raise ValueError(f"conv2d_backward_input: gradient of shape {tuple(gy.shape)}, the "
                         f"convolution's output is {g.out_shape}")
    xp, gy, w = _prepare(gy, w)
    return _launch("backward_input", gy, w, xp.empty(g.x_shape, gy.dtype), g)


def conv2d_backward_weight(x, gy, kernel_hw, stride, padding, dilation, groups):
    """dL/dw."""
    g = Conv2dGeometry(x.shape, (gy.shape[1], x.shape[1] // max(groups, 1)) + tuple(kernel_hw),
                       stride, padding, dilation, groups)
    if tuple(gy.shape) != g.out_shape:
        raise ValueError(f"conv2d_backward_weight: gradient of shape {tuple(gy.shape)}, the "
                         f"convolution's output is {g.out_shape}")
    xp, x, gy = _prepare(x, gy)
    return _launch("backward_weight", x, gy, xp.empty(g.w_shape, x.dtype), g)
