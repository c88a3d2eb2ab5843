"""Explicit SIMD for the int8 weight-only GEMV (float32 activations), picked at run time.

The portable GEMV (``cpu.py``) reads four weight rows at once and reached about 56 % of the
read bandwidth on one thread (8 layers of 4096 x 4096: 8.5 ms against 4.8 ms for a plain sum
of the same bytes). Here one row at a time is one sequential stream (as the int4 GEMV,
``simd.py``), in LLVM vector IR: per vector of packed bytes, four sign-extending loads to
int32 lanes, four conversions and four multiply-adds into four independent float
accumulators; the row's scale and the horizontal sum once per row. The activations stay
float32 (an int8 weight-only layer keeps its 0.5 % error; no rounding of ``x``).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .. import _pool
from ._simd_ir import _F32, _I8, _I32, _declare, _hsum, _vconst, host_features

#: name -> (vector bytes per step, CPU features needed)
VARIANTS = {"avx512": (64, ("avx512f",)), "avx2": (32, ("avx2", "fma"))}


def available(name: str) -> bool:
    feats = host_features()
    return all(feats.get(f, False) for f in VARIANTS[name][1])


def usable(name: str, k: int, dtype) -> bool:
    """float32 activations and rows of whole steps (``k`` a multiple of the step's bytes)."""
    return dtype == np.float32 and k % VARIANTS[name][0] == 0


def _make_row(name: str):
    vbytes = VARIANTS[name][0]
    lanes = vbytes // 4           # four sub-vectors per step, one int32 / float lane per byte
    vb = ir.VectorType(_I8, lanes)
    vi = ir.VectorType(_I32, lanes)
    vf = ir.VectorType(_F32, lanes)
    wide = vbytes == 64

    @intrinsic
    def row_kernel(typingctx, x, q, n):
        """``sum_k x[k] * q[n, k]`` (float32; ``x`` float32 ``[K]``, ``q`` int8 ``[N, K]``)."""
        sig = types.float32(x, q, n)

        def codegen(context, builder, signature, args):
            if wide:    # keep the 512-bit types whole (see _pool.wide_vectors)
                _pool.allow_512_bit(builder)
            intp = context.get_value_type(types.intp)
            xa = context.make_array(signature.args[0])(context, builder, args[0])
            qa = context.make_array(signature.args[1])(context, builder, args[1])
            n_ = context.cast(builder, args[2], signature.args[2], types.intp)
            k = cgutils.unpack_tuple(builder, qa.shape, 2)[1]
            q_stride = cgutils.unpack_tuple(builder, qa.strides, 2)[0]
            px = builder.bitcast(xa.data, _I8.as_pointer())
            pq = builder.gep(builder.bitcast(qa.data, _I8.as_pointer()), [builder.mul(n_, q_stride)])
            fma = _declare(builder.module, f"llvm.fma.v{lanes}f32", vf, [vf, vf, vf])
            accs = [cgutils.alloca_once_value(builder, _vconst(vf, 0.0)) for _ in range(4)]
            for a in accs:
                builder.store(_vconst(vf, 0.0), a)
            steps = builder.udiv(k, ir.Constant(intp, vbytes))
            with cgutils.for_range(builder, steps) as loop:
                off = builder.mul(loop.index, ir.Constant(intp, vbytes))
                for j, a in enumerate(accs):
                    o = builder.add(off, ir.Constant(intp, j * lanes))
                    w = builder.load(builder.bitcast(builder.gep(pq, [o]), vb.as_pointer()), align=1)
                    wf = builder.sitofp(builder.sext(w, vi), vf)
                    xo = builder.mul(o, ir.Constant(intp, 4))
                    xv = builder.load(builder.bitcast(builder.gep(px, [xo]), vf.as_pointer()), align=4)
                    builder.store(builder.call(fma, [wf, xv, builder.load(a)]), a)
            total = builder.fadd(builder.fadd(builder.load(accs[0]), builder.load(accs[1])),
                                 builder.fadd(builder.load(accs[2]), builder.load(accs[3])))
            return _hsum(builder, total)

        return sig, codegen

    return row_kernel


_row_avx512 = _make_row("avx512")
_row_avx2 = _make_row("avx2")


# one chunk loop per variant (compiled on first call only, so only where the CPU runs it)

@njit(cache=True, nogil=True)
def _part_avx512(x, q, scale, out, chunk, ctr, n_chunks, wait):
    n_total = q.shape[0]
    xv = x[0]
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        for n in range(c * chunk, min(n_total, (c + 1) * chunk)):
            out[0, n] = _row_avx512(xv, q, n) * scale[n]
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)


@njit(cache=True, nogil=True)
def _part_avx2(x, q, scale, out, chunk, ctr, n_chunks, wait):
    n_total = q.shape[0]
    xv = x[0]
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        for n in range(c * chunk, min(n_total, (c + 1) * chunk)):
            out[0, n] = _row_avx2(xv, q, n) * scale[n]
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)


PARTS = {"avx512": _part_avx512, "avx2": _part_avx2}
