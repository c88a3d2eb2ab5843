"""Every public np.ndarray attribute, measured (issue 21, item 2): representative calls of each
(positional and keyword arguments, out=, in-place forms) and __setitem__ with every index kind
run plainly and under %%compile; each gives the same names, values, types, dtypes, output and
exception, either compiled or in a plain run whose reason the report gives. None differs."""
import pathlib
import sys

import numpy as np
import pytest

pytest.importorskip("IPython")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from tests.cells import harness, surface  # noqa: E402

# what a user sees, the plain re-run included (tests/conftest.py: not_strict)
pytestmark = pytest.mark.usefixtures("not_strict")

CELLS = surface.cells()


@pytest.fixture(scope="module")
def shell():
    sh = harness.get_shell("numpy")
    yield sh
    sh.run_line_magic("nbaccel", "config report=auto backend=auto")


def test_every_public_attribute_is_in_the_table():
    public = {n for n in dir(np.ndarray) if not n.startswith("_")}
    assert public <= set(surface.CALLS), sorted(public - set(surface.CALLS))


@pytest.mark.parametrize("cell", CELLS, ids=lambda c: c.name)
def test_attribute_same_or_plain_with_reason(shell, cell):
    plain = harness.run(shell, cell, compiled=False)
    comp = harness.run(shell, cell, compiled=True)
    assert harness.differences(plain, comp) == []
    if comp.fallback is not None:
        assert "plainly" in comp.fallback and "(" in comp.fallback, comp.fallback
