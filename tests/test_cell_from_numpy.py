"""``nb.from_numpy`` inside a %%compile cell (issue 35): the array it is given is a traced
NumPy value there, and the cell must behave as the plain one, where the result is an nbaccel
Tensor sharing the array's memory (writes through either show in the other, inside the cell and
after it). Before, it raised "expected np.ndarray, got Tensor" and the cell ran plainly after a
failed trace, on every run (notebook 07's cell that checks an exported model)."""
import pathlib
import sys

import numpy as np
import pytest

pytest.importorskip("IPython")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from tests.cells import catalogue, harness  # noqa: E402

import nbaccel as nb  # noqa: E402

SETUP = "import numpy as np\nimport nbaccel as nb\nx0 = np.arange(4000.0).reshape(-1, 2)\n"

CELLS = {
    # an array the cell made, and writes through both sides before and after reads
    "made_in_cell": ("a = np.linspace(-4, 4, 3000).reshape(-1, 3)\n"
                     "t = nb.from_numpy(a[1:, ::2])\n"
                     "a[2, 0] = 9.0\n"
                     "t[0, 1] = 4.0\n"
                     "s = float(t.sum())\n"
                     "b = a.sum()\n", "a"),
    # a view of an input: the write through the tensor reaches the notebook's array
    "input_view": ("t = nb.from_numpy(x0[:, 1])\n"
                   "t += 1\n"
                   "y = x0 * 2\n", "x0"),
    # a temporary tensor whose result goes back to NumPy (notebook 07's cell 5)
    "temporary": ("z = x0 * 3\n"
                  "w = (nb.from_numpy(z) * 2).numpy()\n"
                  "q = w.sum()\n", None),
}


@pytest.fixture(scope="module")
def shell():
    sh = harness.get_shell("auto")
    yield sh
    sh.run_line_magic("nbaccel", "config report=auto backend=auto")


def _tensors_same(plain, comp, root):
    """Tensors have no value comparison in the harness: values, flavour and, with ``root``
    (the NumPy name the tensor was made from), that a write into the array shows in the tensor."""
    for k, p in plain.names.items():
        c = comp.names[k]
        if not isinstance(p, nb.Tensor):
            continue
        assert type(c) is nb.Tensor and not c._np, (k, type(c))
        assert c.dtype == p.dtype and np.array_equal(c.numpy(), p.numpy()), k
        if root is not None:
            arr = comp.names[root]
            assert np.shares_memory(c.numpy(), arr), f"{k} does not share {root}'s memory"
            before = c.numpy().copy()
            arr[...] = -1.0                              # what a later plain cell may do
            assert (c.numpy() == -1.0).all() and not (before == -1.0).all()


@pytest.mark.parametrize("name", sorted(CELLS))
def test_from_numpy_in_a_compiled_cell(shell, name):
    src, root = CELLS[name]
    cell = catalogue.Cell(name, src, setup=SETUP)
    plain = harness.run(shell, cell, compiled=False)
    assert plain.error is None
    for _ in range(3):                   # the trace, then runs that would replay
        comp = harness.run(shell, cell, compiled=True, fresh=True)
        assert comp.fallback is None or "timing the plain" in comp.fallback, comp.fallback
        assert harness.differences(plain, comp) == []
        _tensors_same(plain, comp, root)


def test_a_returned_shared_tensor_never_replays(shell):
    """A replay hands back new arrays for the array and the tensor alike: they would share
    nothing. A cell that returns such a tensor traces every run, and says why."""
    cell = catalogue.Cell("ret", "t = nb.from_numpy(x0)\n", setup=SETUP)
    for _ in range(3):
        comp = harness.run(shell, cell, compiled=True)
        assert comp.error is None
        assert comp.fallback is None or "timing the plain" in comp.fallback, comp.fallback
        assert np.shares_memory(comp.names["t"].numpy(), comp.names["x0"])
    from nbaccel.magics import get_extension
    entry, _ = get_extension(shell).last
    assert "shares the array's memory" in (entry.cf._guarded.refusal or "")


@pytest.mark.usefixtures("not_strict")
def test_what_from_numpy_refuses_stays_the_plain_error(shell):
    """A NumPy scalar (a reduction's result) and a Tensor are refused as in the plain cell."""
    for src in ("s = x0.sum()\nt = nb.from_numpy(s)\n", "t = nb.from_numpy(nb.ones(3))\n"):
        cell = catalogue.Cell("bad", src, setup=SETUP)
        plain = harness.run(shell, cell, compiled=False)
        comp = harness.run(shell, cell, compiled=True)
        assert plain.error is not None and plain.error == comp.error


def test_nbaccel_tensors_stay_tensors_beside_numpy_inputs(shell):
    """A cell reading NumPy arrays hands back its nbaccel tensors as Tensors (it handed back
    every value as NumPy's once any input was an ndarray)."""
    cell = catalogue.Cell("mixed", "t = nb.ones(3) * 2\ny = x0 * 2\n", setup=SETUP)
    plain = harness.run(shell, cell, compiled=False)
    comp = harness.run(shell, cell, compiled=True)
    assert harness.differences(plain, comp) == []
    _tensors_same(plain, comp, None)
