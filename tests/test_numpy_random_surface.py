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

SETUP = "import numpy as np\nA = np.arange(1.0, 13.0).reshape(3, 4) / 7\n"
# the arguments each draw takes: shape parameters first, then size
ARGS = {"beta": "2.0, 3.0", "binomial": "5, 0.5", "chisquare": "0.5", "f": "2.0, 3.0", "gamma": "0.5",
        "geometric": "0.5", "hypergeometric": "5, 2, 3", "logseries": "0.5", "negative_binomial": "5, 0.5",
        "noncentral_chisquare": "2.0, 3.0", "noncentral_f": "1.0, 2.0, 3.0", "pareto": "0.5",
        "power": "0.5", "randint": "2, 9", "integers": "2, 9", "random_integers": "2, 9",
        "standard_gamma": "0.5", "standard_t": "0.5", "triangular": "1.0, 2.0, 3.0", "vonmises": "2.0, 3.0",
        "wald": "2.0, 3.0", "weibull": "0.5", "zipf": "2.0"}
SIZE_ONLY = ["exponential", "gumbel", "laplace", "logistic", "lognormal", "normal", "poisson", "random",
             "rayleigh", "standard_cauchy", "standard_exponential", "standard_normal", "uniform"]
LEGACY_ONLY = ["random_sample", "ranf", "sample", "randint", "random_integers"]
GENERATOR_ONLY = ["integers"]
COMMON = sorted(set(ARGS) - set(LEGACY_ONLY) - set(GENERATOR_ONLY)) + SIZE_ONLY


def _draw(name):
    args = ARGS.get(name)
    return f"{name}({args}, size=(3, 4))" if args else f"{name}(size=(3, 4))"


LEGACY = [(n, f"np.random.seed(1)\nr = np.random.{_draw(n)} * A + 1\nafter = np.random.random()\n")
          for n in COMMON + LEGACY_ONLY]
LEGACY += [("rand", "np.random.seed(2)\nr = np.random.rand(3, 4) - A\n"),
           ("randn", "np.random.seed(2)\nr = np.random.randn(3, 4) * A\nafter = np.random.randn()\n"),
           ("bytes", "np.random.seed(2)\nr = np.random.bytes(8)\n"),
           ("choice", "np.random.seed(3)\nr = np.random.choice(A.ravel(), 5) * 2\n"),
           ("choice-p", "np.random.seed(3)\nr = np.random.choice(4, 6, p=A[0] / A[0].sum())\n"),
           ("permutation", "np.random.seed(4)\nr = np.random.permutation(A) + 1\n"),
           ("shuffle", "np.random.seed(4)\nnp.random.shuffle(A)\nr = A * 2\n"),
           ("normal-traced-loc", "np.random.seed(5)\nr = np.random.normal(A, 2.0) - A\n"),
           ("uniform-traced-bounds", "np.random.seed(5)\nr = np.random.uniform(A, A + 1)\n"),
           ("get_state", "np.random.seed(6)\nx = A * 3\nstate = np.random.get_state()[1][:4]\n"),
           ("multivariate_normal", "np.random.seed(7)\n"
            "r = np.random.multivariate_normal(np.zeros(2), np.eye(2), size=3) + 1\n"),
           ("dirichlet", "np.random.seed(7)\nr = np.random.dirichlet([1.0, 2.0, 3.0], size=3) * 2\n"),
           ("multinomial", "np.random.seed(7)\nr = np.random.multinomial(10, [0.2, 0.3, 0.5], size=3)\n"),
           ("RandomState", "rs = np.random.RandomState(8)\nr = rs.normal(size=(3, 4)) * A\n"
            "after = rs.random_sample()\n")]
GENERATOR = [(n, f"rng = np.random.default_rng(1)\nr = rng.{_draw(n)} * A + 1\nafter = rng.random()\n")
             for n in COMMON + GENERATOR_ONLY]
GENERATOR += [("bytes", "rng = np.random.default_rng(2)\nr = rng.bytes(8)\n"),
              ("choice", "rng = np.random.default_rng(3)\nr = rng.choice(A, 2) * 2\n"),
              ("choice-axis", "rng = np.random.default_rng(3)\nr = rng.choice(A, 3, axis=1, replace=False)\n"),
              ("permutation", "rng = np.random.default_rng(4)\nr = rng.permutation(A) + 1\n"),
              ("permuted", "rng = np.random.default_rng(4)\nr = rng.permuted(A, axis=1) - A\n"),
              ("shuffle", "rng = np.random.default_rng(4)\nrng.shuffle(A)\nr = A * 2\n"),
              ("normal-traced-loc", "rng = np.random.default_rng(5)\nr = rng.normal(A, 2.0) - A\n"),
              ("integers-traced-high", "rng = np.random.default_rng(5)\nr = rng.integers(0, (A * 10 + 1).astype(int))\n"),
              ("out", "rng = np.random.default_rng(6)\nbuf = np.empty((3, 4))\n"
               "rng.standard_normal(out=buf)\nr = buf * A\n"),
              ("spawn", "rng = np.random.default_rng(6)\nkids = rng.spawn(2)\nr = kids[1].random(3) + A[0, :3]\n"),
              ("multivariate_normal", "rng = np.random.default_rng(7)\n"
               "r = rng.multivariate_normal(np.zeros(2), np.eye(2), size=3) + 1\n"),
              ("dirichlet", "rng = np.random.default_rng(7)\nr = rng.dirichlet([1.0, 2.0, 3.0], size=3) * 2\n"),
              ("multinomial", "rng = np.random.default_rng(7)\nr = rng.multinomial(10, [0.2, 0.3, 0.5], size=3)\n"),
              ("multivariate_hypergeometric", "rng = np.random.default_rng(7)\n"
               "r = rng.multivariate_hypergeometric([3, 4, 5], 6, size=2)\n"),
              ("bit_generator", "bg = np.random.PCG64(9)\nrng = np.random.Generator(bg)\n"
               "r = rng.random((3, 4)) * A\nafter = bg.random_raw()\n")]


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
