"""Issue 36, item 6: PyTorch's exception types (and wording) for PyTorch-style calls, NumPy's
for NumPy code.

Shape and size errors of Tensor methods, ``nb.*`` functions, ``nn`` and ``F`` are
``ShapeError``: a ``RuntimeError`` (what PyTorch raises) and a ``ValueError`` (what NumPy
raises), one class where the two disagree. Its text is PyTorch's for PyTorch-style tensors and
NumPy's, word for word, for NumPy data (also inside a compiled NumPy function). Index errors
are ``IndexError``. A built-in layer called with a raw NumPy array raises ``TypeError``, as
PyTorch's do.

The oracle half runs each case on PyTorch itself (skipped where it is not installed); the
NumPy half compares with NumPy, which is always there."""
import numpy as np
import pytest

import nbaccel as nb
from nbaccel.ops.meta import ShapeError
from nbaccel.ops.nn import ShapeError as NnShapeError


def _raised(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the exception is what is compared
        return e
    return None


# (name, case, same_text): case(T, nn) builds the failing call from a torch-like module T;
# same_text: nbaccel's message is PyTorch's exactly (else only the exception class is compared)
CASES = [
    ("matmul", lambda T, nn: T.ones(3, 4) @ T.ones(5, 4), True),
    ("matmul_vectors", lambda T, nn: T.ones(3) @ T.ones(4), True),
    ("matmul_matrix_vector", lambda T, nn: T.ones(3, 4) @ T.ones(5), True),
    ("matmul_vector_matrix", lambda T, nn: T.matmul(T.ones(3), T.ones(5, 4)), True),
    ("matmul_batched", lambda T, nn: T.ones(2, 3, 4) @ T.ones(2, 5, 4), True),
    ("matmul_batch_dims", lambda T, nn: T.ones(2, 3, 4) @ T.ones(3, 4, 5), True),
    ("matmul_0d", lambda T, nn: T.matmul(T.tensor(1.0), T.ones(3)), True),
    ("mm", lambda T, nn: T.mm(T.ones(3, 4), T.ones(5, 4)), True),
    ("mm_not_matrix", lambda T, nn: T.mm(T.ones(2, 3, 4), T.ones(4, 4)), True),
    ("bmm", lambda T, nn: T.bmm(T.ones(2, 3, 4), T.ones(2, 5, 4)), True),
    ("view", lambda T, nn: T.ones(3, 4).view(5, 5), True),
    ("reshape", lambda T, nn: T.ones(3, 4).reshape(5, -1), True),
    ("reshape_two_unknown", lambda T, nn: T.ones(3, 4).reshape(-1, -1), True),
    ("cat", lambda T, nn: T.cat([T.ones(3, 4), T.ones(3, 5)]), True),
    ("cat_dim1", lambda T, nn: T.cat([T.ones(3, 4), T.ones(2, 5)], dim=1), True),
    ("cat_ndim", lambda T, nn: T.cat([T.ones(3, 4), T.ones(4)]), True),
    ("cat_0d", lambda T, nn: T.cat([T.tensor(1.0), T.tensor(2.0)]), True),
    ("stack", lambda T, nn: T.stack([T.ones(3, 4), T.ones(3, 5)]), True),
    ("add", lambda T, nn: T.ones(3, 4) + T.ones(3, 5), True),
    ("mul_rank", lambda T, nn: T.ones(2, 3, 4) * T.ones(5, 1), True),
    ("add_rightmost_clash", lambda T, nn: T.ones(3, 4) + T.ones(4, 5), True),
    ("add_inplace", lambda T, nn: T.ones(3, 4).add_(T.ones(5, 4)), True),
    ("where", lambda T, nn: T.where(T.ones(3, 4) > 0, T.ones(3, 4), T.ones(5, 4)), True),
    ("expand", lambda T, nn: T.ones(2, 3).expand(2, 5), True),
    ("linear", lambda T, nn: nn.Linear(3, 4)(T.ones(2, 5)), False),
    ("conv2d_channels", lambda T, nn: nn.Conv2d(1, 2, 3)(T.ones(1, 3, 5, 5)), False),
    ("index", lambda T, nn: T.ones(3, 4)[5], False),
    ("index_second_dim", lambda T, nn: T.ones(3, 4)[0, 7], False),
    ("index_negative", lambda T, nn: T.ones(3, 4)[-4], False),
    ("index_tensor", lambda T, nn: T.ones(3, 4)[T.tensor([0, 5])], False),
    ("too_many_indices", lambda T, nn: T.ones(3, 4)[0, 0, 0], False),
    ("dim_out_of_range", lambda T, nn: T.ones(3, 4).sum(dim=2), False),
    ("transpose_dim", lambda T, nn: T.ones(3, 4).transpose(0, 2), False),
    ("linear_numpy_input", lambda T, nn: nn.Linear(3, 4)(np.ones((2, 3), np.float32)), False),
    ("conv2d_numpy_input",
     lambda T, nn: nn.Conv2d(1, 2, 3)(np.ones((1, 1, 5, 5), np.float32)), False),
    ("relu_numpy_input", lambda T, nn: nn.ReLU()(np.ones((2, 3), np.float32)), False),
]


def test_one_shape_error_class():
    assert ShapeError is NnShapeError
    assert issubclass(ShapeError, ValueError) and issubclass(ShapeError, RuntimeError)


@pytest.mark.parametrize("name, case, same_text", CASES, ids=[c[0] for c in CASES])
def test_pytorch_exception(name, case, same_text):
    torch = pytest.importorskip("torch")
    want = _raised(lambda: case(torch, torch.nn))
    assert want is not None, f"PyTorch accepts {name}"
    got = _raised(lambda: case(nb, nb.nn))
    assert got is not None, f"nbaccel accepts {name}; PyTorch raises {want!r}"
    assert isinstance(got, type(want)), f"{name}: PyTorch raises {want!r}, nbaccel {got!r}"
    if same_text:
        assert str(got) == str(want)
    if isinstance(want, RuntimeError) and not isinstance(want, TypeError):
        assert isinstance(got, ShapeError)      # NumPy code catching ValueError still works


def test_linear_speaks_pytorch():
    e = _raised(lambda: nb.nn.Linear(3, 4)(nb.ones(2, 5)))
    assert isinstance(e, RuntimeError) and isinstance(e, ValueError)
    assert str(e).startswith("mat1 and mat2 shapes cannot be multiplied (2x5 and 3x4)")


def test_user_modules_and_containers_pass_arrays_on():
    """As in PyTorch: a model whose forward is its own, Identity and Sequential of it take
    whatever they are given; a subclass that keeps a layer's forward refuses arrays too."""
    class Double(nb.nn.Module):
        def forward(self, x):
            return x * 2

    a = np.ones(3)
    assert np.array_equal(Double()(a), 2 * a)
    assert nb.nn.Sequential(nb.nn.Identity())(a) is a

    class MyLinear(nb.nn.Linear):
        pass

    with pytest.raises(TypeError, match="must be Tensor"):
        MyLinear(3, 2)(np.ones((1, 3), np.float32))
    # the functional form stays the NumPy-friendly nb.* function
    assert F_linear_accepts_arrays()


def F_linear_accepts_arrays():
    y = nb.nn.functional.linear(np.ones((2, 3), np.float32), nb.ones(4, 3))
    return tuple(y.shape) == (2, 4)


# ---- NumPy code: NumPy's exception, word for word ---------------------------------------------

NP_CASES = [
    ("matmul", lambda m, a: m.matmul(a(3, 4), a(5, 4))),
    ("matmul_vectors", lambda m, a: m.matmul(a(3), a(4))),
    ("matmul_0d", lambda m, a: m.matmul(a(), a(3))),
    ("matmul_batch_dims", lambda m, a: m.matmul(a(2, 3, 4), a(3, 4, 5))),
    ("reshape", lambda m, a: a(3, 4).reshape(5, 5)),
    ("reshape_unknown", lambda m, a: a(3, 4).reshape(5, -1)),
    ("reshape_two_unknown", lambda m, a: a(3, 4).reshape(-1, -1)),
    ("concatenate", lambda m, a: m.concatenate([a(3, 4), a(3, 5)])),
    ("concatenate_ndim", lambda m, a: m.concatenate([a(3, 4), a(4)])),
    ("concatenate_0d", lambda m, a: m.concatenate([a(), a()])),
    ("stack", lambda m, a: m.stack([a(3, 4), a(3, 5)])),
    ("add", lambda m, a: a(3, 4) + a(3, 5)),
    ("where", lambda m, a: m.where(True, a(3, 4), a(5, 4))),
    ("broadcast_to", lambda m, a: m.broadcast_to(a(2, 3), (2, 5))),
    ("broadcast_to_fewer_dims", lambda m, a: m.broadcast_to(a(2, 3), (3,))),
    ("index", lambda m, a: a(3, 4)[5]),
]


@pytest.mark.parametrize("name, case", NP_CASES, ids=[c[0] for c in NP_CASES])
def test_numpy_exception(name, case):
    want = _raised(lambda: case(np, lambda *s: np.ones(s)))
    assert want is not None
    got = _raised(lambda: case(nb, lambda *s: nb.asarray(np.ones(s))))
    assert isinstance(got, type(want)), f"{name}: NumPy raises {want!r}, nbaccel {got!r}"
    assert str(got) == str(want)


COMPILED = [
    ("matmul", lambda x, y: x @ y, ((3, 4), (5, 4))),
    ("reshape", lambda x, y: x.reshape(5, 5) + y, ((3, 4), (5, 5))),
    ("concatenate", lambda x, y: np.concatenate([x, y]) * 2, ((3, 4), (3, 5))),
    ("add", lambda x, y: x + y, ((3, 4), (3, 5))),
]


@pytest.mark.parametrize("name, fn, shapes", COMPILED, ids=[c[0] for c in COMPILED])
def test_compiled_numpy_function_raises_numpys_exception(name, fn, shapes):
    args = [np.ones(s) for s in shapes]
    want = _raised(lambda: fn(*args))
    got = _raised(lambda: nb.compile(fn, backend="numpy")(*args))
    assert isinstance(got, type(want)) and str(got) == str(want)
