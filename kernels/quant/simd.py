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
from llvmlite import binding as _ll
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .. import _pool
from .packing import INT4_BLOCK, INT4_IL_BYTES as IL_BYTES, INT4_IL_ROWS as IL_ROWS, INT4_SYMMETRIC_ZERO

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
    """For a float ``x [K]``: ``xq_lo``, ``xq_hi`` (int8 ``[K // 2]``: the first and second 16
    values of each 32-block, matching the low and high nibbles of a packed byte), per int32
    lane of 4 packed bytes ``lane_sum`` (int32 ``[K // 8]``: the lane's 8 activation codes
    summed, for the zero point) and ``lane_scale`` (float32 ``[K // 8]``: its block's scale)."""
    k = x.shape[0]
    h = INT4_BLOCK // 2
    xq_lo = np.empty(k // 2, np.int8)
    xq_hi = np.empty(k // 2, np.int8)
    lane_sum = np.empty(k // 8, np.int32)
    lane_scale = np.empty(k // 8, np.float32)
    for b in range(k // INT4_BLOCK):
        amax = 0.0
        for j in range(INT4_BLOCK):
            amax = max(amax, abs(np.float64(x[b * INT4_BLOCK + j])))
        s = np.float32(amax / 127.0)
        inv = 127.0 / amax if amax > 0 else 0.0
        for j in range(h):
            xq_lo[b * h + j] = np.int8(np.rint(np.float64(x[b * INT4_BLOCK + j]) * inv))
            xq_hi[b * h + j] = np.int8(np.rint(np.float64(x[b * INT4_BLOCK + h + j]) * inv))
        for lane in range(b * 4, b * 4 + 4):
            acc = np.int32(0)
            for j in range(4 * lane, 4 * lane + 4):
                acc += np.int32(xq_lo[j]) + np.int32(xq_hi[j])
            lane_sum[lane] = acc
            lane_scale[lane] = s
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


# ---- the row kernels, in LLVM IR ---------------------------------------------------------------

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


def _make_rows(name: str, rows: int, interleaved: bool = False):
    """An intrinsic ``rows_kernel(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros,
    has_zeros, group_size, n, res)``: ``res[r]`` = output ``n + r`` (float32) for ``rows`` rows.
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

    @intrinsic
    def rows_kernel(typingctx, xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros,
                    has_zeros, group_size, n, res):
        sig = types.none(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                         group_size, n, res)

        def codegen(context, builder, signature, args):
            if wide:    # let LLVM keep the 512-bit types whole (see _pool.wide_vectors)
                attrs = builder.function.attributes
                set.add(attrs, '"prefer-vector-width"="512"')
                set.add(attrs, '"min-legal-vector-width"="512"')
            mod = builder.module
            intp = context.get_value_type(types.intp)
            arrs = [context.make_array(t)(context, builder, a)
                    for t, a in zip(signature.args[:7], args[:7])]
            ptr = [builder.bitcast(a.data, _I8.as_pointer()) for a in arrs]
            p_lo, p_hi, p_sum, p_scl, p_w, p_s, p_z = ptr
            w_stride = cgutils.unpack_tuple(builder, arrs[4].strides, 2)[0]
            s_stride = cgutils.unpack_tuple(builder, arrs[5].strides, 2)[0]
            z_stride = cgutils.unpack_tuple(builder, arrs[6].strides, 2)[0]
            has_z = context.cast(builder, args[7], signature.args[7], types.boolean)
            gs = context.cast(builder, args[8], signature.args[8], types.intp)
            n0 = context.cast(builder, args[9], signature.args[9], types.intp)
            res = context.make_array(signature.args[10])(context, builder, args[10])
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
                    gi = builder.udiv(builder.mul(c, ir.Constant(intp, vbytes)), ir.Constant(intp, per))
                    s = builder.load(builder.bitcast(
                        builder.gep(p, [builder.add(row_off, builder.mul(gi, ir.Constant(intp, esize)))]),
                        elem.as_pointer()), align=1)
                    if convert is None:
                        return _broadcast(builder, s, vf)
                    return _broadcast(builder, convert(s), vi)
                gpc = vbytes // per                # groups in one chunk
                vt = ir.VectorType(elem, gpc)
                off = builder.add(row_off, builder.mul(c, ir.Constant(intp, gpc * esize)))
                v = load(p, off, vt)
                v = convert(v) if convert is not None else v
                mask = ir.Constant(ir.VectorType(_I32, lanes), [lane * 4 // per for lane in range(lanes)])
                return builder.shuffle_vector(v, v, mask)

            def zext_i32(v):
                if isinstance(v.type, ir.VectorType):
                    return builder.zext(v, ir.VectorType(_I32, v.type.count))
                return builder.zext(v, _I32)

            def loop_for(g, with_zeros):
                tot = [cgutils.alloca_once_value(builder, _vconst(vf, 0.0)) for _ in range(rows)]
                for t in tot:
                    builder.store(_vconst(vf, 0.0), t)
                if interleaved:     # the block starts where its first row would
                    w_rows = [builder.add(builder.mul(n0, w_stride), ir.Constant(intp, r * IL_BYTES))
                              for r in range(rows)]
                else:
                    w_rows = [builder.mul(builder.add(n0, ir.Constant(intp, r)), w_stride)
                              for r in range(rows)]
                s_rows = [builder.mul(builder.add(n0, ir.Constant(intp, r)), s_stride) for r in range(rows)]
                z_rows = [builder.mul(builder.add(n0, ir.Constant(intp, r)), z_stride) for r in range(rows)]
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
                    xlo = load(p_lo, boff, vb)
                    xhi = load(p_hi, boff, vb)
                    lsum = load(p_sum, loff, vi)
                    lscl = load(p_scl, loff, vf)
                    if dot_kind == "maddubs":
                        xs = (xlo, xhi)
                    if not with_zeros:
                        init = builder.mul(lsum, _vconst(vi, -INT4_SYMMETRIC_ZERO))
                    for r in range(rows):
                        w = load(p_w, builder.add(w_rows[r], woff), vb)
                        lo = builder.and_(w, mask15)
                        hi = builder.and_(builder.lshr(w, four), mask15)
                        if with_zeros:
                            z = group_vector(p_z, z_rows[r], c, g, _I8, zext_i32)
                            acc = builder.sub(_vconst(vi, 0), builder.mul(z, lsum))
                        else:
                            acc = init
                        if dot_kind == "vnni":
                            acc = dot(dot(acc, lo, xlo), hi, xhi)
                        else:
                            acc = dot(acc, (lo, hi), xs)
                        sw = group_vector(p_s, s_rows[r], c, g, _F32, None)
                        scale = builder.fmul(sw, lscl)
                        f = builder.sitofp(acc, vf)
                        builder.store(builder.call(fma, [f, scale, builder.load(tot[r])]), tot[r])
                for r in range(rows):
                    out_ptr = cgutils.get_item_pointer(context, builder, signature.args[10], res,
                                                       [ir.Constant(intp, r)])
                    builder.store(_hsum(builder, builder.load(tot[r])), out_ptr)

            # one loop per (group size, zero point); unknown group sizes were rejected upstream
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



_avx512_vnni, _avx512_vnni_il = _make_rows("avx512-vnni", 1), _make_rows("avx512-vnni", 4, True)
_avx512bw, _avx512bw_il = _make_rows("avx512bw", 1), _make_rows("avx512bw", 4, True)
_avx_vnni, _avx_vnni_il = _make_rows("avx-vnni", 1), _make_rows("avx-vnni", 4, True)
_avx2, _avx2_il = _make_rows("avx2", 1), _make_rows("avx2", 4, True)


# ---- one chunk loop per variant ----------------------------------------------------------------
#
# Each is the whole GEMV for one thread of _pool's launcher: claim chunks of output rows (whole
# 4-row blocks) and run them. Row-major weights go one row at a time: each row is then one
# sequential stream; four rows at once (four streams 2 KiB apart, each activation load serving
# four rows) ran 2.2x slower from memory (8 layers of 4096 x 4096, 6.8 against 3.1 ms) though
# as fast in cache: the prefetchers lose short streams (software prefetches did not help: 5.4
# ms). The "rows4x64" layout makes a 4-row block one stream, and four rows at a time then ran
# 2.5 against 3.3 ms. The functions differ only in the intrinsics they call (an intrinsic is not
# a first-class value in numba); each is a top-level function so that numba's disk cache keeps
# it, and each is compiled only when first called, so only on a CPU that has its instructions.

@njit(cache=True, nogil=True)
def _part_avx512_vnni(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                      group_size, interleaved, out, chunk, ctr, n_chunks, wait):
    n_total = packed.shape[0]
    res = np.empty(IL_ROWS, np.float32)
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        r1 = min(n_total, (c + 1) * chunk)
        if interleaved:
            for n in range(c * chunk, r1, IL_ROWS):
                _avx512_vnni_il(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros,
                                has_zeros, group_size, n, res)
                out[0, n:n + IL_ROWS] = res
        else:
            for n in range(c * chunk, r1):
                _avx512_vnni(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                             group_size, n, res)
                out[0, n] = res[0]
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)


@njit(cache=True, nogil=True)
def _part_avx512bw(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                   group_size, interleaved, out, chunk, ctr, n_chunks, wait):
    n_total = packed.shape[0]
    res = np.empty(IL_ROWS, np.float32)
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        r1 = min(n_total, (c + 1) * chunk)
        if interleaved:
            for n in range(c * chunk, r1, IL_ROWS):
                _avx512bw_il(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros,
                             has_zeros, group_size, n, res)
                out[0, n:n + IL_ROWS] = res
        else:
            for n in range(c * chunk, r1):
                _avx512bw(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                          group_size, n, res)
                out[0, n] = res[0]
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)


@njit(cache=True, nogil=True)
def _part_avx_vnni(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                   group_size, interleaved, out, chunk, ctr, n_chunks, wait):
    n_total = packed.shape[0]
    res = np.empty(IL_ROWS, np.float32)
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        r1 = min(n_total, (c + 1) * chunk)
        if interleaved:
            for n in range(c * chunk, r1, IL_ROWS):
                _avx_vnni_il(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros,
                             has_zeros, group_size, n, res)
                out[0, n:n + IL_ROWS] = res
        else:
            for n in range(c * chunk, r1):
                _avx_vnni(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                          group_size, n, res)
                out[0, n] = res[0]
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)


@njit(cache=True, nogil=True)
def _part_avx2(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
               group_size, interleaved, out, chunk, ctr, n_chunks, wait):
    n_total = packed.shape[0]
    res = np.empty(IL_ROWS, np.float32)
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        r1 = min(n_total, (c + 1) * chunk)
        if interleaved:
            for n in range(c * chunk, r1, IL_ROWS):
                _avx2_il(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros,
                         has_zeros, group_size, n, res)
                out[0, n:n + IL_ROWS] = res
        else:
            for n in range(c * chunk, r1):
                _avx2(xq_lo, xq_hi, lane_sum, lane_scale, packed, scales, zeros, has_zeros,
                      group_size, n, res)
                out[0, n] = res[0]
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)


PARTS = {"avx512-vnni": _part_avx512_vnni, "avx512bw": _part_avx512bw,
         "avx-vnni": _part_avx_vnni, "avx2": _part_avx2}


def usable(name: str, k: int, dtype) -> bool:
    """Whether variant ``name`` can run a GEMV with ``k`` inputs on ``dtype`` activations:
    float32 only (float64 callers asked for float64 accuracy: the portable kernel), and whole
    vectors of packed bytes per row (``k / 2`` a multiple of the vector's bytes)."""
    return dtype == np.float32 and (k // 2) % VARIANTS[name][0] == 0
