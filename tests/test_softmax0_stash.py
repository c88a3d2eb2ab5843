"""The numba tier's axis-0 softmax keeps exp(x - max so far) in the output during its online
pass and rescales it per chunk in the final pass (``numba_passes.softmax_stash``): exp once per
element and the input read once. Values against NumPy where the factors matter (chunks of -inf
before very negative maxima, NaN, +inf, maxima rising in every chunk), on shapes that are not
multiples of the chunk or the block, strided and 3-D inputs, and kernels that must not stash."""
import warnings

import numpy as np
import pytest

import nbaccel as nb
import nbaccel.nn.functional as F
from nbaccel.compiler.codegen import numba as R

CH = R.SUM_CHUNK_ROWS


def _numba(fn, *args):
    cf = nb.compile(fn, backend="numba")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = cf(*args)
    rep = cf.report
    assert rep.tier == "numba", rep
    return np.asarray(out), rep


def _softmax0(x, axis=0):
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)


def _hard_columns(rows, cols):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((rows, cols)) * 3).astype(np.float32)
    k = min(CH + 3, rows - 1)
    x[:k, 0] = -np.inf                             # -inf chunks, then maxima near -100: the
    x[k:, 0] = -100.0 + x[k:, 0]                   # factor of the -inf chunks must be 0, not inf * 0
    x[:, 1] = -np.inf                              # all -inf: NaN, as NumPy
    x[min(CH + 1, rows - 1), 2] = np.nan
    x[min(2 * CH + 2, rows - 1), 3] = np.inf
    x[:, 4] = np.linspace(-80, 80, rows)           # the max rises in every chunk
    x[:, 5] = np.linspace(80, -80, rows)           # the first chunk holds the max
    x[:, 6] = 1e30                                 # equal huge values: 1 / rows each
    x[::2, 7] = -np.inf                            # -inf mixed into every chunk
    return x


@pytest.mark.parametrize("rows,cols", [(3 * CH + 5, R.STASH_BLOCK * 2 + 7), (CH - 3, 9), (2, 8)])
def test_stashed_softmax_over_axis0_matches_numpy(rows, cols):
    x = _hard_columns(rows, cols)
    out, rep = _numba(lambda t: F.softmax(t, dim=0), x)
    np.testing.assert_allclose(out, _softmax0(x), rtol=4e-6, atol=1e-7, equal_nan=True)
    assert len(rep.kernels) == 1
    code = rep.code
    assert "seen" in code and f"jn = min({R.STASH_BLOCK}," in code
    # the input is read by the chunk's max and the chunk's exps only; the final pass reads
    # the stored exps back (no exp per element there)
    assert code.count("for i0 in range(c0,") == 2
    final = code[code.rindex("for i0 in range(n0)"):]
    assert "fexp" not in final and "_EXP_LO" not in final and "a0[" not in final


def test_stashed_softmax_of_an_expression_strided_and_3d():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((150, 70)).astype(np.float32)
    out, _ = _numba(lambda t: F.softmax(t * 2.0 + 1.0, dim=0), x)
    np.testing.assert_allclose(out, _softmax0(x * 2 + 1), rtol=4e-6, atol=1e-7)
    xt = np.ascontiguousarray(rng.standard_normal((90, 140)).astype(np.float32)).T   # strided
    out, _ = _numba(lambda t: F.softmax(t, dim=0), xt)
    np.testing.assert_allclose(out, _softmax0(xt), rtol=4e-6, atol=1e-7)
    x3 = rng.standard_normal((3, 130, 20)).astype(np.float32)
    out, _ = _numba(lambda t: F.softmax(t, dim=1), x3)
    np.testing.assert_allclose(out, _softmax0(x3, axis=1), rtol=4e-6, atol=1e-7)


def test_no_stash_where_the_store_does_not_use_the_exps():
    x = _hard_columns(2 * CH + 5, 40)
    x[:, 6] = 0.0   # 1e30 - 1e30 - log(n): reassociated to 0 under fast-math (not this pass's)

    def log_softmax0(t):
        m = t.max(axis=0, keepdims=True)
        return t - m - np.log(np.exp(t - m).sum(axis=0, keepdims=True))
    out, rep = _numba(log_softmax0, x)
    with np.errstate(invalid="ignore", divide="ignore"):
        want = log_softmax0(x)
    np.testing.assert_allclose(out, want, rtol=4e-6, atol=1e-5, equal_nan=True)
    assert "seen" not in rep.code and f"jn = min({R.BLOCK}," in rep.code

    # two reductions over two axes: the chunk index alone cannot name the factor
    x3 = np.random.default_rng(2).standard_normal((4, 70, 30)).astype(np.float32)

    def softmax01(t):
        e = np.exp(t - t.max(axis=(0, 1), keepdims=True))
        return e / e.sum(axis=(0, 1), keepdims=True)
    out, rep = _numba(softmax01, x3)
    np.testing.assert_allclose(out, softmax01(x3), rtol=4e-6, atol=1e-7)
    assert "seen" not in rep.code
