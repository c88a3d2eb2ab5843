"""Explicit SIMD for the 2:4 GEMV (float32), picked at run time from the CPU's features.

The portable GEMV (``_products.py``) picks each kept value's input with selects over the 8
inputs of a metadata byte, four rows at a time; it ran 1.13x the dense GEMV where the bytes
allow 1.88x. Here the selection is one permute: per vector of kept values (16 at 512 bits,
covering 32 input columns), the metadata word is broadcast to every lane and shifted by
``2 * lane`` (value ``j``'s 2-bit position sits at bit ``2 j`` of the little-endian word,
see ``reference.py``), masked, and added to ``4 * (j // 2)``: the lane's column in the
32-column window, and ``vpermt2ps`` (two-source permute) fetches those inputs from two
registers. At 256 bits (AVX2) lanes 0-3 come from the window's first 8 columns and lanes 4-7
from the next 8, so two ``vpermps`` and a fixed blend do it. One multiply-add per vector into
one of two accumulators, one row at a time (one sequential stream of values and metadata),
one horizontal sum per row; the last values that do not fill a vector are summed in numba.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .. import _pool
from ..quant._simd_ir import host_features

#: name -> (kept values per vector, CPU features needed)
VARIANTS = {"avx512": (16, ("avx512f",)), "avx2": (8, ("avx2", "fma"))}

_I8, _I16, _I32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)
_F32 = ir.FloatType()


def available(name: str) -> bool:
    """Whether the CPU numba compiles for has variant ``name``'s instructions."""
    feats = host_features()
    return all(feats.get(f, False) for f in VARIANTS[name][1])


def usable(name: str, dtype) -> bool:
    return dtype == np.float32


def _declare(module, name, ret, args):
    return cgutils.get_or_insert_function(module, ir.FunctionType(ret, args), name)


def _const(vt, values):
    return ir.Constant(vt, list(values))


def _make_row(name: str):
    lanes = VARIANTS[name][0]
    vi = ir.VectorType(_I32, lanes)
    vf = ir.VectorType(_F32, lanes)
    wide = lanes == 16
    meta_bytes = lanes // 4          # 2 bits per kept value
    meta_t = _I32 if meta_bytes == 4 else _I16

    @intrinsic
    def row_kernel(typingctx, x, values, meta, r):
        """``sum`` over the first ``lanes * (K/2 // lanes)`` kept values of row ``r`` of
        value * its input (float32)."""
        sig = types.float32(x, values, meta, r)

        def codegen(context, builder, signature, args):
            if wide:    # keep the 512-bit types whole (see _pool.wide_vectors)
                _pool.allow_512_bit(builder)
            mod = builder.module
            intp = context.get_value_type(types.intp)
            xa, va, ma = (context.make_array(t)(context, builder, a)
                          for t, a in zip(signature.args[:3], args[:3]))
            r_ = context.cast(builder, args[3], signature.args[3], types.intp)
            nvals = cgutils.unpack_tuple(builder, va.shape, 2)[1]
            v_stride = cgutils.unpack_tuple(builder, va.strides, 2)[0]
            m_stride = cgutils.unpack_tuple(builder, ma.strides, 2)[0]
            i8p = _I8.as_pointer()
            px = builder.bitcast(xa.data, i8p)
            pv = builder.gep(builder.bitcast(va.data, i8p), [builder.mul(r_, v_stride)])
            pm = builder.gep(builder.bitcast(ma.data, i8p), [builder.mul(r_, m_stride)])
            fma = _declare(mod, f"llvm.fma.v{lanes}f32", vf, [vf, vf, vf])
            if wide:
                perm2 = _declare(mod, "llvm.x86.avx512.vpermi2var.ps.512", vf, [vf, vi, vf])
            else:
                perm = _declare(mod, "llvm.x86.avx2.permps", vf, [vf, vi])
            shifts = _const(vi, (2 * j for j in range(lanes)))
            base = _const(vi, (4 * (j // 2) for j in range(lanes)))
            three = _const(vi, [3] * lanes)
            zero_f = ir.Constant(vf, [0.0] * lanes)
            accs = [cgutils.alloca_once_value(builder, zero_f) for _ in range(2)]
            for a in accs:
                builder.store(zero_f, a)
            steps = builder.udiv(nvals, ir.Constant(intp, lanes))

            def step(s, acc):
                vals = builder.load(builder.bitcast(
                    builder.gep(pv, [builder.mul(s, ir.Constant(intp, 4 * lanes))]),
                    vf.as_pointer()), align=4)
                word = builder.load(builder.bitcast(
                    builder.gep(pm, [builder.mul(s, ir.Constant(intp, meta_bytes))]),
                    meta_t.as_pointer()), align=1)
                word = builder.zext(word, _I32) if meta_t is not _I32 else word
                wv = builder.insert_element(ir.Constant(vi, ir.Undefined), word,
                                            ir.Constant(_I32, 0))
                wv = builder.shuffle_vector(wv, wv, _const(vi, [0] * lanes))
                pos = builder.and_(builder.lshr(wv, shifts), three)
                idx = builder.add(pos, base)
                xoff = builder.mul(s, ir.Constant(intp, 2 * lanes * 4))   # 2 columns per value
                xlo = builder.load(builder.bitcast(builder.gep(px, [xoff]), vf.as_pointer()), align=4)
                xhi = builder.load(builder.bitcast(
                    builder.gep(px, [builder.add(xoff, ir.Constant(intp, lanes * 4))]),
                    vf.as_pointer()), align=4)
                if wide:
                    xs = builder.call(perm2, [xlo, idx, xhi])
                else:   # lanes 0-3 lie in the first 8 columns, lanes 4-7 in the next 8
                    a = builder.call(perm, [xlo, idx])
                    b = builder.call(perm, [xhi, builder.sub(idx, _const(vi, [8] * lanes))])
                    xs = builder.shuffle_vector(a, b, _const(vi, [0, 1, 2, 3, 12, 13, 14, 15]))
                builder.store(builder.call(fma, [vals, xs, builder.load(acc)]), acc)

            # two steps per iteration into two accumulators (two FMA chains)
            pairs = builder.udiv(steps, ir.Constant(intp, 2))
            with cgutils.for_range(builder, pairs) as loop:
                s0 = builder.mul(loop.index, ir.Constant(intp, 2))
                step(s0, accs[0])
                step(builder.add(s0, ir.Constant(intp, 1)), accs[1])
            odd = builder.icmp_unsigned("!=", builder.urem(steps, ir.Constant(intp, 2)),
                                        ir.Constant(intp, 0))
            with builder.if_then(odd):
                step(builder.sub(steps, ir.Constant(intp, 1)), accs[0])
            v = builder.fadd(builder.load(accs[0]), builder.load(accs[1]))
            n = lanes
            while n > 1:
                n //= 2
                lo = builder.shuffle_vector(v, v, _const(ir.VectorType(_I32, n), range(n)))
                hi = builder.shuffle_vector(v, v, _const(ir.VectorType(_I32, n), range(n, 2 * n)))
                v = builder.fadd(lo, hi)
            return builder.extract_element(v, ir.Constant(_I32, 0))

        return sig, codegen

    return row_kernel


_row_avx512 = _make_row("avx512")
_row_avx2 = _make_row("avx2")


@njit(cache=True, nogil=True, inline="always")
def _tail(x, values, meta, r, j0):
    """The kept values of row ``r`` from ``j0`` on, one at a time (fewer than a vector)."""
    acc = np.float32(0)
    for j in range(j0, values.shape[1]):
        g = j // 2
        pos = (np.int64(meta[r, g // 2]) >> (4 * (g % 2) + 2 * (j % 2))) & 3
        acc += values[r, j] * x[4 * g + pos]
    return acc


# one chunk loop per variant (compiled on first call only, so only where the CPU runs it)

@njit(cache=True, nogil=True)
def _part_avx512(x, values, meta, out, chunk, ctr, n_chunks, wait):
    rows = values.shape[0]
    j0 = values.shape[1] - values.shape[1] % 16
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        for r in range(c * chunk, min(rows, (c + 1) * chunk)):
            out[r] = _row_avx512(x, values, meta, r) + _tail(x, values, meta, r, j0)
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)


@njit(cache=True, nogil=True)
def _part_avx2(x, values, meta, out, chunk, ctr, n_chunks, wait):
    rows = values.shape[0]
    j0 = values.shape[1] - values.shape[1] % 8
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        for r in range(c * chunk, min(rows, (c + 1) * chunk)):
            out[r] = _row_avx2(x, values, meta, r) + _tail(x, values, meta, r, j0)
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)


PARTS = {"avx512": _part_avx512, "avx2": _part_avx2}
