"""2:4 semi-structured sparsity in Triton: compression, decompression and the sparse x dense
product (format in ``reference.py``).

The product (``x @ W.T`` with W 2:4) loads a tile of the *compressed* weight (``BN`` rows by
``BK // 2`` values and ``BK // 8`` metadata bytes), expands it to the dense ``BN x BK`` tile in
registers (the nibbles pick which of the four positions each value lands in, the rest are
zero) and feeds that to ``tl.dot`` with fp32 accumulation. The weight's bytes read from memory
are the compressed ones.

Arrays: NumPy arrays run under Triton's interpreter (``TRITON_INTERPRET=1``, set before this
module is imported); on a GPU the same wrappers accept CuPy arrays (anything with a device
pointer), launched on the driver nbaccel sets up. Triton is imported lazily by the caller
importing this module.
"""
from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from .._triton_args import as_triton_arg
from .reference import check_dense, meta_cols


def _empty(like, shape, dtype):
    if isinstance(like, np.ndarray):
        return np.empty(shape, dtype)
    import cupy
    return cupy.empty(shape, dtype)


def _zeros(like, shape, dtype):
    if isinstance(like, np.ndarray):
        return np.zeros(shape, dtype)
    import cupy
    return cupy.zeros(shape, dtype)


def _contig(a):
    if isinstance(a, np.ndarray):
        return np.ascontiguousarray(a)
    import cupy
    return cupy.ascontiguousarray(a)


# ---- kernels ----------------------------------------------------------------------------------

@triton.jit
def _keep_positions(a0, a1, a2, a3):
    """Positions (first, second) of the two largest magnitudes among four entries (ties to the
    smaller position, NaN the largest): the rule of reference.keep_positions."""
    k0 = tl.abs(a0.to(tl.float64))
    k1 = tl.abs(a1.to(tl.float64))
    k2 = tl.abs(a2.to(tl.float64))
    k3 = tl.abs(a3.to(tl.float64))
    k0 = tl.where(k0 != k0, float("inf"), k0)
    k1 = tl.where(k1 != k1, float("inf"), k1)
    k2 = tl.where(k2 != k2, float("inf"), k2)
    k3 = tl.where(k3 != k3, float("inf"), k3)
    # entries that outrank each one (larger, or equal at a smaller position); two outrank: pruned
    b0 = (k1 > k0).to(tl.int32) + (k2 > k0).to(tl.int32) + (k3 > k0).to(tl.int32)
    b1 = (k0 >= k1).to(tl.int32) + (k2 > k1).to(tl.int32) + (k3 > k1).to(tl.int32)
    b2 = (k0 >= k2).to(tl.int32) + (k1 >= k2).to(tl.int32) + (k3 > k2).to(tl.int32)
    b3 = (k0 >= k3).to(tl.int32) + (k1 >= k3).to(tl.int32) + (k2 >= k3).to(tl.int32)
    first = tl.where(b0 < 2, 0, tl.where(b1 < 2, 1, 2))
    second = tl.where(b3 < 2, 3, tl.where(b2 < 2, 2, 1))
    return first, second


@triton.jit
def _pick(p, a0, a1, a2, a3):
    return tl.where(p == 0, a0, tl.where(p == 1, a1, tl.where(p == 2, a2, a3)))


@triton.jit
def _compress_kernel(w_ptr, v_ptr, m_ptr, rows, groups, stride_w, stride_v, stride_m,
                     BR: tl.constexpr, BB: tl.constexpr):
    # one program: BR rows x BB metadata bytes (2 * BB groups)
    r = tl.program_id(0) * BR + tl.arange(0, BR)[:, None]
    byte = tl.program_id(1) * BB + tl.arange(0, BB)[None, :]
    packed = tl.zeros((BR, BB), dtype=tl.int32)
    for half in tl.static_range(2):
        g = 2 * byte + half
        ok = (r < rows) & (g < groups)
        base = w_ptr + r * stride_w + 4 * g
        a0 = tl.load(base, mask=ok, other=0.0)
        a1 = tl.load(base + 1, mask=ok, other=0.0)
        a2 = tl.load(base + 2, mask=ok, other=0.0)
        a3 = tl.load(base + 3, mask=ok, other=0.0)
        first, second = _keep_positions(a0, a1, a2, a3)
        tl.store(v_ptr + r * stride_v + 2 * g, _pick(first, a0, a1, a2, a3), mask=ok)
        tl.store(v_ptr + r * stride_v + 2 * g + 1, _pick(second, a0, a1, a2, a3), mask=ok)
        nib = tl.where(ok, first | (second << 2), 0)
        packed = packed | (nib << (4 * half))
    tl.store(m_ptr + r * stride_m + byte, packed.to(tl.uint8), mask=(r < rows) & (2 * byte < groups))


@triton.jit
def _expand_tile(v_ptr, m_ptr, rn, k0, rows, cols, stride_v, stride_m,
                 BN: tl.constexpr, BK: tl.constexpr):
    """The dense BN x BK tile of W at rows ``rn`` and columns k0..k0+BK, from its compressed
    BN x BK/2 values and BN x BK/8 metadata bytes, expanded in registers."""
    vc = k0 // 2 + tl.arange(0, BK // 2)
    vals = tl.load(v_ptr + rn[:, None] * stride_v + vc[None, :],
                   mask=(rn[:, None] < rows) & (vc[None, :] < cols // 2), other=0.0)
    mc = k0 // 8 + tl.arange(0, BK // 8)
    meta = tl.load(m_ptr + rn[:, None] * stride_m + mc[None, :],
                   mask=(rn[:, None] < rows) & (mc[None, :] < (cols // 4 + 1) // 2), other=0)
    meta = meta.to(tl.int32)
    nib = tl.reshape(tl.join(meta & 15, meta >> 4), (BN, BK // 4))      # one nibble per group
    v0, v1 = tl.split(tl.reshape(vals, (BN, BK // 4, 2)))              # each group's two values
    first = (nib & 3)[:, :, None]
    second = (nib >> 2)[:, :, None]
    pos = tl.arange(0, 4)[None, None, :]
    dense = tl.where(pos == first, v0[:, :, None], tl.where(pos == second, v1[:, :, None], 0.0))
    return tl.reshape(dense, (BN, BK))


@triton.jit
def _decompress_kernel(v_ptr, m_ptr, out_ptr, rows, cols, stride_v, stride_m, stride_o,
                       BN: tl.constexpr, BK: tl.constexpr):
    rn = tl.program_id(0) * BN + tl.arange(0, BN)
    k0 = tl.program_id(1) * BK
    dense = _expand_tile(v_ptr, m_ptr, rn, k0, rows, cols, stride_v, stride_m, BN, BK)
    kc = k0 + tl.arange(0, BK)
    tl.store(out_ptr + rn[:, None] * stride_o + kc[None, :], dense,
             mask=(rn[:, None] < rows) & (kc[None, :] < cols))


@triton.jit
def _linear_kernel(x_ptr, v_ptr, m_ptr, out_ptr, M, N, K, stride_xm, stride_v, stride_m,
                   stride_om, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   F64: tl.constexpr):
    # out[M, N] = x[M, K] @ W[N, K].T, W 2:4-compressed; fp32 accumulation (fp64 for fp64)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    if F64:
        acc = tl.zeros((BM, BN), dtype=tl.float64)
    else:
        acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kc = k0 + tl.arange(0, BK)
        x = tl.load(x_ptr + rm[:, None] * stride_xm + kc[None, :],
                    mask=(rm[:, None] < M) & (kc[None, :] < K), other=0.0)
        w = _expand_tile(v_ptr, m_ptr, rn, k0, N, K, stride_v, stride_m, BN, BK)
        acc += tl.dot(x, tl.trans(w.to(x.dtype)), input_precision="ieee")
    tl.store(out_ptr + rm[:, None] * stride_om + rn[None, :], acc.to(out_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


# ---- wrappers: check, allocate, launch ----------------------------------------------------------

def _check_pair(values, meta, cols):
    if values.ndim != 2 or meta.ndim != 2 or values.shape[0] != meta.shape[0] or cols % 4 \
            or values.shape[1] != cols // 2 or meta.shape[1] != meta_cols(cols):
        raise ValueError(f"2:4 values {values.shape} and metadata {meta.shape} don't describe "
                         f"{cols} dense columns")


def compress(w, BR=16, BB=16):
    """Dense 2-D ``w`` -> ``(values, meta)``, keeping the two largest magnitudes per group."""
    check_dense(w)
    w = _contig(w)
    rows, cols = w.shape
    values = _empty(w, (rows, cols // 2), w.dtype)
    meta = _zeros(w, (rows, meta_cols(cols)), np.uint8)
    if w.size:
        grid = (triton.cdiv(rows, BR), triton.cdiv(meta_cols(cols), BB))
        _compress_kernel[grid](as_triton_arg(w), as_triton_arg(values), as_triton_arg(meta), rows, cols // 4,
                               w.strides[0] // w.itemsize, cols // 2, meta_cols(cols), BR=BR, BB=BB)
    return values, meta


def decompress(values, meta, cols: int, BN=16, BK=32):
    """``(values, meta)`` -> dense ``(rows, cols)``."""
    _check_pair(values, meta, cols)
    values, meta = _contig(values), _contig(meta)
    rows = values.shape[0]
    out = _empty(values, (rows, cols), values.dtype)
    if out.size:
        grid = (triton.cdiv(rows, BN), triton.cdiv(cols, BK))
        _decompress_kernel[grid](as_triton_arg(values), as_triton_arg(meta), as_triton_arg(out), rows, cols, cols // 2,
                                 meta_cols(cols), cols, BN=BN, BK=BK)
    return out


def linear(x, values, meta, cols: int, BM=16, BN=32, BK=32):
    """``x @ W.T`` for the 2:4 weight W: ``x`` is ``(cols,)`` or ``(m, cols)``."""
    _check_pair(values, meta, cols)
    if x.ndim not in (1, 2) or x.shape[-1] != cols:
        raise ValueError(f"2:4 linear: input of shape {x.shape} doesn't match a weight with "
                         f"{cols} columns")
    if BK % 8 or min(BM, BN, BK) < 16:
        raise ValueError("block sizes must be >= 16 and BK a multiple of 8")
    vec = x.ndim == 1
    x2 = _contig(x.reshape(1, cols) if vec else x).astype(values.dtype, copy=False)
    values, meta = _contig(values), _contig(meta)
    m, n = x2.shape[0], values.shape[0]
    out = _empty(values, (m, n), values.dtype)
    if out.size:
        grid = (triton.cdiv(m, BM), triton.cdiv(n, BN))
        _linear_kernel[grid](as_triton_arg(x2), as_triton_arg(values), as_triton_arg(meta), as_triton_arg(out), m, n, cols,
                             cols, cols // 2, meta_cols(cols), n, BM=BM, BN=BN, BK=BK,
                             F64=values.dtype == np.float64)
    return out.reshape(n) if vec else out
