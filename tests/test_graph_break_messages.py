"""A graph break names the user's construct and says what to do about it (issue 37, item 7):
``.item()``, ``float()``/``int()``, an ndarray method without an op, ``print``, ``if`` on array
data; in a %%compile cell and in an nb.compile function alike. Each case checks the reason
(which construct) and the fix (advice for that construct, never another's)."""
import numpy as np
import pytest

import nbaccel as nb
from nbaccel.compiler.capture.capture import _fix_for

pytest.importorskip("IPython")
from IPython import get_ipython  # noqa: E402
from IPython.testing.globalipapp import start_ipython  # noqa: E402

# cell body -> (construct in the reason, words the fix must hold, words it must not)
CELLS = {
    "m = x.mean()\nprint(round(m.item(), 4))\nz = np.tanh(x - m)\n":
        ("item()", [".item()", "np.round(m, 4)", "end of the cell"], ["float()", "ndarray.item has no op"]),
    "print(round(float(x.mean()), 3))\nz = np.tanh(x) * 2\n":
        ("(float())", ["instead of float()", "arithmetic", "call float()"], [".item()", "np.where"]),
    "if float(x.max()) > 0.5:\n    z = np.tanh(x) * 2\n":
        ("(float())", ["instead of float()", "np.where(cond, a, b)", "call float()"], [".item()"]),
    "v = int(x.sum()) + 1\nz = np.tanh(x) * v\n":
        ("(int())", ["instead of int()", "call int()"], [".item()"]),
    "z = np.tanh(x)\nz.put([0, 2], [9.0, 8.0])\nw = z * 2\n":
        ("ndarray.put", [".put", "supported-ops.md"], [".item()", "0-d array"]),
    "s = x.sum()\nif s > 0:\n    y = np.exp(-x)\nelse:\n    y = np.exp(x)\n":
        ("bool", ["np.where"], [".item()"]),
}


@pytest.fixture(scope="module")
def ip():
    shell = start_ipython() or get_ipython()
    shell.run_line_magic("load_ext", "nbaccel")
    yield shell
    shell.user_ns.pop("rep", None)


@pytest.mark.parametrize("body", list(CELLS), ids=["item", "float", "float-if", "int", "put", "if"])
def test_a_cell_break_names_the_construct_and_its_fix(ip, body):
    construct, must, must_not = CELLS[body]
    ip.user_ns.update(np=np, x=np.linspace(-1, 2, 12).reshape(3, 4))
    res = ip.run_cell(f"%%compile --backend numpy --report none -o rep\n{body}")
    assert res.success, res.error_in_exec
    breaks = ip.user_ns["rep"].graph_breaks
    assert breaks, body
    b = breaks[0]
    assert construct in b["reason"], b
    for word in must:
        assert word in b["fix"], (word, b["fix"])
    for word in must_not:
        assert word not in b["fix"] and word not in b["reason"], (word, b)


def test_float_in_a_compiled_function_is_named_as_float_not_item():
    f = nb.compile(lambda x: x * 2 if float(x.max()) > 0.5 else x, backend="numpy")
    f(nb.asarray(np.linspace(0, 1, 6)))
    (b,) = f.report.graph_breaks
    assert b["reason"] == "a Python scalar is needed (float())"
    assert "x.max() > 0.5" in b["fix"] and "np.where" in b["fix"] and ".item()" not in b["fix"]


@pytest.mark.parametrize("reason,fix", [
    ("a Python scalar is needed (.item())", "instead of .item()"),
    ("a Python scalar is needed (ndarray.item())", "instead of .item()"),
    ("a Python scalar is needed (complex())", "instead of complex()"),
    ("a Python scalar is needed (an index)", "a Python int"),
    ("a Python list is needed (.tolist())", "instead of .tolist()"),
    ("ndarray.itemsize has no op: NumPy runs it on the concrete value", "move .itemsize"),
    ("ndarray.item has no op: NumPy runs it on the concrete value", "instead of .item()"),
    ("fft.rfft has no op: NumPy computes it on the concrete value", "np.fft.rfft"),
    ("print is outside NumPy's namespace: it receives NumPy values", "print outside"),
    ("np.median is not in the op table (no-op fallback): NumPy runs it on concrete values", "op table"),
])
def test_each_reason_gets_the_fix_for_its_construct(reason, fix):
    assert fix in _fix_for(reason), _fix_for(reason)


def test_one_element_conversions_keep_their_errors():
    """float() of a many-element tensor raises as before (the construct only names breaks)."""
    with pytest.raises(RuntimeError, match="cannot be converted"):
        float(nb.ones(3))
    assert float(nb.ones(())) == 1.0 and int(nb.ones((1,))) == 1 and complex(nb.ones(())) == 1
