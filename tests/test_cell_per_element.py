"""Per-element Python never runs under the tracer (issue 21): a cell that reaches an
np.vectorize / np.frompyfunc object made anywhere, or np.apply_along_axis / np.piecewise with a
Python callable (also through notebook functions and classes), runs plainly at once."""
import pathlib
import sys

import pytest

pytest.importorskip("IPython")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from tests.cells import catalogue, harness  # noqa: E402

SETUP = """import numpy as np
def compute_indices(kind, v):
    if kind == 'PM2.5':
        if v < 12:
            return v * 4.1
        elif v < 35:
            return 50 + (v - 12) * 2.1
        return 100 + v
    return v * 0.5
vf = np.vectorize(compute_indices)
fp = np.frompyfunc(lambda v: v * 2 if v > 30 else -v, 1, 1)
def spread(r):
    return r.max() - r.min()
def with_vectorize(a):
    return vf('PM2.5', a) + 1
def through_another(a):
    return with_vectorize(a) * 2
def rows(a):
    return np.apply_along_axis(spread, 1, a)
def pieces(a):
    return np.piecewise(a, [a < 10, a >= 10], [lambda v: v * 2, lambda v: v - 1])
class Model:
    def predict(self, a):
        return fp(a).astype(float)
model = Model()
a = np.random.default_rng(0).uniform(0, 60, (40, 30, 2))
"""

CASES = {
    "vectorize_made_earlier": "out = np.stack((vf('PM2.5', a[..., 0]), vf('PM10', a[..., 1])))\n",
    "frompyfunc_made_earlier": "out = fp(a[..., 0]).astype(float)\n",
    "vectorize_in_a_function": "out = with_vectorize(a[..., 0])\n",
    "vectorize_two_calls_down": "out = through_another(a[..., 1])\n",
    "apply_along_axis_in_a_function": "out = rows(a[..., 0])\n",
    "piecewise_in_a_function": "out = pieces(a[..., 0])\n",
    "method_of_a_notebook_object": "out = model.predict(a[..., 0])\n",
}


@pytest.fixture(scope="module")
def shell():
    sh = harness.get_shell("numpy")
    yield sh
    sh.run_line_magic("nbaccel", "config report=auto backend=auto")


@pytest.mark.parametrize("name", sorted(CASES))
def test_runs_plainly_at_once(shell, name):
    cell = catalogue.Cell(name, CASES[name], setup=SETUP)
    plain = harness.run(shell, cell, compiled=False)
    comp = harness.run(shell, cell, compiled=True)
    assert harness.differences(plain, comp) == []
    assert comp.fallback and "per element" in comp.fallback, comp.fallback


def test_plain_helpers_still_compile(shell):
    cell = catalogue.Cell("no_vectorize", "out = np.tanh(a) * 2\n", setup=SETUP)
    comp = harness.run(shell, cell, compiled=True)
    assert comp.fallback is None


def test_regression_vectorize_cell_costs_about_the_plain_run(shell):
    """The issue's example took minutes compiled against 0.9 s plainly: the compiled cell must
    stay within 2x the plain run + 50 ms (best of two, interleaved)."""
    setup = SETUP + "a = np.random.default_rng(1).uniform(0, 60, (150, 100, 2))\n"
    cell = catalogue.Cell("vectorize_timed", CASES["vectorize_made_earlier"], setup=setup)
    plain_t, comp_t = [], []
    for _ in range(2):
        plain_t.append(harness.run(shell, cell, compiled=False).seconds)
        comp_t.append(harness.run(shell, cell, compiled=True).seconds)
    assert min(comp_t) <= 2 * min(plain_t) + 0.05, (plain_t, comp_t)
