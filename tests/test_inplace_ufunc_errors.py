"""An in-place ufunc (``t -= x``, ``np.subtract(t, x, out=t)``) that NumPy refuses raises
NumPy's own exception under ``nb.compile``: the same class and message, in NumPy's order (the
ufunc's loop and the cast of its result into ``t`` come before the shapes)."""

import itertools

import numpy as np
import pytest

import nbaccel as nb


def _outcome(fn, *arrays):
    try:
        r = fn(*[a.copy() for a in arrays])
    except Exception as e:                      # noqa: BLE001 - the exception is the result
        return type(e), str(e)
    return "ok", r.dtype, r.shape


def same_error_as_numpy(fn, *arrays, backend="numpy"):
    want = _outcome(fn, *arrays)
    compiled = nb.compile(fn, backend=backend)
    for _ in range(2):                          # traced, then the cached entry
        got = _outcome(compiled, *arrays)
        if want[0] == "ok":
            assert got == want
        else:
            assert got[0] != "ok" and issubclass(got[0], want[0]), (got, want)
            assert got[1] == want[1]


def test_fuzz_seed_51436_bool_subtract_is_a_type_error_before_the_shapes():
    # NumPy: "Cannot cast ufunc 'subtract' output from dtype('int32') to dtype('bool')", where
    # the compiled function raised nbaccel's ShapeError of the (2,2) and (2,3) operands
    def program(a3, a4):
        t1 = np.isnan(a3)
        t1[::-1] -= a4
        return t1
    same_error_as_numpy(program, np.zeros((2, 2), np.float32), np.ones((2, 3), np.int32))


def _inplace(op):
    ns = {"np": np}
    exec(f"def f(a, b):\n    t = a + a\n    t {op}= b\n    return t\n", ns)
    return ns["f"]


def _out(ufunc):
    def f(a, b):
        t = a + a
        ufunc(t, b, out=t)
        return t
    return f


DTYPES = (np.bool_, np.int32, np.float32, np.complex64)
SHAPES = (((2, 2), (2, 2)), ((2, 2), (2, 3)), ((2, 2), (3,)), ((3,), (2, 3)))


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "//", "%", "**", "&", "|", "^", "<<", ">>"])
def test_an_in_place_operator_fails_as_numpy_does(op):
    f = _inplace(op)
    for (da, db), (sa, sb) in itertools.product(itertools.product(DTYPES, DTYPES), SHAPES):
        same_error_as_numpy(f, np.ones(sa, da), np.ones(sb, db))


@pytest.mark.parametrize("ufunc", [np.subtract, np.multiply, np.true_divide, np.bitwise_and])
def test_a_ufunc_into_out_fails_as_numpy_does(ufunc):
    f = _out(ufunc)
    for (da, db), (sa, sb) in itertools.product(itertools.product(DTYPES[:3], DTYPES[:3]), SHAPES):
        same_error_as_numpy(f, np.ones(sa, da), np.ones(sb, db))


def test_numba_backend_too():
    same_error_as_numpy(_inplace("-"), np.ones((2, 2), bool), np.ones((2, 3), np.int32), backend="numba")
    same_error_as_numpy(_inplace("-"), np.ones((2, 2), bool), np.ones((2, 3), bool), backend="numba")


MATMUL_SHAPES = [((2, 2), (2, 3)), ((2, 2), (3,)), ((2, 2), (3, 2)), ((3,), (3, 2)), ((3,), (2, 3)),
                 ((2, 2), (2, 2, 2)), ((4, 2, 2), (3, 2, 2)), ((2, 3), (3, 3)), ((), (2, 2))]


def test_matmul_in_place_words_its_shapes_as_numpy():
    # ndarray's @= is np.matmul(t, b, out=t, axes=...) and words an AxisError as its own
    # ("inplace matrix multiplication requires ..."); core and loop dimensions in NumPy's words
    f = _inplace("@")
    for (sa, sb), (da, db) in itertools.product(MATMUL_SHAPES, itertools.product(DTYPES, DTYPES)):
        same_error_as_numpy(f, np.ones(sa, da), np.ones(sb, db))


@pytest.mark.parametrize("other", [[1, 2, 3], [[1.5, 2], [3, 4]], [[1, 2], [3, 4]], (True, False)])
def test_a_list_operand_is_numpys_array_of_it(other):
    # (a list of Python ints is an int64 array to NumPy: not weak, so bool -= [1, 2, 3] is the cast error)
    ns = {"np": np, "other": other}
    exec("def f(a):\n    t = a.copy()\n    t -= other\n    return t\n", ns)
    for dt, shape in itertools.product((np.bool_, np.int32, np.float32), ((2, 2), (2, 3))):
        same_error_as_numpy(ns["f"], np.ones(shape, dt))
