"""Shape and movement ops vs NumPy: views, joins, splits, tiles, flips, triangles."""
import numpy as np
import pytest

import nbaccel as nb
from oracle import check, gradcheck, random_array

DTYPES = ("bool", "int8", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64")


def A(shape, dtype="float64"):
    return random_array(shape, dtype)


# ---- value checks across dtypes and layouts -------------------------------------------------------

UNARY = [
    ("squeeze", lambda x: nb.squeeze(x), lambda a: np.squeeze(a), (1, 3, 1, 2)),
    ("squeeze-axis", lambda x: x.squeeze(2), lambda a: np.squeeze(a, 2), (1, 3, 1, 2)),
    ("squeeze-tuple", lambda x: nb.squeeze(x, (0, 2)), lambda a: np.squeeze(a, (0, 2)), (1, 3, 1, 2)),
    ("unsqueeze", lambda x: x.unsqueeze(-1), lambda a: np.expand_dims(a, -1), (2, 3)),
    ("expand_dims", lambda x: nb.expand_dims(x, (0, 3)), lambda a: np.expand_dims(a, (0, 3)), (2, 3)),
    ("flatten", lambda x: x.flatten(), lambda a: a.flatten(), (2, 3, 4)),
    ("flatten-range", lambda x: x.flatten(1, 2), lambda a: a.reshape(2, 12, 5), (2, 3, 4, 5)),
    ("ravel", lambda x: nb.ravel(x), np.ravel, (2, 3)),
    ("transpose-np", lambda x: nb.transpose(x), np.transpose, (2, 3, 4)),
    ("transpose-axes", lambda x: nb.transpose(x, (1, 2, 0)), lambda a: np.transpose(a, (1, 2, 0)), (2, 3, 4)),
    ("transpose-torch", lambda x: x.transpose(0, 2), lambda a: np.swapaxes(a, 0, 2), (2, 3, 4)),
    ("transpose-2d", lambda x: x.transpose(0, 1), lambda a: a.T, (2, 3)),
    ("permute_dims", lambda x: nb.permute_dims(x, (2, 0, 1)), lambda a: np.permute_dims(a, (2, 0, 1)), (2, 3, 4)),
    ("moveaxis", lambda x: nb.moveaxis(x, 0, -1), lambda a: np.moveaxis(a, 0, -1), (2, 3, 4)),
    ("movedim", lambda x: x.movedim((0, 1), (2, 0)), lambda a: np.moveaxis(a, (0, 1), (2, 0)), (2, 3, 4)),
    ("flip-all", lambda x: nb.flip(x), np.flip, (2, 3)),
    ("flip-axis", lambda x: x.flip(dims=(1,)), lambda a: np.flip(a, 1), (2, 3)),
    ("fliplr", nb.fliplr, np.fliplr, (2, 3)),
    ("roll", lambda x: nb.roll(x, 2), lambda a: np.roll(a, 2), (3, 4)),
    ("roll-axes", lambda x: nb.roll(x, (1, -1), (0, 1)), lambda a: np.roll(a, (1, -1), (0, 1)), (3, 4)),
    ("tile", lambda x: nb.tile(x, (2, 1, 3)), lambda a: np.tile(a, (2, 1, 3)), (2, 3)),
    ("tile-short", lambda x: nb.tile(x, 2), lambda a: np.tile(a, 2), (2, 3)),
    ("torch-repeat", lambda x: x.repeat(2, 1, 2), lambda a: np.tile(a, (2, 1, 2)), (2, 3)),
    ("repeat", lambda x: nb.repeat(x, 2, axis=1), lambda a: np.repeat(a, 2, axis=1), (2, 3)),
    ("repeat-flat", lambda x: nb.repeat(x, 3), lambda a: np.repeat(a, 3), (2, 3)),
    ("repeat-counts", lambda x: nb.repeat(x, [1, 0, 2], axis=1), lambda a: np.repeat(a, [1, 0, 2], axis=1), (2, 3)),
    ("repeat_interleave", lambda x: x.repeat_interleave(2, dim=0), lambda a: np.repeat(a, 2, 0), (2, 3)),
    ("tril", lambda x: nb.tril(x), np.tril, (2, 4, 3)),
    ("triu-k", lambda x: x.triu(1), lambda a: np.triu(a, 1), (4, 3)),
    ("tril-neg", lambda x: nb.tril(x, -1), lambda a: np.tril(a, -1), (3, 5)),
    ("contiguous", lambda x: x.contiguous(), lambda a: a, (3, 4)),
]


@pytest.mark.parametrize("name,f,g,shape", UNARY, ids=[u[0] for u in UNARY])
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "bfloat16"])
def test_unary_movement(name, f, g, shape, dtype):
    check(f, g, A(shape, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtypes_roundtrip(dtype):
    a = A((2, 3, 1), dtype)
    check(lambda x: nb.moveaxis(nb.squeeze(x, -1), 0, 1).flip(0), lambda a: np.flip(np.moveaxis(np.squeeze(a, -1), 0, 1), 0), a)


@pytest.mark.parametrize("name,f,g,shape", [u for u in UNARY if u[0] in (
    "squeeze", "flatten", "ravel", "transpose-np", "flip-all", "roll", "tile", "repeat-flat")],
    ids=lambda v: v if isinstance(v, str) else "")
def test_zero_dim_and_empty(name, f, g, shape):
    check(f, g, A((0, 3) if name != "squeeze" else (1, 0)))
    if name in ("squeeze", "flatten", "ravel", "transpose-np", "flip-all", "repeat-flat", "tile"):
        a = np.array(2.5)
        got, want = f(nb.asarray(a)), g(a)
        assert np.array_equal(np.asarray(got), want) and got.shape == np.shape(want)


# ---- gradients ----------------------------------------------------------------------------------

GRADS = [u for u in UNARY if u[0] not in ("contiguous",)]


@pytest.mark.parametrize("name,f,g,shape", GRADS, ids=[u[0] for u in GRADS])
def test_grad(name, f, g, shape):
    gradcheck(f, A(shape))


def test_grad_joins():
    a, b = A((2, 3)), A((2, 1))
    gradcheck(lambda x, y: nb.concat([x, y], axis=1), a, b)
    gradcheck(lambda x, y: nb.stack([x, y * 2]), a, np.ones((2, 3)))
    gradcheck(lambda x: nb.split(x, 2, dim=1)[1] * 3, a)
    gradcheck(lambda x: np.split(x, [1], axis=0)[1], a)
    gradcheck(lambda x: x.unbind(1)[2], a)


# ---- joins and splits ----------------------------------------------------------------------------

def test_concat_spellings_and_promotion():
    a, b = A((2, 3), "int8"), A((1, 3), "float32")
    want = np.concatenate([a, b]).astype(np.float32)
    for f in (lambda x, y: nb.concat([x, y]), lambda x, y: nb.cat((x, y), dim=0),
              lambda x, y: np.concatenate([x, y]), lambda x, y: nb.concatenate([x, y], axis=-2)):
        got = f(nb.asarray(a), nb.asarray(b))
        assert got.dtype == nb.float32 and np.array_equal(np.asarray(got), want)
    got = nb.concat([nb.asarray(a), nb.asarray(b)], axis=None)
    assert np.array_equal(np.asarray(got), np.concatenate([a.ravel(), b.ravel()]))
    check(lambda x, y: nb.concat([x, y], axis=1), lambda x, y: np.concatenate([x, y], 1), A((2, 0)),
          A((2, 3)), all_layouts=False)


def test_stack_hstack_vstack():
    a, b = A((2, 3)), A((2, 3))
    check(lambda x, y: nb.stack([x, y], axis=-1), lambda x, y: np.stack([x, y], -1), a, b)
    check(lambda x, y: np.stack([x, y], axis=1), lambda x, y: np.stack([x, y], 1), a, b)
    check(lambda x, y: nb.hstack([x, y]), lambda x, y: np.hstack([x, y]), a, b)
    check(lambda x, y: nb.vstack([x, y]), lambda x, y: np.vstack([x, y]), A(3), A(3))


def test_join_errors():
    # PyTorch's wording for PyTorch-style tensors, NumPy's for NumPy data; both catchable as
    # ValueError (NumPy) and RuntimeError (PyTorch)
    with pytest.raises(ValueError, match=r"Expected size 3 but got size 4 for tensor number 1"):
        nb.concat([nb.zeros(2, 3), nb.zeros(2, 4)])
    with pytest.raises(RuntimeError, match="along dimension 1, the array at index 0 has size 3"):
        nb.concat([nb.asarray(np.zeros((2, 3))), nb.asarray(np.zeros((2, 4)))])
    with pytest.raises(ValueError, match="equal size"):
        nb.stack([nb.zeros(2, 3), nb.zeros(3, 2)])
    with pytest.raises(RuntimeError, match="same shape"):
        nb.stack([nb.asarray(np.zeros((2, 3))), nb.asarray(np.zeros((3, 2)))])
    with pytest.raises(ValueError, match="zero-dimensional"):
        nb.concat([nb.tensor(1.0), nb.tensor(2.0)])
    with pytest.raises(IndexError):
        nb.concat([nb.zeros(2), nb.zeros(2)], axis=1)


def test_split_spellings():
    a = A((7, 2))
    x = nb.asarray(a)
    assert [p.shape[0] for p in nb.split(x, 3)] == [3, 3, 1]           # PyTorch: size 3 pieces
    assert [p.shape[0] for p in x.split([2, 5])] == [2, 5]
    assert [p.shape[0] for p in nb.array_split(x, 3)] == [3, 2, 2]     # NumPy: 3 sections
    for got, want in zip(np.split(x, [2, 5]), np.split(a, [2, 5])):
        assert np.array_equal(np.asarray(got), want)
    for got, want in zip(np.split(nb.asarray(A((6, 2))), 3), np.split(np.zeros((6, 2)), 3)):
        assert got.shape == want.shape
    with pytest.raises(ValueError, match="equal division"):
        np.split(x, 3)
    with pytest.raises(RuntimeError):
        nb.split(x, [2, 2])
    assert [p.shape[0] for p in x.chunk(3)] == [3, 3, 1]
    assert [p.shape[0] for p in nb.chunk(nb.zeros(6), 4)] == [2, 2, 2]
    parts = x.unbind(1)
    assert len(parts) == 2 and np.array_equal(np.asarray(parts[1]), a[:, 1])


def test_errors():
    x = nb.zeros(2, 1, 3)
    with pytest.raises(ValueError, match="size is not 1"):
        x.squeeze(0)
    with pytest.raises(IndexError):
        x.squeeze(5)
    with pytest.raises(IndexError):
        x.transpose(0, 3)
    with pytest.raises(RuntimeError, match="number of sizes"):
        x.repeat(2, 2)
    with pytest.raises(ValueError):
        nb.tril(nb.zeros(3))
    with pytest.raises(ValueError, match="repeats"):
        nb.repeat(x, [1, 2], axis=0 + 2)


# ---- view semantics ------------------------------------------------------------------------------

VIEWS = [lambda x: x.reshape(6, 2), lambda x: x.permute(1, 0, 2), lambda x: x.unsqueeze(0),
         lambda x: x.squeeze(), lambda x: x.transpose(0, 1), lambda x: x[1:, ::-1],
         lambda x: x[0], lambda x: x.flip(0), lambda x: x[..., None, 1],
         lambda x: nb.moveaxis(x, 0, 2), lambda x: x.ravel(), lambda x: x.flatten(0, 1)]


@pytest.mark.parametrize("view", VIEWS)
def test_views_share_memory_and_version(view):
    base = nb.asarray(np.arange(12.0).reshape(3, 2, 2))
    v = view(base)
    assert v._version is base._version
    np.asarray(v)[(0,) * v.ndim] = -7.0     # a write through the view shows in the base
    assert (np.asarray(base) == -7.0).sum() == 1


def test_flatten_of_numpy_data_copies_as_numpy_does():
    base = nb.asarray(np.arange(6.0).reshape(3, 2))
    flat = base.flatten()
    np.asarray(flat)[0] = -1.0
    assert np.asarray(base)[0, 0] == 0.0 and flat.shape == (6,)


def test_copies_do_not_alias():
    base = nb.asarray(np.arange(6.0).reshape(3, 2))
    for f in (lambda x: x.T.reshape(6), lambda x: nb.roll(x, 1), lambda x: nb.tile(x, 1),
              lambda x: nb.repeat(x, 1), lambda x: x.T.contiguous(), lambda x: nb.concat([x])):
        y = f(base)
        np.asarray(y)[...] = 0
        assert np.asarray(base).sum() == 15
    c = base.contiguous()
    assert c is base


def test_version_counter_catches_view_write_after_use():
    x = nb.tensor([1.0, 2.0, 3.0], requires_grad=True)
    h = x * 1
    y = h.exp()             # saves its output h.exp(); uses h
    v = h[1:]
    out = (h * h).sum()     # saves h
    v.mul_(2) if hasattr(v, "mul_") else v.__setitem__(0, 5.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()
    del y


def test_transpose_of_a_tensor_swaps_two_dims_given_as_numpy_ints():
    """PyTorch takes np.int64 dims as ints: they swap, as two Python ints do."""
    x = nb.arange(6.0).reshape(2, 3)
    assert x.transpose(np.int64(0), np.int64(1)).shape == (3, 2) == x.transpose(0, 1).shape
