"""Type promotion and broadcasting agree with NumPy 2.

* ``nbaccel.result_type`` and the result dtype of binary ops equal NumPy 2's for every pair of
  supported dtypes, and for Python scalars (weak typing, NEP 50) on NumPy-flavoured tensors.
* One documented difference: ``nbaccel.result_type(<int or bool dtype>, <Python float>)`` is
  float32, nbaccel's default float (NumPy: float64). Ops on NumPy-flavoured tensors use
  float64 there, like NumPy.
* bfloat16 (not a NumPy dtype) follows PyTorch/JAX: bfloat16 with bool, int8, uint8 or
  bfloat16 -> bfloat16; with float16 or int16 -> float32; with int32/int64 -> float64; with
  float32/float64 -> that float; Python scalars are weak (bfloat16 + 1.5 -> bfloat16).
* Broadcasting equals ``np.broadcast_shapes``; incompatible shapes raise ValueError naming
  every shape.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import array_shapes, mutually_broadcastable_shapes

import nbaccel as nb
from nbaccel.ops.meta import broadcast_shapes

NP_DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
             "float16", "float32", "float64", "complex64", "complex128"]
dtypes = st.sampled_from(NP_DTYPES)
SETTINGS = settings(max_examples=40, deadline=None)


def _t(dtype, shape=(2,)):
    return nb.asarray(np.ones(shape, dtype))


@pytest.mark.parametrize("a", NP_DTYPES)
@pytest.mark.parametrize("b", NP_DTYPES)
def test_result_type_every_pair(a, b):
    want = np.result_type(np.dtype(a), np.dtype(b))
    assert nb.result_type(nb.dtypes.dtype(a), nb.dtypes.dtype(b)) == want
    assert nb.result_type(_t(a), _t(b)) == want
    assert nb.result_type(np.dtype(a), b) == want


BINARY_OPS = ["add", "multiply", "maximum", "minimum", "divide", "floor_divide", "remainder",
              "pow", "atan2", "hypot", "copysign", "logaddexp", "equal", "less",
              "logical_and", "bitwise_and", "bitwise_or", "bitwise_left_shift", "subtract"]
NP_NAMES = {"pow": "power", "atan2": "arctan2", "bitwise_left_shift": "left_shift"}


def _np_result(name, a, b):
    try:
        with np.errstate(all="ignore"):
            return getattr(np, NP_NAMES.get(name, name))(a, b).dtype, None
    except Exception as e:  # noqa: BLE001 - we compare exception classes
        return None, e


@SETTINGS
@given(da=dtypes, db=dtypes, name=st.sampled_from(BINARY_OPS))
def test_binary_op_dtypes_match_numpy(da, db, name):
    a, b = np.ones(2, da), np.ones(2, db)
    want, err = _np_result(name, a, b)
    if err is not None:
        with pytest.raises(TypeError if isinstance(err, TypeError) else type(err)):
            getattr(nb, name)(nb.asarray(a), nb.asarray(b))
        return
    assert getattr(nb, name)(nb.asarray(a), nb.asarray(b)).dtype == want


SCALARS = st.sampled_from([True, False, 0, 1, 2, -1, 127, 300, 2.5, -0.5])


@SETTINGS
@given(d=dtypes, s=SCALARS, name=st.sampled_from(BINARY_OPS), reflected=st.booleans())
def test_python_scalars_are_weak(d, s, name, reflected):
    a = np.ones(2, d)
    args_np = (s, a) if reflected else (a, s)
    want, err = _np_result(name, *args_np)
    t = nb.asarray(a)
    args = (s, t) if reflected else (t, s)
    if err is not None:
        with pytest.raises((TypeError, OverflowError, ValueError)):
            getattr(nb, name)(*args)
        return
    assert getattr(nb, name)(*args).dtype == want


@SETTINGS
@given(d=dtypes, s=SCALARS)
def test_result_type_with_scalars(d, s):
    got = nb.result_type(nb.dtypes.dtype(d), s)
    want = np.result_type(np.dtype(d), s) if not isinstance(s, int) or isinstance(s, bool) \
        or np.dtype(d).kind != "b" else np.dtype("int64")
    if isinstance(s, float) and np.dtype(d).kind in "biu":
        want = np.dtype("float32")    # nbaccel's default float (documented above)
    assert got == want


def test_result_type_scalars_only():
    assert nb.result_type(1, 2) == nb.int64
    assert nb.result_type(True, False) == nb.bool
    assert nb.result_type(1, 2.0) == nb.float32


@pytest.mark.parametrize("other,want", [
    ("bool", "bfloat16"), ("int8", "bfloat16"), ("uint8", "bfloat16"), ("int16", "float32"),
    ("int32", "float64"), ("int64", "float64"), ("float16", "float32"), ("bfloat16", "bfloat16"),
    ("float32", "float32"), ("float64", "float64")])
def test_bfloat16_rules(other, want):
    assert nb.result_type(nb.bfloat16, nb.dtypes.dtype(other)) == nb.dtypes.dtype(want)
    assert nb.result_type(nb.dtypes.dtype(other), nb.bfloat16) == nb.dtypes.dtype(want)
    x = nb.ones(2, dtype="bfloat16")
    assert (x + nb.ones(2, dtype=other)).dtype == nb.dtypes.dtype(want)


def test_bfloat16_with_scalars():
    x = nb.ones(2, dtype="bfloat16")
    assert (x + 1).dtype == nb.bfloat16 and (x * 2.5).dtype == nb.bfloat16
    assert (x > 1).dtype == nb.bool and nb.exp(x).dtype == nb.bfloat16


def test_torch_flavour_default_float():
    i = nb.tensor([1, 2])
    assert (i * 1.5).dtype == nb.float32 and (i / i).dtype == nb.float32
    assert nb.asarray(np.array([1, 2])).__mul__(1.5).dtype == nb.float64


@SETTINGS
@given(shapes=mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=3))
def test_broadcast_shapes_match_numpy(shapes):
    sa, sb = shapes.input_shapes
    want = np.broadcast_shapes(sa, sb)
    assert broadcast_shapes(sa, sb) == want
    out = nb.add(nb.asarray(np.zeros(sa)), nb.asarray(np.ones(sb)))
    assert out.shape == want
    assert np.array_equal(np.asarray(out), np.zeros(sa) + np.ones(sb))


@SETTINGS
@given(sa=array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
       sb=array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
def test_incompatible_shapes_raise_value_error_naming_both(sa, sb):
    try:
        want = np.broadcast_shapes(sa, sb)
    except ValueError:
        want = None
    if want is not None:
        assert broadcast_shapes(sa, sb) == want
        return
    with pytest.raises(ValueError) as e:
        nb.multiply(nb.asarray(np.zeros(sa)), nb.asarray(np.zeros(sb)))
    with pytest.raises(ValueError) as want:       # NumPy data: NumPy's text, naming both shapes
        np.multiply(np.zeros(sa), np.zeros(sb))
    assert str(e.value) == str(want.value)
