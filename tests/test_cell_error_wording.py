"""A cell that raises: its report words the error as the exception the user sees (issue 37,
item 7). nbaccel detects a shape error first (a ShapeError with NumPy's text) and runs the cell
plainly, so the user gets NumPy's own ValueError; the report must name that, not ShapeError."""
import numpy as np
import pytest

pytest.importorskip("IPython")
from IPython import get_ipython  # noqa: E402
from IPython.testing.globalipapp import start_ipython  # noqa: E402

from nbaccel.magics import cellrun  # noqa: E402

# what a user sees: the plain re-run included (tests/conftest.py: not_strict)
pytestmark = pytest.mark.usefixtures("not_strict")

CELLS = ["c = a @ b\n", "c = np.ones((3, 4)) @ np.ones((5, 4))\n", "c = a + b\n", "c = a.reshape(5, 5)\n",
         "c = a[7]\n", "c = np.concatenate([a, b], axis=1)\n", "c = np.exp(a)\nd = c.T @ b.T\n"]


@pytest.fixture(scope="module")
def ip():
    shell = start_ipython() or get_ipython()
    shell.run_line_magic("load_ext", "nbaccel")
    yield shell
    shell.user_ns.pop("rep", None)


@pytest.mark.parametrize("src", CELLS)
@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_the_report_names_the_exception_the_user_sees(ip, src, backend, capsys):
    ip.user_ns.update(np=np, a=np.ones((3, 4)), b=np.ones((5, 4)))
    ip.user_ns.pop("rep", None)
    res = ip.run_cell(f"%%compile --backend {backend} --report text -o rep\n{src}")
    err = res.error_in_exec
    assert err is not None and type(err) in (ValueError, IndexError)     # NumPy's own, as plainly
    seen = f"{type(err).__name__}: {err}"
    rep = ip.user_ns["rep"]
    assert seen in rep.fallback and "ShapeError" not in rep.fallback, rep.fallback
    out = capsys.readouterr().out
    assert seen in out and "ShapeError" not in out              # the text report as printed


def test_a_different_plain_exception_keeps_the_compiled_failure_and_names_the_plain_one():
    compiled = RuntimeError("nbaccel's kernel failed")
    reason = f"the compiled run failed at line 2 (RuntimeError: {compiled}); the cell ran plainly"
    out = cellrun._as_raised(reason, (compiled, " at line 2"), KeyError("k"))
    assert out.startswith(reason) and out.endswith("and raised KeyError: 'k'")
    # the same text from another class (ShapeError is a ValueError) is the user's exception
    same = cellrun._as_raised(reason, (ValueError("bad"), " at line 2"), ValueError("bad"))
    assert same.startswith("the cell raised ValueError: bad at line 2") and "compiled run failed" not in same
    # a reason that is not a compiled failure (too many graph breaks, ...) stays as it was
    assert cellrun._as_raised("tracing cost more", (compiled, ""), ValueError("x")) == "tracing cost more"


TRACEBACK_CELLS = [
    "x = np.ones(3)\ny = x[5]\n",                        # NumPy raises in the cell's own line
    "def f(v):\n    return v[9]\nz = f(np.ones(2))\n",    # in a function the cell defines
    "y = np.exp(a)\nz = y @ b\n",                        # a shape error: detected compiled, raised plainly
]


def _shown(ip, src, capsys):
    """The traceback IPython prints for ``src`` (the run's cell number written as N)."""
    capsys.readouterr()
    res = ip.run_cell(src)
    assert res.error_in_exec is not None
    out = capsys.readouterr().out
    return out.replace(f"In[{res.execution_count}]", "In[N]"), res.execution_count


@pytest.mark.parametrize("src", TRACEBACK_CELLS)
@pytest.mark.parametrize("now", [False, True])
def test_a_traceback_reads_as_the_plain_cells(ip, src, now, capsys):
    """The traceback starts at the user's line and names the running cell (In[n] of this run),
    as the plain cell's does: no ``run_cell_magic`` frame, no hidden-frames line, and not the
    number of the run that first compiled the cell (its code is reused). Three runs: the first
    (plain, or compiled with --now) and two more (compiled or decided)."""
    ip.user_ns.update(np=np, a=np.ones((3, 4)), b=np.ones((5, 4)))
    ip.run_line_magic("nbaccel", "config report=none")
    try:
        plain, _ = _shown(ip, src, capsys)
        assert "Cell In[N]" in plain and "Traceback" in plain
        for _ in range(3):
            shown, count = _shown(ip, ("%%compile --now\n" if now else "%%compile\n") + src, capsys)
            assert shown == plain, (shown, plain)
    finally:
        ip.run_line_magic("nbaccel", "config report=auto")


def test_a_graph_break_error_shows_the_users_cell_only(ip, capsys):
    """--fullgraph's GraphBreakError: its traceback heads the cell's frame as the plain cell's
    ("Cell In[n], line 2"), never as nbaccel's cell function ("in cell_3(x, __nbaccel_env__)"),
    and its message names the same running cell, on later runs of the reused cell file too."""
    ip.user_ns.update(np=np, a=np.ones((3, 4)))
    ip.run_line_magic("nbaccel", "config report=none")
    try:
        for _ in range(3):
            shown, count = _shown(ip, "%%compile --fullgraph\ny = a * 2\nif y.sum() > 3:\n    y = y + 1\n", capsys)
            assert "Cell In[N], line 2\n" in shown, shown
            assert "cell_" not in shown and "__nbaccel_env__" not in shown, shown
            assert "graph break at Cell In[N]:2" in shown, shown
    finally:
        ip.run_line_magic("nbaccel", "config report=auto")
