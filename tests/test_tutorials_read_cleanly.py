"""The tutorials' saved outputs read cleanly (issue 37, item 8): no warnings or log lines from
the libraries nbaccel drives (Dask's nanny killing a worker at shutdown), no workaround code in
a visible cell (a matplotlib backend switch, a suppressed exception around a close), and no
raw floats of 15 digits in what a cell prints. ``make notebooks`` re-executes them."""
import json
import pathlib
import re

import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
WORKAROUNDS = [r"matplotlib\.use\(", r"_called_from_notebook", r"contextlib\.suppress", r"warnings\.filterwarnings",
               r"logging\.getLogger\(.*\)\.setLevel", r"silence_logs"]
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ - [\w.]+ - (WARNING|ERROR|CRITICAL) - ", re.M)
LONG_FLOAT = re.compile(r"\b\d+\.\d{12,}\b")


def _cells(path):
    return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


def _texts(cell):
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            yield out.get("name"), "".join(out.get("text", ""))
        for mime in ("text/plain",):
            if mime in out.get("data", {}):
                yield mime, "".join(out["data"][mime])


def test_there_are_tutorials():
    assert len(NOTEBOOKS) >= 10


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_workaround_code_in_a_cell(path):
    for cell in _cells(path):
        src = "".join(cell["source"])
        for pattern in WORKAROUNDS:
            assert not re.search(pattern, src), (pattern, src)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_library_warnings_or_raw_floats_in_saved_outputs(path):
    for cell in _cells(path):
        for kind, text in _texts(cell):
            assert not LOG_LINE.search(text), (kind, text)
            assert "still alive after" not in text, text
            if kind == "stderr":     # a warning is the cell's own (attributed to its line), never a library's
                for line in text.splitlines():
                    assert "Warning" not in line or line.startswith("Cell In["), line
            assert not LONG_FLOAT.search(text), (kind, text)
