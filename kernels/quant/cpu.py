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
* int4, batch 1..8 (``INT4_GEMV_BATCH``), float32: explicit SIMD where the CPU has it
  (:mod:`.simd`: integer dot products on activations rounded to int8 per 32-value block, about
  2-3x faster than the portable loops from memory); else the portable loops
  (:mod:`._int4_cpu`): for batch 2..8 the GEMV loop over four tokens at a time, each unpacked
  byte serving all four.
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
from . import _vnni, simd, simd_int8
from ._int4_cpu import (_int4_gemm_part, _int4_gemv_batch_part, _int4_gemv_part, _int4_split_x,
                        _int4_split_x_batch)
from ._int8_int8 import _I8_ROWS, _int8_int8_part, _int8_int8_vnni_part
from ._tiles import _FM, _NOGIL, _TILE, _row1, _rows4
from .packing import (check_group_size, check_int4_layout, deinterleave_int4,
                      quantize_per_token_int8)


_wide_vectors = _pool.wide_vectors     # 512-bit vectors for the kernel that calls it


# multiply-adds from which a kernel runs its parallel version (as the compiler's numba tier,
# which goes parallel from 1M elements)
PARALLEL_WORK = 1 << 20
# int4 batches up to this size run the GEMV loop with shared unpacking, larger ones the GEMM
INT4_GEMV_BATCH = 8
# the explicit-SIMD int4 GEMVs this CPU runs (:mod:`.simd`), widest first; the first one usable
# for a layer's shape runs it, else the portable loop (tests set this to pick one, or none)
INT4_GEMV_SIMD = tuple(name for name in simd.VARIANTS if simd.available(name))
# the same for the int8 weight-only GEMV (:mod:`.simd_int8`; float activations, exact as before)
INT8_GEMV_SIMD = tuple(name for name in simd_int8.VARIANTS if simd_int8.available(name))
# float32 activations of the int4 kernels are rounded to int8 per 32-value block (what the SIMD
# GEMV's integer dot products need), in every path, so that a token's result does not depend
# on its batch or the CPU. False: exact float activations and the portable loops only.
INT4_INT8_ACTIVATIONS = True


# ---- weight-only kernels: a row-range body, run by _pool's chunk loop ---------------------------
#
# Each ``*_part`` function is the whole kernel for one thread: it claims chunks of output rows
# (tiles of 4 rows for batch > 1) from ``ctr`` until none is left (see ``_pool``). Called
# alone with one chunk it is the serial kernel.

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

# ---- int8 x int8 -> int32 (dynamic activation quantization): kernels in _int8_int8.py --------

# int8 x int8 tiles in AVX-512 VNNI where the CPU has it (tests turn it off for the portable tile)
_VNNI = _vnni.available()


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
    variant = next((v for v in INT8_GEMV_SIMD if simd_int8.usable(v, q.shape[1], x.dtype)), None) \
        if x.shape[0] == 1 else None
    if variant is not None:
        _launch(simd_int8.PARTS[variant], out.size * q.shape[1], q.shape[0], x, q, scale, out)
    elif x.shape[0] == 1:
        _launch(_int8_gemv_part, out.size * q.shape[1], q.shape[0], x, q, scale, out)
    else:
        _launch(_int8_gemm_part, out.size * q.shape[1], -(-q.shape[0] // _TILE), x, q, scale, out)
    return _add_bias(out, bias)


def int4_weight_only_matmul(x, packed, scales, zeros=None, group_size=128, bias=None,
                            layout="rows"):
    """``x @ dequantize_int4(packed, scales, zeros).T + bias``, dequantizing in the loop.
    ``layout``: ``"rows"`` or ``"rows4x64"`` (:mod:`.packing`); the explicit-SIMD GEMV reads
    the latter as it is, the portable loops from a row-major copy made per call."""
    packed = np.ascontiguousarray(packed, np.uint8)
    k = packed.shape[1] * 2
    check_group_size(k, group_size)
    check_int4_layout(layout, packed.shape[0], k)
    x = _prepare_x(x, k)
    scales = np.ascontiguousarray(scales, np.float32)
    has_zeros = zeros is not None
    zeros = np.ascontiguousarray(zeros, np.uint8) if has_zeros else np.zeros((1, 1), np.uint8)
    out = np.empty((x.shape[0], packed.shape[0]), x.dtype)
    if x.shape[0] == 0:
        return out
    rounded = INT4_INT8_ACTIVATIONS and x.dtype == _F32
    variant = next((v for v in INT4_GEMV_SIMD if simd.usable(v, k, x.dtype)), None) \
        if rounded and x.shape[0] <= INT4_GEMV_BATCH else None
    if variant is not None:
        xq_lo, xq_hi, lane_sum, lane_scale = simd.quantize_activations(x)
        _launch(simd.gemv_part(variant, layout, has_zeros, group_size), out.size * k,
                packed.shape[0], xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros,
                has_zeros, group_size, out)
        return _add_bias(out, bias)
    if rounded:
        x = simd.round_activations(x)
    if layout != "rows":
        packed = deinterleave_int4(packed)
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
