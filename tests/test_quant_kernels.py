"""nbaccel_kernels.quant: packing round trips, and every kernel version against the NumPy
reference (numba always; Triton under TRITON_INTERPRET=1 on small shapes)."""
import os
import sys

# Triton decides at import whether it interprets: on a machine without a GPU, ask for its
# interpreter before anything imports it
if "triton" not in sys.modules and not os.path.exists("/dev/nvidia0"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from nbaccel_kernels.quant import cpu, packing as P, reference as R  # noqa: E402

RNG = np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def portable_kernels(monkeypatch):
    """These tests hold the portable kernels (int4 ones with exact float activations) to the
    float64 reference's 2e-5. The int4 default, activations rounded to int8 per 32-block (every
    path, the explicit-SIMD GEMVs included), is tested in test_quant_simd.py."""
    monkeypatch.setattr(cpu, "INT4_GEMV_SIMD", ())
    monkeypatch.setattr(cpu, "INT4_INT8_ACTIVATIONS", False)
    monkeypatch.setattr(cpu, "INT8_GEMV_SIMD", ())      # its variants: test_quant_simd_int8.py


def _w(n, k, dtype=np.float32):
    return RNG.standard_normal((n, k)).astype(dtype)


def _close(got, want, rtol=2e-5):
    """Kernels accumulate in float32 in a different order than the float64 reference."""
    scale = max(float(np.abs(want).max()), 1e-6)
    assert got.shape == want.shape and got.dtype == want.dtype
    err = float(np.abs(got.astype(np.float64) - want).max()) / scale
    assert err < rtol, f"relative error {err:.2e}"


# ---- formats ------------------------------------------------------------------------------

@pytest.mark.parametrize("k", [32, 64, 160])
def test_pack_unpack_round_trip(k):
    codes = RNG.integers(0, 16, size=(7, k)).astype(np.uint8)
    packed = P.pack_int4(codes)
    assert packed.shape == (7, k // 2) and packed.dtype == np.uint8
    np.testing.assert_array_equal(P.unpack_int4(packed), codes)


def test_pack_layout_is_halves_of_32_blocks():
    codes = np.arange(32, dtype=np.uint8)[None] % 16
    packed = P.pack_int4(codes)
    # byte j holds value j (low nibble) and value j + 16 (high nibble)
    np.testing.assert_array_equal(packed[0] & 15, codes[0, :16])
    np.testing.assert_array_equal(packed[0] >> 4, codes[0, 16:])


def test_pack_rejects_bad_codes_and_widths():
    with pytest.raises(ValueError, match="0..15"):
        P.pack_int4(np.full((1, 32), 16, np.int32))
    with pytest.raises(ValueError, match="multiple of 32"):
        P.pack_int4(np.zeros((1, 48), np.uint8))


def test_int8_quantize_round_trip_error_and_range():
    w = _w(33, 70)
    q, s = P.quantize_int8(w)
    assert q.dtype == np.int8 and s.dtype == np.float32 and s.shape == (33,)
    assert np.abs(q).max() == 127
    err = np.abs(P.dequantize_int8(q, s) - w)
    assert np.all(err <= s[:, None] / 2 + 1e-7)        # at most half a step
    # quantizing the dequantized weight is exact (a fixed point)
    q2, s2 = P.quantize_int8(P.dequantize_int8(q, s))
    np.testing.assert_array_equal(q2, q)


@pytest.mark.parametrize("group_size", [32, 64, 128])
@pytest.mark.parametrize("zero_point", [False, True])
def test_int4_quantize_round_trip_error(group_size, zero_point):
    w = _w(9, 256)
    packed, scales, zeros = P.quantize_int4(w, group_size, zero_point)
    assert scales.shape == (9, 256 // group_size) and (zeros is None) == (not zero_point)
    deq = P.dequantize_int4(packed, scales, zeros, group_size)
    step = np.repeat(scales, group_size, axis=1)
    assert np.all(np.abs(deq - w) <= step / 2 + 1e-6)


def test_zero_rows_quantize_to_zero():
    w = np.zeros((3, 64), np.float32)
    q, s = P.quantize_int8(w)
    assert not q.any() and np.all(s == 1)
    packed, scales, zeros = P.quantize_int4(w, 32, True)
    assert not P.dequantize_int4(packed, scales, zeros, 32).any()


def test_quantize_bad_input():
    with pytest.raises(ValueError, match="2-D"):
        P.quantize_int8(np.zeros(5, np.float32))
    with pytest.raises(TypeError, match="floating point"):
        P.quantize_int8(np.zeros((2, 2), np.int32))
    with pytest.raises(ValueError, match="multiple of group_size"):
        P.quantize_int4(_w(2, 96), 64)
    with pytest.raises(ValueError, match="group_size must be one of"):
        P.quantize_int4(_w(2, 96), 48)


# ---- numba kernels vs the reference ------------------------------------------------------------

SHAPES = [(1, 37, 64), (17, 37, 128), (1, 5, 256), (17, 64, 96), (4, 3, 32), (2, 1, 64)]


@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cpu_int8_weight_only(m, n, k, dtype):
    w, x, b = _w(n, k), _w(m, k, dtype), _w(1, n)[0]
    q, s = P.quantize_int8(w)
    _close(cpu.int8_weight_only_matmul(x, q, s), R.int8_weight_only_matmul(x, q, s))
    _close(cpu.int8_weight_only_matmul(x, q, s, b), R.int8_weight_only_matmul(x, q, s, b))


@pytest.mark.parametrize("m", [1, 4, 7, 17])    # GEMV, batched GEMV (2..8), GEMM
@pytest.mark.parametrize("n,k,group_size", [(37, 128, 32), (5, 256, 64), (19, 384, 128), (4, 128, 128)])
@pytest.mark.parametrize("zero_point", [False, True])
def test_cpu_int4_weight_only(m, n, k, group_size, zero_point):
    w, x, b = _w(n, k), _w(m, k), _w(1, n)[0]
    p, s, z = P.quantize_int4(w, group_size, zero_point)
    want = R.int4_weight_only_matmul(x, p, s, z, group_size, b)
    _close(cpu.int4_weight_only_matmul(x, p, s, z, group_size, b), want)


def test_cpu_int4_float64_activations():
    w, x = _w(6, 64), _w(3, 64, np.float64)
    p, s, z = P.quantize_int4(w, 32)
    _close(cpu.int4_weight_only_matmul(x[:1], p, s, z, 32), R.int4_weight_only_matmul(x[:1], p, s, z, 32))
    _close(cpu.int4_weight_only_matmul(x, p, s, z, 32), R.int4_weight_only_matmul(x, p, s, z, 32))


@pytest.mark.parametrize("m,n,k", SHAPES + [(3, 7, 1), (5, 6, 33)])
def test_cpu_int8_int8_is_exact(m, n, k):
    xq = RNG.integers(-127, 128, size=(m, k)).astype(np.int8)
    wq = RNG.integers(-127, 128, size=(n, k)).astype(np.int8)
    got = cpu.int8_int8_matmul(xq, wq)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, R.int8_int8_matmul(xq, wq))


def test_cpu_int8_int8_extreme_codes_do_not_overflow():
    k = 4096   # 4096 * 127 * 127 fits in int32; int16 partial products must not wrap
    xq = np.full((3, k), 127, np.int8)
    wq = np.full((5, k), -127, np.int8)
    np.testing.assert_array_equal(cpu.int8_int8_matmul(xq, wq), np.full((3, 5), -127 * 127 * k))


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_cpu_int8_dynamic(m, n, k):
    w, x, b = _w(n, k), _w(m, k), _w(1, n)[0]
    q, s = P.quantize_int8(w)
    _close(cpu.int8_dynamic_matmul(x, q, s, b), R.int8_dynamic_matmul(x, q, s, b))


def test_cpu_empty_batch():
    q, s = P.quantize_int8(_w(4, 32))
    assert cpu.int8_weight_only_matmul(np.zeros((0, 32), np.float32), q, s).shape == (0, 4)


def test_cpu_bad_input():
    q, s = P.quantize_int8(_w(4, 32))
    with pytest.raises(ValueError, match=r"\[M, 32\]"):
        cpu.int8_weight_only_matmul(np.zeros((2, 31), np.float32), q, s)
    with pytest.raises(TypeError, match="float32 or float64"):
        cpu.int8_weight_only_matmul(np.zeros((2, 32), np.float16), q, s)
    with pytest.raises(ValueError, match="don't match"):
        cpu.int8_int8_matmul(np.zeros((2, 31), np.int8), q)


# ---- the quantized weights stay close to the float layer ------------------------------------------

@pytest.mark.parametrize("kernel,bound", [("int8", 0.02), ("int4-32", 0.12), ("int4-128", 0.15),
                                          ("int8-dynamic", 0.03)])
def test_layer_relative_error_on_random_weights(kernel, bound):
    w, x = _w(128, 256), _w(17, 256)
    want = x @ w.T
    if kernel == "int8":
        got = cpu.int8_weight_only_matmul(x, *P.quantize_int8(w))
    elif kernel == "int8-dynamic":
        got = cpu.int8_dynamic_matmul(x, *P.quantize_int8(w))
    else:
        g = int(kernel.split("-")[1])
        got = cpu.int4_weight_only_matmul(x, *P.quantize_int4(w, g), group_size=g)
    rel = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert rel < bound, rel
    assert rel > bound / 100        # the test measures a real quantization error


# ---- Triton, through its interpreter ------------------------------------------------------------

@pytest.fixture(scope="module")
def tri():
    pytest.importorskip("triton")
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("Triton was imported without TRITON_INTERPRET=1 (no GPU here)")
    from nbaccel_kernels.quant import triton as T
    return T


@pytest.mark.parametrize("m,n,k", [(1, 37, 64), (17, 20, 96)])
def test_triton_int8_weight_only(tri, m, n, k):
    w, x, b = _w(n, k), _w(m, k), _w(1, n)[0]
    q, s = P.quantize_int8(w)
    _close(tri.int8_weight_only_matmul(x, q, s, b), R.int8_weight_only_matmul(x, q, s, b))


@pytest.mark.parametrize("m,n,k,group_size,zero_point", [(1, 37, 64, 32, False), (17, 20, 128, 64, True),
                                                         (3, 9, 256, 128, False)])
def test_triton_int4_weight_only(tri, m, n, k, group_size, zero_point):
    w, x, b = _w(n, k), _w(m, k), _w(1, n)[0]
    p, s, z = P.quantize_int4(w, group_size, zero_point)
    _close(tri.int4_weight_only_matmul(x, p, s, z, group_size, b),
           R.int4_weight_only_matmul(x, p, s, z, group_size, b))


def test_triton_quantize_rows_matches_numpy(tri):
    x = _w(17, 200)
    q, s = tri.quantize_per_token_int8(x)
    q2, s2 = P.quantize_per_token_int8(x)
    np.testing.assert_allclose(s, s2, rtol=1e-6)
    np.testing.assert_array_equal(q, q2)       # random data: no rounding ties


@pytest.mark.parametrize("m,n,k", [(1, 37, 64), (17, 20, 80)])
def test_triton_int8_int8_and_dynamic(tri, m, n, k):
    xq = RNG.integers(-127, 128, size=(m, k)).astype(np.int8)
    wq = RNG.integers(-127, 128, size=(n, k)).astype(np.int8)
    np.testing.assert_array_equal(tri.int8_int8_matmul(xq, wq), R.int8_int8_matmul(xq, wq))
    w, x, b = _w(n, k), _w(m, k), _w(1, n)[0]
    q, s = P.quantize_int8(w)
    _close(tri.int8_dynamic_matmul(x, q, s, b), R.int8_dynamic_matmul(x, q, s, b))


# ---- the parallel versions (big problems run them; force them here on small shapes) ------------

@pytest.mark.parametrize("m", [1, 17])
def test_cpu_parallel_versions_match_the_reference(monkeypatch, m):
    monkeypatch.setattr(cpu, "PARALLEL_WORK", 0)
    w, x, b = _w(37, 128), _w(m, 128), _w(1, 37)[0]
    q, s = P.quantize_int8(w)
    _close(cpu.int8_weight_only_matmul(x, q, s, b), R.int8_weight_only_matmul(x, q, s, b))
    _close(cpu.int8_dynamic_matmul(x, q, s, b), R.int8_dynamic_matmul(x, q, s, b))
    p, sc, z = P.quantize_int4(w, 32, True)
    _close(cpu.int4_weight_only_matmul(x, p, sc, z, 32, b), R.int4_weight_only_matmul(x, p, sc, z, 32, b))
    xq = RNG.integers(-127, 128, size=(m, 128)).astype(np.int8)
    np.testing.assert_array_equal(cpu.int8_int8_matmul(xq, q), R.int8_int8_matmul(xq, q))
    assert (cpu._int8_gemm_part.signatures if m > 1 else cpu._int8_gemv_part.signatures)


@pytest.mark.parametrize("m", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("n,k,group_size", [(37, 128, 32), (130, 256, 64), (7, 384, 128)])
def test_cpu_chunked_threads_match_the_reference(monkeypatch, m, n, k, group_size):
    """The helper-thread launcher (kernels/_pool.py) over many small chunks, with odd
    row counts (a short last chunk / tile), batch 1..8 and each group size."""
    monkeypatch.setattr(cpu, "PARALLEL_WORK", 0)
    monkeypatch.setattr(cpu, "_threads", lambda: 3)
    monkeypatch.setattr(cpu, "CHUNKS_PER_THREAD", 5)
    w, x, b = _w(n, k), _w(m, k), _w(1, n)[0]
    q, s = P.quantize_int8(w)
    _close(cpu.int8_weight_only_matmul(x, q, s, b), R.int8_weight_only_matmul(x, q, s, b))
    for zp in (False, True):
        p, sc, z = P.quantize_int4(w, group_size, zp)
        _close(cpu.int4_weight_only_matmul(x, p, sc, z, group_size, b),
               R.int4_weight_only_matmul(x, p, sc, z, group_size, b))


def test_pool_runs_every_chunk_once_with_late_helpers():
    """Every chunk is claimed exactly once whether or not the helpers wake in time."""
    from numba import njit
    from nbaccel_kernels import _pool

    @njit(nogil=True)
    def count(hits, ctr, n_chunks, wait):
        while True:
            c = _pool.claim(ctr, n_chunks)
            if c < 0:
                break
            hits[c] += 1
            _pool.finish(ctr, False, n_chunks)
        _pool.finish(ctr, wait, n_chunks)

    for n_chunks in (1, 2, 7, 1000):
        hits = np.zeros(n_chunks, np.int64)
        for _ in range(20):
            _pool.run(count, (hits,), n_chunks, 3)
        np.testing.assert_array_equal(hits, 20)


def test_quant_pool_module_is_the_shared_one():
    from nbaccel_kernels import _pool
    from nbaccel_kernels.quant import _pool as qpool
    assert qpool.run is _pool.run and qpool.claim is _pool.claim


@pytest.mark.parametrize("vnni", [True, False])
@pytest.mark.parametrize("m,n,k", [(1, 9, 64), (4, 4, 64), (5, 13, 65), (7, 37, 200), (17, 30, 128),
                                   (64, 67, 321), (3, 8, 127), (9, 16, 63)])
def test_cpu_int8_int8_tiles_chunked_match_the_reference(monkeypatch, vnni, m, n, k):
    """The int8 x int8 GEMM and the dynamic linear on the helper-thread launcher, in VNNI tiles
    (where the CPU has them) and in the portable tile: tokens and rows left over from whole
    tiles, K not a multiple of 64 (or below it), float32 and float64 activations."""
    if vnni and not cpu._vnni.available():
        pytest.skip("no AVX-512 VNNI on this CPU")
    monkeypatch.setattr(cpu, "_VNNI", vnni)
    monkeypatch.setattr(cpu, "PARALLEL_WORK", 0)
    monkeypatch.setattr(cpu, "_threads", lambda: 3)
    monkeypatch.setattr(cpu, "CHUNKS_PER_THREAD", 5)
    xq = RNG.integers(-127, 128, size=(m, k)).astype(np.int8)
    wq = RNG.integers(-127, 128, size=(n, k)).astype(np.int8)
    np.testing.assert_array_equal(cpu.int8_int8_matmul(xq, wq), R.int8_int8_matmul(xq, wq))
    w, b = _w(n, k), _w(1, n)[0]
    q, s = P.quantize_int8(w)
    for dt in (np.float32, np.float64):
        x = _w(m, k, dt)
        _close(cpu.int8_dynamic_matmul(x, q, s, b), R.int8_dynamic_matmul(x, q, s, b))


@pytest.mark.parametrize("vnni", [True, False])
def test_cpu_int8_int8_extreme_codes_both_tiles(monkeypatch, vnni):
    """All codes +-127 over a long K: the VNNI tile's +128 weight offset must not overflow."""
    if vnni and not cpu._vnni.available():
        pytest.skip("no AVX-512 VNNI on this CPU")
    monkeypatch.setattr(cpu, "_VNNI", vnni)
    k = 8192 + 64
    for xv, wv in ((127, -127), (-127, -127), (127, 127), (-127, 127)):
        xq = np.full((5, k), xv, np.int8)
        wq = np.full((9, k), wv, np.int8)
        np.testing.assert_array_equal(cpu.int8_int8_matmul(xq, wq), np.full((5, 9), xv * wv * k))
