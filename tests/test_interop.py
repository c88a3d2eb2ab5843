"""NumPy and DLPack interop: dispatch through the op table, zero-copy conversions, pickling,
and Array-API-generic code running on both NumPy and nbaccel."""
import copy
import pickle

import numpy as np
import pytest

import nbaccel as nb
from oracle import assert_close, random_array


@pytest.fixture
def t():
    return nb.asarray(random_array((3, 4), "float64"))


# ---- NumPy functions on tensors --------------------------------------------------------------

@pytest.mark.parametrize("call,want", [
    (lambda x: np.exp(x), lambda a: np.exp(a)),
    (lambda x: np.sum(x, axis=0), lambda a: np.sum(a, axis=0)),
    (lambda x: np.add(x, 1.5), lambda a: np.add(a, 1.5)),
    (lambda x: np.maximum(x, 0), lambda a: np.maximum(a, 0)),
    (lambda x: np.concatenate([x, x]), lambda a: np.concatenate([a, a])),
    (lambda x: np.reshape(x, (4, 3)), lambda a: np.reshape(a, (4, 3))),
    (lambda x: np.transpose(x), lambda a: np.transpose(a)),
    (lambda x: np.matmul(x, x.T), lambda a: a @ a.T),
    (lambda x: np.linalg.norm(x), lambda a: np.linalg.norm(a)),
    (lambda x: np.einsum("ij->i", x), lambda a: np.einsum("ij->i", a)),
    (lambda x: np.where(x > 0, x, 0.0), lambda a: np.where(a > 0, a, 0.0)),
])
def test_numpy_functions_return_tensors(t, call, want):
    got = call(t)
    assert isinstance(got, nb.Tensor), type(got)
    assert_close(got, want(np.asarray(t)))


def test_numpy_functions_keep_autograd():
    x = nb.asarray(random_array((3,), "float64")).requires_grad_()
    np.sum(np.exp(x)).backward()
    assert_close(x.grad, np.exp(np.asarray(x.detach())))


def test_unsupported_numpy_function_raises_type_error(t):
    native = nb.tensor(t.tolist())          # an nbaccel-native tensor (not made from NumPy data)
    with pytest.raises(TypeError, match="fft"):
        np.fft.fft(native)
    # tensors made from NumPy arrays keep NumPy's behaviour: NumPy runs it on the values
    np.testing.assert_allclose(np.fft.fft(t), np.fft.fft(np.asarray(t)))
    # and so do ufunc methods nbaccel has no op for (NumPy's reduce, on the values)
    np.testing.assert_allclose(np.asarray(np.add.reduce(t)), np.add.reduce(np.asarray(t)))
    with pytest.raises(TypeError, match="nbaccel has no op"):
        np.add.reduce(native)


def test_ufunc_out_argument(t):
    out = nb.zeros(3, 4, dtype=nb.float64)
    res = np.exp(t, out=out)
    assert res is out
    assert_close(out, np.exp(np.asarray(t)))
    buf = np.empty((3, 4))
    assert np.exp(t, out=buf) is buf
    assert_close(buf, np.exp(np.asarray(t)))


# ---- zero-copy conversions -------------------------------------------------------------------

def test_array_protocol_is_zero_copy(t):
    a = np.asarray(t)
    assert a is t.numpy() or np.shares_memory(a, t.numpy())
    assert np.shares_memory(a, np.asarray(t))
    assert np.asarray(t, dtype=np.float32).dtype == np.float32
    assert not np.shares_memory(np.array(t, copy=True), a)


def test_array_protocol_copy_keeps_the_layout():
    # np.array(x) of an ndarray copies in order "K": an F-ordered or transposed value stays so
    a = np.arange(12.0).reshape(3, 4)
    for plain in (a.T, np.asfortranarray(a), a[:, ::2]):
        t = nb.from_numpy(plain)
        for copied, expected in ((np.array(t), np.array(plain)), (np.array(t, copy=True), np.array(plain, copy=True))):
            assert copied.strides == expected.strides and (copied == plain).all()
            assert not np.shares_memory(copied, plain)


def test_asarray_of_tensor_requiring_grad_gives_data():
    x = nb.ones(2, 3, requires_grad=True)
    a = np.asarray(x)
    assert a.shape == (2, 3) and a.dtype == np.float32 and (a == 1).all()
    y = x * 2
    assert (np.asarray(y) == 2).all()


def test_from_numpy_and_numpy_share_memory_both_ways():
    a = np.zeros(4)
    t = nb.from_numpy(a)
    a[1] = 5.0
    assert float(t[1]) == 5.0
    t.numpy()[2] = 7.0
    assert a[2] == 7.0
    with nb.no_grad():
        t += 1
    assert a[0] == 1.0
    with pytest.raises(TypeError):
        nb.from_numpy([1, 2])


def test_dlpack_round_trip_without_copy():
    a = np.arange(12.0).reshape(3, 4)
    t = nb.from_dlpack(a)
    assert isinstance(t, nb.Tensor) and t.shape == (3, 4) and t.dtype == nb.float64
    assert np.shares_memory(np.asarray(t), a)
    back = np.from_dlpack(t)
    assert np.shares_memory(back, a)
    assert t.__dlpack_device__() == (1, 0)
    cap = t.__dlpack__()
    assert type(cap).__name__ == "PyCapsule"
    # non-contiguous views travel too
    v = nb.from_dlpack(a[:, ::2])
    assert np.shares_memory(np.asarray(v), a)
    assert_close(v, a[:, ::2])
    # nbaccel tensor -> nbaccel tensor
    assert np.shares_memory(np.asarray(nb.from_dlpack(t)), a)


def test_asarray_keeps_memory_and_copies_on_request():
    a = np.ones(3)
    assert np.shares_memory(np.asarray(nb.asarray(a)), a)
    assert not np.shares_memory(np.asarray(nb.asarray(a, copy=True)), a)
    assert not np.shares_memory(np.asarray(nb.tensor(a)), a)


# ---- pickling and copying ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool", "bfloat16"])
def test_pickle_round_trip(dtype):
    x = nb.asarray(random_array((2, 3), dtype))
    y = pickle.loads(pickle.dumps(x))
    assert isinstance(y, nb.Tensor) and y.dtype is x.dtype and y.shape == x.shape
    assert_close(np.asarray(y).astype(np.float64), np.asarray(x).astype(np.float64))


def test_pickle_and_deepcopy_keep_requires_grad_but_not_memory():
    x = nb.ones(3, requires_grad=True)
    for y in (pickle.loads(pickle.dumps(x)), copy.deepcopy(x)):
        assert y.requires_grad and y.is_leaf
        assert not np.shares_memory(np.asarray(y.detach()), np.asarray(x.detach()))
    d = copy.deepcopy({"a": x, "b": x})
    assert d["a"] is d["b"]


# ---- Array API generic code ----------------------------------------------------------------------

def softmax_entropy(x):
    """Generic code: only what x.__array_namespace__() offers."""
    xp = x.__array_namespace__()
    z = x - xp.max(x, axis=-1, keepdims=True)
    p = xp.exp(z) / xp.sum(xp.exp(z), axis=-1, keepdims=True)
    h = -xp.sum(p * xp.log(p), axis=-1)
    return xp.concat([h, xp.linalg.vector_norm(p, axis=-1)]) + xp.mean(xp.astype(x > 0, x.dtype))


def test_namespace_and_generic_code(t):
    assert t.__array_namespace__() is nb
    a = np.asarray(t).copy()
    got = softmax_entropy(t)
    assert isinstance(got, nb.Tensor)
    assert_close(got, softmax_entropy(a))
