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
