"""The short path of a replayed %%compile cell (nbaccel/magics/replay_path.py): it reuses the
last run's prelude while the kinds of the cell's values stay the same, runs the call
replay-only, and leaves everything else to the full path. Each test would fail if the short
path skipped a check it must not: the cell must behave exactly as the plain cell."""
from __future__ import annotations

import contextlib
import io
import re

import numpy as np
import pytest

from nbaccel.magics import get_extension, replay_path
from tests.cells import harness

CELL = ("h = x * w + b\ny = np.tanh(h) * k\np = y / y.sum(axis=-1, keepdims=True)\n"
        "q = p * m if k > 10 else p + 1\n")       # (m: read only on a branch not taken)
NAMES = ("h", "y", "p", "q")


@pytest.fixture
def shell():
    return harness.reset_shell("auto")


def _run(shell, src, compiled=True):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        res = shell.run_cell(("%%compile --now\n" if compiled else "") + src, store_history=True)
    err = res.error_in_exec or res.error_before_exec
    # (the traceback's "Cell In[n]" numbers the run: runs of two sequences differ in it)
    printed = re.sub(r"In\[\d+\]", "In[]", out.getvalue())
    return printed, (type(err).__name__, str(err)) if err is not None else None


def _state(shell, names=NAMES):
    ns = shell.user_ns
    return {n: (type(ns[n]), getattr(ns[n], "dtype", None), np.asarray(ns[n]).tolist()) for n in names if n in ns}


SETUP = ("import numpy as np\nx = np.linspace(-1, 1, 48, dtype=np.float32).reshape(6, 8)\n"
         "w = np.float32(0.5)\nb = np.float32(0.1)\nk = 3\nm = 1\n")
# between compiled runs of CELL, what another (plain) cell does to its inputs
STEPS = ["", "", "",                         # replays: the short path from the third run on
         "x[0, 0] = 100",                    # an in-place write from another cell
         "x = x.astype(np.float64)",          # a dtype change (another decision, another entry)
         "x = x[:3] * 1",                     # a shape change
         "w = np.float32(2.0)",               # a value the trace read (its guard fails)
         "k = 4",                             # an int: part of the decision's input signature
         "m = 2",                             # one the trace did not read: no guard, another decision
         "k = 4.5",                           # a float where an int was
         "b = np.float64(0.25)",              # another scalar type
         "del k",                             # a name the cell reads is gone: NameError
         "k = 2"]
# (after each change, two runs more: the one after a trace replays on the full path and makes the
# plan the next one uses, so that every change meets a plan)
STEPS = [s for step in STEPS for s in ((step, "", "") if step else (step,))]


def _sequence(shell, short):
    seen = []
    shell.run_cell(SETUP, store_history=False, silent=True)
    for step in STEPS:
        if step:
            shell.run_cell(step, store_history=True)
        printed, err = _run(shell, CELL)
        seen.append((step, printed, err, _state(shell)))
        for n in NAMES:
            shell.user_ns.pop(n, None)          # (each run must bind them again)
    return seen


def test_a_replayed_cell_takes_the_short_path(shell):
    shell.run_cell(SETUP, store_history=False, silent=True)
    for _ in range(4):
        _run(shell, CELL)
    ext = get_extension(shell)
    assert ("--now", CELL) in ext.plans
    cf = ext.plans[("--now", CELL)].cf
    replays, calls = cf.stats.get("replays", 0), cf.stats["calls"]
    _run(shell, CELL)
    assert cf.stats["replays"] == replays + 1 and cf.stats["calls"] == calls + 1


def test_the_short_path_runs_as_the_plain_cell_and_the_full_path_do(shell, monkeypatch):
    short = _sequence(shell, True)
    ext = get_extension(shell)
    decisions_short = sorted(repr(k[3]) for k in ext.decisions)
    shell.run_line_magic("nbaccel", "reset")
    shell.run_line_magic("nbaccel", "config report=none")
    monkeypatch.setattr(replay_path, "run", lambda *a: replay_path.NOT_TAKEN)
    full = _sequence(shell, False)
    assert [s[:3] for s in short] == [s[:3] for s in full]
    for (step, _, _, a), (_, _, _, b) in zip(short, full):
        assert a.keys() == b.keys(), step
        for n in a:
            assert a[n][:2] == b[n][:2], (step, n)
            np.testing.assert_allclose(a[n][2], b[n][2], rtol=1e-6, err_msg=f"{step}: {n}")
    # the same decisions (one per kind of input), so the same verdicts
    assert decisions_short == sorted(repr(k[3]) for k in get_extension(shell).decisions)
    monkeypatch.undo()
    shell.run_line_magic("nbaccel", "reset")
    plain = []
    shell.run_cell(SETUP, store_history=False, silent=True)
    for step in STEPS:
        if step:
            shell.run_cell(step, store_history=True)
        printed, err = _run(shell, CELL, compiled=False)
        plain.append((step, printed, err, _state(shell)))
        for n in NAMES:
            shell.user_ns.pop(n, None)
    assert [s[:3] for s in short] == [s[:3] for s in plain]
    for (step, _, _, a), (_, _, _, b) in zip(short, plain):
        for n in b:
            assert a[n][:2] == b[n][:2], (step, n)
            np.testing.assert_allclose(a[n][2], b[n][2], rtol=1e-5, err_msg=f"{step}: {n}")


def test_a_call_that_must_trace_leaves_the_short_path_before_the_cells_code_runs(shell):
    """A failed guard re-traces: the cell's Python runs inside the full path's set-up (NumPy's
    method meanings: ``x.repeat(2)`` repeats each element, as ndarray.repeat does; PyTorch's
    repeat would tile), and the compiled function counts one call."""
    shell.run_cell("import numpy as np\nx = np.arange(4.0)\nw = 0.5\n", store_history=False, silent=True)
    src = "y = x.repeat(2) * w\n"
    for _ in range(4):
        _run(shell, src)
    ext = get_extension(shell)
    assert ("--now", src) in ext.plans
    cf = ext.plans[("--now", src)].cf
    calls = cf.stats["calls"]
    shell.run_cell("w = 2.0", store_history=True)
    assert _run(shell, src) == ("", None)
    assert shell.user_ns["y"].tolist() == (np.repeat(np.arange(4.0), 2) * 2.0).tolist()
    assert cf.stats["calls"] == calls + 1


def test_a_cell_reading_values_of_other_kinds_has_no_short_path(shell):
    """Functions, containers and objects are checked by more than their kind (the per-element
    check reads a function's code, the safety net copies containers): no plan."""
    shell.run_cell("import numpy as np\nx = np.arange(4.0)\nscale = [2.0]\n"
                   "def f(v):\n    return v * 3\n", store_history=False, silent=True)
    for src in ("y = x * scale[0]\n", "y = f(x)\n"):
        for _ in range(4):
            _run(shell, src)
        assert ("--now", src) not in get_extension(shell).plans
    shell.run_cell("def f(v):\n    return v * 4\n", store_history=True)
    _run(shell, "y = f(x)\n")
    assert shell.user_ns["y"].tolist() == [0.0, 4.0, 8.0, 12.0]


def test_a_settings_change_drops_the_plan(shell):
    shell.run_cell(SETUP, store_history=False, silent=True)
    for _ in range(4):
        _run(shell, CELL)
    ext = get_extension(shell)
    assert ("--now", CELL) in ext.plans
    shell.run_line_magic("nbaccel", "config report=text")
    printed, err = _run(shell, CELL)
    assert err is None and "nbaccel" in printed          # the report, shown as the setting says
    shell.run_line_magic("nbaccel", "config report=none")
