"""getitem/setitem (NumPy semantics), take/gather/scatter, nonzero and sorting vs NumPy."""
import types

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nbaccel as nb
from nbaccel.ops import OPS
from nbaccel.ops.indexing_plan import encode_index
from nbaccel.ops.meta import DataDependentShape
from oracle import check, gradcheck, random_array

A0 = np.arange(60.0).reshape(3, 4, 5)
INDICES = [
    0, -1, (1, 2), (1, 2, 3), (slice(None, None, -1),), (slice(3, 0, -2), slice(None), 1),
    (..., 1), (None, 0, ..., None), (Ellipsis,), ([0, 2],), ([[0], [2]], [1, 3]),
    (0, slice(None), [1, 2]), ([1, 0], 1, [2, 3]), (slice(None), [0, 0, 3], None),
    ([0, 1], slice(None), [0, 1]), (A0 > 30,), (0, A0[0] > 5), (slice(None), A0[0, :, 0] > 5),
    (np.array([2, -1]), Ellipsis, np.array(1)), True, False, (slice(1, 1),), ([],),
    (slice(None), np.zeros((2, 0), int)),
]


@pytest.mark.parametrize("idx", INDICES, ids=[str(i)[:40] for i in range(len(INDICES))])
@pytest.mark.parametrize("dtype", ["float32", "int16", "bool", "bfloat16"])
def test_getitem(idx, dtype):
    check(lambda x: x[idx], lambda a: a[idx], random_array((3, 4, 5), dtype))


@pytest.mark.parametrize("idx", INDICES, ids=[str(i)[:40] for i in range(len(INDICES))])
def test_getitem_and_setitem_decompositions(idx):
    """The compiler's view: getitem/setitem decompose into the primitives and agree."""
    x = nb.asarray(A0)
    entries, ts = encode_index(idx)
    got = OPS["getitem"].decomp(x, *ts, index=entries)
    assert np.array_equal(np.asarray(got), A0[idx])
    want = A0.copy()
    want[idx] = -1
    got = OPS["setitem"].decomp(x, -1.0, *ts, index=entries, accumulate=False)
    assert np.array_equal(np.asarray(got), want)


@pytest.mark.parametrize("idx", INDICES, ids=[str(i)[:40] for i in range(len(INDICES))])
def test_setitem(idx):
    a = A0.copy()
    x = nb.tensor(A0)
    x[idx] = -2.0
    a[idx] = -2.0
    assert np.array_equal(np.asarray(x), a)


@pytest.mark.parametrize("idx", [0, (slice(None), 1), ([0, 2, 0],), (A0[:, :, 0] > 20,),
                                 (slice(None, None, -1), [1, 1], 2), (None, 1, ..., 2)])
def test_getitem_grad(idx):
    gradcheck(lambda x: x[idx], A0 / 10)


def test_getitem_grad_accumulates_repeats():
    x = nb.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x[[0, 0, 2, 0]].sum().backward()
    assert np.array_equal(np.asarray(x.grad), [3.0, 0.0, 1.0])


def test_basic_index_is_view():
    x = nb.tensor(A0)
    v = x[1, ::-2]
    assert v._version is x._version
    v[0] = 100.0
    assert float(x[1, 3, 0]) == 100.0 and x._version[0] == 1
    s = x[0, 0, 0]
    assert s.shape == () and s._version is x._version      # 0-d view, not a copy
    w = x[[0, 1]]
    assert w._version is not x._version                     # advanced indexing copies


def test_setitem_broadcast_and_cast():
    x = nb.zeros(3, 4, dtype="int32")
    x[1] = nb.tensor([1.7, 2.2, 3.9, -1.5])    # float into int: cast like NumPy
    x[:, 0] = 9
    x[2:] = np.ones((1, 1, 4)) * 5              # extra leading 1s are dropped
    a = np.zeros((3, 4), np.int32)
    a[1] = [1.7, 2.2, 3.9, -1.5]
    a[:, 0] = 9
    a[2:] = np.ones((1, 1, 4)) * 5
    assert x.dtype == nb.int32 and np.array_equal(np.asarray(x), a)
    with pytest.raises(ValueError, match=r"\(3,\).*\(4,\)"):
        x[0] = nb.tensor([1, 2, 3])


def test_setitem_autograd():
    x = nb.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    y[0] = 0
    y.sum().backward()
    assert np.array_equal(np.asarray(x.grad), [0.0, 2.0, 2.0])
    # value gradient, with broadcasting and an advanced index
    w = nb.tensor(3.0, requires_grad=True)
    x2 = nb.tensor([1.0, 2.0, 3.0], requires_grad=True)
    z = x2 * 1
    z[[0, 2]] = w * 2
    (z * nb.tensor([1.0, 10.0, 100.0])).sum().backward()
    assert np.array_equal(np.asarray(x2.grad), [0.0, 10.0, 0.0]) and float(w.grad) == 202.0
    with pytest.raises(RuntimeError, match="leaf"):
        x[0] = 1.0
    with nb.no_grad():
        x[0] = 5.0
    assert float(x[0]) == 5.0


def test_setitem_into_saved_tensor_raises_on_backward():
    x = nb.tensor([1.0, 2.0, 3.0], requires_grad=True)
    h = x * 1
    out = (h * h).sum()
    h[0] = 7.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()


def test_setitem_gradcheck():
    def f(x, v):
        y = x * 1
        y[1:, [0, 2]] = v
        return y
    gradcheck(f, A0[0] / 7, np.array([[0.5, -1.0]]))


def test_index_errors():
    x = nb.zeros(3, 4)
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 1 with size 4"):
        x[0, 5]
    with pytest.raises(IndexError, match="index -4 is out of bounds for axis 0 with size 3"):
        x[-4]
    with pytest.raises(IndexError, match="out of bounds"):
        x[:, [0, 4]]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., ...]
    with pytest.raises(IndexError, match="boolean index"):
        x[np.array([True, False])]
    with pytest.raises(IndexError):
        x[1.5]
    with pytest.raises(IndexError, match="shape mismatch"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(ValueError, match="step cannot be zero"):
        x[::0]


def test_mask_infer_is_data_dependent():
    x = nb.zeros(3)
    mask = nb.tensor([True, False, True])
    mask._node = types.SimpleNamespace(shape=(3,))   # pretend it is a tracer: infer must refuse, not guess
    try:
        with pytest.raises(DataDependentShape, match="boolean mask"):
            OPS["getitem"].infer((x, mask), {"index": (("b", 0),)})
        with pytest.raises(DataDependentShape):
            OPS["argwhere"].infer((mask,), {})
    finally:
        mask._node = None


# ---- hypothesis: random basic + advanced index expressions ----------------------------------------

@st.composite
def index_exprs(draw):
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    parts, axis, ell = [], 0, False
    while axis < len(shape) and draw(st.booleans()):
        n = shape[axis]
        kind = draw(st.sampled_from("isanNeb" if not ell else "isanb"))
        if kind == "i":
            parts.append(draw(st.integers(-n, n - 1)))
        elif kind == "s":
            parts.append(slice(draw(st.none() | st.integers(-n - 1, n + 1)),
                               draw(st.none() | st.integers(-n - 1, n + 1)),
                               draw(st.none() | st.sampled_from([1, 2, -1, -3]))))
        elif kind == "a":
            k = draw(st.integers(0, 3))
            parts.append(np.array(draw(st.lists(st.integers(-n, n - 1), min_size=k, max_size=k)), dtype=np.int64))
        elif kind == "b":
            parts.append(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))))
        elif kind == "n":
            parts.append(None)
            continue
        else:
            ell = True
            parts.append(Ellipsis)
            axis = len(shape) - sum(1 for p in parts if p is not None and p is not Ellipsis)
            continue
        axis += 1
    return shape, tuple(parts)


@settings(max_examples=40, deadline=None)
@given(index_exprs())
def test_random_index_expressions(case):
    shape, idx = case
    a = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    try:
        want = a[idx]
    except IndexError:
        with pytest.raises(IndexError):
            nb.asarray(a)[idx]
        return
    got = nb.asarray(a)[idx]
    assert got.shape == want.shape and np.array_equal(np.asarray(got), want)
    entries, ts = encode_index(idx)
    dec = OPS["getitem"].decomp(nb.asarray(a), *ts, index=entries)
    assert np.array_equal(np.asarray(dec), want)
    b = a.copy()
    b[idx] = -1
    x = nb.tensor(a)
    x[idx] = -1
    assert np.array_equal(np.asarray(x), b)


# ---- take / gather / scatter / nonzero ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float64", "int8", "bool"])
def test_take_family(dtype):
    a = random_array((3, 4), dtype)
    i = np.array([[2, 0], [1, 1]])
    check(lambda x: nb.take(x, i, axis=1), lambda a: np.take(a, i, axis=1), a)
    check(lambda x: np.take(x, [5, 0]), lambda a: np.take(a, [5, 0]), a)
    check(lambda x: x.index_select(0, nb.tensor([2, 0, 2])), lambda a: a[[2, 0, 2]], a)
    j = np.array([[3, 0, 1, 1], [2, 2, 0, 0], [0, 1, 2, 3]])
    check(lambda x: nb.take_along_axis(x, j, axis=1), lambda a: np.take_along_axis(a, j, 1), a)
    check(lambda x: np.take_along_axis(x, j[:1] % 3, 0), lambda a: np.take_along_axis(a, j[:1] % 3, 0), a)
    k = np.array([[0, 2], [1, 0]])
    check(lambda x: x.gather(1, nb.tensor(k)), lambda a: np.take_along_axis(a[:2], k, 1), a)


def test_take_grads():
    a = A0[0] / 3
    gradcheck(lambda x: nb.take(x, [[0, 0], [3, 1]], axis=1), a)
    gradcheck(lambda x: nb.take_along_axis(x, np.array([[0, 0, 2, 3]] * 4), 1), a)
    gradcheck(lambda x: x.gather(0, nb.tensor([[1, 0, 1, 1, 0]])), a)


def test_scatter():
    x = nb.zeros(3, 4, dtype="float64")
    idx = nb.tensor([[0, 1, 2, 0], [0, 0, 0, 0]])
    src = nb.asarray(np.arange(12.0).reshape(3, 4))
    got = nb.scatter_add(x, 0, idx, src)
    want = np.zeros((3, 4))
    np.add.at(want, (idx.numpy(), np.arange(4)[None, :].repeat(2, 0)), np.arange(8.0).reshape(2, 4))
    assert np.array_equal(np.asarray(got), want)
    got = x.scatter(1, nb.tensor([[3], [0]]), value=5.0)
    assert float(got[0, 3]) == 5 and float(got[1, 0]) == 5 and float(got.sum()) == 10
    gradcheck(lambda s: nb.scatter_add(nb.ones(3, 4, dtype="float64"), 0, idx, s), np.arange(12.0).reshape(3, 4))
    out = nb.index_put(nb.zeros(4, dtype="float64"), (nb.tensor([1, 1, 3]),), nb.tensor([1.0, 2.0, 3.0], dtype="float64"), accumulate=True)
    assert np.array_equal(np.asarray(out), [0, 3, 0, 3])


def test_nonzero_spellings():
    a = np.array([[0, 1, 0], [2, 0, 3]])
    x = nb.asarray(a)
    for got, want in zip(nb.nonzero(x), np.nonzero(a)):
        assert np.array_equal(np.asarray(got), want)
    for got, want in zip(np.nonzero(x), np.nonzero(a)):
        assert np.array_equal(np.asarray(got), want)
    assert np.array_equal(np.asarray(x.nonzero()), np.argwhere(a))
    assert np.array_equal(np.asarray(nb.argwhere(x)), np.argwhere(a))
    assert nb.argwhere(nb.zeros(0, 2)).shape == (0, 2)
    with pytest.raises(ValueError):
        nb.nonzero(nb.tensor(1))


# ---- sorting ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "uint8", "bool", "bfloat16"])
@pytest.mark.parametrize("axis", [0, -1, None])
def test_sort_argsort(dtype, axis):
    a = random_array((5, 6), dtype, low=-2, high=2)      # few distinct values: many ties
    check(lambda x: nb.sort(x, axis=axis), lambda a: np.sort(a, axis=axis, kind="stable"), a)
    check(lambda x: np.sort(x, axis), lambda a: np.sort(a, axis, kind="stable"), a)
    check(lambda x: nb.argsort(x, axis=axis), lambda a: np.argsort(a, axis, kind="stable"), a)
    if axis is not None:
        # stable descending: ties keep their original order
        want = np.flip(np.sort(a, axis=axis, kind="stable"), axis)
        check(lambda x: nb.sort(x, axis=axis, descending=True), lambda a: want, a, all_layouts=False)
        idx = np.asarray(nb.argsort(nb.asarray(a), axis=axis, descending=True))
        keys = np.take_along_axis(a, idx, axis).astype(np.float64)
        assert (np.diff(keys, axis=axis) <= 0).all()
        tie = np.diff(keys, axis=axis) == 0
        assert (np.diff(idx, axis=axis)[tie] > 0).all()


def test_sort_edge_cases():
    assert nb.sort(nb.zeros(0)).shape == (0,)
    assert float(nb.sort(nb.tensor(3.0))) == 3.0
    a = np.array([3.0, np.nan, 1.0])
    assert np.array_equal(np.asarray(nb.sort(nb.asarray(a))), np.sort(a), equal_nan=True)


def test_sort_method_and_topk():
    x = nb.tensor([[3.0, 1.0, 2.0, 1.0], [0.0, 5.0, 5.0, -1.0]])
    vals, idx = x.sort(dim=1, descending=True)
    assert np.array_equal(np.asarray(vals), [[3, 2, 1, 1], [5, 5, 0, -1]])
    assert np.array_equal(np.asarray(idx), [[0, 2, 1, 3], [1, 2, 0, 3]])
    r = nb.topk(x, 2)
    assert r.values.shape == (2, 2) and np.array_equal(np.asarray(r.indices), [[0, 2], [1, 2]])
    r = x.topk(1, dim=0, largest=False)
    assert np.array_equal(np.asarray(r.values), [[0, 1, 2, -1]])
    with pytest.raises(RuntimeError, match="out of range"):
        x.topk(5)


def test_sort_grads():
    a = np.array([[0.3, -1.0, 2.0], [1.5, 0.2, -0.7]])
    gradcheck(lambda x: nb.sort(x, axis=1), a)
    gradcheck(lambda x: nb.sort(x, axis=0, descending=True), a)
    gradcheck(lambda x: nb.topk(x, 2).values, a)
