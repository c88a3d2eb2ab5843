"""The register-blocked micro-kernel the weight-only GEMMs share (``cpu.py``, ``_int4_cpu.py``):
4 output rows x 4 tokens per tile, so each weight value loaded serves four tokens and each
activation four output rows."""
from __future__ import annotations

from numba import njit

# fastmath without the no-NaN / no-Inf assumptions (see FINDINGS.md); reassociation is what
# lets LLVM vectorise the dot-product reductions.
_FM = {"reassoc", "contract", "arcp", "nsz", "afn"}
_TILE = 4
_NOGIL = dict(fastmath=_FM, cache=True, nogil=True)


# ---- shared micro-kernel: out[m, n] = sum_k x[m, k] * w[n, k] for 4 rows of w ----------------

@njit(fastmath=_FM, cache=True, inline="always")
def _rows4(x, w, r0, out, c0, scale0, scale1, scale2, scale3):
    """For rows r0..r0+3 of ``w`` and every row of ``x``: out[m, c0 + i] = scale_i * dot.
    ``w``'s element type may be int8 (converted in the loop) or float (a dequantized tile)."""
    m_total, k_total = x.shape
    acc_t = x.dtype.type
    m = 0
    while m + _TILE <= m_total:
        a00 = a01 = a02 = a03 = acc_t(0)
        a10 = a11 = a12 = a13 = acc_t(0)
        a20 = a21 = a22 = a23 = acc_t(0)
        a30 = a31 = a32 = a33 = acc_t(0)
        for k in range(k_total):
            w0 = acc_t(w[r0, k])
            w1 = acc_t(w[r0 + 1, k])
            w2 = acc_t(w[r0 + 2, k])
            w3 = acc_t(w[r0 + 3, k])
            x0 = x[m, k]
            x1 = x[m + 1, k]
            x2 = x[m + 2, k]
            x3 = x[m + 3, k]
            a00 += x0 * w0
            a01 += x0 * w1
            a02 += x0 * w2
            a03 += x0 * w3
            a10 += x1 * w0
            a11 += x1 * w1
            a12 += x1 * w2
            a13 += x1 * w3
            a20 += x2 * w0
            a21 += x2 * w1
            a22 += x2 * w2
            a23 += x2 * w3
            a30 += x3 * w0
            a31 += x3 * w1
            a32 += x3 * w2
            a33 += x3 * w3
        out[m, c0] = a00 * scale0
        out[m, c0 + 1] = a01 * scale1
        out[m, c0 + 2] = a02 * scale2
        out[m, c0 + 3] = a03 * scale3
        out[m + 1, c0] = a10 * scale0
        out[m + 1, c0 + 1] = a11 * scale1
        out[m + 1, c0 + 2] = a12 * scale2
        out[m + 1, c0 + 3] = a13 * scale3
        out[m + 2, c0] = a20 * scale0
        out[m + 2, c0 + 1] = a21 * scale1
        out[m + 2, c0 + 2] = a22 * scale2
        out[m + 2, c0 + 3] = a23 * scale3
        out[m + 3, c0] = a30 * scale0
        out[m + 3, c0 + 1] = a31 * scale1
        out[m + 3, c0 + 2] = a32 * scale2
        out[m + 3, c0 + 3] = a33 * scale3
        m += _TILE
    while m < m_total:     # the last M % 4 tokens
        b0 = b1 = b2 = b3 = acc_t(0)
        for k in range(k_total):
            xv = x[m, k]
            b0 += xv * acc_t(w[r0, k])
            b1 += xv * acc_t(w[r0 + 1, k])
            b2 += xv * acc_t(w[r0 + 2, k])
            b3 += xv * acc_t(w[r0 + 3, k])
        out[m, c0] = b0 * scale0
        out[m, c0 + 1] = b1 * scale1
        out[m, c0 + 2] = b2 * scale2
        out[m, c0 + 3] = b3 * scale3
        m += 1


@njit(fastmath=_FM, cache=True, inline="always")
def _row1(x, w, r, out, c, scale):
    """One row of ``w`` against every row of ``x`` (the last N % 4 output rows)."""
    acc_t = x.dtype.type
    for m in range(x.shape[0]):
        acc = acc_t(0)
        for k in range(x.shape[1]):
            acc += x[m, k] * acc_t(w[r, k])
        out[m, c] = acc * scale
