"""The explicit-SIMD 2:4 GEMMs (nbaccel_kernels.sparse.simd_gemm): every variant the CPU has
against the NumPy reference and the portable kernel (the same multiply-adds; the portable
kernel's fastmath may associate them differently), over batch tiles, column blocks, odd group counts and the chunked launcher; batches that are not whole vectors run
padded with zero inputs; float64 runs the portable kernel."""
import subprocess
import sys

import numpy as np
import pytest

from nbaccel_kernels.sparse import cpu, reference as ref, simd_gemm
from sparse_weights import every_pair_pattern

RNG = np.random.default_rng(39)


@pytest.fixture(params=list(simd_gemm.VARIANTS))
def variant(request, monkeypatch):
    """Run only variant ``name`` (skipped where the CPU lacks it); returns its call log."""
    name = request.param
    if not simd_gemm.available(name):
        pytest.skip(f"this CPU lacks {'+'.join(simd_gemm.VARIANTS[name][1])} (variant {name})")
    cpu._k("simd_gemm")
    monkeypatch.setattr(cpu, "GEMM_SIMD", (name,))
    called = []
    part = simd_gemm.PARTS[name]
    monkeypatch.setitem(simd_gemm.PARTS, name, lambda *a: called.append(1) or part(*a))
    return name, called


def _portable(monkeypatch, x, values, meta, cols):
    with monkeypatch.context() as m:
        m.setattr(cpu, "GEMM_SIMD", ())
        return cpu.linear(x, values, meta, cols)


# batches: one-vector tiles only, whole 4-vector tiles, both, padded (5, 17, 33); columns: odd group counts (a
# half-used metadata byte), one byte, several column blocks
@pytest.mark.parametrize("batch", [5, 16, 17, 33, 48, 64, 80, 128])
@pytest.mark.parametrize("rows,cols", [(5, 8), (9, 12), (33, 100), (130, 1024)])
def test_variant_matches_the_reference_and_the_portable_kernel(variant, monkeypatch, batch, rows,
                                                               cols):
    name, called = variant
    w = RNG.standard_normal((rows, cols)).astype(np.float32)
    values, meta = cpu.compress(w)
    x = RNG.standard_normal((batch, cols)).astype(np.float32)
    got = cpu.linear(x, values, meta, cols)
    assert called and got.shape == (batch, rows) and got.flags.c_contiguous
    np.testing.assert_allclose(got, ref.linear(x, values, meta, cols), rtol=1e-5,
                               atol=1e-5 * np.sqrt(cols))
    np.testing.assert_allclose(got, _portable(monkeypatch, x, values, meta, cols), rtol=1e-5,
                               atol=1e-5 * np.sqrt(cols))


@pytest.mark.parametrize("block_bytes", [1, 3 * 8 * 64 * 4, 1 << 30])
def test_column_blocks_and_chunks(variant, monkeypatch, block_bytes):
    """Blocks of one metadata byte, of three, and one block for all columns; rows split into
    chunks over three threads (the last chunk short)."""
    monkeypatch.setattr(cpu, "_SIMD_GEMM_BLOCK_BYTES", block_bytes)
    monkeypatch.setattr(cpu, "_threads", lambda work: 3)
    monkeypatch.setattr(cpu, "CHUNKS_PER_THREAD", 5)
    values, meta = cpu.compress(RNG.standard_normal((67, 260)).astype(np.float32))
    x = RNG.standard_normal((64, 260)).astype(np.float32)
    got = cpu.linear(x, values, meta, 260)
    assert variant[1]
    np.testing.assert_allclose(got, ref.linear(x, values, meta, 260), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got, _portable(monkeypatch, x, values, meta, 260), rtol=1e-5,
                               atol=1e-4)


def test_every_position_pattern(variant):
    """All 6 kept-position pairs of a group in both halves of a metadata byte: each kept value
    meets exactly its own input row."""
    cols = 4 * 12
    w = every_pair_pattern(cols)
    values, meta = cpu.compress(w)
    x = (np.arange(16 * cols, dtype=np.float32).reshape(16, cols) % 11) / 7
    want = x.astype(np.float64) @ w.T.astype(np.float64)
    bound = 1e-6 * (np.abs(x).astype(np.float64) @ np.abs(w.T))
    assert np.all(np.abs(cpu.linear(x, values, meta, cols) - want) <= bound)
    assert variant[1]


def test_inf_and_nan_propagate(variant):
    w = np.zeros((3, 64), np.float32)
    w[0, :2] = [np.inf, 1.0]
    w[1, 36:38] = [np.nan, 2.0]
    w[2, 62:64] = [1.0, -1.0]
    values, meta = cpu.compress(w)
    x = np.ones((32, 64), np.float32)
    x[3, 0] = -1.0
    np.testing.assert_array_equal(cpu.linear(x, values, meta, 64), ref.linear(x, values, meta, 64))


def test_float64_runs_the_portable_kernel(monkeypatch):
    cpu._k("simd_gemm")
    monkeypatch.setattr(cpu, "GEMM_SIMD", tuple(simd_gemm.VARIANTS))
    called = []
    for name in simd_gemm.VARIANTS:
        monkeypatch.setitem(simd_gemm.PARTS, name, lambda *a: called.append(1))
    values, meta = cpu.compress(RNG.standard_normal((5, 64)))
    x = RNG.standard_normal((64, 64))
    np.testing.assert_allclose(cpu.linear(x, values, meta, 64), ref.linear(x, values, meta, 64),
                               rtol=1e-12, atol=1e-12)
    assert not called


def test_padded_batch_writes_into_out(variant):
    """``out=`` gets the batch's rows only (the padding lanes are dropped)."""
    values, meta = cpu.compress(RNG.standard_normal((12, 32)).astype(np.float32))
    x = RNG.standard_normal((7, 32)).astype(np.float32)
    out = np.full((7, 12), np.nan, np.float32)
    assert cpu.linear(x, values, meta, 32, out=out) is out
    np.testing.assert_allclose(out, ref.linear(x, values, meta, 32), rtol=1e-5, atol=1e-5)
    assert variant[1]


def test_simd_gemm_loads_from_numbas_disk_cache():
    """The chunk loops are top-level functions: a fresh process compiles nothing for them."""
    code = ("import numpy as np\n"
            "from nbaccel_kernels.sparse import cpu, simd_gemm\n"
            "v, m = cpu.compress(np.ones((8, 64), np.float32))\n"
            "cpu.linear(np.ones((64, 64), np.float32), v, m, 64)\n"
            "used = [simd_gemm.PARTS[cpu.GEMM_SIMD[0]]] if cpu.GEMM_SIMD else []\n"
            "print(len(used), sum(v for f in used for v in f.stats.cache_misses.values()))\n")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)   # fill it
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    used, misses = out.stdout.split()
    assert misses == "0", out.stdout
