"""2:4 sparsity kernels on raw arrays: the NumPy reference, numba (cpu) and Triton (under the
interpreter on the CPU) against each other and against the dense product of the pruned weight."""
import os

import numpy as np
import pytest

from nbaccel.devices import cuda_available

if not cuda_available():                      # no GPU: run the Triton kernels in the interpreter
    os.environ.setdefault("TRITON_INTERPRET", "1")

from nbaccel_kernels.sparse import cpu, reference as ref  # noqa: E402

# (rows, cols): odd group counts (cols/4 odd leaves a half-used metadata byte), one group,
# sizes that are not multiples of any block
SHAPES = [(1, 4), (3, 8), (5, 12), (7, 20), (16, 64), (33, 36)]
DTYPES = [np.float32, np.float64]


def _tol(dt):
    return dict(rtol=1e-5, atol=1e-5) if dt == np.float32 else dict(rtol=1e-12, atol=1e-12)


def _weight(rows, cols, dt, seed=0):
    w = np.random.default_rng(seed).standard_normal((rows, cols)).astype(dt)
    w[0, :4] = [1.0, 1.0, 1.0, 1.0]            # ties: the earlier positions win
    if rows > 1:
        w[1, :4] = [0.0, 0.0, 0.0, 0.0]
    if rows > 2:
        w[2, :4] = [0.0, -7.0, 0.0, 0.0]       # already sparser than 2:4
    return w


def _expected_positions(group):
    """The kept positions of one group, by a slow obvious rule."""
    key = [np.inf if np.isnan(v) else abs(v) for v in group]
    order = sorted(range(4), key=lambda i: (-key[i], i))
    return sorted(order[:2])


# ---- the reference itself ----------------------------------------------------------------------

def test_reference_keeps_the_two_largest_magnitudes():
    w = np.array([[0.1, -0.9, 0.5, 0.2, 3.0, 3.0, 3.0, -3.0],
                  [np.nan, 1.0, np.nan, 2.0, 0.0, 0.0, 0.0, 1e-30]], np.float32)
    mask = ref.prune_mask(w)
    assert mask.tolist() == [[False, True, True, False, True, True, False, False],
                             [True, False, True, False, True, False, False, True]]
    rng = np.random.default_rng(1)
    w = rng.standard_normal((6, 16)).astype(np.float32)
    pos = ref.keep_positions(w)
    for r in range(6):
        for g in range(4):
            assert pos[r, g].tolist() == _expected_positions(w[r, 4 * g:4 * g + 4])


@pytest.mark.parametrize("rows,cols", SHAPES)
@pytest.mark.parametrize("dt", DTYPES)
def test_reference_round_trip(rows, cols, dt):
    w = _weight(rows, cols, dt)
    values, meta = ref.compress(w)
    assert values.shape == (rows, cols // 2) and values.dtype == dt
    assert meta.shape == (rows, ref.meta_cols(cols)) and meta.dtype == np.uint8
    pruned = np.where(ref.prune_mask(w), w, 0)
    np.testing.assert_array_equal(ref.decompress(values, meta, cols), pruned)
    # compressing a 2:4 tensor is lossless, and gather is decompress's transpose
    v2, m2 = ref.compress(pruned)
    np.testing.assert_array_equal(ref.decompress(v2, m2, cols), pruned)
    np.testing.assert_array_equal(ref.gather(pruned, m2), v2)
    assert ref.first_violation(pruned) is None


def test_reference_meta_packing_is_documented_layout():
    # group 0 keeps positions (1, 2) -> nibble 1 | 2 << 2 = 9; group 1 keeps (0, 3) -> 12
    w = np.array([[0, 5, 6, 0, 7, 0, 0, 8]], np.float32)
    values, meta = ref.compress(w)
    assert values.tolist() == [[5, 6, 7, 8]]
    assert meta.tolist() == [[9 | (12 << 4)]]


def test_first_violation_names_row_and_group():
    w = np.zeros((3, 8), np.float32)
    w[2, 4:7] = 1.0
    assert ref.first_violation(w) == (2, 1)


@pytest.mark.parametrize("bad,exc,match", [
    (np.ones((2, 6), np.float32), ValueError, "multiple of 4"),
    (np.ones((2, 2, 4), np.float32), ValueError, "2-D"),
    (np.ones(8, np.float32), ValueError, "2-D"),
    (np.ones((2, 4), np.int32), TypeError, "float32 and float64"),
    (np.ones((2, 4), np.float16), TypeError, "float32 and float64"),
])
@pytest.mark.parametrize("mod", ["reference", "cpu"])
def test_bad_input(bad, exc, match, mod):
    with pytest.raises(exc, match=match):
        (ref if mod == "reference" else cpu).compress(bad)


# ---- numba ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("rows,cols", SHAPES)
@pytest.mark.parametrize("dt", DTYPES)
def test_cpu_compression_matches_reference(rows, cols, dt):
    w = _weight(rows, cols, dt)
    w[-1, -4:] = [np.nan, 1.0, 2.0, np.nan]     # NaNs are kept, never silently dropped
    values, meta = cpu.compress(w)
    rv, rm = ref.compress(w)
    np.testing.assert_array_equal(meta, rm)
    np.testing.assert_array_equal(values, rv)
    np.testing.assert_array_equal(cpu.decompress(values, meta, cols), ref.decompress(rv, rm, cols))
    dense = ref.decompress(rv, rm, cols)
    np.testing.assert_array_equal(cpu.gather(dense, meta), rv)


@pytest.mark.parametrize("rows,cols", SHAPES)
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("batch", [None, 1, 2, 67])
def test_cpu_linear_matches_reference_and_dense(rows, cols, dt, batch):
    w = _weight(rows, cols, dt)
    values, meta = cpu.compress(w)
    rng = np.random.default_rng(2)
    x = rng.standard_normal(cols if batch is None else (batch, cols)).astype(dt)
    got = cpu.linear(x, values, meta, cols)
    assert got.dtype == dt and got.shape == ((rows,) if batch is None else (batch, rows))
    np.testing.assert_allclose(got, ref.linear(x, values, meta, cols), **_tol(dt))
    np.testing.assert_allclose(got, x @ np.where(ref.prune_mask(w), w, 0).T, **_tol(dt))


@pytest.mark.parametrize("batch", [None, 3, 9])
def test_cpu_linear_propagates_inf_and_nan(batch):
    w = np.zeros((3, 8), np.float32)
    w[0, :2] = [np.inf, 1.0]
    w[1, 4:6] = [np.nan, 2.0]
    w[2, 2:4] = [1.0, -1.0]
    values, meta = cpu.compress(w)
    x = np.ones(8 if batch is None else (batch, 8), np.float32)
    np.testing.assert_array_equal(cpu.linear(x, values, meta, 8), ref.linear(x, values, meta, 8))


@pytest.mark.parametrize("rows", [512, 2 * cpu.PARALLEL_WORK // 1024])   # serial / parallel GEMV
def test_cpu_linear_full_size_gemv_and_gemm(rows):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((rows, 1024)).astype(np.float32)
    values, meta = cpu.compress(w)
    dense = ref.decompress(values, meta, 1024)
    for x in (rng.standard_normal(1024).astype(np.float32),
              rng.standard_normal((64, 1024)).astype(np.float32),
              rng.standard_normal((5, 1024)).astype(np.float32)):
        np.testing.assert_allclose(cpu.linear(x, values, meta, 1024), x @ dense.T,
                                   rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("rows,cols", [(37, 44), (130, 68), (5, 12), (64, 36)])
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("batch", [None, 3, 5, 67])
def test_cpu_linear_chunked_threads(monkeypatch, rows, cols, dt, batch):
    """The helper-thread launcher (kernels/_pool.py) over many small chunks: rows left over
    from the GEMV's 4-row passes and from whole chunks, odd group counts, GEMM column blocks
    of one metadata byte and of a partial last block."""
    monkeypatch.setattr(cpu, "_threads", lambda work: 3)
    monkeypatch.setattr(cpu, "CHUNKS_PER_THREAD", 5)
    w = _weight(rows, cols, dt)
    values, meta = cpu.compress(w)
    x = np.random.default_rng(4).standard_normal(cols if batch is None else (batch, cols)).astype(dt)
    want = ref.linear(x, values, meta, cols)
    for block_bytes in (1, 3 * 8 * 67 * 8, cpu._GEMM_BLOCK_BYTES):
        monkeypatch.setattr(cpu, "_GEMM_BLOCK_BYTES", block_bytes)
        np.testing.assert_allclose(cpu.linear(x, values, meta, cols), want, **_tol(dt))


def test_sparse_kernels_load_from_numbas_disk_cache():
    """The products and the compression are top-level functions (a closure holding other
    jitted functions missed numba's cache in every new process): a fresh process compiles
    nothing for them."""
    import subprocess
    import sys
    code = ("import numpy as np, time\n"
            "from nbaccel_kernels.sparse import cpu\n"
            "v, m = cpu.compress(np.ones((8, 64), np.float32))\n"
            "cpu.linear(np.ones(64, np.float32), v, m, 64); cpu.linear(np.ones((9, 64), np.float32), v, m, 64)\n"
            "print(*(sum(cpu._k(n).stats.cache_misses.values()) for n in ('compress', 'gemv', 'gemm_t')))\n")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)   # fill it
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.split() == ["0", "0", "0"], out.stdout


def test_cpu_linear_shape_errors():
    values, meta = cpu.compress(np.ones((4, 8), np.float32))
    with pytest.raises(ValueError, match="input of shape"):
        cpu.linear(np.ones(12, np.float32), values, meta, 8)
    with pytest.raises(ValueError, match="don't describe"):
        cpu.linear(np.ones(8, np.float32), values, meta, 12)


def test_cpu_empty():
    values, meta = cpu.compress(np.ones((0, 8), np.float32))
    assert values.shape == (0, 4) and meta.shape == (0, 1)
    assert cpu.linear(np.ones((3, 8), np.float32), values, meta, 8).shape == (3, 0)


# ---- Triton (interpreter on the CPU; small shapes: ~1.5 ms per program) ---------------------------

class _OnDevice:
    """The Triton wrappers with NumPy in and out: under the interpreter the arrays pass as they
    are; on a GPU they go through CuPy."""

    def __init__(self, mod):
        self.mod = mod
        self.gpu = os.environ.get("TRITON_INTERPRET") != "1"

    def _in(self, a):
        if self.gpu and isinstance(a, np.ndarray):
            import cupy
            return cupy.asarray(a)
        return a

    def _out(self, a):
        return a.get() if self.gpu else a

    def __getattr__(self, name):
        fn = getattr(self.mod, name)

        def call(*args, **kw):
            res = fn(*[self._in(a) for a in args], **kw)
            return tuple(self._out(r) for r in res) if isinstance(res, tuple) else self._out(res)
        return call


@pytest.fixture(scope="module")
def tri():
    pytest.importorskip("triton")
    from nbaccel_kernels.sparse import triton as t
    return _OnDevice(t)


@pytest.mark.parametrize("rows,cols", [(1, 4), (5, 12), (20, 36), (17, 72)])
@pytest.mark.parametrize("dt", DTYPES)
def test_triton_compression_matches_reference(tri, rows, cols, dt):
    w = _weight(rows, cols, dt)
    w[-1, -4:] = [np.nan, 1.0, 2.0, np.nan]
    values, meta = tri.compress(w)
    rv, rm = ref.compress(w)
    np.testing.assert_array_equal(meta, rm)
    np.testing.assert_array_equal(values, rv)
    np.testing.assert_array_equal(tri.decompress(rv, rm, cols), ref.decompress(rv, rm, cols))


@pytest.mark.parametrize("rows,cols", [(5, 12), (20, 36), (40, 72)])
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("batch", [None, 3, 19])
def test_triton_linear_matches_reference_and_dense(tri, rows, cols, dt, batch):
    w = _weight(rows, cols, dt)
    values, meta = ref.compress(w)
    x = np.random.default_rng(4).standard_normal(cols if batch is None else (batch, cols)).astype(dt)
    got = tri.linear(x, values, meta, cols)
    assert got.dtype == dt and got.shape == ((rows,) if batch is None else (batch, rows))
    np.testing.assert_allclose(got, ref.linear(x, values, meta, cols), **_tol(dt))
    np.testing.assert_allclose(got, x @ np.where(ref.prune_mask(w), w, 0).T, **_tol(dt))


def test_triton_linear_block_sizes(tri):
    w = _weight(24, 40, np.float32)
    values, meta = ref.compress(w)
    x = np.random.default_rng(5).standard_normal((9, 40)).astype(np.float32)
    want = ref.linear(x, values, meta, 40)
    for blocks in ({"BM": 16, "BN": 16, "BK": 16}, {"BM": 16, "BN": 32, "BK": 64}):
        np.testing.assert_allclose(tri.linear(x, values, meta, 40, **blocks), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="block sizes"):
        tri.linear(x, values, meta, 40, BK=12)
