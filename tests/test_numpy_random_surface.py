"""np.random, measured (issue 21, item 2; the random rows): every public draw of the legacy
global state and of a Generator, seeded, called plainly and under %%compile. Values, types,
dtypes and the state after the cell (the next draw) must match; a draw whose parameters are
traced arrays, or that shuffles an input in place, must too."""
import pathlib
import sys

import numpy as np
import pytest

pytest.importorskip("IPython")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from tests.cells import catalogue, harness  # noqa: E402
from tests.cells.surface import GENERATOR, LEGACY, RANDOM_SETUP as SETUP  # noqa: E402


@pytest.fixture(scope="module")
def shell():
    sh = harness.get_shell("numpy")
    yield sh
    sh.run_line_magic("nbaccel", "config report=auto backend=auto")


def _same(shell, name, body):
    harness.assert_same_or_plain_with_reason(shell, catalogue.Cell(name, body, setup=SETUP))


def test_the_random_surface_is_broad():
    legacy = {n for n in dir(np.random) if not n.startswith("_") and callable(getattr(np.random, n))}
    covered = {n for n, _ in LEGACY}
    # all but the state setters, the bit-generator swap and numpy's own test runner
    assert legacy - covered - {"seed", "set_state", "get_bit_generator", "set_bit_generator", "test",
                               "default_rng", "Generator", "BitGenerator", "MT19937", "PCG64",
                               "PCG64DXSM", "Philox", "SFC64", "SeedSequence"} == set()
    generator = {n for n in dir(np.random.default_rng()) if not n.startswith("_")}
    assert generator - {n for n, _ in GENERATOR} - {"bit_generator"} == set()


@pytest.mark.parametrize("name,body", LEGACY, ids=[n for n, _ in LEGACY])
def test_legacy_draw_same_or_plain_with_reason(shell, name, body):
    _same(shell, name, body)


@pytest.mark.parametrize("name,body", GENERATOR, ids=[n for n, _ in GENERATOR])
def test_generator_draw_same_or_plain_with_reason(shell, name, body):
    _same(shell, name, body)
