"""Bad input raises the exception NumPy/PyTorch users expect, with a message naming the shapes
or dtypes at fault, and never takes the interpreter down."""
import subprocess
import sys

import numpy as np
import pytest

import nbaccel as nb
from nbaccel.devices import cuda_available


# ---- shapes ------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda a, b: a + b, lambda a, b: a * b, lambda a, b: nb.maximum(a, b),
    lambda a, b: nb.where(a > 0, a, b), lambda a, b: a.__iadd__(b)])
def test_non_broadcastable_shapes(fn):
    # PyTorch-style tensors: PyTorch's RuntimeError and text (the sizes at fault); NumPy data:
    # NumPy's ValueError and text (the shapes); one ShapeError is both
    with pytest.raises(RuntimeError, match=r"tensor a \(3\) must match the size of tensor b "
                                           r"\(4\) at non-singleton dimension 1"):
        fn(nb.ones(2, 3), nb.ones(4))
    with pytest.raises(ValueError, match=r"\(2,3\).*\(4,\)|\(4,\).*\(2,3\)"):
        fn(nb.asarray(np.ones((2, 3))), nb.asarray(np.ones(4)))


def test_broadcast_to_bad_shape():
    with pytest.raises(RuntimeError, match=r"expanded size of the tensor \(4\) must match the "
                                           r"existing size \(3\)"):
        nb.ones(3).broadcast_to((4,))
    with pytest.raises(ValueError, match=r"\(3,\).*\(4,\)"):
        nb.asarray(np.ones(3)).broadcast_to((4,))


@pytest.mark.parametrize("shape", [(5,), (2, 4), (-1, 5), (-1, -1)])
def test_reshape_incompatible(shape):
    with pytest.raises(RuntimeError, match="invalid for input of size 6|only one dimension"):
        nb.ones(2, 3).reshape(shape)
    with pytest.raises(ValueError, match="cannot reshape array of size 6|one unknown dimension"):
        nb.asarray(np.ones((2, 3))).reshape(shape)


@pytest.mark.parametrize("sa,sb", [((2, 3), (4, 5)), ((3,), (4,)), ((2, 3), (2,)),
                                   ((5, 2, 3), (4, 3, 2))])
def test_matmul_misaligned(sa, sb):
    with pytest.raises(RuntimeError, match="cannot be multiplied|inconsistent tensor size|"
                                           "size mismatch|must match the size"):
        nb.ones(*sa) @ nb.ones(*sb)
    with pytest.raises(ValueError, match="mismatch in its core dimension|could not be broadcast"):
        nb.asarray(np.ones(sa)) @ nb.asarray(np.ones(sb))


def test_matmul_scalar_operand():
    with pytest.raises(RuntimeError, match="at least 1D"):
        nb.matmul(nb.ones(()), nb.ones(3))
    with pytest.raises(ValueError, match="does not have enough dimensions"):
        nb.matmul(nb.asarray(np.ones(())), nb.asarray(np.ones(3)))


def test_linalg_shape_errors():
    with pytest.raises(ValueError, match=r"\(3, 3\).*\(4,\)"):
        nb.linalg.solve(nb.eye(3), nb.ones(4))
    with pytest.raises(nb.linalg.LinAlgError, match=r"square.*\(2, 3\)"):
        nb.linalg.det(nb.ones(2, 3))
    with pytest.raises(ValueError, match="einsum"):
        nb.einsum("ij,jk->ik", nb.ones(2, 3), nb.ones(4, 2))
    with pytest.raises(ValueError, match="tensordot"):
        nb.tensordot(nb.ones(2, 3), nb.ones(4, 2), axes=1)
    with pytest.raises(ValueError):
        nb.linalg.vector_norm(nb.ones(3), ord="fro")
    with pytest.raises(ValueError):
        nb.linalg.matrix_norm(nb.ones(3))


# ---- dtypes --------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [lambda x: x & x, lambda x: x | x, lambda x: x ^ x, lambda x: ~x,
                                lambda x: x << 1])
def test_bitwise_on_float(fn):
    with pytest.raises(TypeError, match="float32"):
        fn(nb.ones(3))


@pytest.mark.parametrize("fn", [lambda x: x @ x, lambda x: nb.tensordot(x, x, 1),
                                lambda x: nb.cross(x, x)])
def test_linalg_on_bool(fn):
    with pytest.raises(TypeError, match="bool"):
        fn(nb.ones(3, 3, dtype=nb.bool))


def test_bool_negative_and_subtract():
    with pytest.raises(TypeError, match="bool"):
        -nb.ones(3, dtype=nb.bool)
    with pytest.raises(TypeError, match="bool"):
        nb.ones(3, dtype=nb.bool) - nb.ones(3, dtype=nb.bool)


def test_unsupported_dtypes():
    with pytest.raises(TypeError, match="datetime64"):
        nb.asarray(np.array(["2020-01-01"], dtype="datetime64[D]"))
    with pytest.raises(TypeError):
        nb.zeros(3, dtype="complex256" if hasattr(np, "complex256") else "U3")
    with pytest.raises(TypeError):
        nb.asarray(["a", "b"])


def test_requires_grad_on_int_tensor():
    with pytest.raises(RuntimeError, match="int64"):
        nb.arange(3).requires_grad_()
    with pytest.raises(RuntimeError):
        nb.tensor([1, 2], requires_grad=True)


# ---- devices -------------------------------------------------------------------------------------

@pytest.mark.skipif(cuda_available(), reason="checks the message shown without CuPy/GPU")
def test_cuda_without_cupy_says_what_to_install():
    with pytest.raises(RuntimeError, match="CuPy|GPU"):
        nb.ones(3, device="cuda")
    with pytest.raises(RuntimeError, match="CuPy|GPU"):
        nb.ones(3).to("cuda")


@pytest.mark.skipif(not cuda_available(), reason="needs CuPy and a GPU")
def test_device_mismatch():
    with pytest.raises(RuntimeError, match="same device"):
        nb.ones(3) + nb.ones(3, device="cuda")


def test_unknown_device():
    with pytest.raises((ValueError, RuntimeError)):
        nb.ones(3, device="tpu")


# ---- indexing and axes -----------------------------------------------------------------------------

@pytest.mark.parametrize("index", [5, -6, (0, 3), (slice(None), 7)])
def test_out_of_range_index(index):
    x = nb.ones(5, 3)
    with pytest.raises(IndexError):
        x[index]


def test_out_of_range_setitem_and_axes():
    x = nb.ones(5, 3)
    with pytest.raises(IndexError):
        x[9] = 1.0
    with pytest.raises(IndexError):
        x.sum(axis=2)
    with pytest.raises(IndexError):
        nb.linalg.vector_norm(x, axis=3)
    with pytest.raises(IndexError):
        x[nb.tensor([0, 7])]
    with pytest.raises(ValueError):
        x.sum(axis=(0, 0))


# ---- autograd misuse ---------------------------------------------------------------------------------

def test_backward_on_non_scalar():
    x = nb.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="scalar"):
        (x * 2).backward()


def test_backward_twice():
    x = nb.ones(3, requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="retain_graph"):
        y.backward()
    z = (x.exp() * x).sum()
    z.backward(retain_graph=True)
    z.backward()       # allowed once more


def test_inplace_modification_of_saved_tensor():
    x = nb.ones(3, requires_grad=True)
    y = x * 2
    w = (y * y).sum()        # mul saves y for its gradient
    y.add_(1)
    with pytest.raises(RuntimeError, match="version 1, expected version 0"):
        w.backward()


def test_inplace_on_leaf_requiring_grad():
    x = nb.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        x.add_(1)


def test_backward_without_grad():
    with pytest.raises(RuntimeError):
        nb.ones(3).sum().backward()


def test_scalar_conversions():
    with pytest.raises((RuntimeError, ValueError)):
        nb.ones(3).item()
    with pytest.raises(ValueError, match="ambiguous"):
        bool(nb.ones(3))
    with pytest.raises(TypeError):
        len(nb.ones(()))


def test_none_of_these_crash_the_interpreter():
    """Run a batch of bad calls in a fresh interpreter: it must exit normally."""
    code = """
import nbaccel as nb, numpy as np
bad = [lambda: nb.ones(2, 3) + nb.ones(4), lambda: nb.ones(2, 3) @ nb.ones(4, 5),
       lambda: nb.ones(3) & nb.ones(3), lambda: nb.ones(5)[9], lambda: nb.ones(2).reshape(3),
       lambda: nb.linalg.inv(nb.zeros(3, 3)), lambda: nb.einsum('ij', nb.ones(3)),
       lambda: np.fft.fft(nb.ones(4)), lambda: nb.arange(3).requires_grad_(),
       lambda: nb.ones(3, device='cuda'), lambda: nb.asarray(object())]
n = 0
for f in bad:
    try:
        f()
    except Exception:
        n += 1
print('raised', n)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "raised 11", r.stdout + r.stderr
