"""Stride-1 convolution as shifted GEMMs over the padded input: no im2col buffer.

With the padded input of one image flattened per channel (row pitch ``Wp``), the window of
kernel tap (i, j) is the same flat array shifted by ``i*dh*Wp + j*dw``. So the output, laid
out on the padded width (``OH`` rows of ``Wp``, the last ``Wp - OW`` columns of each row
unused), is a sum of KH*KW GEMMs

    y_wide[n, group] += w[:, :, i, j] @ xp_flat[n, group, shift : shift + OH*Wp]

whose right-hand side is a strided view into one buffer, accumulated in place by BLAS
(_openblas.gemm). Against im2col this skips writing and re-reading KH*KW copies of the input
(measured here: a 3x3, 64->64, 56x56, batch-8 forward goes from 25 ms to 10 ms). Blocks of
images run on the kernels' own threads with single-threaded BLAS, each block padded into its
thread's buffer with its images side by side (in cache for its GEMMs), so one GEMM per tap
covers the block: a window that runs past an image's last row reads the next image, in
outputs that are dropped. OpenBLAS splitting each of the small GEMMs over both cores was 10 ms
back to back but 12-20 ms beside another library's spinning threads. The input gradient is
the same kernel on the output gradient with the flipped, transposed weight; the weight
gradient is, per tap, ``gy_wide @ xp_window.T`` (gy_wide zero outside the outputs, so an
inf or NaN in x outside a tap's windows would still add NaN: cpu.py sends a non-finite x to
im2col).
"""
from __future__ import annotations

import threading

import numpy as np

from .._openblas import gemm
from .._tasks import num_threads, run_tasks
from .geometry import Conv2dGeometry


def applies(g: Conv2dGeometry) -> bool:
    return g.sh == 1 and g.sw == 1


# a task's block of images: its padded input stays under this (in a core's L2 with the GEMMs'
# output), and one GEMM per tap covers every image of the block. One image per GEMM made
# 9 * N small calls from Python: at 14x14, 16 -> 32 channels, batch 64 (the CNN step's second
# convolution) 580 calls for 6.8 ms forward; by blocks of 16 images, 36 calls
BLOCK_BYTES = 256 << 10


def _blocks(g, itemsize):
    """The images in blocks [n0, n1): as many as fit BLOCK_BYTES of padded input, and at
    least as many blocks as the kernels' threads (when there are that many images)."""
    hp, wp = g.padded_hw
    per = max(1, g.c * hp * wp * itemsize)
    size = max(1, min(BLOCK_BYTES // per, -(-g.n // num_threads())))
    return [(n0, min(g.n, n0 + size)) for n0 in range(0, g.n, size)]


def _padded_block(x, n0, n1, g, state):
    """Images n0:n1 of ``x``, zero-padded, channel-major and flattened per channel:
    (C, nb*Hp*Wp + slack) in this thread's buffer (the slack keeps the last tap's window of
    the last image inside it). A window that runs past an image's last valid output reads
    the next image's rows: those outputs are never kept (forward) or multiply zeros (weight
    gradient). Buffers are kept per layout, so their padding and slack stay zero."""
    hp, wp = g.padded_hw
    c, h, w = x.shape[1:]
    nb = n1 - n0
    buf = _rows(state, "xp", c, nb * hp * wp + (g.kw - 1) * g.dw, x.dtype,
                (nb, h, w, g.pt, g.pb, g.pl, g.pr))
    planes = buf[:, :nb * hp * wp].reshape(c, nb, hp, wp)
    planes[:, :, g.pt:g.pt + h, g.pl:g.pl + w] = x[n0:n1].transpose(1, 0, 2, 3)
    return buf


# each thread's scratch buffers, kept between calls: made per call (np.zeros of 0.3-1 MB, an
# mmap and its page faults) they cost the CNN step 10 ms, 1.7 ms a buffer on the loaded machine
_BUFFERS = threading.local()
_KEEP = 8               # buffers a thread keeps (forward and input gradient alternate shapes)
_KEEP_BYTES = 32 << 20  # ... in all: larger ones are kept for the call only (its ``state``)


def _rows(state, name, rows, length, dtype, layout):
    """This thread's zeroed (rows, length) buffer ``name`` for ``layout`` (the geometry that
    decides which places callers write: what they leave unwritten stays zero, so a buffer is
    reused only for the same layout), its rows an odd number of cache lines apart: at a
    pitch of a power of two (16 images of 16x16 padded planes: 16 KiB) the GEMMs' rows share
    cache sets, and a block's forward ran 2-4x slower, erratically."""
    kept = _BUFFERS.__dict__
    key = (name, rows, length, np.dtype(dtype), layout)
    buf = kept.get(key)
    if buf is None:
        buf = state.get(key)
    if buf is None:
        line = 64 // np.dtype(dtype).itemsize
        pitch = -(-length // line) | 1
        buf = np.zeros((rows, pitch * line), dtype)[:, :length]
        if buf.base.nbytes > _KEEP_BYTES:
            state[key] = buf                # (run_tasks' per-call, per-thread scratch)
            return buf
        if len(kept) >= _KEEP or sum(b.base.nbytes for b in kept.values()) + buf.base.nbytes \
                > _KEEP_BYTES:
            kept.clear()
        kept[key] = buf
    return buf


def _taps(g, pitch_w):
    return [(i, j, i * g.dh * pitch_w + j * g.dw) for i in range(g.kh) for j in range(g.kw)]


def forward(x, w, g: Conv2dGeometry, y):
    """y = conv2d(x, w) for a stride-1 geometry ``g``; y is (N, O, OH, OW). Blocks of images
    run on the kernels' threads (_tasks.run_tasks), each with single-threaded BLAS."""
    hp, wp = g.padded_hw
    wt = np.ascontiguousarray(w.transpose(2, 3, 0, 1))          # (KH, KW, O, Cg)
    taps = _taps(g, wp)

    def block(bounds, state):
        n0, n1 = bounds
        nb = n1 - n0
        length = (nb - 1) * hp * wp + g.oh * wp
        xp = _padded_block(x, n0, n1, g, state)
        wide = _rows(state, "wide", g.o, nb * hp * wp, y.dtype, None)     # written before read
        for k in range(g.groups):
            cs, os_ = slice(k * g.cg, (k + 1) * g.cg), slice(k * g.og, (k + 1) * g.og)
            for t, (i, j, shift) in enumerate(taps):
                gemm(wt[i, j, os_], xp[cs, shift:shift + length], wide[os_, :length],
                     accumulate=t > 0)
        y[n0:n1] = wide.reshape(g.o, nb, hp, wp)[:, :, :g.oh, :g.ow].transpose(1, 0, 2, 3)
    run_tasks(_blocks(g, x.itemsize), block)
    return y


def backward_input(gy, w, g: Conv2dGeometry, gx):
    """gx = the input gradient, as the stride-1 convolution of gy (padded by the kernel's
    extent less the forward padding) with the flipped weight, input and output channels
    swapped within each group. False when the forward padding exceeds the kernel's extent."""
    ext_h, ext_w = (g.kh - 1) * g.dh, (g.kw - 1) * g.dw
    pads = (ext_h - g.pt, ext_h - g.pb, ext_w - g.pl, ext_w - g.pr)
    if min(pads) < 0:
        return False
    wf = w[:, :, ::-1, ::-1].reshape(g.groups, g.og, g.cg, g.kh, g.kw)
    wf = np.ascontiguousarray(wf.transpose(0, 2, 1, 3, 4)).reshape(g.c, g.og, g.kh, g.kw)
    gt = Conv2dGeometry(gy.shape, wf.shape, (1, 1), ((pads[0], pads[1]), (pads[2], pads[3])),
                        (g.dh, g.dw), g.groups)
    forward(gy, wf, gt, gx)
    return True


def backward_weight(x, gy, g: Conv2dGeometry, gw):
    """gw[:, :, i, j] = sum over image blocks of gy_wide @ xp_window(i, j).T (gy laid out
    as the padded input, zeros outside the outputs); each thread sums its blocks, then the
    threads' sums are added."""
    hp, wp = g.padded_hw
    taps = _taps(g, wp)
    sums, lock = [], threading.Lock()

    def block(bounds, state):
        n0, n1 = bounds
        nb = n1 - n0
        length = (nb - 1) * hp * wp + g.oh * wp
        xp = _padded_block(x, n0, n1, g, state)
        if "acc" not in state:
            state["acc"] = np.zeros((g.kh, g.kw, g.o, g.cg), gw.dtype)
            with lock:
                sums.append(state["acc"])
        acc = state["acc"]
        wide = _rows(state, "gy", g.o, nb * hp * wp, gy.dtype,
                     (nb, hp, wp, g.oh, g.ow))                 # unused places stay zero
        wide.reshape(g.o, nb, hp, wp)[:, :, :g.oh, :g.ow] = gy[n0:n1].transpose(1, 0, 2, 3)
        flat = wide[:, :length]
        for k in range(g.groups):
            cs, os_ = slice(k * g.cg, (k + 1) * g.cg), slice(k * g.og, (k + 1) * g.og)
            for i, j, shift in taps:
                gemm(flat[os_], xp[cs, shift:shift + length], acc[i, j, os_], accumulate=True,
                     trans_b=True)
    run_tasks(_blocks(g, x.itemsize), block)
    total = sums[0]
    for more in sums[1:]:
        total += more
    gw[...] = total.transpose(2, 3, 0, 1)
    return gw
