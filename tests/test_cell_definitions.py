"""The %%compile contract for what a cell leaves behind (issue 21): functions, lambdas and
classes defined in a compiled cell are the plain functions afterwards (NumPy in, NumPy out, the
notebook's globals, no closure over the cell's tracers); line magics, ``!cmd`` and
``get_ipython()`` see the cell's current values and leave no helper names; a keyword named ``f``
reaches the user's function; ``from numpy import *`` runs plainly."""
import pathlib
import sys
import threading
import types

import numpy as np
import pytest

pytest.importorskip("IPython")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from tests.cells import catalogue, harness  # noqa: E402

DEFS = ("f = lambda t: np.exp(t) * 2\n"
        "def g(t):\n    return np.sqrt(t) + 1\n"
        "class Scaler:\n    def __init__(self, k):\n        self.k = k\n"
        "    def __call__(self, t):\n        return np.tanh(t) * self.k\n"
        "s3 = Scaler(3)\n")


@pytest.fixture(scope="module")
def shell():
    sh = harness.get_shell("numpy")
    yield sh
    sh.run_line_magic("nbaccel", "config report=auto backend=auto")


def _cell(shell, src, compiled):
    res = shell.run_cell(("%%compile\n" + src) if compiled else src)
    res.raise_error()
    return res


def _fresh(shell, setup="import numpy as np\n"):
    harness._fresh(shell, setup)


def _expected():
    one = np.ones(3)
    return np.exp(one) * 2, np.sqrt(one) + 1, np.tanh(one) * 3


def _check(values):
    for got, want in zip(values, _expected()):
        assert type(got) is np.ndarray, type(got)
        np.testing.assert_array_equal(got, want)


def test_definitions_called_from_a_plain_cell_are_numpy(shell):
    _fresh(shell)
    _cell(shell, DEFS, compiled=True)
    _cell(shell, "a = f(np.ones(3)); b = g(np.ones(3)); c = s3(np.ones(3))\n", compiled=False)
    ns = shell.user_ns
    _check([ns["a"], ns["b"], ns["c"]])
    for fn in (ns["f"], ns["g"], ns["Scaler"].__call__):
        assert fn.__globals__ is ns                   # the notebook's globals, as plainly
        assert fn.__closure__ is None                 # no cell of the compiled run kept alive
    assert ns["g"].__qualname__ == "g" and ns["Scaler"].__qualname__ == "Scaler"


def test_definitions_called_from_a_compiled_cell_match_plain(shell):
    _fresh(shell)
    _cell(shell, DEFS, compiled=True)
    _cell(shell, "a = f(np.ones(3)); b = g(np.ones(3)); c = s3(np.ones(3))\n", compiled=True)
    ns = shell.user_ns
    _check([ns["a"], ns["b"], ns["c"]])


def test_definitions_called_from_another_module_and_a_thread(shell):
    _fresh(shell)
    _cell(shell, DEFS, compiled=True)
    ns = shell.user_ns
    other = types.ModuleType("other_module")
    exec("def use(f, g, s):\n    import numpy\n    x = numpy.ones(3)\n    return f(x), g(x), s(x)\n",
         other.__dict__)
    _check(other.use(ns["f"], ns["g"], ns["s3"]))
    out = []
    th = threading.Thread(target=lambda: out.append(other.use(ns["f"], ns["g"], ns["s3"])))
    th.start()
    th.join()
    _check(out[0])


def test_a_function_reads_the_notebook_global_at_call_time(shell):
    # x is a traced input of the compiled cell: the function must not keep the tracer
    _fresh(shell, "import numpy as np\nx = np.arange(3.0)\n")
    _cell(shell, "def getx():\n    return x * 2\nr = getx()\n", compiled=True)
    np.testing.assert_array_equal(shell.user_ns["r"], [0.0, 2.0, 4.0])
    _cell(shell, "x = np.ones(2)\nq = getx()\n", compiled=False)
    q = shell.user_ns["q"]
    assert type(q) is np.ndarray
    np.testing.assert_array_equal(q, [2.0, 2.0])


def test_defaults_hold_numpy_objects(shell):
    _fresh(shell, "import numpy as np\nx = np.arange(3.0)\n")
    _cell(shell, "def h(v, fn=np.sin, base=x * 2):\n    return fn(v) + base\nr = h(x)\n", compiled=True)
    h = shell.user_ns["h"]
    assert h.__defaults__[0] is np.sin
    assert type(h.__defaults__[1]) is np.ndarray
    assert type(h(np.zeros(3))) is np.ndarray


def test_regression_lambda_and_def_return_ndarrays():
    """The issue's first example, in its own words."""
    sh = harness.get_shell("numpy")
    _fresh(sh)
    _cell(sh, "f = lambda t: np.exp(t) * 2\ndef g(t):\n    return np.sqrt(t) + 1\n", compiled=True)
    _cell(sh, "a = f(np.ones(3)); b = g(np.ones(3))\n", compiled=False)
    assert type(sh.user_ns["a"]) is np.ndarray and type(sh.user_ns["b"]) is np.ndarray


# -- IPython inside the cell ---------------------------------------------------------------------

def _both(shell, setup, source):
    cell = catalogue.Cell("adhoc", source, setup=setup)
    return harness.run(shell, cell, compiled=False), harness.run(shell, cell, compiled=True)


def test_timeit_sees_the_cells_current_values_and_leaves_no_helpers(shell):
    setup = "import numpy as np\nx = np.zeros(3)\n"
    plain, comp = _both(shell, setup, "x = np.arange(5.0)\nt = %timeit -o -q -n1 -r1 x.sum()\nn = len(t.all_runs)\n")
    assert plain.error is None and comp.error is None, comp.error
    assert harness.differences(plain, comp) == [] or set(plain.names) == set(comp.names)
    for helper in ("args", "kwargs", "f"):
        assert helper not in comp.names
    assert comp.names["n"] == 1


def test_line_magic_sees_a_name_the_cell_just_bound(shell):
    # %timeit of a name only the cell binds: NameError before (the notebook's namespace was read)
    plain, comp = _both(shell, "import numpy as np\n", "fresh = np.ones(4) * 2\n%timeit -q -n1 -r1 fresh.sum()\n")
    assert plain.error is None and comp.error is None, comp.error
    assert set(comp.names) == set(plain.names)


def test_time_magic_and_shell_lines_match_plain(shell):
    src = ("v = np.arange(4.0) * 3\n%time w = v + 1\nlines = !echo {int(v.sum())} $v.size\n"
           "total = w.sum()\nout = list(lines)\n")
    plain, comp = _both(shell, "import numpy as np\n", src)
    assert plain.error is None and comp.error is None, comp.error
    assert comp.names["out"] == plain.names["out"] == ["18 4"]
    assert comp.names["total"] == plain.names["total"]
    assert set(comp.names) == set(plain.names)


def test_get_ipython_call_sees_the_cell(shell):
    src = "k = np.arange(3.0) + 1\nshown = get_ipython().ev('k.sum()')\n"
    plain, comp = _both(shell, "import numpy as np\n", src)
    assert harness.differences(plain, comp) == []
    assert comp.names["shown"] == 6.0


def test_matplotlib_magic_runs(shell):
    pytest.importorskip("matplotlib")
    plain, comp = _both(shell, "import numpy as np\n", "%matplotlib agg\nz = np.ones(2)\n")
    assert harness.differences(plain, comp) == []


def test_a_keyword_named_f_reaches_the_users_function(shell):
    setup = ("import numpy as np\ndef julia(z, f=np.square, n=3):\n    for _ in range(n):\n"
             "        z = f(z)\n    return z\n")
    plain, comp = _both(shell, setup, "mesh = np.linspace(0, 1, 5)\nj = julia(mesh, f=np.sin)\n"
                                      "k = julia(mesh, n=1, f=np.cos)\n")
    assert harness.differences(plain, comp) == []
    assert comp.error is None


def test_keywords_named_like_the_wrapper_parameters(shell):
    setup = "import numpy as np\ndef kw(x, args=1, kwargs=2, f=3):\n    return x * (args + kwargs + f)\n"
    plain, comp = _both(shell, setup, "r = kw(np.ones(2), args=2, kwargs=3, f=4)\n")
    assert harness.differences(plain, comp) == []


def test_star_import_runs_plainly(shell):
    plain, comp = _both(shell, "", "from numpy import *\nq = sqrt(arange(4.0))\nm = pi\n")
    assert harness.differences(plain, comp) == []
    assert comp.error is None
    assert comp.fallback and "import *" in comp.fallback


def test_magics_reading_the_namespace_see_the_cells_values(shell):
    # %who_ls and get_ipython().ev read the notebook namespace itself: the plain cell's locals
    harness._fresh(shell, "import numpy as np\n")
    _cell(shell, "a1 = np.ones(2)\nnames = %who_ls\nhas = 'a1' in names\nval = get_ipython().ev('a1.sum()')\n",
          compiled=True)
    ns = shell.user_ns
    assert ns["has"] is True and ns["val"] == 2.0
    assert type(ns["a1"]) is np.ndarray


def test_notebook_objects_get_numpy_attributes_but_keep_their_tensors(shell):
    import nbaccel as nb
    harness._fresh(shell, "import numpy as np\nimport nbaccel as nb\nx = np.arange(4.0)\n"
                          "class Net:\n    def __init__(self):\n        self.w = nb.tensor(np.ones(4))\n"
                          "    def fit(self, v):\n        self.mu = v.mean()\n        return self\nnet = Net()\n")
    _cell(shell, "net.fit(x * 2)\n", compiled=True)
    net = shell.user_ns["net"]
    assert type(net.mu) is np.float64 and net.mu == 3.0       # as the plain cell sets it
    assert isinstance(net.w, nb.Tensor)                        # a Tensor it held before stays one
