"""Quantized matmuls on the CPU with numba.

The weight stays quantized in memory: each kernel converts int8 / int4 codes to floats inside
its inner loop (a batch-1 layer larger than the cache is limited by the bytes it reads, so
reading a quarter or an eighth of float32's bytes is the whole point). Work is split over
output rows, so threads never write the same output: every kernel claims chunks of rows
from an atomic counter, the calling thread included (``kernels/_pool.py``: a thread that
wakes late costs nothing, where a ``prange`` waited for it at its closing barrier).

* batch 1 (decoding): a GEMV, one pass over the weight, four output rows at a time (four
  weight streams; each activation load serves four rows), in 512-bit vectors where the CPU
  has them (:func:`_wide_vectors`).
* int4, batch 2..8 (``INT4_GEMV_BATCH``): the GEMV loop over four tokens at a time, each
  unpacked byte serving all four.
* batch > 1 (int8), > 8 (int4): a register-blocked GEMM, 4 output rows x 4 tokens per
  micro-tile, so each weight value loaded serves four tokens and each activation four output
  rows. For int4 the four rows' codes are dequantized into a small per-thread tile (4 x K
  floats), never the matrix.
* int8 x int8 (the dynamic-activation linear): 4 tokens x 4 rows per tile in AVX-512 VNNI
  (:mod:`._vnni`, ``vpdpbusd``) where the CPU has it, else 2 tokens x 8 rows of int16
  products; the dynamic linear rescales each chunk of rows as soon as it is done.

Formats are those of :mod:`.packing`. Shapes: ``x [M, K]`` float32 / float64, weight
``[N, K]``; results ``[M, N]`` in ``x``'s dtype.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .._parallel import CHUNKS_PER_THREAD
from .. import _pool
from . import _vnni
from .packing import INT4_BLOCK, INT4_SYMMETRIC_ZERO, check_group_size, quantize_per_token_int8

# fastmath without the no-NaN / no-Inf assumptions (see FINDINGS.md); reassociation is what
# lets LLVM vectorise the dot-product reductions.
_FM = {"reassoc", "contract", "arcp", "nsz", "afn"}
_TILE = 4


_wide_vectors = _pool.wide_vectors     # 512-bit vectors for the kernel that calls it


# multiply-adds from which a kernel runs its parallel version (as the compiler's numba tier,
# which goes parallel from 1M elements)
PARALLEL_WORK = 1 << 20
# int4 batches up to this size run the GEMV loop with shared unpacking, larger ones the GEMM
INT4_GEMV_BATCH = 8


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


# ---- weight-only kernels: a row-range body, run by _pool's chunk loop ---------------------------
#
# Each ``*_part`` function is the whole kernel for one thread: it claims chunks of output rows
# (tiles of 4 rows for batch > 1) from ``ctr`` until none is left (see ``_pool``). Called
# alone with one chunk it is the serial kernel.

_NOGIL = dict(fastmath=_FM, cache=True, nogil=True)


@njit(fastmath=_FM, cache=True, inline="always")
def _int8_gemv_rows(x, q, scale, out, r0, r1):
    """Output rows ``r0..r1``, four at a time: each activation load serves four rows, and four
    weight rows stream at once (measured 2x faster than one row at a time on 8 layers of
    4096 x 4096 read from memory: one stream per 4 KiB row left the loads waiting)."""
    k_total = q.shape[1]
    acc_t = x.dtype.type
    n = r0
    while n + 4 <= r1:
        a0 = a1 = a2 = a3 = acc_t(0)
        for k in range(k_total):
            xv = x[0, k]
            a0 += xv * acc_t(q[n, k])
            a1 += xv * acc_t(q[n + 1, k])
            a2 += xv * acc_t(q[n + 2, k])
            a3 += xv * acc_t(q[n + 3, k])
        out[0, n] = a0 * acc_t(scale[n])
        out[0, n + 1] = a1 * acc_t(scale[n + 1])
        out[0, n + 2] = a2 * acc_t(scale[n + 2])
        out[0, n + 3] = a3 * acc_t(scale[n + 3])
        n += 4
    while n < r1:
        acc = acc_t(0)
        for k in range(k_total):
            acc += x[0, k] * acc_t(q[n, k])
        out[0, n] = acc * acc_t(scale[n])
        n += 1


@njit(**_NOGIL)
def _int8_gemv_part(x, q, scale, out, chunk, ctr, n_chunks, wait):
    _wide_vectors()
    n_total = q.shape[0]
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        _int8_gemv_rows(x, q, scale, out, c * chunk, min(n_total, (c + 1) * chunk))
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)


@njit(fastmath=_FM, cache=True, inline="always")
def _int8_gemm_tiles(x, q, scale, out, t0, t1):
    """Tiles ``t0..t1`` of 4 output rows (the last tile may be short)."""
    n_total = q.shape[0]
    acc_t = x.dtype.type
    for t in range(t0, t1):
        r = t * _TILE
        if r + _TILE <= n_total:
            _rows4(x, q, r, out, r, acc_t(scale[r]), acc_t(scale[r + 1]), acc_t(scale[r + 2]),
                   acc_t(scale[r + 3]))
        else:
            for i in range(r, n_total):
                _row1(x, q, i, out, i, acc_t(scale[i]))


@njit(**_NOGIL)
def _int8_gemm_part(x, q, scale, out, chunk, ctr, n_chunks, wait):
    n_tiles = (q.shape[0] + _TILE - 1) // _TILE
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        _int8_gemm_tiles(x, q, scale, out, c * chunk, min(n_tiles, (c + 1) * chunk))
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)


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


def _launch(part, work, items, *args):
    """Run a ``*_part`` kernel over ``items`` rows / tiles: serially below ``PARALLEL_WORK``
    multiply-adds, else on ``numba.get_num_threads()`` threads in chunks of
    ``~items / (threads * CHUNKS_PER_THREAD)``, rounded up to a multiple of 4 (see :mod:`._pool`)."""
    threads = 1 if work < PARALLEL_WORK else _threads()
    if threads == 1:
        return _pool.run(part, args + (max(items, 1),), 1, 1)
    chunk = -(-max(1, -(-items // (threads * CHUNKS_PER_THREAD))) // 4) * 4   # whole 4-row blocks
    _pool.run(part, args + (chunk,), -(-items // chunk), threads)


def _threads():
    import numba
    return numba.get_num_threads()


# ---- int8 x int8 -> int32 (dynamic activation quantization) ------------------------------------

@njit(fastmath=_FM, cache=True, inline="always")
def _i8dot(xq, m, wq, r, k_total):
    acc = np.int32(0)
    for k in range(k_total):
        acc = np.int32(acc + np.int16(np.int16(xq[m, k]) * np.int16(wq[r, k])))
    return acc


_I8_ROWS = 8
# int8 x int8 tiles in AVX-512 VNNI where the CPU has it (tests turn it off for the portable tile)
_VNNI = _vnni.available()


@njit(fastmath=_FM, cache=True, inline="always")
def _i8_rows(xq, wq, out, r0, r1):
    """2 tokens x 8 output rows per micro-tile. Products of two int8 codes in [-127, 127] fit
    in int16 and are summed in int32; the explicit narrow casts keep LLVM on 16/32-bit vector
    lanes (numba would otherwise widen every integer operation to int64). 2 x 8 measured 12%
    faster than 2 x 4 and 4 x 4. Output rows ``r0..r1``: tiles of 8 from ``r0``, then one row
    at a time."""
    k_total = wq.shape[1]
    m_total = xq.shape[0]
    r = r0
    while r + _I8_ROWS <= r1:
        m = 0
        while m + 2 <= m_total:
            a00 = a01 = a02 = a03 = a04 = a05 = a06 = a07 = np.int32(0)
            a10 = a11 = a12 = a13 = a14 = a15 = a16 = a17 = np.int32(0)
            for k in range(k_total):
                x0 = np.int16(xq[m, k])
                x1 = np.int16(xq[m + 1, k])
                w0 = np.int16(wq[r, k])
                w1 = np.int16(wq[r + 1, k])
                w2 = np.int16(wq[r + 2, k])
                w3 = np.int16(wq[r + 3, k])
                w4 = np.int16(wq[r + 4, k])
                w5 = np.int16(wq[r + 5, k])
                w6 = np.int16(wq[r + 6, k])
                w7 = np.int16(wq[r + 7, k])
                a00 = np.int32(a00 + np.int16(x0 * w0))
                a01 = np.int32(a01 + np.int16(x0 * w1))
                a02 = np.int32(a02 + np.int16(x0 * w2))
                a03 = np.int32(a03 + np.int16(x0 * w3))
                a04 = np.int32(a04 + np.int16(x0 * w4))
                a05 = np.int32(a05 + np.int16(x0 * w5))
                a06 = np.int32(a06 + np.int16(x0 * w6))
                a07 = np.int32(a07 + np.int16(x0 * w7))
                a10 = np.int32(a10 + np.int16(x1 * w0))
                a11 = np.int32(a11 + np.int16(x1 * w1))
                a12 = np.int32(a12 + np.int16(x1 * w2))
                a13 = np.int32(a13 + np.int16(x1 * w3))
                a14 = np.int32(a14 + np.int16(x1 * w4))
                a15 = np.int32(a15 + np.int16(x1 * w5))
                a16 = np.int32(a16 + np.int16(x1 * w6))
                a17 = np.int32(a17 + np.int16(x1 * w7))
            out[m, r] = a00
            out[m, r + 1] = a01
            out[m, r + 2] = a02
            out[m, r + 3] = a03
            out[m, r + 4] = a04
            out[m, r + 5] = a05
            out[m, r + 6] = a06
            out[m, r + 7] = a07
            out[m + 1, r] = a10
            out[m + 1, r + 1] = a11
            out[m + 1, r + 2] = a12
            out[m + 1, r + 3] = a13
            out[m + 1, r + 4] = a14
            out[m + 1, r + 5] = a15
            out[m + 1, r + 6] = a16
            out[m + 1, r + 7] = a17
            m += 2
        if m < m_total:
            for i in range(_I8_ROWS):
                out[m, r + i] = _i8dot(xq, m, wq, r + i, k_total)
        r += _I8_ROWS
    for rr in range(r, r1):
        for m in range(m_total):
            out[m, rr] = _i8dot(xq, m, wq, rr, k_total)


@njit(fastmath=_FM, cache=True, inline="always")
def _rescale_rows(acc, xscale, wscale, out, r0, r1):
    ft = out.dtype.type
    for m in range(acc.shape[0]):
        xs = ft(xscale[m])
        for n in range(r0, r1):
            out[m, n] = ft(acc[m, n]) * (xs * ft(wscale[n]))


@njit(**_NOGIL)
def _int8_int8_part(xq, wq, acc, xscale, wscale, out, rescale, chunk, ctr, n_chunks, wait):
    """Chunks of ``chunk`` output rows (a multiple of 8) into the int32 ``acc``; with
    ``rescale``, each chunk's columns are then rescaled into the float ``out`` while they
    are in cache (the dynamic linear: no second pass, no second launch)."""
    _wide_vectors()
    n_total = wq.shape[0]
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        r0 = c * chunk
        r1 = min(n_total, r0 + chunk)
        _i8_rows(xq, wq, acc, r0, r1)
        if rescale:
            _rescale_rows(acc, xscale, wscale, out, r0, r1)
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)


@njit(**_NOGIL)
def _int8_int8_vnni_part(xq, wq, xsum, acc, xscale, wscale, out, rescale, chunk, ctr, n_chunks,
                         wait):
    """:func:`_int8_int8_part` with 4 x 4 tiles in AVX-512 VNNI (:mod:`._vnni`): ``xsum[m]``
    is the sum of token ``m``'s codes over the first ``64 * (K // 64)`` columns (the tile's
    +128 offset on the weight, taken back out); the last ``K % 64`` columns and the rows /
    tokens left over from whole tiles are summed as in the portable tile."""
    n_total, k_total = wq.shape
    m_total = xq.shape[0]
    steps = k_total // _vnni.STEP
    kv = steps * _vnni.STEP
    res = np.empty(_vnni.TILE_M * _vnni.TILE_N, np.int32)
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        r0 = c * chunk
        r1 = min(n_total, r0 + chunk)
        r = r0
        while r + _vnni.TILE_N <= r1:
            m = 0
            while m + _vnni.TILE_M <= m_total:
                _vnni.vnni_tile(xq, wq, m, r, steps, res)
                for i in range(_vnni.TILE_M):
                    for j in range(_vnni.TILE_N):
                        v = np.int32(res[i * _vnni.TILE_N + j] - np.int32(128) * xsum[m + i])
                        for k in range(kv, k_total):
                            v = np.int32(v + np.int16(np.int16(xq[m + i, k]) * np.int16(wq[r + j, k])))
                        acc[m + i, r + j] = v
                m += _vnni.TILE_M
            for mm in range(m, m_total):
                for j in range(_vnni.TILE_N):
                    acc[mm, r + j] = _i8dot(xq, mm, wq, r + j, k_total)
            r += _vnni.TILE_N
        for rr in range(r, r1):
            for mm in range(m_total):
                acc[mm, rr] = _i8dot(xq, mm, wq, rr, k_total)
        if rescale:
            _rescale_rows(acc, xscale, wscale, out, r0, r1)
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)


def _int8_int8_launch(xq, wq, acc, xscale, wscale, out, rescale):
    """Row chunks of whole 8-row tiles on the calling thread and helpers (see :mod:`._pool`),
    in VNNI tiles where the CPU has them (``_VNNI``)."""
    n, k = wq.shape
    threads = 1 if acc.size * k < PARALLEL_WORK else _threads()
    chunk, n_chunks = _pool.chunked(n, threads, CHUNKS_PER_THREAD, _I8_ROWS)
    if _VNNI and k >= _vnni.STEP and k <= _vnni.VNNI_MAX_K and xq.shape[0] >= _vnni.TILE_M:
        kv = k - k % _vnni.STEP
        xsum = xq[:, :kv].sum(axis=1, dtype=np.int32)
        _pool.run(_int8_int8_vnni_part, (xq, wq, xsum, acc, xscale, wscale, out, rescale, chunk),
                  n_chunks, threads)
        return
    _pool.run(_int8_int8_part, (xq, wq, acc, xscale, wscale, out, rescale, chunk), n_chunks,
              threads)


# ---- wrappers: check, allocate, launch ---------------------------------------------------------

def _prepare_x(x, k):
    x = np.asarray(x)
    if x.ndim != 2 or x.shape[1] != k:
        raise ValueError(f"activation must be [M, {k}], got shape {x.shape}")
    if x.dtype != _F32 and x.dtype != _F64:
        raise TypeError(f"activation must be float32 or float64, got {x.dtype}")
    return x if x.flags.c_contiguous else np.ascontiguousarray(x)


_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_NO_SCALE = np.zeros(0, np.float32)      # int8_int8_matmul: no rescale
_NO_FLOAT = np.zeros((0, 0), np.float32)


def _add_bias(out, bias):
    if bias is not None:
        out += np.asarray(bias, out.dtype)
    return out


def int8_weight_only_matmul(x, q, scale, bias=None):
    """``x @ (q * scale[:, None]).T + bias`` reading the int8 weight directly."""
    q = np.ascontiguousarray(q, np.int8)
    x = _prepare_x(x, q.shape[1])
    out = np.empty((x.shape[0], q.shape[0]), x.dtype)
    if x.shape[0] == 0:
        return out
    scale = np.ascontiguousarray(scale, np.float32)
    if x.shape[0] == 1:
        _launch(_int8_gemv_part, out.size * q.shape[1], q.shape[0], x, q, scale, out)
    else:
        _launch(_int8_gemm_part, out.size * q.shape[1], -(-q.shape[0] // _TILE), x, q, scale, out)
    return _add_bias(out, bias)


def int4_weight_only_matmul(x, packed, scales, zeros=None, group_size=128, bias=None):
    """``x @ dequantize_int4(packed, scales, zeros).T + bias``, dequantizing in the loop."""
    packed = np.ascontiguousarray(packed, np.uint8)
    k = packed.shape[1] * 2
    check_group_size(k, group_size)
    x = _prepare_x(x, k)
    scales = np.ascontiguousarray(scales, np.float32)
    has_zeros = zeros is not None
    zeros = np.ascontiguousarray(zeros, np.uint8) if has_zeros else np.zeros((1, 1), np.uint8)
    out = np.empty((x.shape[0], packed.shape[0]), x.dtype)
    if x.shape[0] == 0:
        return out
    if x.shape[0] == 1:
        x_lo, x_mix, xsum = _int4_split_x(x, group_size)
        _launch(_int4_gemv_part, out.size * k, packed.shape[0], x_lo, x_mix, xsum, packed, scales,
                zeros, has_zeros, group_size, out)
    elif x.shape[0] <= INT4_GEMV_BATCH:
        x_lo, x_mix, xsum = _int4_split_x_batch(x, group_size)
        _launch(_int4_gemv_batch_part, out.size * k, packed.shape[0], x_lo, x_mix, xsum, packed,
                scales, zeros, has_zeros, group_size, out)
    else:
        _launch(_int4_gemm_part, out.size * k, -(-packed.shape[0] // _TILE), x, packed, scales,
                zeros, has_zeros, group_size, out)
    return _add_bias(out, bias)


def int8_int8_matmul(xq, wq):
    """``xq @ wq.T`` of int8 matrices with int32 accumulation."""
    xq = np.ascontiguousarray(xq, np.int8)
    wq = np.ascontiguousarray(wq, np.int8)
    if xq.ndim != 2 or wq.ndim != 2 or xq.shape[1] != wq.shape[1]:
        raise ValueError(f"int8 matmul shapes don't match: {xq.shape} and {wq.shape}")
    out = np.empty((xq.shape[0], wq.shape[0]), np.int32)
    if out.size:
        _int8_int8_launch(xq, wq, out, _NO_SCALE, _NO_SCALE, _NO_FLOAT, False)
    return out


def int8_dynamic_matmul(x, wq, wscale, bias=None):
    """Quantize ``x`` per token to int8, multiply in int32, rescale: the dynamic int8 linear."""
    x = _prepare_x(x, np.shape(wq)[1])
    xq, xs = quantize_per_token_int8(x)
    wq = np.ascontiguousarray(wq, np.int8)
    acc = np.empty((x.shape[0], wq.shape[0]), np.int32)
    out = np.empty(acc.shape, x.dtype)
    if out.size:
        _int8_int8_launch(np.ascontiguousarray(xq, np.int8), wq, acc,
                          np.ascontiguousarray(xs, np.float32),
                          np.ascontiguousarray(wscale, np.float32), out, True)
    return _add_bias(out, bias)
