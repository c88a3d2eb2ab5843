"""``%%compile --verify`` and ``%nbaccel verify on`` (issue 21): the plain cell runs as a shadow
on copies; namespace, stdout, exceptions and random state are compared, and each difference is
reported with the name and the first differing element. Differences are forced by patching the
compiled cell's NumPy namespace (the plain shadow uses NumPy's own)."""
import contextlib
import io
import pathlib
import sys

import numpy as np
import pytest

pytest.importorskip("IPython")
from IPython.core.error import UsageError  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from tests.cells import harness  # noqa: E402

from nbaccel import numpy_api  # noqa: E402
from nbaccel.magics import get_extension  # noqa: E402


@pytest.fixture(scope="module")
def shell():
    sh = harness.get_shell("numpy")
    yield sh
    get_extension(sh).verify_all = False
    sh.run_line_magic("nbaccel", "config report=auto backend=auto")


def _run(shell, src, setup="import numpy as np\nnp.random.seed(0)\nx = np.linspace(0.1, 1, 6)\n"):
    harness._fresh(shell, setup)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        res = shell.run_cell(src)
    return res, get_extension(shell).last_verify, err.getvalue()


def test_a_clean_cell_has_no_differences_and_prints_nothing(shell):
    res, verdict, err = _run(shell, "%%compile --verify\ny = np.tanh(x) * 2\nlst = [y.sum()]\nprint(y.max())\ny[:2]\n")
    assert res.success
    assert verdict.differences == []
    assert err == ""
    assert "no differences" in verdict.text() and "not checked: files written" in verdict.text()


def test_a_wrong_value_names_the_variable_and_the_first_element(shell, monkeypatch):
    real = numpy_api.sin
    monkeypatch.setattr(numpy_api, "sin", lambda v, *a, **k: real(v, *a, **k) * (v < 0.5))
    res, verdict, err = _run(shell, "%%compile --verify\ny = np.sin(x)\n")
    assert res.success
    assert len(verdict.differences) == 1
    d = verdict.differences[0]
    assert d.startswith("y: values differ at [3]:"), d
    assert "y: values differ" in err


def test_a_different_dtype_and_a_missing_name(shell, monkeypatch):
    monkeypatch.setattr(numpy_api, "cos", lambda v, *a, **k: np.cos(np.asarray(v)).astype(np.float32))
    res, verdict, _ = _run(shell, "%%compile --verify\nc = np.cos(x)\ndel x\n")
    assert any(d.startswith("c: dtype float64 (plain) != float32 (compiled)") for d in verdict.differences), \
        verdict.differences


def test_stdout_and_random_state_differences(shell, monkeypatch):
    real = numpy_api.exp

    def noisy(v, *a, **k):
        print("extra")
        np.random.rand()
        return real(v, *a, **k)
    monkeypatch.setattr(numpy_api, "exp", noisy)
    res, verdict, _ = _run(shell, "%%compile --verify\ne = np.exp(x)\n")
    kinds = [d.split(":")[0] for d in verdict.differences]
    assert "stdout" in kinds and "np.random global state" in kinds, verdict.differences


def test_an_exception_only_one_side_raises(shell, monkeypatch):
    def fails(*a, **k):
        raise ZeroDivisionError("only compiled")
    fails.__module__ = "__main__"        # looks like the user's own code: no safety net
    monkeypatch.setattr(numpy_api, "log", fails)
    res, verdict, _ = _run(shell, "%%compile --verify\nl = np.log(x)\n")
    assert not res.success
    assert any(d.startswith("exception: the plain cell raised None") for d in verdict.differences), \
        verdict.differences


def test_same_user_exception_is_no_difference(shell):
    res, verdict, _ = _run(shell, "%%compile --verify\na = x * 2\nb = undefined_name + 1\n")
    assert not res.success and isinstance(res.error_in_exec, NameError)
    assert verdict.differences == []


def test_in_place_updates_of_inputs_are_compared_on_copies(shell):
    res, verdict, _ = _run(shell, "%%compile --verify\nx += 1\nx[0] = 7\nbox = {'v': x.sum()}\n")
    assert verdict.differences == []
    ns = shell.user_ns
    assert ns["x"][0] == 7 and abs(ns["x"][1] - (0.1 + 0.18 + 1)) < 1e-12   # changed once, not twice


def test_verify_on_checks_every_cell_and_off_stops(shell):
    ext = get_extension(shell)
    shell.run_line_magic("nbaccel", "verify on")
    try:
        ext.last_verify = None
        res, verdict, _ = _run(shell, "%%compile\nq = x.sum()\n")
        assert verdict is not None and verdict.differences == []
    finally:
        shell.run_line_magic("nbaccel", "verify off")
    ext.last_verify = None
    _run(shell, "%%compile\nq = x.sum()\n")
    assert ext.last_verify is None


def test_the_report_carries_the_verdict(shell):
    res, verdict, _ = _run(shell, "%%compile --verify -o rep\nq = np.sqrt(x)\n")
    assert shell.user_ns["rep"].verify is verdict


def test_verify_command_usage(shell):
    with pytest.raises(UsageError, match="verify on"):
        shell.run_line_magic("nbaccel", "verify sometimes")


@pytest.mark.parametrize("mode", ["text", "auto", "widget", "none"])
def test_the_report_is_never_compared_as_the_cells_output(shell, mode):
    # outside a notebook text and auto print the report, widget falls back to text: nbaccel's
    # output, which the plain cell never prints
    shell.run_line_magic("nbaccel", f"config report={mode}")
    try:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            res, verdict, err = _run(shell, "%%compile --verify --explain\ny = np.exp(x) + 1\nprint(y.shape)\n")
    finally:
        shell.run_line_magic("nbaccel", "config report=none")
    assert res.success and verdict.differences == [] and err == ""
    assert "(6,)" in out.getvalue()
    if mode != "none":
        assert "nbaccel · " in out.getvalue()       # the report is still shown


def test_a_planted_print_is_named_in_every_report_mode(shell, monkeypatch):
    real = numpy_api.exp
    monkeypatch.setattr(numpy_api, "exp", lambda v, *a, **k: (print("extra"), real(v, *a, **k))[1])
    shell.run_line_magic("nbaccel", "config report=text")
    try:
        _, verdict, _ = _run(shell, "%%compile --verify\ny = np.exp(x) + 1\n")
    finally:
        shell.run_line_magic("nbaccel", "config report=none")
    assert len(verdict.differences) == 1 and verdict.differences[0].startswith("stdout:")
    assert "extra" in verdict.differences[0]


def test_a_cell_outside_a_notebook_has_a_stable_label(shell):
    from nbaccel.magics.cellfunc import cell_label
    assert cell_label(7, "y = 1\n") == "In[7]"
    assert cell_label(0, "y = 1\n") == cell_label(0, "y = 1\n") != cell_label(0, "y = 2\n")
    assert cell_label(0, "y = 1\n").startswith("cell ")
    _, verdict, _ = _run(shell, "%%compile --verify\ny = np.exp(x)\n")
    assert verdict.cell != "In[0]"
