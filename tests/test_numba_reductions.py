"""The numba tier's reduction loops: vectorisable float max/min, float32 chunk partial sums,
one pass per distinct reduction, invariants hoisted out of column blocks, and the online
softmax pass over axis 0. Values against NumPy (NaN, ±inf, rising maxima across chunks, several
column blocks) and the structure of the generated source."""
import warnings

import numpy as np
import pytest
from numba import njit

import nbaccel as nb
import nbaccel.nn.functional as F
from nbaccel.compiler.codegen import numba as R
from nbaccel.compiler.codegen.numba_reduce import fmaximum, fminimum

ROWS, COLS = 2 * R.SUM_CHUNK_ROWS + 9, R.BLOCK + 37     # several row chunks, two column blocks


def _numba(fn, *args):
    cf = nb.compile(fn, backend="numba")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = cf(*args)
    rep = cf.report
    rep.measure_eager()
    assert rep.tier == "numba", rep
    return out, rep


def _softmax0_np(x):
    e = np.exp(x - x.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


def _edge_columns(dtype=np.float32):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((ROWS, COLS)) * 4).astype(dtype)
    x[: R.SUM_CHUNK_ROWS + 5, 1] = -np.inf      # a first chunk of -inf, then finite values
    x[:, 2] = -np.inf                            # a column of -inf: NumPy gives NaN
    x[17, 3] = np.nan
    x[40, 4] = np.inf
    x[:, 5] = np.linspace(-60, 70, ROWS)         # the max rises in every chunk
    x[:, 6] = np.linspace(70, -60, ROWS)
    x[:, COLS - 1] = 0.0
    return x


@pytest.mark.parametrize("fn,name", [(fmaximum, "max"), (fminimum, "min")])
def test_fmaximum_fminimum_propagate_nan(fn, name):
    @njit
    def red(a):
        m = a[0]
        for v in a[1:]:
            m = fn(m, v)
        return m
    a = np.array([1.0, 5.0, -2.0], np.float32)
    assert red(a) == getattr(np, name)(a)
    assert np.isnan(red(np.array([1.0, np.nan, 7.0], np.float32)))
    assert red(np.array([-np.inf, 3.0], np.float64)) == getattr(np, name)([-np.inf, 3.0])


def test_softmax_over_axis0_is_one_online_pass():
    x = _edge_columns()
    out, rep = _numba(lambda t: F.softmax(t, dim=0), x)
    with np.errstate(invalid="ignore"):
        want = _softmax0_np(x)
    np.testing.assert_allclose(np.asarray(out), want, rtol=2e-6, atol=1e-7, equal_nan=True)
    assert len(rep.kernels) == 1
    assert "the max rose: rescale" in rep.code and "fmaximum" in rep.code
    # two passes over the input: the online max+sum and the store
    assert rep.code.count("for i0 in range(c0,") == 2
    # the division by each column's sum is a multiplication by its reciprocal, once per column
    assert "np.float32(1) / np.float32(acc" in rep.code and " / np.float32(acc3[jj])))" not in rep.code


def test_logsumexp_over_axis0_all_minus_inf_column_is_nan():
    def lse(x):
        m = x.max(axis=0, keepdims=True)
        return np.log(np.exp(x - m).sum(axis=0)) + m[0]
    x = _edge_columns()
    out, rep = _numba(lse, x)
    with np.errstate(invalid="ignore", divide="ignore"):
        want = lse(x)
    np.testing.assert_allclose(np.asarray(out), want, rtol=2e-6, atol=1e-6, equal_nan=True)
    assert np.isnan(np.asarray(out)[2]) and np.isnan(np.asarray(out)[3])


@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_min_reductions_match_numpy(dim, dtype):
    x = _edge_columns(dtype)
    out, rep = _numba(lambda t: (t.max(axis=dim), t.min(axis=dim)), x)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(np.asarray(out[0]), x.max(axis=dim))
        np.testing.assert_array_equal(np.asarray(out[1]), x.min(axis=dim))
    assert "fmaximum" in rep.code and "fminimum" in rep.code


def test_row_softmax_and_sums_use_float32_partials():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 3 * R.SUM_CHUNK + 5)).astype(np.float32)
    out, rep = _numba(lambda t: F.softmax(t, dim=-1), x)
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(np.asarray(out), e / e.sum(-1, keepdims=True), rtol=2e-6, atol=1e-8)
    assert f"range(0, n1, {R.SUM_CHUNK})" in rep.code and "np.float32(0)" in rep.code


def test_float32_partial_sums_stay_accurate():
    # a large offset and many elements: the float32 partials must not drift like one float32 sum
    x = (1000.0 + np.random.default_rng(1).standard_normal((3, 200_000))).astype(np.float32)
    out, _ = _numba(lambda t: t.sum(axis=-1), x)
    want = x.astype(np.float64).sum(-1)
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-6)
    y = np.ascontiguousarray(x.T[:20_000])
    out, _ = _numba(lambda t: t.sum(axis=0), y)
    np.testing.assert_allclose(np.asarray(out), y.astype(np.float64).sum(0), rtol=1e-6)


@pytest.mark.parametrize("n", [8, R.SUM_CHUNK, R.SUM_CHUNK + 1, 3 * R.SUM_CHUNK + 5])
def test_a_short_float32_sum_skips_the_chunk_loop(n):
    """(g)'s reduction over 8 coordinates: one float32 partial in a branch that unrolls; the
    same kernel takes the chunked branch when the reduced length exceeds one chunk."""
    rng = np.random.default_rng(5)
    X, C = (rng.standard_normal((s, n)).astype(np.float32) for s in (40, 6))
    out, rep = _numba(lambda a, b: ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1), X, C)
    want = ((X[:, None, :].astype(np.float64) - C[None]) ** 2).sum(-1)
    np.testing.assert_allclose(np.asarray(out), want, rtol=2e-6)
    assert f"if n2 <= {R.SUM_CHUNK}:" in rep.code and f"range(0, n2, {R.SUM_CHUNK})" in rep.code


def test_column_standardisation_shares_the_mean_and_hoists_per_column_values():
    x = _edge_columns()[:, 7:]
    out, rep = _numba(lambda t: (t - t.mean(0)) / t.std(0), x)
    np.testing.assert_allclose(np.asarray(out), (x - x.mean(0)) / x.std(0), rtol=1e-4, atol=1e-5)
    assert len(rep.kernels) == 1
    # mean and centred sum of squares in one shifted pass (x.std's own mean is shared)
    assert rep.code.count("dv * dv") == 1 and "+= part" not in rep.code
    # sqrt once per column of the block, never per element
    body = rep.code.split("def kernel")[1]
    sqrt_line = next(line for line in body.splitlines() if "math.sqrt" in line)
    assert len(sqrt_line) - len(sqrt_line.lstrip()) == 12


def test_int_and_bool_reductions_unchanged():
    a = np.arange(ROWS * COLS, dtype=np.int32).reshape(ROWS, COLS) % 97 - 40
    out, _ = _numba(lambda t: (t.max(axis=0), t.sum(axis=-1), (t > 0).any(axis=0)), a)
    np.testing.assert_array_equal(np.asarray(out[0]), a.max(0))
    np.testing.assert_array_equal(np.asarray(out[1]), a.sum(-1))
    np.testing.assert_array_equal(np.asarray(out[2]), (a > 0).any(0))


def _var_cases():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    x[:, 0] = 5.0                                   # constant: exactly 0
    x[:, 1] += 1000.0                               # a large offset
    x[0, 2] = 1e4                                   # an outlier in the first row (the shift)
    x[9, 3] = np.nan
    x[11, 4] = np.inf
    x[12, 5], x[13, 5] = np.inf, -np.inf
    x[0, 6] = -np.inf
    return x


@pytest.mark.parametrize("ddof", [0, 1])
def test_std_var_over_axis0_in_one_pass_match_numpy(ddof):
    x = _var_cases()
    out, rep = _numba(lambda t: (t.var(axis=0, ddof=ddof), t.std(axis=0, ddof=ddof), t.mean(axis=0)), x)
    with np.errstate(invalid="ignore"):
        want = (x.var(axis=0, ddof=ddof), x.std(axis=0, ddof=ddof), x.mean(axis=0))
    for g, w in zip(out, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=2e-5, atol=1e-6, equal_nan=True)
    assert np.asarray(out[0])[0] == 0.0
    assert "dv * dv" in rep.code


def test_centred_sum_of_squares_with_weights_and_3d():
    x = _var_cases()[:, :40].reshape(ROWS, 4, 10)
    w = np.linspace(0.5, 2.0, 10).astype(np.float32)

    def f(t, w):
        m = t.mean(axis=(0, 1), keepdims=True)
        return (((t - m) ** 2).sum(axis=(0, 1)) * w, (t - m).sum(axis=0))
    out, _ = _numba(f, x, w)
    with np.errstate(invalid="ignore"):
        want = f(x, w)
    for g, ww in zip(out, want):
        np.testing.assert_allclose(np.asarray(g), ww, rtol=2e-5, atol=2e-4, equal_nan=True)


def test_empty_column_reductions():
    x = np.zeros((0, COLS), np.float32)
    out, _ = _numba(lambda t: (t.sum(axis=0), t.sum(axis=0) * 2,
                               ((t - t.mean(axis=0)) ** 2).sum(axis=0)), x)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(np.asarray(out[0]), np.zeros(COLS, np.float32))
        np.testing.assert_array_equal(np.asarray(out[2]), ((x - x.mean(axis=0)) ** 2).sum(axis=0))
