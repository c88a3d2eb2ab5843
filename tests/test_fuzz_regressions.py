"""Regressions from the differential fuzzer (tests/fuzz/): each test is the shrunk reproducer of
one failure class, run plainly and under ``nb.compile``. The compiled call must give NumPy's
result types (NumPy scalar or ndarray), dtypes and values, raise NumPy's exception type where
NumPy raises (even from a line whose result is never used), and leave the inputs as NumPy
leaves them.
"""

import numpy as np
import pytest

import nbaccel as nb
from fuzz.check import _call     # (the fuzzer's own call: result or exception, warnings off)


def body_same_as_numpy(body):
    """``def f(x): <body>`` on a 2x3 float64 ``x``, as :func:`same_as_numpy` checks it."""
    ns = {"np": np}
    exec(f"def f(x):\n    {body}\n", ns)
    same_as_numpy(ns["f"], np.arange(6.0).reshape(2, 3))


def same_as_numpy(fn, *arrays, backend="numpy"):
    """Run ``fn`` plainly and compiled (twice: the second call replays the cached entry) on
    fresh copies of ``arrays`` and assert the contract."""
    plain = [a.copy() for a in arrays]
    want, want_exc = _call(fn, plain)
    compiled = nb.compile(fn, backend=backend)
    for _ in range(2):
        inputs = [a.copy() for a in arrays]
        got, got_exc = _call(compiled, inputs)
        for after, want_after in zip(inputs, plain):    # written (through a view) as NumPy writes
            np.testing.assert_array_equal(after, want_after)
        if want_exc is not None:
            assert isinstance(got_exc, type(want_exc)), (got_exc, want_exc)
            continue
        assert got_exc is None, got_exc
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert isinstance(g, np.generic) == isinstance(w, np.generic), (type(g), type(w))
            assert type(g) is type(w) or isinstance(w, np.generic), (type(g), type(w))
            g, w = np.asarray(g), np.asarray(w)
            assert (g.dtype, g.shape) == (w.dtype, w.shape)
            np.testing.assert_array_equal(g, w)
    return want


# -- wrong dtype: NumPy 2's rules --------------------------------------------------------------

def test_bool_squared_by_the_operator_is_int8():
    # ndarray's ** with a Python int 2 is np.square (int8 for bool); np.power gives int64
    b = np.array([[True, False]])
    assert same_as_numpy(lambda a: a ** 2, b).dtype == np.int8
    assert same_as_numpy(lambda a: np.power(a, 2), b).dtype == np.int64
    assert same_as_numpy(lambda a: (a ** 2)[None], b).dtype == np.int8
    # a NumPy scalar's ** has no fast path: np.any(a) ** 2 is int64
    assert same_as_numpy(lambda a: np.any(a) ** 2, b).dtype == np.int64


@pytest.mark.parametrize("x, lo, hi", [
    (np.array([True]), 2, np.array([[1]], np.int32)),                  # int32, not int64
    (np.array([[True]]), 1.5, np.array([[-2.0]], np.float32)),         # float32, not float64
    (np.array([1.0], np.float32), 2**40, np.array([1.0], np.float32)),
    (np.array([1, 5], np.int32), -2**40, 2**40),                       # clips nothing: int32
    (np.array([1, 5], np.int32), 2**40, None),                         # OverflowError
    (np.array([1, 5], np.int32), None, -2**40),                        # OverflowError
    (np.array([True]), 2**40, None),                                   # int64
    (np.array([True]), -1, np.array([3], np.uint8)),                   # OverflowError
])
def test_clip_dtype_is_of_all_three_operands(x, lo, hi):
    same_as_numpy(lambda a: np.clip(a, lo, hi), x)


def test_mean_of_a_padded_empty_int_array_is_float64():
    # the pad of an empty array is a `full` (creation: no operand to take NumPy's flavour
    # from), which must still be NumPy-flavoured: the mean of ints is float64
    a = np.zeros((1, 0, 1, 1), np.int32)
    assert same_as_numpy(lambda a: np.mean(np.pad(a, (1, 2), mode="constant"), keepdims=True), a).dtype \
        == np.float64
    same_as_numpy(lambda a: np.pad(a, 1).sum() / 2, a)


# -- wrong type: NumPy scalar or 0-d array -----------------------------------------------------

def test_astype_of_a_numpy_scalar_is_a_scalar():
    a = np.array([[-1.75]], np.float32)
    assert isinstance(same_as_numpy(lambda a: np.var(a).astype(np.int64), a), np.int64)
    assert isinstance(same_as_numpy(lambda a: np.asarray(np.var(a), dtype=np.int64), a), np.ndarray)
    # a 0-d array's astype stays an array
    assert isinstance(same_as_numpy(lambda a: a.reshape(()).astype(np.int64), a), np.ndarray)


def test_copy_of_a_numpy_scalar_is_a_scalar():
    # ndarray.copy of a NumPy scalar is a scalar; np.copy of one is a 0-d array
    a = np.array([[0.25, -1.5]], np.float32)
    assert isinstance(same_as_numpy(lambda a: a.all().copy(), a), np.bool_)
    assert isinstance(same_as_numpy(lambda a: np.sum(a, axis=(0,)) @ np.ones(2, np.int32), a), np.float64)
    assert isinstance(same_as_numpy(lambda a: (np.sum(a, axis=(0,)) @ np.ones(2, np.int32)).copy(), a),
                      np.float64)
    assert isinstance(same_as_numpy(lambda a: np.copy(a.std()), a), np.ndarray)
    assert isinstance(same_as_numpy(lambda a: a[0, :1].reshape(()).copy(), a), np.ndarray)


def test_a_scalar_stays_a_scalar_past_a_graph_break():
    def f(a0, a1):
        t1 = np.where(a0, a1, a0) >= 0        # a ufunc of a 0-d array: a NumPy scalar
        np.asarray(t1, dtype=np.float32)      # a graph break (np.asarray wants the array)
        return t1.transpose(()), t1.copy(), t1
    for r in same_as_numpy(f, np.array(False), np.array(-1.0, np.float32)):
        assert isinstance(r, np.bool_)


def test_broadcast_to_of_a_scalar_is_an_array():
    assert isinstance(same_as_numpy(lambda a: np.broadcast_to(a.argmin(), ()),
                                    np.array([-1.75, 2.0])), np.ndarray)


# -- dead code that raises still raises ---------------------------------------------------------

def test_unused_python_int_overflow_raises():
    def f(a):
        t = a * 2**40                  # never used: NumPy raises anyway
        return a + 1
    same_as_numpy(f, np.array([-1], np.int32))
    same_as_numpy(lambda a: (a - 300, a)[1], np.array([1], np.int8))
    same_as_numpy(lambda a: a < 300, np.array([1], np.int8))       # comparisons take any int
    same_as_numpy(lambda a: a + 2**40, np.array([1], np.int64))    # fits int64


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_where_converts_a_python_int_as_numpy_casts_it(backend):
    # np.where takes any Python int in int64 (or uint64) and casts it to the result dtype,
    # keeping the low bits; the constant 2**40 made the kernel raise OverflowError (the first
    # call then ran eagerly, the replayed second call raised)
    c = np.array([[-1.5, 2.5]])
    for a in (np.array([[3, 4]], np.int32), np.array([[3, 4]], np.uint8), np.array([[3, 4]], np.int64)):
        same_as_numpy(lambda c, a: np.where(c > 2, 2**40 + 5, a), c, a, backend=backend)
        same_as_numpy(lambda c, a: np.where(c > 2, a, -2**40 - 7), c, a, backend=backend)
        same_as_numpy(lambda c, a: np.where(c > 2, 2**63 + 1, a), c, a, backend=backend)
    same_as_numpy(lambda c, a: np.where(c > 2, 2**64, a), c, np.array([[3, 4]], np.int32))   # OverflowError
    same_as_numpy(lambda c, a: np.where(c > 2, 2**70, a), c, np.array([[3, 4]], np.float32))  # any int


def test_reductions_of_0d_arrays_take_axis_0_as_numpy_does():
    a = np.array(3, np.int32)
    for fn in (lambda a: np.prod(a, axis=0, keepdims=True), lambda a: a.sum(axis=-1),
               lambda a: np.argmax(a, axis=0), lambda a: np.max(a, axis=0, keepdims=True)):
        same_as_numpy(fn, a)                    # NumPy's legacy rule: reduces nothing

    def unused_mean(a):
        np.mean(a, axis=0, keepdims=True)       # AxisError, used or not
        return a
    for fn in (unused_mean, lambda a: np.std(a, axis=0), lambda a: np.sum(a, axis=(0,))):
        with pytest.raises(np.exceptions.AxisError):
            fn(a)
        same_as_numpy(fn, a)


# -- exception types -----------------------------------------------------------------------------

def test_item_assignment_into_a_numpy_scalar_is_a_type_error():
    def f(a):
        t = np.std(a, axis=None)
        t[..., -1:] = 1.5
        return t
    same_as_numpy(f, np.array(True))


def test_positive_of_bool_is_numpys_ufunc_type_error():
    with pytest.raises(np.exceptions.UFuncTypeError if hasattr(np.exceptions, "UFuncTypeError")
                       else TypeError):
        nb.compile(lambda a: +a[..., ::-1], backend="numpy")(np.zeros((1, 1, 1), bool))
    same_as_numpy(lambda a: +a, np.zeros((2,), bool))
    same_as_numpy(lambda a: np.sign(a), np.zeros((2,), bool))
    same_as_numpy(lambda a: -a, np.zeros((2,), bool))        # NumPy's own TypeError


def test_dtype_check_comes_before_the_broadcast_check():
    same_as_numpy(lambda a, b: a.flatten() | b, np.array([[-3, 2]], np.int32),
                  np.array([-1.75, 1.25, 1.25], np.float32))


def test_inplace_same_kind_cast_int64_into_int32():
    def f(a, b):
        t = +a
        t[::-1] -= b
        return t
    same_as_numpy(f, np.array([[-1]], np.int32), np.array([[2]], np.int64))


def test_inplace_write_into_a_broadcast_view_is_read_only_before_any_cast():
    def f(a, b):
        t = np.broadcast_to(a, (0, 3, 4))
        u = np.minimum(t, b)
        t /= 2                          # NumPy: ValueError (read-only), not the cast error
        return u
    same_as_numpy(f, np.zeros((1, 1), bool), np.full((1, 1, 1), -0.5))


def test_a_view_of_a_broadcast_view_is_read_only_too():
    def through_a_slice(a, b):
        t = np.broadcast_to(a[:, None] * b[None, :], (1, 2, 3, 4))
        t[..., ::2] += 1                # NumPy: ValueError (read-only), not the bool cast error
        return a
    same_as_numpy(through_a_slice, np.zeros((1, 1), bool), np.zeros((1, 1), bool))

    def named_view(a):
        v = np.broadcast_to(a, (2, 3)).T[1:]
        v += 1.0                        # NumPy: ValueError; it passed silently
        return v
    same_as_numpy(named_view, np.arange(3.0))

    def reshaped(a):
        r = np.broadcast_to(a, (2, 3)).reshape(-1)     # a copy (zero strides): writeable
        r += 1
        s = np.broadcast_to(a, (1, 2, 3)).reshape(2, 3)   # a view: read-only
        return r, s
    same_as_numpy(reshaped, np.arange(3.0))
    same_as_numpy(lambda a: np.broadcast_to(a, (1, 2, 3)).reshape(2, 3).__iadd__(1), np.arange(3.0))


def test_ufunc_into_an_ndarray_out_raises_numpys_cast_error():
    def f(a, b):
        t = np.asarray(a, dtype=np.bool)
        t[::-1] -= b                    # NumPy: UFuncTypeError (float32 output into bool)
        return t
    same_as_numpy(f, np.full((1, 1, 1, 1), 1.5), np.full((1, 1, 1, 1), -1.0, np.float32))


# -- inputs written as NumPy writes them ----------------------------------------------------------

@pytest.mark.parametrize("shape", [(4, 1, 3), (1, 1, 1), (3, 1, 1)])
def test_ravel_is_a_view_only_where_numpy_strides_allow(shape):
    def f(a):
        t = np.swapaxes(a, 2, -3)
        r = np.ravel(t)             # a copy for (4, 1, 3), a view of a for (1, 1, 1)
        r[..., ::2] += 1
        return t, r
    same_as_numpy(f, np.arange(np.prod(shape), dtype=np.float32).reshape(shape))


def test_reshape_views_of_inputs_and_of_computed_values():
    a = np.arange(12.0).reshape(3, 4)
    for f in (lambda a: (a.ravel().__setitem__(0, -1), a)[1],            # C order: a view
              lambda a: (a[:, ::2].reshape(-1).__setitem__(0, -1), a)[1],  # strided: a copy
              lambda a: (a.T.reshape(-1).__setitem__(0, -1), a)[1]):
        same_as_numpy(f, a)

    def computed(a):
        t = a + 1
        r = t.reshape(-1)           # a view of t (C order): t changes too
        r[1:] *= 2
        u = t.T.reshape(-1)         # a copy
        u[0] = 0
        return t, r, u
    same_as_numpy(computed, a)


def test_an_integer_index_of_a_matrix_is_a_view():
    # a[0] of a 2-d array is a row view (only a 0-d result of integer indexing is a scalar
    # copy): a write to the array shows in the row, a write to the row in the array
    def read_after_write(x):
        a = x.reshape(2, 3).copy()
        c = a[0]
        a += 1
        return c

    def write_through(x):
        a = x.reshape(2, 3).copy()
        c = a[0]
        c += 1
        return a
    for f in (read_after_write, write_through):
        same_as_numpy(f, np.arange(6.0))

    def broadcast_row(x):
        a = x.copy()
        b = np.broadcast_to(a, (2, 3))
        c, d = b[0], b.T[1:]
        a += 1
        return c, d
    same_as_numpy(broadcast_row, np.arange(3.0))


# -- the numba tier ------------------------------------------------------------------------------

def test_numba_std_ddof1_over_one_row_is_nan():
    # the deviations pass recomputed x fused with `- mean`, and the fast-math flags reassociated
    # it: x - mean(x) was not 0 over a single row, so var's 0/0 became tiny/0 = inf
    def f(a):
        t = np.sqrt(np.abs(a.clip(min=-1)))
        t += 1
        return t.std(axis=1, keepdims=True, ddof=1)
    a = np.array([-2, -2, -1, -2, 2, 1], np.int64).reshape((2, 1, 3))
    out = same_as_numpy(f, a, backend="numba")
    assert np.isnan(out).all()


def test_numba_float_to_int_cast_of_nan_inf_and_large_values_is_numpys():
    # numba's np.int32(x) is LLVM's fptosi, undefined for NaN, inf and values out of range: a
    # kernel that knew its value was x / 0 folded the cast to 0, where NumPy gives INT_MIN (x86)
    def f(a):
        t = a / 0
        return (t.astype(np.int32), t.astype(np.int64), t.astype(np.int8), t.astype(np.uint16),
                (a * 1e10).astype(np.int32), (a * 1e20).astype(np.int64), (a * 300).astype(np.uint8))
    same_as_numpy(f, np.array([0.0, 1.0, -1.0, 2.5]), backend="numba")
    same_as_numpy(lambda a: (a / 0).astype(np.uint32), np.array([0.0, 1.0, -1.0]), backend="numba")

    def program(a0, a1):                # the fuzzer's seed 1004648
        t1 = np.where(np.expand_dims(a0, 0) != 1.5, np.expand_dims(a0, 0), -2.25)
        t4 = (t1[:, None] * a1[None, :]) ** 2 / 0
        return t4[0, -3].astype(np.int32)
    same_as_numpy(program, np.array(2, np.int32), np.zeros(3, bool), backend="numba")


# NumPy words a write into a read-only array by what writes: item assignment, an in-place
# operator or out=, and each in-place method its own way
READ_ONLY_WRITES = ["v[0] = 1", "v[...] = 1", "v[v > 1] = 0", "v.T[0] = 1", "v[0][1] = 5",
                    "v.real[0] = 1", "v.flat[0] = 1", "v += 1", "v[:] += 1",
                    "np.add(v, 1, out=v)", "v.fill(1)", "v.sort()", "v.partition(1)",
                    "v.put([0], [1])", "print(v.sum()); v.partition(1)",
                    # NumPy's own functions on the view's value: never a write through it
                    "np.copyto(v, 1)", "np.put(v, [0], [9])", "np.putmask(v, v > 1, 0)",
                    "np.putmask(v.T, v.T > 1, 0)"]


@pytest.mark.parametrize("stmt", READ_ONLY_WRITES)
def test_a_write_into_a_broadcast_view_says_what_numpy_says(stmt, capsys):
    from nbaccel.ndarray_methods import numpy_code   # (a %%compile cell: NumPy's methods)
    ns = {"np": np}
    exec(f"def f(x):\n    v = np.broadcast_to(x, (2, 3))\n    {stmt}\n    return v\n", ns)
    f = ns["f"]
    with pytest.raises(ValueError) as plain:
        f(np.arange(3.0))
    compiled = nb.compile(f, backend="numpy")
    for _ in range(2):
        x = np.arange(3.0)
        with numpy_code(), pytest.raises(ValueError) as got:
            compiled(x)
        assert str(got.value) == str(plain.value)
        np.testing.assert_array_equal(x, np.arange(3.0))     # the input is never written


# NumPy's functions that write into their first argument, given a view of an array the code
# made: the write lands in that array, as NumPy's view writes it (it was lost: the view's
# value was a copy of its own)
WRITES_THROUGH_A_VIEW = {
    "copyto": "t = x * 2\n    v = t[0]\n    np.copyto(v, 7)\n    return t",
    "copyto then a read": "t = x * 2\n    v = t[:, 1]\n    np.copyto(v, 7)\n    return t.sum(), v",
    "put": "t = x * 2\n    np.put(t[1], [0], [9])\n    return t",
    "putmask": "t = x * 2\n    np.putmask(t.T, t.T > 3, 0)\n    return t",
    "copyto of an input's view": "v = x[0]\n    np.copyto(v, 7)\n    return x + 1",
}


@pytest.mark.parametrize("name", sorted(WRITES_THROUGH_A_VIEW))
def test_numpy_writing_into_a_view_writes_into_its_array(name):
    body_same_as_numpy(WRITES_THROUGH_A_VIEW[name])


# A view made before a graph break (print, NumPy's own function) shares its base's memory in
# NumPy: a later write into the base shows in the view, and one through the view in the base
# and its other views (the realized view held an array of its own, and kept its old values)
VIEWS_ACROSS_A_BREAK = {
    "copyto into the base": "t = x * 2\n    t4 = t.T\n    np.copyto(t[0], 5)\n    return t4",
    "item write": "t = x * 2\n    t4 = t.T\n    print(t4.sum())\n    t[0] = 5\n    return t4",
    "read in the same segment": "t = x * 2\n    t4 = t.T\n    print(t4.sum())\n    t[0] = 5\n    return t4 + 1",
    "through a view, seen by another": "t = x * 2\n    v = t[0]\n    w = t.T\n    print(v.sum())\n"
                                       "    v[1] = 50\n    return w",
    "two breaks": "t = x * 2\n    t4 = t[:, ::2]\n    print(t4.sum())\n    t += 1\n    print(t4.sum())\n"
                  "    t[1] = -1\n    return t4, t",
    "an in-place operator": "t = x * 2\n    t4 = t.reshape(-1)\n    print(t4.sum())\n    t *= 3\n    return t4",
    "a chain of views": "t = x * 2\n    a = t.T\n    b = a[1:]\n    print(b.sum())\n    t[:, 1] = 0\n    return a, b",
    "a write into a view of a view": "t = x * 2\n    a = t.T\n    b = a[1:]\n    print(b.sum())\n"
                                     "    b[0] = 9\n    return t, a",
    "a loop": "t = x * 2\n    v = t[0]\n    for i in range(3):\n        print(v.sum())\n        t += 1\n"
              "    return v",
    "a broadcast view": "t = x * 2\n    b = np.broadcast_to(t[0], (2, 3))\n    print(b.sum())\n"
                        "    t[0] = 1\n    return b + 0",
}


@pytest.mark.parametrize("name", sorted(VIEWS_ACROSS_A_BREAK))
def test_a_view_made_before_a_graph_break_shares_its_bases_memory(name, capsys):
    body_same_as_numpy(VIEWS_ACROSS_A_BREAK[name])


def test_an_integer_power_by_a_negative_exponent_is_numpys_value_error_on_numba():
    # numba's ** gave a number (2 ** -2 == 0 silently); the kernel stays on the NumPy tier
    a, b = np.array([2, 3]), np.array([1, -2])
    for backend in ("numpy", "numba"):
        with pytest.raises(ValueError, match="negative integer powers"):
            nb.compile(lambda a, b: a ** b + 1, backend=backend)(a, b)
    same_as_numpy(lambda a, b: a ** b + 1, a, np.array([1, 2]), backend="numba")
    same_as_numpy(lambda a: a ** 3 - a, a, backend="numba")


def test_a_ufuncs_out_cannot_be_a_numpy_scalar():
    def f(a):
        t0 = np.prod(a)                 # NumPy holds it as a NumPy scalar: no array to write
        np.multiply(t0, 2, out=t0)      # NumPy: TypeError "return arrays must be of ArrayType"
        return t0
    same_as_numpy(f, np.array([], np.int32))
    with pytest.raises(TypeError, match="return arrays must be of ArrayType"):
        nb.compile(f, backend="numpy")(np.array([1, 2], np.int32))

    def into_an_array(a):
        t0 = np.zeros(())               # a 0-d array: out= writes into it
        np.multiply(a.sum(), 2, out=t0)
        return t0
    same_as_numpy(into_an_array, np.arange(3.0))


# np.ravel / ndarray.ravel give a view only of a C-contiguous array (reshape(-1) wherever the
# strides allow one): a write into the ravel of a strided view must leave the input alone
RAVELS = {
    "a column of an input (fuzz seed 2909)": "v = x[:, :1].ravel()\n    v[0] = 9\n    return x * 1",
    "a 1-d strided view": "v = x.reshape(-1)[::2].ravel()\n    v[0] = 9\n    return x * 1",
    "a C-contiguous row: a view": "v = x[:1].ravel()\n    v[0] = 9\n    return x * 1",
    "a transpose": "v = np.ravel(x.T)\n    v[0] = 9\n    return x * 1",
    "an intermediate's slice": "t = x * 2\n    v = t[:, 1:].ravel()\n    v[0] = 9\n    return t",
    "an intermediate, whole": "t = x * 2\n    v = t.ravel()\n    v[0] = 9\n    return t",
}


@pytest.mark.parametrize("name", sorted(RAVELS))
def test_ravel_is_a_view_only_of_a_c_contiguous_array(name):
    body_same_as_numpy(RAVELS[name])


def test_an_index_of_a_numpy_scalar_is_a_new_array_not_a_view():
    # (fuzz seed 6693) NumPy's clip of a 0-d array is a NumPy scalar: t0[None] is a new array,
    # so a write into it leaves t0 readable (it was refused as a write through a view)
    def f(a0):
        t0 = np.clip(a0, None, np.float32(0.5))
        t1 = t0[None]
        t1 -= t1
        return +t0, t1
    same_as_numpy(f, np.array(1.0, np.float32))

    def g(a):
        s = a.sum()
        v = s[None]
        v += 1
        return s * 2, v
    same_as_numpy(g, np.arange(3.0))


def test_a_read_only_view_refuses_before_the_index_is_read():
    # (fuzz seed 30646) NumPy: "assignment destination is read-only", not the IndexError of
    # index 0 into a size-0 axis
    def f(a0, a2):
        t0 = np.broadcast_to(a0, (0, 2, 4, 3))
        t1 = a2 * 2
        t0[0] = 0
        return t1
    same_as_numpy(f, np.zeros((1, 1, 1), bool), np.array([[[[-3]]]]))
    with pytest.raises(ValueError, match="assignment destination is read-only"):
        nb.compile(f, backend="numpy")(np.zeros((1, 1, 1), bool), np.array([[[[-3]]]]))


def test_an_in_place_operator_on_a_read_only_view_refuses_first():
    def broadcast_scalar(a1, a2):
        t1 = np.minimum(a1, a2)         # a NumPy scalar: its broadcast is a read-only view too
        t2 = np.broadcast_to(t1, (1, 3))
        t2 **= 2                        # (fuzz seed 40324: it was written)
        return t2
    same_as_numpy(broadcast_scalar, np.array(2, np.int32), np.array(0.75, np.float32))

    def before_the_shapes(a0, a1):
        t0 = np.broadcast_to(a0, (3, 0, 4))
        t0[::-1] -= a1                  # (seed 42350) read-only, not the broadcast error
        return t0
    with pytest.raises(ValueError) as plain:
        before_the_shapes(np.array([[-3]]), np.zeros((4, 0, 1)))
    with pytest.raises(ValueError) as got:
        nb.compile(before_the_shapes, backend="numpy")(np.array([[-3]]), np.zeros((4, 0, 1)))
    assert str(got.value) == str(plain.value) == "output array is read-only"
