"""The NumPy surface table in docs/magics.md (issue 37, item 6): its np.random rows (the legacy
state, RandomState, Generator) and its calls of three and more arguments are exactly the rows
tests/test_numpy_random_surface.py and tests/test_numpy_keyword_surface.py measure, and each row
says how the cell runs under %%compile (compiled, a graph break to NumPy's own, NumPy's own on
the input values, or plainly) as it does now. Regenerate with ``python -m tests.cells.surface``."""
import pathlib
import re
import sys
import warnings

import pytest

pytest.importorskip("IPython")
ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.cells import harness, surface  # noqa: E402

pytestmark = pytest.mark.usefixtures("not_strict")      # what a user sees, plain re-runs included

DOC = (ROOT / "docs" / "magics.md").read_text()


def _doc_rows():
    block = DOC.split("<!-- numpy-surface-table:start -->", 1)[1].split("<!-- numpy-surface-table:end -->", 1)[0]
    rows = []
    for line in block.splitlines():
        m = re.match(r"\| `(.*)` \| (.*) \|$", line)
        if m:
            rows.append((m.group(1).replace("\\|", "|"), m.group(2)))
    return rows


ROWS = surface.numpy_rows()
DOC_ROWS = _doc_rows()


def test_the_docs_table_has_every_measured_row_in_order():
    assert [label for label, _ in DOC_ROWS] == [label for _, label, _ in ROWS]
    sections = re.findall(r"^\| ([^`|][^|]*) \| in a compiled cell \|$",
                          DOC.split("<!-- numpy-surface-table:start -->", 1)[1], re.M)
    assert sections == list(dict.fromkeys(sec for sec, _, _ in ROWS))


def test_the_table_covers_random_and_many_argument_calls():
    labels = [label for _, label, _ in ROWS]
    assert sum(label.startswith("np.random.") for label in labels) >= 50
    assert sum(label.startswith("Generator.") for label in labels) >= 45
    many = [label for sec, label, _ in ROWS if sec.startswith("calls of three")]
    assert len(many) >= 60
    # most of them really take three or more arguments (positional and keyword together)
    import ast
    def arity(call):
        node = ast.parse(call, mode="eval").body
        return len(node.args) + len(node.keywords)
    assert sum(arity(call) >= 3 for call in many) >= 50, [c for c in many if arity(c) < 3]
    assert max(arity(call) for call in many) >= 5


@pytest.fixture(scope="module")
def shell():
    sh = harness.get_shell("numpy")
    yield sh
    sh.run_line_magic("nbaccel", "config report=auto backend=auto")


@pytest.mark.parametrize("i", range(len(ROWS)), ids=[label[:50] for _, label, _ in ROWS])
def test_each_row_says_how_the_cell_runs(shell, i):
    _, label, cell = ROWS[i]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        harness.run(shell, cell, compiled=True)
    got = surface.how(shell)
    doc = dict(DOC_ROWS)[label]
    assert surface.kind(got) == surface.kind(doc), (label, got, doc)
