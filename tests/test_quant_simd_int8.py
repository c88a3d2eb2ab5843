"""The explicit-SIMD int8 weight-only GEMVs (nbaccel_kernels.quant.simd_int8): every variant the
CPU has against the NumPy reference (the others skipped, with the reason). The activations stay
float, so each is held to the float32 accumulation's 2e-5, as the portable kernel."""
import numpy as np
import pytest

from nbaccel_kernels.quant import cpu, simd_int8, packing as P, reference as R

RNG = np.random.default_rng(398)


@pytest.fixture(params=list(simd_int8.VARIANTS))
def variant(request, monkeypatch):
    if not simd_int8.available(request.param):
        pytest.skip(f"this CPU lacks {'+'.join(simd_int8.VARIANTS[request.param][1])} "
                    f"(variant {request.param})")
    monkeypatch.setattr(cpu, "INT8_GEMV_SIMD", (request.param,))
    called = []
    part = simd_int8.PARTS[request.param]
    monkeypatch.setitem(simd_int8.PARTS, request.param, lambda *a: called.append(1) or part(*a))
    return called


def _close(got, want, rtol=2e-5):
    assert got.shape == want.shape and got.dtype == want.dtype
    err = float(np.abs(got.astype(np.float64) - want).max()) / max(float(np.abs(want).max()), 1e-6)
    assert err < rtol, f"relative error {err:.2e}"


@pytest.mark.parametrize("n,k", [(1, 64), (37, 128), (5, 256), (130, 4096), (3, 192)])
def test_variant_matches_the_reference(variant, n, k):
    w, x, b = RNG.standard_normal((n, k), np.float32), RNG.standard_normal((1, k), np.float32), \
        RNG.standard_normal(n, np.float32)
    q, s = P.quantize_int8(w)
    _close(cpu.int8_weight_only_matmul(x, q, s, b), R.int8_weight_only_matmul(x, q, s, b))
    if k % 64 == 0:
        assert variant          # whole 64-byte steps: every variant ran


@pytest.mark.parametrize("n", [1, 7, 130])
def test_variant_on_the_chunked_launcher(variant, monkeypatch, n):
    monkeypatch.setattr(cpu, "PARALLEL_WORK", 0)
    monkeypatch.setattr(cpu, "_threads", lambda: 3)
    monkeypatch.setattr(cpu, "CHUNKS_PER_THREAD", 5)
    q, s = P.quantize_int8(RNG.standard_normal((n, 512), np.float32))
    x = RNG.standard_normal((1, 512), np.float32)
    _close(cpu.int8_weight_only_matmul(x, q, s), R.int8_weight_only_matmul(x, q, s))
    assert variant


def test_extreme_codes(variant):
    k = 4096
    q = np.full((5, k), -127, np.int8)
    q[1] = 127
    x = np.full((1, k), 1e3, np.float32)
    got = cpu.int8_weight_only_matmul(x, q, np.ones(5, np.float32))
    np.testing.assert_allclose(got[0], [-127e3 * k, 127e3 * k, -127e3 * k, -127e3 * k, -127e3 * k],
                               rtol=1e-6)


def test_what_the_variants_do_not_take_runs_the_portable_loop(monkeypatch):
    """float64 activations, batches and rows that are not whole steps."""
    monkeypatch.setattr(cpu, "INT8_GEMV_SIMD", tuple(simd_int8.VARIANTS))
    called = []
    for name in simd_int8.VARIANTS:
        monkeypatch.setitem(simd_int8.PARTS, name, lambda *a: called.append(1))
    q, s = P.quantize_int8(RNG.standard_normal((9, 96), np.float32))
    for x in (RNG.standard_normal((1, 96)), RNG.standard_normal((3, 96), np.float32),
              RNG.standard_normal((1, 96), np.float32)):       # 96: no whole 64-byte step
        if x.dtype == np.float32 and x.shape[0] == 1:
            monkeypatch.setattr(cpu, "INT8_GEMV_SIMD", ("avx512",))
        _close(cpu.int8_weight_only_matmul(x, q, s), R.int8_weight_only_matmul(x, q, s))
    assert not called


def test_the_default_dispatch_is_every_available_variant():
    assert cpu.INT8_GEMV_SIMD == tuple(n for n in simd_int8.VARIANTS if simd_int8.available(n))
