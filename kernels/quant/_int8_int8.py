"""int8 x int8 -> int32 products (the dynamic-activation linear): the portable 2 x 8 tile and the
AVX-512 VNNI 4 x 4 tile (``_vnni.py``), as row-chunk bodies for ``_pool``'s launcher (``cpu.py``
picks one and launches it)."""
from __future__ import annotations

import numpy as np
from numba import njit

from .. import _pool
from . import _vnni
from ._tiles import _FM, _NOGIL

_wide_vectors = _pool.wide_vectors     # 512-bit vectors for the kernel that calls it


# ---- int8 x int8 -> int32 (dynamic activation quantization) ------------------------------------

@njit(fastmath=_FM, cache=True, inline="always")
def _i8dot(xq, m, wq, r, k_total):
    acc = np.int32(0)
    for k in range(k_total):
        acc = np.int32(acc + np.int16(np.int16(xq[m, k]) * np.int16(wq[r, k])))
    return acc


_I8_ROWS = 8


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
