"""Scalar arguments and reads in guarded replay (compiler/replay/guarded.py ``call_key``,
readset.py's value guards, the graph's structure): a NumPy scalar argument replays as a Python
scalar does, keyed on its type (its dtype) and value; a change of dtype traces again; a signed
zero is never replayed as the other zero (0.0 == -0.0, but 1 / -0.0 is -inf)."""
import numpy as np
import pytest

import nbaccel as nb


@pytest.fixture(autouse=True)
def _compiled_calls_only(monkeypatch):
    """Every call takes the compiled path (the plain-or-compiled decision is tested elsewhere)."""
    monkeypatch.setitem(nb.config, "decide_functions", False)


def _same(got, want):
    assert type(got) is type(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def f_scaled(x, w, b, k):
    return (x * w + b) ** 2 + k


@pytest.mark.parametrize("backend", ["numpy", "auto"])
def test_numpy_scalar_arguments_replay(backend):
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    cf = nb.compile(f_scaled, backend=backend)
    args = (x, np.float32(0.5), np.float32(0.1), np.int64(3))
    for i in range(4):
        _same(cf(*args), f_scaled(*args))
        cf.wait()
    assert cf.stats["compiles"] == 1
    assert cf.stats.get("replays", 0) == 3          # every call after the first replays


def test_a_change_of_scalar_dtype_traces_again():
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    cf = nb.compile(f_scaled, backend="numpy")
    kinds = [np.float32(0.5), np.float64(0.5), 0.5, np.float16(0.5), np.int8(1), True, np.bool_(True)]
    for w in kinds:                                 # each kind's first call traces
        replays = cf.stats.get("replays", 0)
        _same(cf(x, w, 0.1, 3), f_scaled(x, w, 0.1, 3))
        assert cf.stats.get("replays", 0) == replays, type(w)
    for w in kinds:                                 # and replays its own program afterwards
        replays = cf.stats.get("replays", 0)
        _same(cf(x, w, 0.1, 3), f_scaled(x, w, 0.1, 3))
        assert cf.stats.get("replays", 0) == replays + 1, type(w)
    # a float64 input: a np.float32 scalar does not promote it, a np.float64 one neither; an
    # int8 array: np.float32 makes float32, a Python float float64 -> different programs
    xi = np.arange(12, dtype=np.int8).reshape(3, 4)
    cf = nb.compile(f_scaled, backend="numpy")
    for w in [np.float32(2.0), 2.0, np.float64(2.0), np.int16(2), 2] * 2:
        _same(cf(xi, w, 1, 1), f_scaled(xi, w, 1, 1))


def test_a_value_change_of_a_numpy_scalar_traces_again():
    x = np.ones((2, 2), np.float32)
    cf = nb.compile(f_scaled, backend="numpy")
    for w in [np.float32(0.5), np.float32(2.0), np.float32(0.5), np.float32(2.0)]:
        _same(cf(x, w, np.float32(0), 0), f_scaled(x, w, np.float32(0), 0))
    assert cf.stats.get("replays", 0) == 2


def f_div(x, s):
    return x / s


@pytest.mark.parametrize("zero", [0.0, np.float32(0.0), np.float64(0.0), 0j, np.complex64(0)])
def test_a_signed_zero_argument_is_not_the_other_zero(zero):
    x = np.ones(4, np.float32)
    cf = nb.compile(f_div, backend="numpy")
    neg = -zero if not isinstance(zero, (complex, np.complexfloating)) else type(zero)(complex(0.0, -0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        for s in [zero, neg, zero, neg]:
            got, want = cf(x, s), f_div(x, s)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(np.signbit(got.real), np.signbit(want.real))
            np.testing.assert_array_equal(np.signbit(np.imag(got)), np.signbit(np.imag(want)))
            np.testing.assert_array_equal(got, want)
    assert cf.stats.get("replays", 0) == 2           # each zero replays its own program


DENOM = 0.0


def f_global_div(x):
    return x / DENOM


def test_a_global_turned_negative_zero_is_a_failed_guard():
    global DENOM
    x = np.ones(4, np.float32)
    cf = nb.compile(f_global_div, backend="numpy")
    try:
        with np.errstate(divide="ignore"):
            for v in [0.0, 0.0, -0.0, -0.0, 0.0]:
                DENOM = v
                _same(cf(x), f_global_div(x))
    finally:
        DENOM = 0.0


def test_reduce_overhead_keys_numpy_scalars_and_signed_zeros():
    x = np.ones(4, np.float32)
    cf = nb.compile(f_div, mode="reduce-overhead", backend="numpy")
    with np.errstate(divide="ignore"):
        for s in [np.float32(2), np.float32(2), 2.0, np.float64(2), np.float32(0), np.float32(-0.0),
                  np.float32(2), -0.0, 0.0, -0.0]:
            _same(cf(x, s), f_div(x, s))
    assert cf.stats.get("replays", 0) >= 2
