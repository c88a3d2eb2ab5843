"""The portable int4 weight-only kernels (numba): the GEMV (batch 1), the batched GEMV (2..8)
and the GEMM with a dequantized per-thread tile. Launched by ``cpu.py``; the explicit-SIMD
GEMVs that replace the batch-1 loop where the CPU allows are in ``simd.py``."""
from __future__ import annotations

import numpy as np
from numba import njit

from .. import _pool
from ._tiles import _FM, _NOGIL, _TILE, _row1, _rows4
from .packing import INT4_BLOCK, INT4_SYMMETRIC_ZERO

_wide_vectors = _pool.wide_vectors     # 512-bit vectors for the kernel that calls it


# ---- int4 weight-only, group-wise --------------------------------------------------------------

_SIXTEENTH = np.float32(1 / 16)
_SIXTEEN = np.float32(16)


@njit(fastmath=_FM, cache=True, inline="always")
def _int4_gemv_rows(x_lo, x_mix, xsum, packed, scales, zeros, has_zeros, group_size, out, r0, r1):
    """Batch 1. Byte ``j`` of a row holds the codes that multiply ``x_lo[j]`` (low nibble) and
    ``x_hi[j]`` (high nibble); the caller passes ``x_mix = x_hi - 16 x_lo``, so that with
    ``hi = floor(byte / 16)`` and ``lo = byte - 16 hi``:
    ``lo x_lo + hi x_hi = byte x_lo + hi x_mix``, two multiply-adds per byte.

    Two more things keep the inner loop a clean SIMD loop (measured: 13x faster than the
    obvious version): the nibbles are split in float arithmetic (numba widens integer ``&`` /
    ``>>`` to int64, which vectorises badly), and indices are unsigned, so numba emits no
    negative-index wraparound select (which LLVM turns into gathers). The scale is applied
    once per group, to the group's dot product."""
    n = r0
    while n + 4 <= r1:      # four rows at a time (the weight streams of the int8 GEMV)
        _int4_gemv_rows4(x_lo, x_mix, xsum, packed, scales, zeros, has_zeros, group_size, out, n)
        n += 4
    acc_t = x_lo.dtype.type
    half = np.uint64(group_size // 2)
    while n < r1:
        total = acc_t(0)
        for g in range(scales.shape[1]):
            base = np.uint64(g) * half
            acc = acc_t(0)
            for j in range(half):
                i = base + j
                byte = acc_t(packed[n, i])
                acc += x_lo[i] * byte + x_mix[i] * np.floor(byte * _SIXTEENTH)
            # sum_k (code_k - zero) * s * x_k = s * (dot - zero * sum_k x_k)
            z = acc_t(zeros[n, g]) if has_zeros else acc_t(INT4_SYMMETRIC_ZERO)
            total += acc_t(scales[n, g]) * (acc - z * xsum[g])
        out[0, n] = total
        n += 1


@njit(fastmath=_FM, cache=True, inline="always")
def _int4_gemv_rows4(x_lo, x_mix, xsum, packed, scales, zeros, has_zeros, group_size, out, n):
    acc_t = x_lo.dtype.type
    half = np.uint64(group_size // 2)
    t0 = t1 = t2 = t3 = acc_t(0)
    for g in range(scales.shape[1]):
        base = np.uint64(g) * half
        a0 = a1 = a2 = a3 = acc_t(0)
        for j in range(half):
            i = base + j
            xl = x_lo[i]
            xm = x_mix[i]
            b0 = acc_t(packed[n, i])
            b1 = acc_t(packed[n + 1, i])
            b2 = acc_t(packed[n + 2, i])
            b3 = acc_t(packed[n + 3, i])
            a0 += xl * b0 + xm * np.floor(b0 * _SIXTEENTH)
            a1 += xl * b1 + xm * np.floor(b1 * _SIXTEENTH)
            a2 += xl * b2 + xm * np.floor(b2 * _SIXTEENTH)
            a3 += xl * b3 + xm * np.floor(b3 * _SIXTEENTH)
        xs = xsum[g]
        if has_zeros:
            z0, z1 = acc_t(zeros[n, g]), acc_t(zeros[n + 1, g])
            z2, z3 = acc_t(zeros[n + 2, g]), acc_t(zeros[n + 3, g])
        else:
            z0 = z1 = z2 = z3 = acc_t(INT4_SYMMETRIC_ZERO)
        t0 += acc_t(scales[n, g]) * (a0 - z0 * xs)
        t1 += acc_t(scales[n + 1, g]) * (a1 - z1 * xs)
        t2 += acc_t(scales[n + 2, g]) * (a2 - z2 * xs)
        t3 += acc_t(scales[n + 3, g]) * (a3 - z3 * xs)
    out[0, n] = t0
    out[0, n + 1] = t1
    out[0, n + 2] = t2
    out[0, n + 3] = t3


@njit(**_NOGIL)
def _int4_gemv_part(x_lo, x_mix, xsum, packed, scales, zeros, has_zeros, group_size, out, chunk,
                    ctr, n_chunks, wait):
    _wide_vectors()
    n_total = packed.shape[0]
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        _int4_gemv_rows(x_lo, x_mix, xsum, packed, scales, zeros, has_zeros, group_size, out,
                        c * chunk, min(n_total, (c + 1) * chunk))
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)


@njit(fastmath=_FM, cache=True, inline="always")
def _int4_gemv_batch_rows(x_lo, x_mix, xsum, packed, scales, zeros, has_zeros, group_size, out,
                          r0, r1):
    """Batches of 2..8 (``x_lo`` / ``x_mix`` ``[M, K // 2]``, ``xsum`` ``[M, groups]``): the
    GEMV's loop with each unpacked byte serving four tokens (4 x 2 multiply-adds per unpack,
    against 2 for one token), rather than the GEMM's dequantized tile."""
    m_total = x_lo.shape[0]
    acc_t = x_lo.dtype.type
    half = np.uint64(group_size // 2)
    for n in range(r0, r1):
        m = 0
        while m + 4 <= m_total:
            t0 = t1 = t2 = t3 = acc_t(0)
            for g in range(scales.shape[1]):
                base = np.uint64(g) * half
                a0 = a1 = a2 = a3 = acc_t(0)
                for j in range(half):
                    i = base + j
                    byte = acc_t(packed[n, i])
                    hi = np.floor(byte * _SIXTEENTH)
                    a0 += x_lo[m, i] * byte + x_mix[m, i] * hi
                    a1 += x_lo[m + 1, i] * byte + x_mix[m + 1, i] * hi
                    a2 += x_lo[m + 2, i] * byte + x_mix[m + 2, i] * hi
                    a3 += x_lo[m + 3, i] * byte + x_mix[m + 3, i] * hi
                z = acc_t(zeros[n, g]) if has_zeros else acc_t(INT4_SYMMETRIC_ZERO)
                sc = acc_t(scales[n, g])
                t0 += sc * (a0 - z * xsum[m, g])
                t1 += sc * (a1 - z * xsum[m + 1, g])
                t2 += sc * (a2 - z * xsum[m + 2, g])
                t3 += sc * (a3 - z * xsum[m + 3, g])
            out[m, n] = t0
            out[m + 1, n] = t1
            out[m + 2, n] = t2
            out[m + 3, n] = t3
            m += 4
        while m < m_total:
            total = acc_t(0)
            for g in range(scales.shape[1]):
                base = np.uint64(g) * half
                acc = acc_t(0)
                for j in range(half):
                    i = base + j
                    byte = acc_t(packed[n, i])
                    acc += x_lo[m, i] * byte + x_mix[m, i] * np.floor(byte * _SIXTEENTH)
                z = acc_t(zeros[n, g]) if has_zeros else acc_t(INT4_SYMMETRIC_ZERO)
                total += acc_t(scales[n, g]) * (acc - z * xsum[m, g])
            out[m, n] = total
            m += 1


@njit(**_NOGIL)
def _int4_gemv_batch_part(x_lo, x_mix, xsum, packed, scales, zeros, has_zeros, group_size, out,
                          chunk, ctr, n_chunks, wait):
    _wide_vectors()
    n_total = packed.shape[0]
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        _int4_gemv_batch_rows(x_lo, x_mix, xsum, packed, scales, zeros, has_zeros, group_size,
                              out, c * chunk, min(n_total, (c + 1) * chunk))
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)


@njit(fastmath=_FM, cache=True, inline="always")
def _int4_dequant_row(packed, scales, zeros, has_zeros, group_size, n, tile, i):
    """Row ``n`` of the weight, dequantized into row ``i`` of ``tile`` (the float nibble split
    and unsigned indices of the GEMV: 4x faster than integer ``&`` / ``>>``)."""
    acc_t = tile.dtype.type
    half = np.uint64(INT4_BLOCK // 2)
    for g in range(scales.shape[1]):
        s = acc_t(scales[n, g])
        z = acc_t(zeros[n, g]) if has_zeros else acc_t(INT4_SYMMETRIC_ZERO)
        for b in range(group_size // INT4_BLOCK):
            base = np.uint64(g * group_size + b * INT4_BLOCK)
            pb = base // np.uint64(2)
            for j in range(half):
                byte = acc_t(packed[n, pb + j])
                hi = np.floor(byte * _SIXTEENTH)
                tile[i, base + j] = (byte - _SIXTEEN * hi - z) * s
                tile[i, base + half + j] = (hi - z) * s


@njit(fastmath=_FM, cache=True, inline="always")
def _int4_gemm_tiles(x, packed, scales, zeros, has_zeros, group_size, out, t0, t1, tile):
    n_total = packed.shape[0]
    acc_t = x.dtype.type
    one = acc_t(1)
    for t in range(t0, t1):
        r = t * _TILE
        rows = min(_TILE, n_total - r)
        for i in range(rows):
            _int4_dequant_row(packed, scales, zeros, has_zeros, group_size, r + i, tile, i)
        if rows == _TILE:
            _rows4(x, tile, 0, out, r, one, one, one, one)
        else:
            for i in range(rows):
                _row1(x, tile, i, out, r + i, one)


@njit(**_NOGIL)
def _int4_gemm_part(x, packed, scales, zeros, has_zeros, group_size, out, chunk, ctr, n_chunks,
                    wait):
    """For int4 the four rows' codes are dequantized into a small per-thread tile (4 x K
    floats), never the matrix."""
    n_tiles = (packed.shape[0] + _TILE - 1) // _TILE
    tile = np.empty((_TILE, x.shape[1]), x.dtype)
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        _int4_gemm_tiles(x, packed, scales, zeros, has_zeros, group_size, out, c * chunk,
                         min(n_tiles, (c + 1) * chunk), tile)
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)


@njit(fastmath=_FM, cache=True, nogil=True)
def _int4_split_x(x, group_size):
    """The GEMV's activation operands: per 32-value block, ``x_lo`` = its first 16 values,
    ``x_mix`` = last 16 - 16 x first 16; ``xsum`` = per-group sums (one call instead of five
    NumPy ones: a layer call costs microseconds)."""
    k = x.shape[1]
    h = INT4_BLOCK // 2
    x_lo = np.empty(k // 2, x.dtype)
    x_mix = np.empty(k // 2, x.dtype)
    sixteen = x.dtype.type(16)
    for b in range(k // INT4_BLOCK):
        for j in range(h):
            lo = x[0, b * INT4_BLOCK + j]
            x_lo[b * h + j] = lo
            x_mix[b * h + j] = x[0, b * INT4_BLOCK + h + j] - sixteen * lo
    xsum = np.zeros(k // group_size, x.dtype)
    for g in range(k // group_size):
        acc = x.dtype.type(0)
        for i in range(g * group_size, (g + 1) * group_size):
            acc += x[0, i]
        xsum[g] = acc
    return x_lo, x_mix, xsum


@njit(fastmath=_FM, cache=True, nogil=True)
def _int4_split_x_batch(x, group_size):
    """:func:`_int4_split_x` for every row of ``x``: ``[M, K // 2]`` twice and ``[M, groups]``."""
    m_total, k = x.shape
    h = INT4_BLOCK // 2
    x_lo = np.empty((m_total, k // 2), x.dtype)
    x_mix = np.empty((m_total, k // 2), x.dtype)
    xsum = np.zeros((m_total, k // group_size), x.dtype)
    sixteen = x.dtype.type(16)
    for m in range(m_total):
        for b in range(k // INT4_BLOCK):
            for j in range(h):
                lo = x[m, b * INT4_BLOCK + j]
                x_lo[m, b * h + j] = lo
                x_mix[m, b * h + j] = x[m, b * INT4_BLOCK + h + j] - sixteen * lo
        for g in range(k // group_size):
            acc = x.dtype.type(0)
            for i in range(g * group_size, (g + 1) * group_size):
                acc += x[m, i]
            xsum[m, g] = acc
    return x_lo, x_mix, xsum
