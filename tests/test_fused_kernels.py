"""The fused eager kernels (nbaccel_kernels.fused): the numba loops against their NumPy
reference, float32 and float64, with the edge cases the eager ops hand them (ignored targets,
NaN and infinite rows, a single row, channels split over threads). Adam's update must give
the reference's bits: nbaccel's eager optimizers promise the same bits as their op path."""
import numpy as np
import pytest

from nbaccel_kernels.fused import _launch, cpu, reference

DTYPES = [np.float32, np.float64]


def _rng(seed=0):
    return np.random.default_rng(seed)


def _tol(dt):
    return dict(rtol=2e-5, atol=2e-6) if dt == np.float32 else dict(rtol=1e-10, atol=1e-12)


def _both(name, *args, out_shape, dtype, **kw):
    """Run kernel ``name`` and its reference into fresh outputs; return both outputs."""
    got, want = np.full(out_shape, np.nan, dtype), np.full(out_shape, np.nan, dtype)
    r1 = getattr(cpu, name)(*args, got, **kw)
    r2 = getattr(reference, name)(*args, want, **kw)
    assert r1 == r2
    return got, want


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("size", [1, 7, 70_000])      # 70,000: split over the kernel threads
def test_gelu(dt, size):
    x = (_rng().standard_normal(size) * 3).astype(dt)
    g = _rng(1).standard_normal(size).astype(dt)
    np.testing.assert_allclose(*_both("gelu_forward", x, out_shape=size, dtype=dt), **_tol(dt))
    np.testing.assert_allclose(*_both("gelu_backward", g, x, out_shape=size, dtype=dt),
                               **_tol(dt))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape", [(1, 5), (9, 33), (1600, 130)])    # the last: threads
def test_softmax_backward(dt, log, shape):
    g = _rng().standard_normal(shape).astype(dt)
    y = _rng(1).standard_normal(shape).astype(dt)
    y = np.log(np.abs(y)).astype(dt) if log else np.abs(y)
    np.testing.assert_allclose(*_both("softmax_backward", g, y, out_shape=shape, dtype=dt,
                                      log=log), **_tol(dt))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("affine", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("shape", [(1, 4), (30, 128), (2100, 96)])    # the last: threads
def test_layer_norm(dt, affine, shape):
    x = (_rng().standard_normal(shape) * 2 + 1).astype(dt)
    g = _rng(1).standard_normal(shape).astype(dt)
    w, b = (_rng(2).standard_normal(shape[1]).astype(dt) for _ in range(2))
    np.testing.assert_allclose(*_both("layer_norm_forward", x, w, b, *affine, 1e-5,
                                      out_shape=shape, dtype=dt), **_tol(dt))
    np.testing.assert_allclose(*_both("layer_norm_backward", g, x, w, affine[0], 1e-5,
                                      out_shape=shape, dtype=dt), **_tol(dt))
    got, want = _both("layer_norm_affine_backward", g, x, 1e-5, out_shape=(2, shape[1]),
                      dtype=dt)
    np.testing.assert_allclose(got, want, rtol=_tol(dt)["rtol"], atol=1e-4 if dt == np.float32
                               else 1e-10)


def test_float32_layer_norm_keeps_a_large_mean_exact():
    """float32 rows run float32 element passes with the mean as a head and a rest (a float32
    mean alone, or "reassoc" folding the two, is off by half an ulp of 1000 = 3e-5, which is
    0.3% of this spread): a row far from zero normalises as in float64."""
    x = (1000 + 0.01 * _rng().standard_normal((64, 128))).astype(np.float32)
    g = _rng(1).standard_normal(x.shape).astype(np.float32)
    w = _rng(2).standard_normal(128).astype(np.float32)
    for name, args in (("layer_norm_forward", (x, w, w, True, True, 1e-6)),
                       ("layer_norm_backward", (g, x, w, True, 1e-6))):
        got, want = _both(name, *args, out_shape=x.shape, dtype=np.float32)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    got, want = _both("layer_norm_affine_backward", g, x, 1e-6, out_shape=(2, 128),
                      dtype=np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("rows,n", [(1, 3), (50, 10), (450, 257)])    # the last: threads
def test_cross_entropy(dt, rows, n):
    x = (_rng().standard_normal((rows, n)) * 4).astype(dt)
    t = _rng(1).integers(0, n, rows)
    t[::3] = -100                                  # ignored rows
    scale = _rng(2).standard_normal(rows)
    np.testing.assert_allclose(*_both("cross_entropy_forward", x, t, -100, out_shape=rows,
                                      dtype=dt), **_tol(dt))
    np.testing.assert_allclose(*_both("cross_entropy_backward", x, t, -100, scale,
                                      out_shape=(rows, n), dtype=dt), **_tol(dt))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # the reference's own NaN arithmetic
@pytest.mark.parametrize("dt", DTYPES)
def test_rows_with_nan_and_infinities_follow_numpy(dt):
    """A NaN, a +inf or an all -inf row makes the row's result NaN, as NumPy's formula does;
    a -inf logit is an ordinary (zero-probability) class. Rows of 19: the float32 kernel's
    row max runs eight lanes and a tail, so the NaN sits in the first lane, a later block and
    the tail; a row of logits 200 apart underflows its exps to 0 (not NaN)."""
    n = 19
    x = np.tile(np.linspace(-1.0, 2.0, n), (9, 1))
    x[0, 0] = x[1, 9] = x[2, 18] = np.nan
    x[3, 5] = np.inf
    x[4] = -np.inf
    x[5, 3] = -np.inf
    x[6] *= 200.0
    x = x.astype(dt)
    t = np.array([0, 0, 0, 0, 0, 0, 0, 3, 18])
    loss, want = _both("cross_entropy_forward", x, t, -100, out_shape=9, dtype=dt)
    np.testing.assert_array_equal(np.isnan(loss), [True] * 5 + [False] * 4)
    np.testing.assert_allclose(loss, want, **_tol(dt))
    got, want = _both("cross_entropy_backward", x, t, -100, np.ones(9), out_shape=(9, n),
                      dtype=dt)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got[:5]).all() and not np.isnan(got[5:]).any()
    np.testing.assert_allclose(got[5:], want[5:], **_tol(dt))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [(2, 1, 3), (4, 5, 9), (16, 24, 600)])   # the last: threads
def test_batch_norm(dt, shape):
    x = (_rng().standard_normal(shape) * 3 - 1).astype(dt)
    g = _rng(1).standard_normal(shape).astype(dt)
    w, b = (_rng(2).standard_normal(shape[1]).astype(dt) for _ in range(2))
    c = shape[1]
    tol = _tol(dt)
    np.testing.assert_allclose(*_both("batch_norm_stats", x, out_shape=(2, c), dtype=dt), **tol)
    for has_w, has_b in [(False, False), (True, True)]:
        np.testing.assert_allclose(*_both("batch_norm_forward", x, w, b, has_w, has_b, 1e-5,
                                          out_shape=shape, dtype=dt), **tol)
        np.testing.assert_allclose(*_both("batch_norm_backward", g, x, w, has_w, 1e-5,
                                          out_shape=shape, dtype=dt), **tol)
    got, want = _both("batch_norm_affine_backward", g, x, 1e-5, out_shape=(2, c), dtype=dt)
    np.testing.assert_allclose(got, want, rtol=tol["rtol"], atol=1e-3 if dt == np.float32
                               else 1e-9)


def test_embedding_backward_adds_repeated_rows():
    g = _rng().standard_normal((50, 6)).astype(np.float32)
    idx = _rng(1).integers(0, 7, 50)
    got, want = np.zeros((7, 6), np.float32), np.zeros((7, 6), np.float32)
    cpu.embedding_backward(g, idx, got)
    reference.embedding_backward(g, idx, want)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("decay,decoupled,maximize", [(False, False, False), (True, True, False),
                                                      (True, False, True)])
@pytest.mark.parametrize("size", [5, 500_000])        # the last: threads
def test_adam_update_gives_the_references_bits(dt, decay, decoupled, maximize, size):
    rng = _rng()
    p, g = rng.standard_normal(size).astype(dt), rng.standard_normal(size).astype(dt)
    m, v = rng.standard_normal(size).astype(dt) * 0.1, rng.random(size).astype(dt) * 0.01
    lr, b1, b2, wd, t = 1e-3, 0.9, 0.999, 0.01, 3
    sc = np.array([wd, b1, 1 - b1, b2, 1 - b2, np.sqrt(1 - b2 ** t), 1e-8, lr / (1 - b1 ** t),
                   1 - lr * wd], dt)
    args = [(p.copy(), g, m.copy(), v.copy()) for _ in range(2)]
    cpu.adam_update(*args[0], sc, decay, decoupled, maximize)
    reference.adam_update(*args[1], sc, decay, decoupled, maximize)
    for got, want in zip(args[0], args[1]):
        np.testing.assert_array_equal(got, want)


def test_the_large_cases_above_do_split_over_threads(monkeypatch):
    """The sizes marked "threads" above are over the split threshold (so both the inline and
    the threaded paths are tested), where the kernels have two threads or more."""
    monkeypatch.setenv("NBACCEL_KERNEL_THREADS", "2")
    for size, ns in [(70_000, 10), (1600 * 130, 1), (2100 * 96, 1), (450 * 257, 2),
                     (16 * 24 * 600, 1), (500_000, 0.5)]:
        assert _launch._worth_splitting(size, ns)
    assert not _launch._worth_splitting(65_536, 0.5)


def test_float32_gelu_is_within_float32_rounding_of_the_exact_function():
    """float32 GELU uses a fitted erfc in float32 arithmetic (kernels/fused/gelu32.py): against
    the exact x * Phi(x), computed with math.erfc (no cancellation in the negative tail), it is
    within 3e-7 absolute and a few float32 ulps where the result is not tiny, out to where the
    tail underflows (|x| = 14)."""
    import math
    x = np.concatenate([np.linspace(-14, 14, 200001), [0.0, -0.0, 1e-30, -1e-30, 1e-40]]
                       ).astype(np.float32)
    v = x.astype(np.float64)
    exact = v * 0.5 * np.vectorize(math.erfc)(-v / math.sqrt(2))
    dexact = 0.5 * np.vectorize(math.erfc)(-v / math.sqrt(2)) + v * np.exp(-v * v / 2) / math.sqrt(2 * math.pi)
    out = np.empty_like(x)
    cpu.gelu_forward(x, out)
    assert np.max(np.abs(out - exact)) < 3e-7
    big = np.abs(exact) > 1e-3
    assert np.max(np.abs(out - exact)[big] / np.abs(exact[big])) < 5e-7
    cpu.gelu_backward(np.ones_like(x), x, out)
    assert np.max(np.abs(out - dexact)) < 3e-7
    assert out.dtype == np.float32
    special = np.array([np.nan, np.inf, -np.inf, -100.0, 100.0], np.float32)
    out = np.empty_like(special)
    cpu.gelu_forward(special, out)
    assert np.isnan(out[0]) and out[1] == np.inf and np.isnan(out[2])     # as x * Phi(x)
    assert out[3] == 0 and np.signbit(out[3]) and out[4] == 100           # -100 * 0 is -0


def test_float32_gelu_tanh_form_against_its_float64_formula():
    """The tanh form's float32 kernel (x * sigmoid(2u), kernels/fused/gelu32.py) against
    0.5 * x * (1 + tanh(u)) in float64: within 6e-7 absolute, 2e-6 relative where the result
    is not tiny (NumPy's float32 expression: 9e-5, 1 + tanh cancels for negative x), the
    gradient within 3e-7; special values as the float32 expression gives them."""
    import math
    k = math.sqrt(2 / math.pi)
    x = np.concatenate([np.linspace(-14, 14, 200001), [0.0, -0.0, 1e-30, -1e-30]]
                       ).astype(np.float32)
    v = x.astype(np.float64)
    t = np.tanh(k * (v + 0.044715 * v ** 3))
    exact = 0.5 * v * (1 + t)
    dexact = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * 0.044715 * v * v)
    out = np.empty_like(x)
    cpu.gelu_tanh_forward(x, out)
    assert np.max(np.abs(out - exact)) < 6e-7
    big = np.abs(exact) > 1e-3
    assert np.max(np.abs(out - exact)[big] / np.abs(exact[big])) < 2e-6
    cpu.gelu_tanh_backward(np.ones_like(x), x, out)
    assert np.max(np.abs(out - dexact)) < 3e-7
    special = np.array([np.nan, np.inf, -np.inf, -100.0, 100.0], np.float32)
    out = np.empty_like(special)
    cpu.gelu_tanh_forward(special, out)
    assert np.isnan(out[0]) and out[1] == np.inf and np.isnan(out[2])
    assert out[3] == 0 and np.signbit(out[3]) and out[4] == 100


# (x shape (P, H, W), kh, kw, sh, sw, dh, dw, pt, pl, out (OH, OW))
POOLS = [((3, 6, 6), 2, 2, 2, 2, 1, 1, 0, 0, (3, 3)),
         ((2, 7, 5), 3, 3, 2, 2, 1, 1, 1, 1, (4, 3)),
         ((2, 9, 9), 3, 2, 1, 2, 2, 1, 1, 0, (5, 4)),          # dilation, overlap, asymmetric
         ((2, 5, 5), 2, 2, 2, 2, 1, 1, 0, 0, (3, 3)),          # ceil_mode's overhang
         ((3, 7, 9), 2, 2, 2, 2, 1, 1, 0, 0, (3, 4)),          # 2x2 kernel: rows, columns left over
         ((400, 14, 14), 2, 2, 2, 2, 1, 1, 0, 0, (7, 7))]      # threads


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("case", POOLS)
def test_max_pool2d_backward(dt, case):
    xs, kh, kw, sh, sw, dh, dw, pt, pl, ohw = case
    rng = _rng()
    x = rng.integers(-3, 3, xs).astype(dt)           # ties: the first maximum takes it
    if xs[0] < 10:
        x.flat[::7] = np.nan                         # a NaN maximum is its first NaN
    g = rng.standard_normal((xs[0],) + ohw).astype(dt)
    np.testing.assert_allclose(*_both("max_pool2d_backward", g, x, kh, kw, sh, sw, dh, dw, pt,
                                      pl, out_shape=xs, dtype=dt), rtol=1e-6, atol=1e-6)
