"""IPython's work around a %%compile cell (nbaccel/magics/ipython_path.py): the static transform
and the async check are remembered per text, exactly as IPython computes them, and the cell's
plain side counts what IPython spends on the plain cell's own text (cell_clock.py)."""
from __future__ import annotations

import numpy as np
import pytest

from nbaccel.compiler.replay.decision import Decision
from nbaccel.magics import get_extension, ipython_path
from tests.cells import harness

CELL = "%%compile --now\nh = x * 2\ny = np.tanh(h)\np = y / y.sum()\n"


@pytest.fixture
def shell():
    return harness.reset_shell("auto")


def test_a_compile_cells_transform_is_remembered_and_is_ipythons(shell):
    path = shell._nbaccel_path
    assert path is not None
    want = path.transform(CELL)                     # IPython's own static transform
    assert shell.input_transformer_manager.transform_cell(CELL) == want
    again = shell.input_transformer_manager.transform_cell(CELL)
    assert again is shell.input_transformer_manager.transform_cell(CELL)   # remembered
    assert shell.input_transformer_manager.transform_cell("y = 1\n") == "y = 1\n"


def test_a_transformer_added_later_applies_to_remembered_cells(shell):
    """The memo is per list of transformers: one added after a cell ran changes its text."""
    mgr = shell.input_transformer_manager
    mgr.transform_cell(CELL)

    def shout(lines):
        return [ln.replace("np.tanh", "np.sinh") for ln in lines]
    mgr.cleanup_transforms.append(shout)
    try:
        assert "np.sinh" in mgr.transform_cell(CELL)
    finally:
        mgr.cleanup_transforms.remove(shout)
    assert "np.tanh" in mgr.transform_cell(CELL)


def test_an_unhashable_transformer_is_run_not_remembered(shell):
    mgr = shell.input_transformer_manager

    class Upper:
        __hash__ = None                     # (an instance that defines __eq__ and no __hash__)

        def __call__(self, lines):
            return [ln.replace("np.tanh", "np.cosh") for ln in lines]
    t = Upper()
    mgr.cleanup_transforms.append(t)
    try:
        assert "np.cosh" in mgr.transform_cell(CELL)
    finally:
        mgr.cleanup_transforms.remove(t)


def test_the_async_check_is_remembered_and_follows_autoawait(shell):
    cell = shell.transform_cell(CELL)
    assert shell.should_run_async(CELL, transformed_cell=cell) is False
    assert cell in shell._nbaccel_path.asynchronous
    top_await = "await something()\n"
    assert shell.should_run_async(top_await, transformed_cell=top_await) is True   # not a magic cell
    shell.autoawait = False
    try:
        assert shell.should_run_async(top_await, transformed_cell=top_await) is False
    finally:
        shell.autoawait = True


def test_unloading_puts_ipythons_own_methods_back(shell):
    from nbaccel.magics import unload_ipython_extension, load_ipython_extension
    unload_ipython_extension(shell)
    try:
        assert "transform_cell" not in shell.input_transformer_manager.__dict__
        assert "should_run_async" not in shell.__dict__
    finally:
        load_ipython_extension(shell)
        shell.run_line_magic("nbaccel", "config report=none")
    assert shell._nbaccel_path is not None


def test_the_plain_side_counts_ipythons_work_on_the_plain_text(shell):
    """A plain run under the magic is timed inside the one-line magic call; the plain cell run by
    IPython also tokenizes, parses and compiles its own text, statement by statement. The
    decision adds that (measured once) to its plain side, so the headline is the ratio a
    stopwatch around run_cell sees."""
    body = CELL.split("\n", 1)[1]
    extra = ipython_path.extra_cost(shell, body, CELL)
    assert extra > 0
    shell.run_cell("import numpy as np\nx = np.ones(16, np.float32)\n", store_history=False, silent=True)
    for _ in range(3):
        shell.run_cell(CELL, store_history=True)
    d = next(iter(get_extension(shell).decisions.values()))
    assert d.plain_text == body and d.plain_extra is not None and d.plain_extra >= 0


def test_the_plain_extra_shifts_the_plain_side_of_the_verdict():
    d = Decision(first="compiled")
    d.plain_extra = 2e-3
    d.record("compiled", 2e-3)                 # (the first compiled run is no sample)
    for _ in range(3):
        d.record("compiled", 2e-3)
        d.record("plain", 1e-3)
    v = d.verdict()
    # without the extra the plain side (1 ms) beats the compiled one (2 ms); with it, 3 ms does not
    assert v.plain_seconds == pytest.approx(3e-3) and v.plain_spread == pytest.approx([3e-3, 3e-3])
    assert v.ratio == pytest.approx(1.5) and v.choice == "compiled"
    assert v.saved_seconds == pytest.approx(4 * 1e-3)
    assert np.isclose(Decision._median([3.0, 1.0, 2.0, 10.0]), 2.5)
