"""The explicit-SIMD 2:4 GEMVs (nbaccel_kernels.sparse.simd): every variant the CPU has, and the
portable loop, against the NumPy reference (a variant the CPU lacks is skipped, with the reason).
The selection by permutes changes no arithmetic: float32 tolerance, inf and NaN propagate."""
import subprocess
import sys

import numpy as np
import pytest

from nbaccel_kernels.sparse import cpu, reference as ref, simd
from sparse_weights import every_pair_pattern

RNG = np.random.default_rng(24)


@pytest.fixture(params=list(simd.VARIANTS) + ["portable"])
def variant(request, monkeypatch):
    name = request.param
    if name == "portable":
        monkeypatch.setattr(cpu, "GEMV_SIMD", ())
        return []
    if not simd.available(name):
        pytest.skip(f"this CPU lacks {'+'.join(simd.VARIANTS[name][1])} (variant {name})")
    monkeypatch.setattr(cpu, "GEMV_SIMD", (name,))
    called = []
    part = simd.PARTS[name]
    monkeypatch.setitem(simd.PARTS, name, lambda *a: called.append(1) or part(*a))
    return called


# columns: one group, odd group counts (a half-used metadata byte), fewer values than a vector,
# whole vectors with and without a tail
@pytest.mark.parametrize("rows,cols", [(1, 4), (5, 12), (33, 36), (16, 64), (7, 100), (130, 1024),
                                       (9, 4100)])
def test_variant_matches_the_reference(variant, rows, cols):
    w = RNG.standard_normal((rows, cols)).astype(np.float32)
    values, meta = cpu.compress(w)
    x = RNG.standard_normal(cols).astype(np.float32)
    np.testing.assert_allclose(cpu.linear(x, values, meta, cols), ref.linear(x, values, meta, cols),
                               rtol=1e-5, atol=1e-5 * np.sqrt(cols))
    if isinstance(variant, list) and cpu.GEMV_SIMD:
        assert variant          # the variant itself ran


@pytest.mark.parametrize("rows", [1, 7, 130])
def test_variant_on_the_chunked_launcher(variant, monkeypatch, rows):
    monkeypatch.setattr(cpu, "_threads", lambda work: 3)
    monkeypatch.setattr(cpu, "CHUNKS_PER_THREAD", 5)
    values, meta = cpu.compress(RNG.standard_normal((rows, 256)).astype(np.float32))
    for x in (RNG.standard_normal(256).astype(np.float32),
              RNG.standard_normal((3, 256)).astype(np.float32)):   # batches up to 4: one GEMV each
        np.testing.assert_allclose(cpu.linear(x, values, meta, 256), ref.linear(x, values, meta, 256),
                                   rtol=1e-5, atol=1e-4)


def test_every_position_pattern(variant):
    """All 6 kept-position pairs of a group, in every lane of a vector: each kept value meets
    exactly its own input."""
    cols = 4 * 48
    w = every_pair_pattern(cols)
    values, meta = cpu.compress(w)
    x = np.arange(cols, dtype=np.float32) / 7
    want = w.astype(np.float64) @ x
    bound = 1e-6 * (np.abs(w).astype(np.float64) @ np.abs(x))   # float32 sums of these terms
    assert np.all(np.abs(cpu.linear(x, values, meta, cols) - want) <= bound)


def test_inf_and_nan_propagate(variant):
    w = np.zeros((3, 64), np.float32)
    w[0, :2] = [np.inf, 1.0]
    w[1, 36:38] = [np.nan, 2.0]
    w[2, 62:64] = [1.0, -1.0]
    values, meta = cpu.compress(w)
    x = np.ones(64, np.float32)
    np.testing.assert_array_equal(cpu.linear(x, values, meta, 64), ref.linear(x, values, meta, 64))


def test_float64_runs_the_portable_loop(monkeypatch):
    monkeypatch.setattr(cpu, "GEMV_SIMD", tuple(simd.VARIANTS))
    called = []
    for name in simd.VARIANTS:
        monkeypatch.setitem(simd.PARTS, name, lambda *a: called.append(1))
    values, meta = cpu.compress(RNG.standard_normal((5, 64)))
    x = RNG.standard_normal(64)
    np.testing.assert_allclose(cpu.linear(x, values, meta, 64), ref.linear(x, values, meta, 64),
                               rtol=1e-12, atol=1e-12)
    assert not called


def test_simd_gemvs_load_from_numbas_disk_cache():
    """The variants' chunk loops (sparse and quantized) are top-level functions: a fresh process
    compiles nothing for them."""
    code = ("import numpy as np\n"
            "from nbaccel_kernels.sparse import cpu, simd\n"
            "from nbaccel_kernels.quant import cpu as q, simd as qs, simd_int8 as q8, packing as P\n"
            "v, m = cpu.compress(np.ones((8, 64), np.float32))\n"
            "cpu.linear(np.ones(64, np.float32), v, m, 64)\n"
            "x = np.ones((1, 256), np.float32)\n"
            "q.int4_weight_only_matmul(x, *P.quantize_int4(np.ones((8, 256), np.float32), 128), 128)\n"
            "q.int8_weight_only_matmul(x, *P.quantize_int8(np.ones((8, 256), np.float32)))\n"
            "used = [simd.PARTS[cpu.GEMV_SIMD[0]]] if cpu.GEMV_SIMD else []\n"
            "used += [qs.PARTS[q.INT4_GEMV_SIMD[0]]] if q.INT4_GEMV_SIMD else []  # via gemv_part\n"
            "used += [q8.PARTS[q.INT8_GEMV_SIMD[0]]] if q.INT8_GEMV_SIMD else []\n"
            # a miss that was compiled (the int4 loops' first, non-literal typing attempt under
            # numba.literally also counts as a miss, but compiles nothing)
            "print(len(used), sum(v for f in used for sig, v in f.stats.cache_misses.items()\n"
            "                     if tuple(sig) in {tuple(s) for s in f.signatures}))\n")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)   # fill it
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    used, misses = out.stdout.split()
    assert misses == "0", out.stdout
