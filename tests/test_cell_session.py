"""tests/cells/session.py, the notebook-as-a-session comparison: how it reads a notebook, and
that its comparison names a planted difference and passes equal records."""
import json
import pickle

import numpy as np

from tests.cells import session


def test_cells_of_reads_a_notebooks_code_cells_and_numpy_100s_answers(tmp_path):
    nb = {"cells": [{"cell_type": "markdown", "source": ["# title"]},
                    {"cell_type": "code", "source": ["import numpy as np\n", "Z = np.zeros(3)"]},
                    {"cell_type": "code", "source": "   \n"}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    p = tmp_path / "a.ipynb"
    p.write_text(json.dumps(nb))
    assert session.cells_of(p) == [("cell 1", "import numpy as np\nZ = np.zeros(3)\n")]
    k = tmp_path / "exercises100.ktx"
    k.write_text("< q1\nImport numpy\n\n< h1\nhint: import\n\n< a1\nimport numpy as np\n\n"
                 "< q2\nA null vector\n\n< a2\nZ = np.zeros(10)\nprint(Z)\n")
    assert session.cells_of(k) == [("answer 1", "import numpy as np\n"),
                                   ("answer 2", "Z = np.zeros(10)\nprint(Z)\n")]


def _record(**names):
    return dict(label="cell 0", seconds=0.0, fallback=None, stdout="", error=None,
                value=session._pickled(None), warnings=(),
                names={k: session._pickled(v) for k, v in names.items()})


def test_differences_names_a_planted_difference_and_passes_equal_records():
    plain = _record(Z=np.arange(3), f=lambda: 0)
    assert session.differences(plain, _record(Z=np.arange(3), f=lambda: 1)) == []
    retyped = session.differences(plain, _record(Z=np.arange(3.0), f=lambda: 0))
    assert len(retyped) == 1 and "Z" in retyped[0]
    lost = session.differences(plain, _record(f=lambda: 0))
    assert lost and "only plainly ['Z']" in lost[0]
    printed = dict(_record(Z=np.arange(3), f=len), stdout="x\n")
    assert any(d.startswith("stdout") for d in session.differences(plain, printed))
    assert session._TIMEIT.sub("<timeit>", "1.2 ms +- 3 us per loop (mean +- std. dev. of 7 runs, 1 loop each)\n") \
        == "<timeit>\n"
    assert pickle.loads(session._pickled(np.int64(3))) == 3
