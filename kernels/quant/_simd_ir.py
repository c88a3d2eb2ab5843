"""LLVM vector IR for the explicit-SIMD int4 GEMV (``simd.py``): the variants, the CPU feature
query and the row-kernel intrinsics, built with llvmlite's IR builder inside numba intrinsics
(see ``simd.py`` for the method and the measurements)."""
from __future__ import annotations

from llvmlite import binding as _ll
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .. import _pool
from .packing import INT4_IL_BYTES as IL_BYTES, INT4_IL_ROWS as IL_ROWS, INT4_SYMMETRIC_ZERO

#: name -> (vector bytes, dot-product kind, CPU features needed (any one of the tuples))
VARIANTS = {
    "avx512-vnni": (64, "vnni", (("avx512vnni", "avx512bw"),)),
    "avx512bw": (64, "maddubs", (("avx512bw",),)),
    "avx-vnni": (32, "vnni", (("avxvnni",), ("avx512vnni", "avx512vl"))),
    "avx2": (32, "maddubs", (("avx2",),)),
}


def host_features() -> dict:
    """The CPU features numba compiles for: ``NUMBA_CPU_FEATURES`` when set (e.g. to build a
    cache that runs on older CPUs), else the host's (llvmlite's feature query). A variant
    is only picked when these have its instructions, or LLVM could not select them."""
    from numba.core import config
    if config.CPU_FEATURES is not None:
        return {f[1:]: f[0] == "+" for f in config.CPU_FEATURES.split(",") if len(f) > 1}
    try:
        return dict(_ll.get_host_cpu_features())
    except Exception:       # pragma: no cover - feature query unsupported
        return {}


# ---- the row kernels -------------------------------------------------------------------------

_I8, _I16, _I32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)
_F32 = ir.FloatType()


def _declare(module, name, ret, args):
    return cgutils.get_or_insert_function(module, ir.FunctionType(ret, args), name)


def _vconst(vt, value):
    return ir.Constant(vt, [value] * vt.count)


def _broadcast(builder, scalar, vt):
    v = builder.insert_element(ir.Constant(vt, ir.Undefined), scalar, ir.Constant(_I32, 0))
    return builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(_I32, vt.count), [0] * vt.count))


def _hsum(builder, v):
    """Horizontal float sum by halving (log2(lanes) shuffles and adds), once per row."""
    n = v.type.count
    while n > 1:
        n //= 2
        lo = builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(_I32, n), list(range(n))))
        hi = builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(_I32, n), list(range(n, 2 * n))))
        v = builder.fadd(lo, hi)
    return builder.extract_element(v, ir.Constant(_I32, 0))


def _make_rows(name: str, rows: int, interleaved: bool = False, tokens: int = 1):
    """An intrinsic ``rows_kernel(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros,
    has_zeros, group_size, n, m, res)``: ``res[t * rows + r]`` = output ``[m + t, n + r]``
    (float32) for ``rows`` rows and ``tokens`` tokens (the activation arrays are ``[M, ...]``;
    each unpacked weight vector serves every token).
    ``group_size`` (32, 64 or 128) and ``has_zeros`` are run-time values; the IR holds one loop
    per combination (the group layout fixes the lane -> group map at compile time).
    ``interleaved``: ``packed`` is in the ``"rows4x64"`` layout (:mod:`.packing`), ``rows`` 4
    and ``n`` a multiple of 4."""
    assert not interleaved or rows == IL_ROWS
    vbytes, dot_kind, _ = VARIANTS[name]
    lanes = vbytes // 4
    vb = ir.VectorType(_I8, vbytes)
    vi = ir.VectorType(_I32, lanes)
    vf = ir.VectorType(_F32, lanes)
    wide = vbytes == 64

    # prefer_literal: a caller that passes has_zeros and group_size as literals (the chunk
    # loops do, through numba.literally) gets the one loop it uses, not all six (compile time)
    @intrinsic(prefer_literal=True)
    def rows_kernel(typingctx, xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros,
                    has_zeros, group_size, n, m, res):
        sig = types.none(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                         group_size, n, m, res)

        def codegen(context, builder, signature, args):
            if wide:    # let LLVM keep the 512-bit types whole (see _pool.wide_vectors)
                _pool.allow_512_bit(builder)
            mod = builder.module
            intp = context.get_value_type(types.intp)
            arrs = [context.make_array(t)(context, builder, a)
                    for t, a in zip(signature.args[:7], args[:7])]
            ptr = [builder.bitcast(a.data, _I8.as_pointer()) for a in arrs]
            p_w, p_s, p_z = ptr[4:]
            w_stride = cgutils.unpack_tuple(builder, arrs[4].strides, 2)[0]
            s_stride = cgutils.unpack_tuple(builder, arrs[5].strides, 2)[0]
            z_stride = cgutils.unpack_tuple(builder, arrs[6].strides, 2)[0]
            has_z = context.cast(builder, args[7], signature.args[7], types.boolean)
            gs = context.cast(builder, args[8], signature.args[8], types.intp)
            n0 = context.cast(builder, args[9], signature.args[9], types.intp)
            m0 = context.cast(builder, args[10], signature.args[10], types.intp)
            res = context.make_array(signature.args[11])(context, builder, args[11])
            # token t's activation rows: [M, K // 2] int8 twice, [M, K // 8] int32 and float32
            x_strides = [cgutils.unpack_tuple(builder, a.strides, 2)[0] for a in arrs[:4]]
            tok = [[builder.gep(p, [builder.mul(builder.add(m0, ir.Constant(intp, t)), st)])
                    for t in range(tokens)] for p, st in zip(ptr[:4], x_strides)]
            k2 = cgutils.unpack_tuple(builder, arrs[4].shape, 2)[1]       # packed bytes per row
            nchunks = builder.udiv(k2, ir.Constant(intp, vbytes))

            if dot_kind == "vnni":
                vdp = _declare(mod, f"llvm.x86.avx512.vpdpbusd.{vbytes * 8}", vi, [vi, vi, vi])
            else:
                vh = ir.VectorType(_I16, vbytes // 2)
                if wide:
                    maddubs = _declare(mod, "llvm.x86.avx512.pmaddubs.w.512", vh, [vb, vb])
                    maddwd = _declare(mod, "llvm.x86.avx512.pmaddw.d.512", vi, [vh, vh])
                else:
                    maddubs = _declare(mod, "llvm.x86.avx2.pmadd.ub.sw", vh, [vb, vb])
                    maddwd = _declare(mod, "llvm.x86.avx2.pmadd.wd", vi, [vh, vh])
                ones16 = _vconst(vh, 1)
            fma = _declare(mod, f"llvm.fma.v{lanes}f32", vf, [vf, vf, vf])
            mask15 = _vconst(vb, 15)
            four = _vconst(vb, 4)

            def load(p, off, vt, align=1):
                return builder.load(builder.bitcast(builder.gep(p, [off]), vt.as_pointer()),
                                    align=align)

            def dot(acc, codes, xq):
                if dot_kind == "vnni":
                    return builder.call(vdp, [acc, builder.bitcast(codes, vi),
                                              builder.bitcast(xq, vi)])
                pairs = builder.add(builder.call(maddubs, [codes[0], xq[0]]),
                                    builder.call(maddubs, [codes[1], xq[1]]))
                return builder.add(acc, builder.call(maddwd, [pairs, ones16]))

            def group_vector(p, row_off, c, g, elem, convert):
                """The per-lane value of chunk ``c`` of a per-group array (scales or zeros)."""
                per = g // 2                       # packed bytes per group
                esize = 4 if elem == _F32 else elem.width // 8
                if per >= vbytes:                  # the chunk lies in one group: broadcast
                    gi = builder.udiv(builder.mul(c, ir.Constant(intp, vbytes)),
                                      ir.Constant(intp, per))
                    off = builder.add(row_off, builder.mul(gi, ir.Constant(intp, esize)))
                    s = builder.load(builder.bitcast(builder.gep(p, [off]), elem.as_pointer()),
                                     align=1)
                    if convert is None:
                        return _broadcast(builder, s, vf)
                    return _broadcast(builder, convert(s), vi)
                gpc = vbytes // per                # groups in one chunk
                vt = ir.VectorType(elem, gpc)
                off = builder.add(row_off, builder.mul(c, ir.Constant(intp, gpc * esize)))
                v = load(p, off, vt)
                v = convert(v) if convert is not None else v
                mask = ir.Constant(ir.VectorType(_I32, lanes),
                                   [lane * 4 // per for lane in range(lanes)])
                return builder.shuffle_vector(v, v, mask)

            def zext_i32(v):
                if isinstance(v.type, ir.VectorType):
                    return builder.zext(v, ir.VectorType(_I32, v.type.count))
                return builder.zext(v, _I32)

            def loop_for(g, with_zeros):
                tot = [[cgutils.alloca_once_value(builder, _vconst(vf, 0.0)) for _ in range(rows)]
                       for _ in range(tokens)]
                for per_token in tot:
                    for a in per_token:
                        builder.store(_vconst(vf, 0.0), a)
                if interleaved:     # the block starts where its first row would
                    w_rows = [builder.add(builder.mul(n0, w_stride), ir.Constant(intp, r * IL_BYTES))
                              for r in range(rows)]
                else:
                    w_rows = [builder.mul(builder.add(n0, ir.Constant(intp, r)), w_stride)
                              for r in range(rows)]
                s_rows = [builder.mul(builder.add(n0, ir.Constant(intp, r)), s_stride)
                          for r in range(rows)]
                z_rows = [builder.mul(builder.add(n0, ir.Constant(intp, r)), z_stride)
                          for r in range(rows)]
                with cgutils.for_range(builder, nchunks) as loop:
                    c = loop.index
                    boff = builder.mul(c, ir.Constant(intp, vbytes))
                    if interleaved:     # chunk boff // 64 of the block, then boff % 64 into it
                        woff = builder.add(
                            builder.mul(builder.lshr(boff, ir.Constant(intp, 6)),
                                        ir.Constant(intp, IL_ROWS * IL_BYTES)),
                            builder.and_(boff, ir.Constant(intp, IL_BYTES - 1)))
                    else:
                        woff = boff
                    loff = builder.mul(c, ir.Constant(intp, vbytes))      # lanes * 4 bytes
                    xs = []     # per token: low and high streams, lane sums, lane scales
                    for t in range(tokens):
                        xs.append((load(tok[0][t], boff, vb), load(tok[1][t], boff, vb),
                                   load(tok[2][t], loff, vi), load(tok[3][t], loff, vf)))
                    if not with_zeros:
                        inits = [builder.mul(x[2], _vconst(vi, -INT4_SYMMETRIC_ZERO)) for x in xs]
                    for r in range(rows):
                        w = load(p_w, builder.add(w_rows[r], woff), vb)
                        lo = builder.and_(w, mask15)
                        hi = builder.and_(builder.lshr(w, four), mask15)
                        if with_zeros:
                            z = group_vector(p_z, z_rows[r], c, g, _I8, zext_i32)
                        sw = group_vector(p_s, s_rows[r], c, g, _F32, None)
                        for t, (xlo, xhi, lsum, lscl) in enumerate(xs):
                            if with_zeros:
                                acc = builder.sub(_vconst(vi, 0), builder.mul(z, lsum))
                            else:
                                acc = inits[t]
                            if dot_kind == "vnni":
                                acc = dot(dot(acc, lo, xlo), hi, xhi)
                            else:
                                acc = dot(acc, (lo, hi), (xlo, xhi))
                            f = builder.sitofp(acc, vf)
                            a = tot[t][r]
                            builder.store(builder.call(fma, [f, builder.fmul(sw, lscl),
                                                             builder.load(a)]), a)
                for t in range(tokens):
                    for r in range(rows):
                        out_ptr = cgutils.get_item_pointer(context, builder, signature.args[11], res,
                                                           [ir.Constant(intp, t * rows + r)])
                        builder.store(_hsum(builder, builder.load(tot[t][r])), out_ptr)

            zp_t, g_t = signature.args[7], signature.args[8]
            if isinstance(zp_t, types.BooleanLiteral) and isinstance(g_t, types.IntegerLiteral):
                loop_for(g_t.literal_value, zp_t.literal_value)
                return context.get_dummy_value()
            # else one loop per (group size, zero point); unknown group sizes were rejected upstream
            for g in (32, 64, 128):
                with builder.if_then(builder.icmp_signed("==", gs, ir.Constant(intp, g))):
                    with builder.if_else(has_z) as (then, otherwise):
                        with then:
                            loop_for(g, True)
                        with otherwise:
                            loop_for(g, False)
            return context.get_dummy_value()

        return sig, codegen

    return rows_kernel
