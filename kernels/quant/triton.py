"""Quantized matmuls in Triton (GPU; tested on the CPU with ``TRITON_INTERPRET=1``).

Each program computes a ``BLOCK_M x BLOCK_N`` tile of ``out = x @ w.T``, walking K in blocks:
the int8 / int4 weight tile is loaded as codes, dequantized in registers and fed to
``tl.dot`` with a float32 accumulator (int32 for int8 x int8). Formats are those of
:mod:`.packing`. Triton is imported lazily, when a kernel is first used, so that this module
imports without it and ``TRITON_INTERPRET`` is read when the kernels are decorated.

Arrays are NumPy (under the interpreter) or CuPy arrays; the wrappers check shapes,
allocate the output with the input's array module and launch.
"""
from __future__ import annotations

import functools

import numpy as np

from .._triton_args import as_triton_arg
from .packing import INT4_BLOCK, check_group_size


@functools.lru_cache(maxsize=None)
def _kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def int8_weight_only(x_ptr, q_ptr, s_ptr, b_ptr, out_ptr, M, N, K,
                         HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         BLOCK_K: tl.constexpr):
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        rk = tl.arange(0, BLOCK_K)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            kk = k0 + rk
            x = tl.load(x_ptr + rm[:, None] * K + kk[None, :],
                        mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
            w = tl.load(q_ptr + rn[:, None] * K + kk[None, :],
                        mask=(rn[:, None] < N) & (kk[None, :] < K), other=0)
            acc += tl.dot(x, tl.trans(w.to(tl.float32)), input_precision="ieee")
        # the per-channel scale is constant along K: applied once, after the reduction
        acc *= tl.load(s_ptr + rn, mask=rn < N, other=0.0)[None, :]
        if HAS_BIAS:
            acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
        tl.store(out_ptr + rm[:, None] * N + rn[None, :], acc,
                 mask=(rm[:, None] < M) & (rn[None, :] < N))

    @triton.jit
    def int4_weight_only(x_ptr, p_ptr, s_ptr, z_ptr, b_ptr, out_ptr, M, N, K,
                         GROUP: tl.constexpr, HAS_ZEROS: tl.constexpr, HAS_BIAS: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        # K advances one packing block (32 values = 16 bytes) at a time: the low nibbles of
        # the block's bytes are its first 16 values, the high nibbles the next 16.
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        rj = tl.arange(0, 16)
        n_groups = K // GROUP
        m_ok = rm[:, None] < M
        n_ok = rn < N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, 32):
            byte = tl.load(p_ptr + rn[:, None] * (K // 2) + (k0 // 2 + rj)[None, :],
                           mask=n_ok[:, None], other=0).to(tl.int32)
            g = k0 // GROUP
            s = tl.load(s_ptr + rn * n_groups + g, mask=n_ok, other=0.0)
            if HAS_ZEROS:
                z = tl.load(z_ptr + rn * n_groups + g, mask=n_ok, other=0).to(tl.float32)
            else:
                z = tl.full((BLOCK_N,), 8.0, tl.float32)
            w_lo = ((byte & 15).to(tl.float32) - z[:, None]) * s[:, None]
            w_hi = ((byte >> 4).to(tl.float32) - z[:, None]) * s[:, None]
            x_lo = tl.load(x_ptr + rm[:, None] * K + (k0 + rj)[None, :], mask=m_ok, other=0.0)
            x_hi = tl.load(x_ptr + rm[:, None] * K + (k0 + 16 + rj)[None, :], mask=m_ok, other=0.0)
            acc += tl.dot(x_lo, tl.trans(w_lo), input_precision="ieee")
            acc += tl.dot(x_hi, tl.trans(w_hi), input_precision="ieee")
        if HAS_BIAS:
            acc += tl.load(b_ptr + rn, mask=n_ok, other=0.0)[None, :]
        tl.store(out_ptr + rm[:, None] * N + rn[None, :], acc, mask=m_ok & n_ok[None, :])

    @triton.jit
    def quantize_rows(x_ptr, q_ptr, s_ptr, K, BLOCK_K: tl.constexpr):
        # one program per token: absmax over the row, then the codes
        row = tl.program_id(0)
        rk = tl.arange(0, BLOCK_K)
        amax = tl.zeros((BLOCK_K,), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            v = tl.load(x_ptr + row * K + k0 + rk, mask=k0 + rk < K, other=0.0)
            amax = tl.maximum(amax, tl.abs(v))
        scale = tl.max(amax, axis=0) / 127.0
        scale = tl.where(scale > 0, scale, 1.0)
        tl.store(s_ptr + row, scale)
        for k0 in range(0, K, BLOCK_K):
            v = tl.load(x_ptr + row * K + k0 + rk, mask=k0 + rk < K, other=0.0) / scale
            code = tl.where(v >= 0, tl.floor(v + 0.5), -tl.floor(-v + 0.5))
            code = tl.minimum(tl.maximum(code, -127.0), 127.0)
            tl.store(q_ptr + row * K + k0 + rk, code.to(tl.int8), mask=k0 + rk < K)

    @triton.jit
    def int8_int8(xq_ptr, wq_ptr, xs_ptr, ws_ptr, b_ptr, out_ptr, M, N, K,
                  RESCALE: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        rk = tl.arange(0, BLOCK_K)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
        for k0 in range(0, K, BLOCK_K):
            kk = k0 + rk
            a = tl.load(xq_ptr + rm[:, None] * K + kk[None, :],
                        mask=(rm[:, None] < M) & (kk[None, :] < K), other=0)
            b = tl.load(wq_ptr + rn[:, None] * K + kk[None, :],
                        mask=(rn[:, None] < N) & (kk[None, :] < K), other=0)
            acc += tl.dot(a, tl.trans(b), out_dtype=tl.int32)
        mask = (rm[:, None] < M) & (rn[None, :] < N)
        if RESCALE:     # the dynamic linear: int32 -> float with x's and w's scales
            xs = tl.load(xs_ptr + rm, mask=rm < M, other=0.0)
            ws = tl.load(ws_ptr + rn, mask=rn < N, other=0.0)
            y = acc.to(tl.float32) * xs[:, None] * ws[None, :]
            if HAS_BIAS:
                y += tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
            tl.store(out_ptr + rm[:, None] * N + rn[None, :], y, mask=mask)
        else:
            tl.store(out_ptr + rm[:, None] * N + rn[None, :], acc, mask=mask)

    return {"int8_weight_only": int8_weight_only, "int4_weight_only": int4_weight_only,
            "quantize_rows": quantize_rows, "int8_int8": int8_int8}


# ---- wrappers -------------------------------------------------------------------------------------

def _xp(a):
    return np if isinstance(a, np.ndarray) else __import__(type(a).__module__.split(".")[0])


def _contig(a, dtype):
    return _xp(a).ascontiguousarray(a, dtype=dtype)


def _blocks(m, n):
    """Tile sizes: at least 16 (tl.dot's minimum), no bigger than the problem needs."""
    bm = 16 if m <= 16 else 32 if m <= 32 else 64
    bn = 16 if n <= 16 else 32 if n <= 32 else 64
    return bm, bn


def _cdiv(a, b):
    return -(-a // b)


def _check_x(x, k):
    if x.ndim != 2 or x.shape[1] != k:
        raise ValueError(f"activation must be [M, {k}], got shape {tuple(x.shape)}")
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"activation must be float32 or float64, got {x.dtype}")


def _bias_arg(bias, out):
    if bias is None:
        return out, False       # any pointer: never read
    return _contig(bias, np.float32), True


def int8_weight_only_matmul(x, q, scale, bias=None):
    """Triton ``x @ (q * scale[:, None]).T + bias`` (computed in float32)."""
    n, k = q.shape
    _check_x(x, k)
    xp = _xp(x)
    m = x.shape[0]
    out = xp.empty((m, n), np.float32)
    if m == 0 or n == 0:
        return out.astype(x.dtype)
    b, has_bias = _bias_arg(bias, out)
    bm, bn = _blocks(m, n)
    _kernels()["int8_weight_only"][(_cdiv(m, bm), _cdiv(n, bn))](
        as_triton_arg(_contig(x, np.float32)), as_triton_arg(_contig(q, np.int8)),
        as_triton_arg(_contig(scale, np.float32)), as_triton_arg(b), as_triton_arg(out), m, n, k,
        HAS_BIAS=has_bias, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=32)
    return out.astype(x.dtype, copy=False)


def int4_weight_only_matmul(x, packed, scales, zeros=None, group_size=128, bias=None):
    """Triton ``x @ dequantize_int4(packed, scales, zeros).T + bias`` (float32)."""
    n, k = packed.shape[0], packed.shape[1] * 2
    check_group_size(k, group_size)
    _check_x(x, k)
    xp = _xp(x)
    m = x.shape[0]
    out = xp.empty((m, n), np.float32)
    if m == 0 or n == 0:
        return out.astype(x.dtype)
    b, has_bias = _bias_arg(bias, out)
    z = _contig(zeros, np.uint8) if zeros is not None else _contig(packed, np.uint8)
    bm, bn = _blocks(m, n)
    assert k % INT4_BLOCK == 0
    _kernels()["int4_weight_only"][(_cdiv(m, bm), _cdiv(n, bn))](
        as_triton_arg(_contig(x, np.float32)), as_triton_arg(_contig(packed, np.uint8)),
        as_triton_arg(_contig(scales, np.float32)), as_triton_arg(z), as_triton_arg(b), as_triton_arg(out),
        m, n, k, GROUP=group_size, HAS_ZEROS=zeros is not None, HAS_BIAS=has_bias,
        BLOCK_M=bm, BLOCK_N=bn)
    return out.astype(x.dtype, copy=False)


def quantize_per_token_int8(x):
    """Triton per-token int8 quantization: ``(q int8 [M, K], scale float32 [M])``."""
    xp = _xp(x)
    m, k = x.shape
    q = xp.empty((m, k), np.int8)
    s = xp.empty((m,), np.float32)
    if m:
        _kernels()["quantize_rows"][(m,)](as_triton_arg(_contig(x, np.float32)), as_triton_arg(q),
                                          as_triton_arg(s), k, BLOCK_K=128)
    return q, s


def _int8_launch(xq, wq, xs, ws, bias, out, rescale):
    m, k = xq.shape
    n = wq.shape[0]
    if m == 0 or n == 0:
        return out
    b, has_bias = _bias_arg(bias, out)
    bm, bn = _blocks(m, n)
    _kernels()["int8_int8"][(_cdiv(m, bm), _cdiv(n, bn))](
        as_triton_arg(_contig(xq, np.int8)), as_triton_arg(_contig(wq, np.int8)), as_triton_arg(xs),
        as_triton_arg(ws), as_triton_arg(b), as_triton_arg(out), m, n, k,
        RESCALE=rescale, HAS_BIAS=has_bias, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=32)
    return out


def int8_int8_matmul(xq, wq):
    """Triton ``xq @ wq.T`` of int8 matrices with int32 accumulation."""
    if xq.ndim != 2 or wq.ndim != 2 or xq.shape[1] != wq.shape[1]:
        raise ValueError(f"int8 matmul shapes don't match: {tuple(xq.shape)} and {tuple(wq.shape)}")
    out = _xp(xq).empty((xq.shape[0], wq.shape[0]), np.int32)
    return _int8_launch(xq, wq, out, out, None, out, False)


def int8_dynamic_matmul(x, wq, wscale, bias=None):
    """Triton dynamic int8 linear: per-token quantization kernel, then int8 x int8 -> int32
    with the rescale (and bias) fused into the GEMM's epilogue."""
    _check_x(x, wq.shape[1])
    xq, xs = quantize_per_token_int8(x)
    out = _xp(x).empty((x.shape[0], wq.shape[0]), np.float32)
    _int8_launch(xq, wq, xs, _contig(wscale, np.float32), bias, out, True)
    return out.astype(x.dtype, copy=False)
