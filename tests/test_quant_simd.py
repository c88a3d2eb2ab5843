"""The explicit-SIMD int4 GEMVs (nbaccel_kernels.quant.simd): every variant against the NumPy
reference, where the CPU has its instructions (else skipped, with the reason), and the
portable kernels in the same default mode (float32 activations rounded to int8 per block).

Each path rounds the activations to int8 per 32-value block, so it is held to two bounds:
against the reference run on those rounded activations, the float32 accumulation's 2e-5 (the
integer dot products are exact); against the reference on the float activations, the rounding
error (at most |w| times half an activation step per value: about 0.5 % of the largest
output on these random layers)."""
import numpy as np
import pytest

from nbaccel_kernels.quant import cpu, simd, packing as P, reference as R

RNG = np.random.default_rng(39)
VARIANTS = list(simd.VARIANTS)
PORTABLE = "portable"


def _need(name):
    if not simd.available(name):
        feats = " or ".join("+".join(f) for f in simd.VARIANTS[name][2])
        pytest.skip(f"this CPU lacks {feats} (variant {name})")


@pytest.fixture(params=VARIANTS + [PORTABLE])
def variant(request, monkeypatch):
    monkeypatch.setattr(cpu, "INT4_INT8_ACTIVATIONS", True)
    if request.param == PORTABLE:
        monkeypatch.setattr(cpu, "INT4_GEMV_SIMD", ())
    else:
        _need(request.param)
        monkeypatch.setattr(cpu, "INT4_GEMV_SIMD", (request.param,))
    return request.param


def _err(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype
    return float(np.abs(got.astype(np.float64) - want).max()) / max(float(np.abs(want).max()), 1e-6)


def _check(x, p, s, z, g, b=None, layout="rows"):
    got = cpu.int4_weight_only_matmul(x, p, s, z, g, b, layout=layout)
    if layout != "rows":
        p = P.deinterleave_int4(p)
    rounded = R.int4_weight_only_matmul(simd.dequantized_activations(x), p, s, z, g, b)
    assert _err(got, rounded) < 2e-5
    # the rounding's own bound: |w| times half an activation step, summed over the inputs
    want = R.int4_weight_only_matmul(x, p, s, z, g, b)
    half_step = np.repeat(np.abs(x).reshape(x.shape[0], -1, 32).max(axis=2) / 127 / 2, 32, axis=1)
    bound = half_step @ np.abs(P.dequantize_int4(p, s, z, g)).astype(np.float64).T
    assert np.all(np.abs(got - want) <= bound * (1 + 1e-4) + 2e-5 * np.abs(want).max())
    assert _err(got, want) < 2e-2 or want.size < 8      # about 0.5 % on these random layers
    return got


@pytest.mark.parametrize("n,k,group_size", [(37, 128, 32), (5, 256, 64), (19, 384, 128),
                                            (4, 128, 128), (1, 1024, 64), (64, 4096, 128)])
@pytest.mark.parametrize("zero_point", [False, True])
@pytest.mark.parametrize("m", [1, 4, 7])      # tokens one at a time, four at a time, both
def test_variant_matches_the_reference(variant, n, k, group_size, zero_point, m):
    w, x, b = RNG.standard_normal((n, k), np.float32), RNG.standard_normal((m, k), np.float32), \
        RNG.standard_normal(n, np.float32)
    p, s, z = P.quantize_int4(w, group_size, zero_point)
    _check(x, p, s, z, group_size, b)


def test_variant_ran(variant, monkeypatch):
    """The dispatch really takes the variant (not the portable loop) for a usable shape."""
    if variant == PORTABLE:
        pytest.skip("the portable loop is not one of simd.PARTS")
    called = []
    get = simd.gemv_part
    monkeypatch.setattr(simd, "gemv_part", lambda v, *a: called.append(v) or get(v, *a))
    p, s, z = P.quantize_int4(RNG.standard_normal((8, 256), np.float32), 64)
    _check(RNG.standard_normal((1, 256), np.float32), p, s, z, 64)
    assert called == [variant]


@pytest.mark.parametrize("n", [1, 7, 130])
def test_variant_on_the_chunked_launcher(variant, monkeypatch, n):
    """Many small row chunks on helper threads, odd row counts (a short last chunk)."""
    monkeypatch.setattr(cpu, "PARALLEL_WORK", 0)
    monkeypatch.setattr(cpu, "_threads", lambda: 3)
    monkeypatch.setattr(cpu, "CHUNKS_PER_THREAD", 5)
    for zp in (False, True):
        p, s, z = P.quantize_int4(RNG.standard_normal((n, 256), np.float32), 32, zp)
        for m in (1, 6):
            _check(RNG.standard_normal((m, 256), np.float32), p, s, z, 32)


def test_extreme_codes_and_activations(variant):
    """Codes 0 and 15 against activations at +-max and blocks of zeros: no int16 saturation
    (pmaddubsw) or int32 overflow, and an all-zero block (scale 0) gives exact zeros."""
    k = 4096
    x = np.where(np.arange(k) % 2 == 0, 3.0, -3.0).astype(np.float32)[None]
    x[0, 64:128] = 0
    for code in (0, 15):
        p = P.pack_int4(np.full((6, k), code, np.uint8))
        s = np.full((6, k // 128), 0.5, np.float32)
        for z in (None, np.full((6, k // 128), 3, np.uint8)):
            got = _check(x, p, s, z, 128)
            want = R.int4_weight_only_matmul(x, p, s, z, 128)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-3)
    x[:] = 0
    p, s, z = P.quantize_int4(RNG.standard_normal((3, k), np.float32), 128, True)
    assert not cpu.int4_weight_only_matmul(x, p, s, z, 128).any()


def test_shapes_the_variants_do_not_take_run_the_portable_loop(monkeypatch):
    """float64 activations (exact: the float reference's 2e-5), batches > 1 and rows that are
    not whole vectors of packed bytes (rounded float32 activations) run the portable kernels."""
    for name in VARIANTS:
        assert not simd.usable(name, 4096, np.float64)
    assert not simd.usable("avx512-vnni", 64, np.float32) and simd.usable("avx2", 64, np.float32)
    monkeypatch.setattr(cpu, "INT4_GEMV_SIMD", tuple(VARIANTS))
    called = []
    monkeypatch.setattr(simd, "gemv_part", lambda *a: called.append(1))
    w = RNG.standard_normal((9, 96), np.float32)
    p, s, z = P.quantize_int4(w, 32, True)
    x64 = RNG.standard_normal((1, 96))
    got = cpu.int4_weight_only_matmul(x64, p, s, z, 32)
    assert _err(got, R.int4_weight_only_matmul(x64, p, s, z, 32)) < 2e-5
    for x in (RNG.standard_normal((3, 96), np.float32), RNG.standard_normal((1, 96), np.float32)):
        _check(x, p, s, z, 32)
    assert not called


@pytest.mark.parametrize("group_size", [32, 128])
def test_a_token_gives_the_same_result_alone_and_in_a_batch(variant, group_size):
    """Batch 1, batches of 2..8 (the GEMV, SIMD where the CPU has it) and the GEMM all multiply
    the same rounded activations."""
    w = RNG.standard_normal((24, 512), np.float32)
    p, s, z = P.quantize_int4(w, group_size, True)
    x = RNG.standard_normal((17, 512), np.float32)
    alone = cpu.int4_weight_only_matmul(x[:1], p, s, z, group_size)
    for m in (4, 17):
        batch = cpu.int4_weight_only_matmul(x[:m], p, s, z, group_size)
        assert _err(batch[:1], alone) < 2e-5
        assert _err(batch, R.int4_weight_only_matmul(simd.dequantized_activations(x[:m]), p, s, z,
                                                     group_size)) < 2e-5


def test_the_default_dispatch_is_the_best_available():
    names = [n for n in VARIANTS if simd.available(n)]
    assert cpu.INT4_GEMV_SIMD == tuple(names)
    assert simd.best() == (names[0] if names else None)


def test_quantized_activations_layout():
    """xq_lo / xq_hi are the two halves of each 32-block (as the nibbles of a packed byte),
    rounded to within half a step of the block's scale; the lane sums add 4 bytes of each."""
    x = RNG.standard_normal((2, 128)).astype(np.float32)
    lo2, hi2, sums2, scales2 = simd.quantize_activations(x)
    assert lo2.shape == hi2.shape == (2, 64) and sums2.shape == scales2.shape == (2, 16)
    lo, hi, lane_sum, lane_scale = lo2[1], hi2[1], sums2[1], scales2[1]     # token 1
    blocks = x[1].reshape(4, 32)
    s = np.abs(blocks).max(axis=1) / 127
    np.testing.assert_allclose(lane_scale, np.repeat(s, 4), rtol=1e-6)
    q = np.concatenate([lo.reshape(4, 16), hi.reshape(4, 16)], axis=1).astype(np.float32)
    assert np.all(np.abs(q * s[:, None] - blocks) <= s[:, None] / 2 * (1 + 1e-5))
    np.testing.assert_array_equal(
        lane_sum, lo.astype(np.int32).reshape(-1, 4).sum(1) + hi.astype(np.int32).reshape(-1, 4).sum(1))


# ---- the "rows4x64" layout (4-row blocks, one stream) ------------------------------------------

def test_interleave_round_trip_and_layout():
    codes = RNG.integers(0, 256, size=(8, 128)).astype(np.uint8)
    il = P.interleave_int4(codes)
    assert il.shape == codes.shape and il.dtype == np.uint8
    np.testing.assert_array_equal(P.deinterleave_int4(il), codes)
    flat = il.reshape(-1)
    # chunk c of row 4 b + r at byte 256 c + 64 r of block b (block = 4 rows' bytes)
    for b, c, r in ((0, 0, 0), (0, 1, 2), (1, 0, 3), (1, 1, 1)):
        start = b * 4 * 128 + 256 * c + 64 * r
        np.testing.assert_array_equal(flat[start:start + 64], codes[4 * b + r, 64 * c:64 * c + 64])


def test_layout_errors():
    p, s, z = P.quantize_int4(RNG.standard_normal((6, 256), np.float32), 64)
    with pytest.raises(ValueError, match="out_features % 4"):
        cpu.int4_weight_only_matmul(np.ones((1, 256), np.float32), p, s, None, 64, layout="rows4x64")
    with pytest.raises(ValueError, match="layout must be one of"):
        cpu.int4_weight_only_matmul(np.ones((1, 256), np.float32), p, s, None, 64, layout="cols")
    with pytest.raises(ValueError, match="in_features % 128"):
        P.interleave_int4(np.zeros((4, 32), np.uint8))


@pytest.mark.parametrize("n,k,group_size", [(4, 128, 32), (36, 256, 64), (8, 1024, 128),
                                            (64, 4096, 128)])
@pytest.mark.parametrize("zero_point", [False, True])
@pytest.mark.parametrize("m", [1, 3, 8, 17])    # the SIMD GEMV (1..8 tokens); the GEMM
def test_interleaved_layout_matches_the_reference(variant, n, k, group_size, zero_point, m):
    w, x, b = RNG.standard_normal((n, k), np.float32), RNG.standard_normal((m, k), np.float32), \
        RNG.standard_normal(n, np.float32)
    p, s, z = P.quantize_int4(w, group_size, zero_point)
    il = P.interleave_int4(p)
    got = _check(x, il, s, z, group_size, b, layout="rows4x64")
    np.testing.assert_allclose(got, cpu.int4_weight_only_matmul(x, p, s, z, group_size, b),
                               rtol=1e-5, atol=1e-5 * np.abs(got).max())
    np.testing.assert_allclose(R.int4_weight_only_matmul(x, il, s, z, group_size, b, "rows4x64"),
                               R.int4_weight_only_matmul(x, p, s, z, group_size, b), rtol=1e-6)


def test_interleaved_layout_on_the_chunked_launcher(variant, monkeypatch):
    monkeypatch.setattr(cpu, "PARALLEL_WORK", 0)
    monkeypatch.setattr(cpu, "_threads", lambda: 3)
    monkeypatch.setattr(cpu, "CHUNKS_PER_THREAD", 5)
    p, s, z = P.quantize_int4(RNG.standard_normal((132, 256), np.float32), 32, True)
    _check(RNG.standard_normal((1, 256), np.float32), P.interleave_int4(p), s, z, 32,
           layout="rows4x64")


def test_numba_cpu_features_limit_the_variants():
    """NUMBA_CPU_FEATURES (a cache built for older CPUs) is what numba compiles for: a variant
    whose instructions it leaves out is not picked, in a fresh process."""
    import subprocess
    import sys
    code = ("from nbaccel_kernels.quant import cpu, simd_int8\n"
            "from nbaccel_kernels.sparse import simd\n"
            "print(cpu.INT4_GEMV_SIMD, cpu.INT8_GEMV_SIMD, [n for n in simd.VARIANTS if simd.available(n)])\n")
    import os
    env = dict(os.environ, NUMBA_CPU_FEATURES="+sse2,+avx,+avx2,+fma,-avx512f,-avx512bw,-avx512vnni,"
                                              "-avx512vl,-avxvnni")
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True,
                         text=True).stdout
    assert out.split("\n")[0] == "('avx2',) ('avx2',) ['avx2']", out


def test_a_layer_call_does_not_retype_the_kernel(variant):
    """The chunk loops take group_size and has_zeros as literals; called through numba's
    dispatcher with plain values, each call would type them again (about 0.25 s). The compiled
    entry point is kept (simd.gemv_part): a warm call of a small layer takes microseconds."""
    import time
    p, s, z = P.quantize_int4(RNG.standard_normal((256, 1024), np.float32), 128, True)
    x = RNG.standard_normal((1, 1024), np.float32)
    cpu.int4_weight_only_matmul(x, p, s, z, 128)
    times = []
    for _ in range(5):
        t = time.perf_counter()
        cpu.int4_weight_only_matmul(x, p, s, z, 128)
        times.append(time.perf_counter() - t)
    assert min(times) < 0.02, times
    if variant in simd.VARIANTS:
        assert simd.gemv_part(variant, "rows", True, 128) is simd.gemv_part(variant, "rows", True, 128)
