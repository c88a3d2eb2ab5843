"""Explicit SIMD for the 2:4 GEMM (float32; the batch a multiple of the vector width, which
the caller pads it to), picked at run time from the CPU's features, like the GEMV's (``simd.py``).

The portable GEMM (``_products.gemm_t``) adds ``w[n, k] * xt[k, :]`` for each kept value to the
output row in memory: per metadata byte it loaded and stored the 64-wide output row and ran
LLVM's loop prologue (alias checks, remainder) for four axpys of a few vectors each. It ran
0.71x the dense BLAS GEMM at batch 64. Here one call computes a tile of one output row (up to
``TILE_VECTORS`` vectors of the batch) over a block of metadata bytes with the tile in
registers: per kept value a broadcast and one load + one multiply-add per vector of the
batch; the tile is loaded and stored once per block. The column blocks (whose ``xt`` rows stay
in L1) are the caller's, as in the portable kernel.

The arithmetic is the portable kernel's float32 multiply-adds, one chain per output value in
column order (the portable kernel's fastmath may associate a metadata byte's four products
differently; at 4096 x 4096, batch 64 the results were bitwise equal): float32 tolerance; inf
and NaN propagate.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .. import _pool
from ..quant._simd_ir import _F32, _I8, _broadcast, _declare, host_features

#: name -> (float lanes per vector, CPU features needed)
VARIANTS = {"avx512": (16, ("avx512f",)), "avx2": (8, ("avx2", "fma"))}
# vectors of the batch held in registers per tile (4 x 16 = a batch of 64 in one tile at
# 512 bits); plus a one-vector tile for the rest of the batch
TILE_VECTORS = 4


def available(name: str) -> bool:
    """Whether the CPU numba compiles for has variant ``name``'s instructions."""
    feats = host_features()
    return all(feats.get(f, False) for f in VARIANTS[name][1])


def usable(name: str, dtype) -> bool:
    """float32 (the batch must be whole vectors: the caller pads it, ``cpu._gemm``)."""
    return dtype == np.float32


def _make_tile(name: str, nv: int):
    lanes = VARIANTS[name][0]
    vf = ir.VectorType(_F32, lanes)
    wide = lanes == 16

    @intrinsic
    def tile_kernel(typingctx, xt, values, meta, outt, r, b0, b1, i0):
        """``outt[r, i0:i0 + nv * lanes] +=`` the kept values of metadata bytes ``b0..b1`` of
        row ``r`` (four each: columns ``8 b + p``) times their ``xt`` rows' same columns."""
        sig = types.none(xt, values, meta, outt, r, b0, b1, i0)

        def codegen(context, builder, signature, args):
            if wide:    # keep the 512-bit types whole (see _pool.wide_vectors)
                _pool.allow_512_bit(builder)
            intp = context.get_value_type(types.intp)
            arrs = [context.make_array(t)(context, builder, a)
                    for t, a in zip(signature.args[:4], args[:4])]
            r_, b0_, b1_, i0_ = (context.cast(builder, a, t, types.intp)
                                 for a, t in zip(args[4:], signature.args[4:]))
            strides = [cgutils.unpack_tuple(builder, a.strides, 2)[0] for a in arrs]
            i8p = _I8.as_pointer()
            ptr = [builder.bitcast(a.data, i8p) for a in arrs]
            c4 = ir.Constant(intp, 4)
            col0 = builder.mul(i0_, c4)                              # the tile's byte offset
            px = builder.gep(ptr[0], [col0])
            pv = builder.gep(ptr[1], [builder.mul(r_, strides[1])])
            pm = builder.gep(ptr[2], [builder.mul(r_, strides[2])])
            po = builder.gep(ptr[3], [builder.add(builder.mul(r_, strides[3]), col0)])
            fma = _declare(builder.module, f"llvm.fma.v{lanes}f32", vf, [vf, vf, vf])

            def vec_ptr(p, v):
                return builder.bitcast(builder.gep(p, [ir.Constant(intp, 4 * lanes * v)]),
                                       vf.as_pointer())

            accs = [cgutils.alloca_once(builder, vf) for _ in range(nv)]
            for v, a in enumerate(accs):
                builder.store(builder.load(vec_ptr(po, v), align=4), a)
            with cgutils.for_range(builder, builder.sub(b1_, b0_)) as loop:
                b = builder.add(b0_, loop.index)
                m = builder.zext(builder.load(builder.gep(pm, [b])), intp)
                # kept value j of the byte's two groups sits at column 8 b + 4 (j // 2) + p_j
                for j in range(4):
                    p = builder.and_(builder.lshr(m, ir.Constant(intp, 2 * j)), ir.Constant(intp, 3))
                    col = builder.add(builder.add(builder.mul(b, ir.Constant(intp, 8)), p),
                                      ir.Constant(intp, 4 * (j // 2)))
                    xrow = builder.gep(px, [builder.mul(col, strides[0])])
                    voff = builder.mul(builder.add(builder.mul(b, c4), ir.Constant(intp, j)), c4)
                    val = builder.load(builder.bitcast(builder.gep(pv, [voff]), _F32.as_pointer()))
                    vv = _broadcast(builder, val, vf)
                    for v, a in enumerate(accs):
                        xv = builder.load(vec_ptr(xrow, v), align=4)
                        builder.store(builder.call(fma, [vv, xv, builder.load(a)]), a)
            for v, a in enumerate(accs):
                builder.store(builder.load(a), vec_ptr(po, v), align=4)
            return context.get_dummy_value()

        return sig, codegen

    return tile_kernel


_tile_avx512, _one_avx512 = _make_tile("avx512", TILE_VECTORS), _make_tile("avx512", 1)
_tile_avx2, _one_avx2 = _make_tile("avx2", TILE_VECTORS), _make_tile("avx2", 1)


@njit(cache=True, nogil=True, inline="always")
def _zero_rows(outt, r0, r1):
    for r in range(r0, r1):
        for i in range(outt.shape[1]):
            outt[r, i] = 0


@njit(cache=True, nogil=True, inline="always")
def _odd_group(xt, values, meta, outt, r0, r1):
    """A last group alone in its metadata byte (columns % 8 == 4): two axpys per row."""
    pairs = values.shape[1] // 4
    for r in range(r0, r1):
        m = np.int64(meta[r, pairs])
        xa = xt[8 * pairs + (m & 3)]
        xb = xt[8 * pairs + ((m >> 2) & 3)]
        va, vb = values[r, 4 * pairs], values[r, 4 * pairs + 1]
        for i in range(outt.shape[1]):
            outt[r, i] += va * xa[i] + vb * xb[i]


# one chunk loop per variant (compiled on first call only, so only where the CPU runs it); the
# arguments are those of _products.gemm_t

@njit(cache=True, nogil=True)
def _part_avx512(xt, values, meta, outt, block, chunk, ctr, n_chunks, wait):
    rows, batch = values.shape[0], xt.shape[1]
    pairs = values.shape[1] // 4
    wide = 16 * TILE_VECTORS
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        r0, r1 = c * chunk, min(rows, (c + 1) * chunk)
        _zero_rows(outt, r0, r1)
        for b0 in range(0, pairs, block):
            b1 = min(pairs, b0 + block)
            for r in range(r0, r1):
                i0 = 0
                while i0 + wide <= batch:
                    _tile_avx512(xt, values, meta, outt, r, b0, b1, i0)
                    i0 += wide
                while i0 < batch:
                    _one_avx512(xt, values, meta, outt, r, b0, b1, i0)
                    i0 += 16
        if values.shape[1] % 4:
            _odd_group(xt, values, meta, outt, r0, r1)
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)


@njit(cache=True, nogil=True)
def _part_avx2(xt, values, meta, outt, block, chunk, ctr, n_chunks, wait):
    rows, batch = values.shape[0], xt.shape[1]
    pairs = values.shape[1] // 4
    wide = 8 * TILE_VECTORS
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        r0, r1 = c * chunk, min(rows, (c + 1) * chunk)
        _zero_rows(outt, r0, r1)
        for b0 in range(0, pairs, block):
            b1 = min(pairs, b0 + block)
            for r in range(r0, r1):
                i0 = 0
                while i0 + wide <= batch:
                    _tile_avx2(xt, values, meta, outt, r, b0, b1, i0)
                    i0 += wide
                while i0 < batch:
                    _one_avx2(xt, values, meta, outt, r, b0, b1, i0)
                    i0 += 8
        if values.shape[1] % 4:
            _odd_group(xt, values, meta, outt, r0, r1)
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)


PARTS = {"avx512": _part_avx512, "avx2": _part_avx2}
