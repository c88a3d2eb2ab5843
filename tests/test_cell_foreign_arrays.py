"""Other libraries' arrays pass through a %%compile cell untouched (issue 21): pandas, xarray,
np.matrix, masked arrays, scipy.sparse and objects with __array_function__ keep their types,
and NumPy's own functions handle them, as in the plain cell."""
import importlib.util
import pathlib
import sys

import pytest

pytest.importorskip("IPython")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from tests.cells import catalogue, harness  # noqa: E402

# what a user sees, the plain re-run included (tests/conftest.py: not_strict)
pytestmark = pytest.mark.usefixtures("not_strict")

DUCK = '''
class Duck:
    def __init__(self, a): self.a = np.asarray(a)
    def __array_function__(self, func, types, args, kwargs):
        un = lambda v: v.a if isinstance(v, Duck) else [un(e) for e in v] if isinstance(v, list) else v
        args = [un(x) for x in args]
        return Duck(func(*args, **kwargs))
    def __array_ufunc__(self, ufunc, method, *inputs, **kw):
        inputs = [x.a if isinstance(x, Duck) else x for x in inputs]
        return Duck(getattr(ufunc, method)(*inputs, **kw))
    def __eq__(self, o): return isinstance(o, Duck) and np.array_equal(self.a, o.a)
'''

CASES = {
 "pandas_series": ("import pandas as pd\nobj = pd.Series([1.0, 2.0, 3.0], index=list('abc'))\n",
                   "y = obj * 2 + 1\ns = np.sqrt(obj)\nm = obj.mean()\nz = np.exp(obj) - obj\nk = y.values.sum()\n"),
 "pandas_frame": ("import pandas as pd\nobj = pd.DataFrame({'a': [1.0, 2.0], 'b': [3.0, 4.0]})\n",
                  "y = obj * 2\ns = np.log(obj)\nt = obj.sum(axis=0)\narr = obj.to_numpy() * 3\n"),
 "xarray": ("import xarray as xr\nobj = xr.DataArray(np.arange(6.0).reshape(2, 3), dims=('x', 'y'))\n",
            "y = obj * 2\ns = np.sin(obj)\nm = obj.mean(dim='x')\n"),
 "matrix": ("obj = np.matrix([[1.0, 2.0], [3.0, 4.0]])\n", "y = obj * obj\ns = np.sqrt(obj)\nt = obj.T @ obj\n"),
 "masked": ("obj = np.ma.masked_array([1.0, 2.0, 3.0], mask=[0, 1, 0])\n", "y = obj * 2\ns = np.sqrt(obj)\nm = obj.mean()\n"),
 "scipy_sparse": ("import scipy.sparse as sp\nobj = sp.csr_matrix(np.eye(3))\n", "y = obj * 2\nt = obj @ np.ones(3)\nd = obj.toarray() + 1\n"),
 "duck": (DUCK + "obj = Duck([1.0, 2.0])\n", "y = np.sum(obj)\ns = np.sin(obj)\nc = np.concatenate([obj, obj])\n"),
}
NEEDS = {"pandas_series": "pandas", "pandas_frame": "pandas", "xarray": "xarray", "scipy_sparse": "scipy"}
# scipy's matrix @ an array made in the cell (a Tensor there) fails inside scipy: the cell runs
# plainly (the safety net sees the Tensor that reached scipy's frame)
MAY_RUN_PLAINLY = {"scipy_sparse"}


@pytest.fixture(scope="module")
def shell():
    sh = harness.get_shell("numpy")
    yield sh
    sh.run_line_magic("nbaccel", "config report=auto backend=auto")


@pytest.mark.parametrize("name", sorted(CASES))
def test_foreign_array_type_survives(shell, name):
    if name in NEEDS:
        pytest.importorskip(NEEDS[name])
    setup, src = CASES[name]
    cell = catalogue.Cell(name, src, setup="import numpy as np\n" + setup)
    plain = harness.run(shell, cell, compiled=False)
    comp = harness.run(shell, cell, compiled=True, verify=True)
    assert plain.error is None
    assert harness.differences(plain, comp) == []
    kinds = lambda names: {k: (type(v).__module__, type(v).__qualname__) for k, v in names.items()}  # noqa: E731
    assert kinds(comp.names) == kinds(plain.names)
    from nbaccel.magics import get_extension
    assert get_extension(shell).last_verify.differences == []
    if name not in MAY_RUN_PLAINLY:
        assert comp.fallback is None, comp.fallback


def test_cupy_without_a_gpu_passes_through(shell):
    if importlib.util.find_spec("cupy") is None:
        pytest.skip("CuPy is not installed")
    cell = catalogue.Cell("cupy", "import cupy\nkind = type(cupy).__name__\n")
    plain = harness.run(shell, cell, compiled=False)
    comp = harness.run(shell, cell, compiled=True)
    assert harness.differences(plain, comp) == []
