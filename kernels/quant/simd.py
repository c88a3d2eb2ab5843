"""Explicit SIMD for the int4 GEMV: integer dot products in LLVM vector IR, picked at run time.

Why: the portable int4 GEMV (``cpu.py``) converts every nibble to a float and issues about 50
vector instructions per 64 packed bytes; it is bound by instructions, not by memory
(docs/quantization.md, "Explicit SIMD"). numba has no vector types and LLVM's auto-vectoriser
does not find an integer formulation, so the inner loop is written here as ``@intrinsic``\\ s
that emit LLVM vector IR through llvmlite (numba's own stack; no C extension).

The formulation (llama.cpp's Q4 x Q8 idea): the activations are quantized to int8 per
32-value packing block (``sx = max|x| / 127``; the weight stays as it is), so a 64-byte load
of packed codes becomes two byte dot products, one per nibble stream:

* ``lo = w & 15``, ``hi = (w >> 4) & 15``: unsigned 4-bit codes in bytes;
* ``acc += dot(lo, xq_lo) + dot(hi, xq_hi)`` in int32 lanes, each lane summing 4 bytes:
  ``vpdpbusd`` (AVX-512 VNNI, or AVX-VNNI at 256 bits), else ``pmaddubsw`` + ``pmaddwd``
  (AVX-512BW / AVX2; the int16 pair sums stay below 2 * 15 * 127 * 2, no saturation);
* the zero point enters as the accumulator's start value, ``-z * (sum of the lane's
  activation codes)`` (precomputed per lane, so it costs nothing for the symmetric format);
* each chunk's int32 lanes become floats once and are multiplied by a per-lane scale
  (weight group scale x activation block scale) into one float vector per row, so the
  horizontal sum happens once per row, not once per group.

About 11 instructions per 64 packed bytes and row, against about 50. The price is the
activation rounding: at most |w| times half an activation step per input, about 0.5 % of
the largest output of a random layer, against 6-8 % for the int4 weights themselves
(``tests/test_quant_simd.py``). float64 activations keep the portable kernel.

Variants (``VARIANTS``), widest first; :func:`available` says which the CPU runs (from
llvmlite's host feature query, or ``NUMBA_CPU_FEATURES`` when set); a kernel is only compiled
when it is first called, so a variant the CPU lacks is never compiled.
"""
from __future__ import annotations

import numpy as np
from numba import literally, njit, types

from .. import _pool
from ._simd_ir import VARIANTS, _make_rows, host_features  # noqa: F401  (public names here)
from .packing import INT4_BLOCK, INT4_IL_ROWS as IL_ROWS

def available(name: str) -> bool:
    """Whether the host CPU has the instructions of variant ``name``."""
    feats = host_features()
    return any(all(feats.get(f, False) for f in need) for need in VARIANTS[name][2])


def best() -> str | None:
    """The variant the kernels use on this CPU (the first available), or None."""
    for name in VARIANTS:
        if available(name):
            return name
    return None


# ---- activations: int8 per 32-value block, laid out like the packed weight ---------------------

@njit(fastmath={"nsz", "arcp", "contract"}, cache=True, nogil=True)
def quantize_activations(x):
    """For float ``x [M, K]``, per token: ``xq_lo``, ``xq_hi`` (int8 ``[M, K // 2]``: the first
    and second 16 values of each 32-block, matching the low and high nibbles of a packed byte),
    per int32 lane of 4 packed bytes ``lane_sum`` (int32 ``[M, K // 8]``: the lane's 8
    activation codes summed, for the zero point) and ``lane_scale`` (float32 ``[M, K // 8]``:
    its block's scale)."""
    m_total, k = x.shape
    h = INT4_BLOCK // 2
    xq_lo = np.empty((m_total, k // 2), np.int8)
    xq_hi = np.empty((m_total, k // 2), np.int8)
    lane_sum = np.empty((m_total, k // 8), np.int32)
    lane_scale = np.empty((m_total, k // 8), np.float32)
    for m in range(m_total):
        for b in range(k // INT4_BLOCK):
            amax = 0.0
            for j in range(INT4_BLOCK):
                amax = max(amax, abs(np.float64(x[m, b * INT4_BLOCK + j])))
            s = np.float32(amax / 127.0)
            inv = 127.0 / amax if amax > 0 else 0.0
            for j in range(h):
                xq_lo[m, b * h + j] = np.int8(np.rint(np.float64(x[m, b * INT4_BLOCK + j]) * inv))
                xq_hi[m, b * h + j] = np.int8(np.rint(np.float64(x[m, b * INT4_BLOCK + h + j]) * inv))
            for lane in range(b * 4, b * 4 + 4):
                acc = np.int32(0)
                for j in range(4 * lane, 4 * lane + 4):
                    acc += np.int32(xq_lo[m, j]) + np.int32(xq_hi[m, j])
                lane_sum[m, lane] = acc
                lane_scale[m, lane] = s
    return xq_lo, xq_hi, lane_sum, lane_scale


@njit(fastmath={"nsz", "arcp", "contract"}, cache=True, nogil=True)
def round_activations(x):
    """``x [M, K]`` float32 with each value rounded as :func:`quantize_activations` rounds it
    (``q * sx``): the batched int4 kernels multiply these, so that a token gives the same
    result in a batch as alone (the GEMV's integer dot products see exactly these values)."""
    out = np.empty_like(x)
    for m in range(x.shape[0]):
        for b in range(x.shape[1] // INT4_BLOCK):
            amax = 0.0
            for j in range(b * INT4_BLOCK, (b + 1) * INT4_BLOCK):
                amax = max(amax, abs(np.float64(x[m, j])))
            s = np.float32(amax / 127.0)
            inv = 127.0 / amax if amax > 0 else 0.0
            for j in range(b * INT4_BLOCK, (b + 1) * INT4_BLOCK):
                out[m, j] = np.float32(np.rint(np.float64(x[m, j]) * inv)) * s
    return out


def dequantized_activations(x):
    """What the int4 kernels multiply float32 activations by (for tests and the docs)."""
    return round_activations(np.ascontiguousarray(np.atleast_2d(x), np.float32))


# ---- the kernels, and one chunk loop per variant -----------------------------------------------
#
# Each chunk loop is the whole GEMV for one thread of _pool's launcher: claim chunks of output
# rows (whole 4-row blocks) and run them, tokens four at a time (each unpacked weight vector
# serving four tokens), then one at a time; one function per layout, so that each compiles
# only its own kernels. Row-major weights go one row at a time: each row is then one
# sequential stream; four rows at once (four streams 2 KiB apart, each activation load serving
# four rows) ran 2.2x slower from memory (8 layers of 4096 x 4096, 6.8 against 3.1 ms) though
# as fast in cache: the prefetchers lose short streams (software prefetches did not help: 5.4
# ms). The "rows4x64" layout makes a 4-row block one stream, and four rows at a time then ran
# 2.5 against 3.3 ms. ``has_zeros`` and ``group_size`` are made literals (numba.literally):
# each combination a model uses compiles its own loop nests, one per kernel, where run-time
# values compiled all six (see gemv_part for how they are called). The loops differ only in
# the intrinsics they call (an intrinsic is not a first-class value in numba); each is a
# top-level function so that numba's disk cache keeps it, and each is compiled only when
# first called, so only on a CPU that has its instructions.

_TOKENS = 4
_avx512_vnni, _avx512_vnni_t4 = (_make_rows("avx512-vnni", 1),
                                 _make_rows("avx512-vnni", 1, tokens=_TOKENS))
_avx512_vnni_il, _avx512_vnni_il_t4 = (_make_rows("avx512-vnni", IL_ROWS, True),
                                       _make_rows("avx512-vnni", IL_ROWS, True, _TOKENS))
_avx512bw, _avx512bw_t4 = (_make_rows("avx512bw", 1),
                           _make_rows("avx512bw", 1, tokens=_TOKENS))
_avx512bw_il, _avx512bw_il_t4 = (_make_rows("avx512bw", IL_ROWS, True),
                                 _make_rows("avx512bw", IL_ROWS, True, _TOKENS))
_avx_vnni, _avx_vnni_t4 = (_make_rows("avx-vnni", 1),
                           _make_rows("avx-vnni", 1, tokens=_TOKENS))
_avx_vnni_il, _avx_vnni_il_t4 = (_make_rows("avx-vnni", IL_ROWS, True),
                                 _make_rows("avx-vnni", IL_ROWS, True, _TOKENS))
_avx2, _avx2_t4 = (_make_rows("avx2", 1),
                   _make_rows("avx2", 1, tokens=_TOKENS))
_avx2_il, _avx2_il_t4 = (_make_rows("avx2", IL_ROWS, True),
                         _make_rows("avx2", IL_ROWS, True, _TOKENS))


@njit(cache=True, nogil=True)
def _part_avx512_vnni(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                      group_size, out, chunk, ctr, n_chunks, wait):
    literally(has_zeros)
    literally(group_size)
    n_total = packed.shape[0]
    m_total = xq_lo.shape[0]
    m4 = m_total - m_total % _TOKENS
    res = np.empty(_TOKENS, np.float32)
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        for n in range(c * chunk, min(n_total, (c + 1) * chunk)):
            for m in range(0, m4, _TOKENS):
                _avx512_vnni_t4(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                                group_size, n, m, res)
                for t in range(_TOKENS):
                    out[m + t, n] = res[t]
            for m in range(m4, m_total):
                _avx512_vnni(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                             group_size, n, m, res)
                out[m, n] = res[0]
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)


@njit(cache=True, nogil=True)
def _il_part_avx512_vnni(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                         group_size, out, chunk, ctr, n_chunks, wait):
    literally(has_zeros)
    literally(group_size)
    n_total = packed.shape[0]
    m_total = xq_lo.shape[0]
    m4 = m_total - m_total % _TOKENS
    res = np.empty(IL_ROWS * _TOKENS, np.float32)
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        for n in range(c * chunk, min(n_total, (c + 1) * chunk), IL_ROWS):
            for m in range(0, m4, _TOKENS):
                _avx512_vnni_il_t4(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros,
                                   has_zeros, group_size, n, m, res)
                for t in range(_TOKENS):
                    out[m + t, n:n + IL_ROWS] = res[t * IL_ROWS:(t + 1) * IL_ROWS]
            for m in range(m4, m_total):
                _avx512_vnni_il(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                                group_size, n, m, res)
                out[m, n:n + IL_ROWS] = res[:IL_ROWS]
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)


@njit(cache=True, nogil=True)
def _part_avx512bw(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                   group_size, out, chunk, ctr, n_chunks, wait):
    literally(has_zeros)
    literally(group_size)
    n_total = packed.shape[0]
    m_total = xq_lo.shape[0]
    m4 = m_total - m_total % _TOKENS
    res = np.empty(_TOKENS, np.float32)
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        for n in range(c * chunk, min(n_total, (c + 1) * chunk)):
            for m in range(0, m4, _TOKENS):
                _avx512bw_t4(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                             group_size, n, m, res)
                for t in range(_TOKENS):
                    out[m + t, n] = res[t]
            for m in range(m4, m_total):
                _avx512bw(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                          group_size, n, m, res)
                out[m, n] = res[0]
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)


@njit(cache=True, nogil=True)
def _il_part_avx512bw(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                      group_size, out, chunk, ctr, n_chunks, wait):
    literally(has_zeros)
    literally(group_size)
    n_total = packed.shape[0]
    m_total = xq_lo.shape[0]
    m4 = m_total - m_total % _TOKENS
    res = np.empty(IL_ROWS * _TOKENS, np.float32)
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        for n in range(c * chunk, min(n_total, (c + 1) * chunk), IL_ROWS):
            for m in range(0, m4, _TOKENS):
                _avx512bw_il_t4(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros,
                                has_zeros, group_size, n, m, res)
                for t in range(_TOKENS):
                    out[m + t, n:n + IL_ROWS] = res[t * IL_ROWS:(t + 1) * IL_ROWS]
            for m in range(m4, m_total):
                _avx512bw_il(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                             group_size, n, m, res)
                out[m, n:n + IL_ROWS] = res[:IL_ROWS]
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)


@njit(cache=True, nogil=True)
def _part_avx_vnni(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                   group_size, out, chunk, ctr, n_chunks, wait):
    literally(has_zeros)
    literally(group_size)
    n_total = packed.shape[0]
    m_total = xq_lo.shape[0]
    m4 = m_total - m_total % _TOKENS
    res = np.empty(_TOKENS, np.float32)
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        for n in range(c * chunk, min(n_total, (c + 1) * chunk)):
            for m in range(0, m4, _TOKENS):
                _avx_vnni_t4(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                             group_size, n, m, res)
                for t in range(_TOKENS):
                    out[m + t, n] = res[t]
            for m in range(m4, m_total):
                _avx_vnni(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                          group_size, n, m, res)
                out[m, n] = res[0]
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)


@njit(cache=True, nogil=True)
def _il_part_avx_vnni(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                      group_size, out, chunk, ctr, n_chunks, wait):
    literally(has_zeros)
    literally(group_size)
    n_total = packed.shape[0]
    m_total = xq_lo.shape[0]
    m4 = m_total - m_total % _TOKENS
    res = np.empty(IL_ROWS * _TOKENS, np.float32)
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        for n in range(c * chunk, min(n_total, (c + 1) * chunk), IL_ROWS):
            for m in range(0, m4, _TOKENS):
                _avx_vnni_il_t4(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros,
                                has_zeros, group_size, n, m, res)
                for t in range(_TOKENS):
                    out[m + t, n:n + IL_ROWS] = res[t * IL_ROWS:(t + 1) * IL_ROWS]
            for m in range(m4, m_total):
                _avx_vnni_il(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                             group_size, n, m, res)
                out[m, n:n + IL_ROWS] = res[:IL_ROWS]
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)


@njit(cache=True, nogil=True)
def _part_avx2(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
               group_size, out, chunk, ctr, n_chunks, wait):
    literally(has_zeros)
    literally(group_size)
    n_total = packed.shape[0]
    m_total = xq_lo.shape[0]
    m4 = m_total - m_total % _TOKENS
    res = np.empty(_TOKENS, np.float32)
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        for n in range(c * chunk, min(n_total, (c + 1) * chunk)):
            for m in range(0, m4, _TOKENS):
                _avx2_t4(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                         group_size, n, m, res)
                for t in range(_TOKENS):
                    out[m + t, n] = res[t]
            for m in range(m4, m_total):
                _avx2(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                      group_size, n, m, res)
                out[m, n] = res[0]
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)


@njit(cache=True, nogil=True)
def _il_part_avx2(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                  group_size, out, chunk, ctr, n_chunks, wait):
    literally(has_zeros)
    literally(group_size)
    n_total = packed.shape[0]
    m_total = xq_lo.shape[0]
    m4 = m_total - m_total % _TOKENS
    res = np.empty(IL_ROWS * _TOKENS, np.float32)
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        for n in range(c * chunk, min(n_total, (c + 1) * chunk), IL_ROWS):
            for m in range(0, m4, _TOKENS):
                _avx2_il_t4(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros,
                            has_zeros, group_size, n, m, res)
                for t in range(_TOKENS):
                    out[m + t, n:n + IL_ROWS] = res[t * IL_ROWS:(t + 1) * IL_ROWS]
            for m in range(m4, m_total):
                _avx2_il(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                         group_size, n, m, res)
                out[m, n:n + IL_ROWS] = res[:IL_ROWS]
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)

#: the chunk loops for row-major codes and for the "rows4x64" layout, by variant
PARTS = {"avx512-vnni": _part_avx512_vnni, "avx512bw": _part_avx512bw,
         "avx-vnni": _part_avx_vnni, "avx2": _part_avx2}
IL_PARTS = {"avx512-vnni": _il_part_avx512_vnni, "avx512bw": _il_part_avx512bw,
            "avx-vnni": _il_part_avx_vnni, "avx2": _il_part_avx2}


def usable(name: str, k: int, dtype) -> bool:
    """Whether variant ``name`` can run a GEMV with ``k`` inputs on ``dtype`` activations:
    float32 only (float64 callers asked for float64 accuracy: the portable kernel), and whole
    vectors of packed bytes per row (``k / 2`` a multiple of the vector's bytes)."""
    return dtype == np.float32 and (k // 2) % VARIANTS[name][0] == 0


# The compiled chunk loops, by (variant, layout, has_zeros, group_size). A call through the
# dispatcher with plain bool / int arguments would go through numba.literally's fallback on
# every call (typing again under the compiler lock: 245 ms against 36 us for a 256 x 1024
# layer, measured); the entry point of the literal signature, compiled (or loaded from the
# disk cache) once, is called directly.
_ENTRIES = {}
_C2 = {dt: types.Array(dt, 2, "C") for dt in (types.int8, types.int32, types.float32, types.uint8)}


def gemv_part(variant: str, layout: str, has_zeros: bool, group_size: int):
    """The chunk loop of ``variant`` for ``layout`` ("rows" or "rows4x64"), specialised for
    ``has_zeros`` and ``group_size``: called with the arguments of ``_part_*``."""
    key = (variant, layout, bool(has_zeros), int(group_size))
    entry = _ENTRIES.get(key)
    if entry is None:
        disp = (PARTS if layout == "rows" else IL_PARTS)[variant]
        sig = (_C2[types.int8], _C2[types.int8], _C2[types.int32], _C2[types.float32],
               _C2[types.uint8], _C2[types.float32], _C2[types.uint8],
               types.BooleanLiteral(bool(has_zeros)), types.IntegerLiteral(int(group_size)),
               _C2[types.float32], types.int64, types.Array(types.int64, 1, "C"), types.int64,
               types.boolean)
        entry = _ENTRIES[key] = disp.compile(sig)
    return entry
