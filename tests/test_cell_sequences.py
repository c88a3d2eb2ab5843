"""Cells that share one namespace, as in a notebook: a compiled cell never drops, confuses or
retypes a binding (tests/fuzz/cellseq.py writes the sequences; ``make fuzz`` runs 2,000).

numpy-100's Game of Life (exercise 88) lost its rebinding of ``Z``: ``def iterate(Z)`` made the
analysis read the notebook's ``Z`` as a cell input (a nested function's parameter counted as a
read), the input was renamed for the function's sake, and the cell's new ``Z`` was then
collected under the wrong name.
"""
import ast
import collections
import os
import random

import numpy as np
import pytest

from tests.cells import harness
from tests.cells.catalogue import Cell
from tests.fuzz import cellseq
from nbaccel.magics import cellfunc, cellnames

CI_SEQUENCES = 60
FUZZ_SEED = int(os.environ.get("NBACCEL_FUZZ_SEED", "1000000"))
FUZZ_SEQUENCES = int(os.environ.get("NBACCEL_FUZZ_SEQUENCES", "2000"))

GAME_OF_LIFE = '''\
def iterate(Z):
    N = (Z[0:-2,0:-2] + Z[0:-2,1:-1] + Z[0:-2,2:] +
         Z[1:-1,0:-2]                + Z[1:-1,2:] +
         Z[2:  ,0:-2] + Z[2:  ,1:-1] + Z[2:  ,2:])
    birth = (N==3) & (Z[1:-1,1:-1]==0)
    survive = ((N==2) | (N==3)) & (Z[1:-1,1:-1]==1)
    Z[...] = 0
    Z[1:-1,1:-1][birth | survive] = 1
    return Z

Z = np.random.default_rng(0).integers(0, 2, (50, 50))
for i in range(10): Z = iterate(Z)
print(Z.sum())
'''


@pytest.fixture(scope="module")
def shell():
    return harness.get_shell()


def test_a_parameter_is_not_a_read_of_the_global():
    tree = ast.parse(GAME_OF_LIFE)
    assert "Z" not in cellfunc.read_first(tree)
    assert cellnames.local_names(tree, ["Z"]) == {}
    # a free name of a nested function still is (the function reads the global when called)
    tree = ast.parse("def f(t):\n    return t + w\ny = f(1)\n")
    assert "w" in cellfunc.read_first(tree)
    # a name local to a scope nested in the function is not free in it
    tree = ast.parse("def f():\n    g = lambda q: q + 1\n    return g(k)\n")
    free, _ = cellnames.nested_free(tree.body[0])
    assert free == {"k"}


@pytest.mark.parametrize("earlier", ["Z = np.zeros((16, 16))", "pass"])
def test_numpy100_game_of_life_keeps_the_rebound_name(shell, not_strict, earlier):
    setup = f"import numpy as np\n{earlier}\n"
    cell = Cell("game_of_life", GAME_OF_LIFE, setup=setup)
    plain = harness.run(shell, cell, compiled=False)
    comp = harness.run(shell, cell, compiled=True)
    assert harness.differences(plain, comp) == []
    assert comp.names["Z"].dtype == np.int64 and comp.names["Z"].shape == (50, 50)


def test_a_renamed_input_the_cell_rebinds_is_written_back(shell, not_strict):
    # `w` is read by the lambda (so renamed inside the cell function) and read first at the
    # cell's scope; binding it in a branch not taken keeps the old value, plainly and compiled
    cell = Cell("renamed_rebound", "g = lambda t: t * w\ny = g(w)\nif y.sum() < -1:\n    w = 0\n",
                setup="import numpy as np\nw = np.arange(4.0)\n")
    assert harness.differences(harness.run(shell, cell, compiled=False),
                               harness.run(shell, cell, compiled=True)) == []


@pytest.mark.parametrize("source", [
    "Z = np.zeros(4)\nZ.put([0, 2], [9, 8])\nprint(Z)",
    "Z = x * 0\nZ.put([0, 2], [9, 8])\nprint(Z)\nprint(Z + 1)",
    "Z = x * 1\nZ.byteswap(inplace=True)\nprint(Z)",
    "Z = np.arange(1).reshape(())\nZ[...] = 5\nZ += 1",
    "n = np.arange(1).reshape(())\ng = lambda t: t + n\nm = g(n)",
    "Z = np.zeros(())\nZ.fill(2)\nZ",
])
def test_in_place_writes_are_seen_by_later_lines_and_keep_the_type(shell, not_strict, source):
    import nbaccel
    nbaccel.config["cheap_enabled"] = False          # traced, not the plain-NumPy cheap path
    cell = Cell("in_place", source, setup="import numpy as np\nx = np.arange(4.0)\n")
    assert harness.differences(harness.run(shell, cell, compiled=False),
                               harness.run(shell, cell, compiled=True)) == []


def test_the_sequence_checker_sees_a_difference(shell):
    # the check compares cell by cell: two sequences that differ in one binding must differ
    a = cellseq.Sequence(0, ["Z = np.zeros(3)", "Z = Z + 1"])
    b = cellseq.Sequence(0, ["Z = np.zeros(3)", "Z = Z + 2"])
    plain_a = cellseq._run_all(shell, a, compiled=False)
    plain_b = cellseq._run_all(shell, b, compiled=False)
    diffs = [harness.differences(p, q) for p, q in zip(plain_a, plain_b)]
    assert diffs[0] == [] and diffs[1] == ["Z: values differ"]


def test_sequences_cover_the_constructs():
    made = collections.Counter()
    for seed in range(CI_SEQUENCES):
        r = random.Random(seed)
        for kind, (maker, _) in cellseq.CELLS.items():
            if maker(r, {"Z": np.zeros(3), "f": len, cellseq.HOLDER: [np.zeros(2)]}) is not None:
                made[kind] += 1
    assert set(made) == set(cellseq.CELLS)
    sources = [src for seed in range(CI_SEQUENCES) for src in cellseq.generate(seed).cells]
    assert any("def f(Z)" in s for s in sources) and any("lambda" in s for s in sources)
    assert any(s.startswith("del ") for s in sources) and any("reshape(())" in s for s in sources)


def _check(shell, seed):
    seq = cellseq.generate(seed)
    diffs = cellseq.check(shell, seq)
    if diffs:
        pytest.fail("\n".join(diffs[:5]) + "\n\nreproducer:\n\n" + seq.reproducer(), pytrace=False)


@pytest.mark.parametrize("seed", range(CI_SEQUENCES))
def test_sequence(shell, not_strict, seed):
    _check(shell, seed)


@pytest.mark.fuzz
@pytest.mark.parametrize("seed", range(FUZZ_SEED, FUZZ_SEED + FUZZ_SEQUENCES))
def test_sequence_fuzz(shell, not_strict, seed):
    _check(shell, seed)
