"""The int8 x int8 GEMM's micro-tile in AVX-512 VNNI (``vpdpbusd``), where the CPU has it.

``vpdpbusd`` multiplies 64 unsigned bytes by 64 signed bytes and adds each group of four
products into one of 16 int32 lanes: 64 multiply-adds per instruction, where LLVM's own
vectorisation of the int16-product loop (the portable tile in ``cpu.py``) reaches about 4
(measured: 29 GMAC/s on one core). numba has no vector types, so the tile's loop over ``K`` is
written here in LLVM IR as an intrinsic.

The unsigned operand is the weight with its sign bit flipped (``w ^ 0x80`` = ``w + 128`` as
uint8, codes in [-127, 127] -> [1, 255]), the signed one the activation, so the tile computes
``sum_k (w + 128) x = dot + 128 sum_k x``; the caller subtracts ``128 sum_k x`` (per token,
over the same columns). Every product and partial sum fits int32 (4096 * 255 * 127 < 2^31
with room to spare: the largest ``K`` the tile takes is ``VNNI_MAX_K``), so the result is
exact.
"""
from __future__ import annotations

from llvmlite import binding as _ll
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

#: 4 tokens x 4 output rows per tile, 64 columns per step
TILE_M = 4
TILE_N = 4
STEP = 64
# (w + 128) * x summed over K stays below 2^31: 255 * 127 * K < 2^31
VNNI_MAX_K = (2**31 - 1) // (255 * 127)


def available() -> bool:
    """Whether the host CPU has AVX-512 VNNI (the intrinsic compiles only there)."""
    try:
        return bool(_ll.get_host_cpu_features().get("avx512vnni", False))
    except Exception:       # pragma: no cover - feature query unsupported
        return False


_V64I8 = ir.VectorType(ir.IntType(8), 64)
_V16I32 = ir.VectorType(ir.IntType(32), 16)


def _declare(module, name, ret, args):
    fnty = ir.FunctionType(ret, args)
    fn = cgutils.get_or_insert_function(module, fnty, name)
    return fn


@intrinsic
def vnni_tile(typingctx, xq, wq, m, r, steps, res):
    """``res[4 i + j] = sum_{k < 64 steps} x[m + i, k] * (w[r + j, k] + 128)`` for a 4 x 4 tile
    (``xq [M, K]``, ``wq [N, K]`` int8, C-contiguous; ``res`` int32 ``[16]``)."""
    ok = (isinstance(xq, types.Array) and xq.dtype == types.int8 and xq.ndim == 2
          and isinstance(wq, types.Array) and wq.dtype == types.int8 and wq.ndim == 2
          and isinstance(res, types.Array) and res.dtype == types.int32 and res.ndim == 1)
    if not ok:
        return None

    def codegen(context, builder, sig, args):
        xty, wty, _, _, _, rty = sig.args
        xa = context.make_array(xty)(context, builder, args[0])
        wa = context.make_array(wty)(context, builder, args[1])
        ra = context.make_array(rty)(context, builder, args[5])
        m_, r_ = (context.cast(builder, a, t, types.intp) for a, t in zip(args[2:4], sig.args[2:4]))
        nsteps = context.cast(builder, args[4], sig.args[4], types.intp)
        intp = context.get_value_type(types.intp)
        i8p = ir.IntType(8).as_pointer()
        xs0 = cgutils.unpack_tuple(builder, xa.strides, 2)[0]
        ws0 = cgutils.unpack_tuple(builder, wa.strides, 2)[0]
        xdata = builder.bitcast(xa.data, i8p)
        wdata = builder.bitcast(wa.data, i8p)
        xrows = [builder.gep(xdata, [builder.mul(builder.add(m_, ir.Constant(intp, i)), xs0)])
                 for i in range(TILE_M)]
        wrows = [builder.gep(wdata, [builder.mul(builder.add(r_, ir.Constant(intp, j)), ws0)])
                 for j in range(TILE_N)]
        dp = _declare(builder.module, "llvm.x86.avx512.vpdpbusd.512", _V16I32,
                      [_V16I32, _V16I32, _V16I32])
        red = _declare(builder.module, "llvm.vector.reduce.add.v16i32", ir.IntType(32), [_V16I32])
        accs = [cgutils.alloca_once_value(builder, ir.Constant(_V16I32, None))
                for _ in range(TILE_M * TILE_N)]
        for a in accs:
            builder.store(ir.Constant(_V16I32, [0] * 16), a)
        flip = ir.Constant(_V64I8, [0x80] * 64)
        v64p = _V64I8.as_pointer()
        with cgutils.for_range(builder, nsteps) as loop:
            off = builder.mul(loop.index, ir.Constant(intp, STEP))
            xv = []
            for p in xrows:
                ld = builder.load(builder.bitcast(builder.gep(p, [off]), v64p), align=1)
                xv.append(builder.bitcast(ld, _V16I32))
            wv = []
            for p in wrows:
                ld = builder.load(builder.bitcast(builder.gep(p, [off]), v64p), align=1)
                wv.append(builder.bitcast(builder.xor(ld, flip), _V16I32))
            for i in range(TILE_M):
                for j in range(TILE_N):
                    a = accs[i * TILE_N + j]
                    builder.store(builder.call(dp, [builder.load(a), wv[j], xv[i]]), a)
        rdata = ra.data
        for t, a in enumerate(accs):
            s = builder.call(red, [builder.load(a)])
            builder.store(s, builder.gep(rdata, [ir.Constant(intp, t)]))
        return context.get_dummy_value()

    return types.none(xq, wq, m, r, steps, res), codegen
