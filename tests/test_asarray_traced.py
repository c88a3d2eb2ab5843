"""np.asarray, np.asanyarray and np.ascontiguousarray of a traced array inside ``nb.compile``
are traced with NumPy's meaning (issue 37): the array itself, a cast where a dtype differs, a
copy where asked or where NumPy makes one; no graph break, and writes through the result reach
what NumPy's would reach."""

import numpy as np
import pytest

import nbaccel as nb


def _same(fn, *arrays):
    plain_in = [a.copy() for a in arrays]
    want = fn(*plain_in)
    cf = nb.compile(fn, backend="numpy", fullgraph=True)      # fullgraph: a break raises
    for _ in range(2):                                         # traced, then replayed
        got_in = [a.copy() for a in arrays]
        got = cf(*got_in)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert type(g) is type(w), (type(g), type(w))
            assert np.asarray(g).dtype == np.asarray(w).dtype
            np.testing.assert_array_equal(g, w)
        for g, w in zip(got_in, plain_in):                    # inputs written as NumPy writes them
            np.testing.assert_array_equal(g, w)
    return cf


X = np.arange(6.0).reshape(2, 3)


def test_asarray_of_a_traced_array_is_the_array():
    cf = _same(lambda x: np.asarray(x * 2) + 1, X)
    assert cf.stats["graph_breaks"] == 0


@pytest.mark.parametrize("conv", [np.asarray, np.asanyarray])
def test_writes_through_asarray_reach_the_input(conv):
    def f(x):
        y = conv(x)
        y[0] = 7                      # x itself, as NumPy's asarray returns x
        z = conv(x, dtype=np.float64)
        z += 1                        # the same dtype: still x
        return x * 1
    _same(f, X)


def test_a_dtype_or_copy_makes_a_new_array():
    def f(x):
        a = np.asarray(x, dtype=np.float32)
        a += 1                        # a float32 copy: x unchanged
        b = np.asarray(x, copy=True)
        b[0] = -1
        return a, b, x + 0
    _same(f, X)


def test_asarray_of_a_numpy_scalar_is_a_new_0d_array():
    def f(x):
        s = x.sum()                   # a NumPy scalar
        a = np.asarray(s)
        a += 1                        # a 0-d array: in place, s unchanged
        return s, a
    _same(f, X)


def test_ascontiguousarray_copies_only_what_is_not_contiguous():
    def f(x):
        c = np.ascontiguousarray(x)
        c[0, 0] = 9                   # x is C-contiguous: c is x
        t = np.ascontiguousarray(x.T)
        t[0, 0] = -9                  # a copy: x unchanged
        return x * 1, t
    _same(f, X)


def test_numpy_is_numpy_again_after_the_trace():
    original = np.asarray
    nb.compile(lambda x: np.asarray(x) * 2, backend="numpy")(X)
    assert np.asarray is original and np.ascontiguousarray.__module__ == "numpy"


def test_an_argument_that_needs_values_goes_to_numpy():
    # order="F" depends on a layout NumPy decides: NumPy's own asarray (a graph break), same values
    f = lambda x: np.asarray(x * 2, order="F") + 1
    cf = nb.compile(f, backend="numpy")
    np.testing.assert_array_equal(cf(X), f(X))
    assert cf.stats["graph_breaks"] == 1
