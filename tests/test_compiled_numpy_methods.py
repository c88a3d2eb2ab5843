"""An nb.compile'd function handed NumPy arrays runs their methods with ndarray's meaning, as its
plain code does (a %%compile cell already did): ``a.repeat(2)`` repeats elements,
``a.transpose(0, 1)`` is a permutation, ``a.view(dtype)`` reinterprets. Tensors handed in keep
PyTorch's meaning, as their plain code has it."""
import numpy as np
import pytest

import nbaccel as nb


pytestmark = pytest.mark.usefixtures("compiled_runs_only")   # (tests/conftest.py)


PROGRAMS = {
    "repeat": lambda a: a.repeat(2) * 1,
    "repeat_axis": lambda a: a.repeat(2, axis=1) + 0,
    "transpose_ints": lambda a: a.transpose(0, 1) * 1,
    "transpose_swap": lambda a: a.transpose(1, 0) * 1,
    "transpose_tuple": lambda a: a.transpose((1, 0)) * 1,
    "transpose_none": lambda a: a.transpose() * 1,
    "view_dtype": lambda a: a.view(np.int64) + 0,
    "sort_in_place": lambda a: (a.sort(axis=0), a * 1)[1],
}


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_ndarray_methods_keep_numpys_meaning(name, backend):
    fn = PROGRAMS[name]
    a = np.random.default_rng(3).standard_normal((3, 4))
    mine, theirs = a.copy(), a.copy()
    got = nb.compile(fn, backend=backend)(mine)
    want = fn(theirs)
    assert type(got) is type(want) and got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(mine, theirs)          # (sort writes the input, as NumPy does)


def test_tensors_keep_pytorchs_meaning():
    t = nb.arange(12.0).reshape(3, 4)
    assert nb.compile(lambda x: x.transpose(0, 1) * 1)(t).shape == (4, 3)
    assert nb.compile(lambda x: x.repeat(2, 1) * 1)(t).shape == (6, 4)


UFUNCS_WITHOUT_AN_OP = {
    "nextafter": lambda a: np.nextafter(a.T, 100.0),
    "reduce": lambda a: np.add.reduce(a * 2, axis=0),
    "accumulate": lambda a: np.maximum.accumulate(a + 1, axis=1),
    "outer": lambda a: np.multiply.outer(a[0], a[1]),
    "at": lambda a: (np.add.at(a, [0, 0], 1.0), a * 1)[1],
}


@pytest.mark.parametrize("name", sorted(UFUNCS_WITHOUT_AN_OP))
def test_ufuncs_and_ufunc_methods_without_an_op_run_as_numpy(name):
    # NumPy's ufunc (or its reduce/accumulate/outer/at) on a traced array of NumPy code is a graph
    # break, as __array_function__'s fallback is: before, a TypeError that plain code never raises
    fn = UFUNCS_WITHOUT_AN_OP[name]
    a = np.random.default_rng(4).standard_normal((3, 4))
    mine, theirs = a.copy(), a.copy()
    got = nb.compile(fn)(mine)
    want = fn(theirs)
    assert type(got) is type(want) and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(mine, theirs)


def test_a_pytorch_made_tensor_still_refuses_a_ufunc_without_an_op():
    with pytest.raises(TypeError, match="no op for numpy.nextafter"):
        np.nextafter(nb.tensor([1.0, 2.0]), 3.0)
