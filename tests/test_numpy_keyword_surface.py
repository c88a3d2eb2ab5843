"""The NumPy namespace with keywords, measured (issue 21, item 2; the calls beyond one or two
positional arrays): every public function that takes an array is called with each keyword form
it accepts plainly (axis=, keepdims=, dtype=, ord=, n=/norm= ...), every ufunc with out= and
where= and through its methods (reduce, accumulate, outer, at), and a fixed list of calls of three
and more arguments. Each call runs plainly and under %%compile; names, values, types, dtypes,
output and exceptions must match (compiled, or in a plain run with its reason)."""
import contextlib
import io
import pathlib
import sys
import warnings

import numpy as np
import pytest

pytest.importorskip("IPython")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from tests.cells import catalogue, harness  # noqa: E402
from tests.test_numpy_namespace_surface import LEFT_OUT  # noqa: E402
from tests.cells.surface import MANY_ARGS, MANY_SETUP  # noqa: E402

SETUP = MANY_SETUP
ENV = {}
exec(SETUP, ENV)  # noqa: S102 - the fixed setup above
KEYWORDS = ["axis=0", "axis=1", "axis=-1, keepdims=True", "axis=None", "dtype=np.float32", "ord=1",
            "n=6", "norm='ortho'", "decimals=2", "k=1", "ddof=1", "q=30", "return_counts=True"]
UFUNC_FORMS = ["{u}(A, out=C)", "{u}(A, where=M, out=C)", "{u}(A, dtype=np.float32)"]
BINARY_UFUNC_FORMS = ["{u}(A, B, out=C)", "{u}(A, B, where=M, out=C)", "{u}(A, B, dtype=np.float64)",
                      "{u}.reduce(A, axis=1)", "{u}.reduce(A, axis=0, keepdims=True)",
                      "{u}.accumulate(A, axis=1)", "{u}.outer(A[0], B[:, 0])", "{u}.at(C, [0, 2], 1.5)",
                      "{u}.reduceat(A, [0, 2], axis=1)"]

def _quiet(source):
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            eval(source, {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in ENV.items()})  # noqa: S307
    except Exception:
        return False
    return True


def _keyword_calls():
    out = []
    for mod, prefix in ((np, "np."), (np.linalg, "np.linalg."), (np.fft, "np.fft.")):
        for n in sorted(dir(mod)):
            f = getattr(mod, n)
            if n.startswith("_") or n in LEFT_OUT or not callable(f) or isinstance(f, (type, np.ufunc)):
                continue
            if not _quiet(f"{prefix}{n}(A)"):
                continue
            out += [f"{prefix}{n}(A, {kw})" for kw in KEYWORDS if _quiet(f"{prefix}{n}(A, {kw})")]
    return out


def _ufunc_calls():
    out = []
    for n in sorted(dir(np)):
        u = getattr(np, n)
        if not isinstance(u, np.ufunc) or u.nout != 1:
            continue
        forms = UFUNC_FORMS if u.nin == 1 else BINARY_UFUNC_FORMS if u.nin == 2 else []
        out += [s for s in (f.format(u=f"np.{n}") for f in forms) if _quiet(s)]
    return out


KEYWORD_CALLS = _keyword_calls()
UFUNC_CALLS = _ufunc_calls()


@pytest.fixture(scope="module")
def shell():
    sh = harness.get_shell("numpy")
    yield sh
    sh.run_line_magic("nbaccel", "config report=auto backend=auto")


def _same(shell, call):
    harness.assert_same_or_plain_with_reason(shell, catalogue.Cell(call[:40], f"r = {call}\n", setup=SETUP))


def test_the_keyword_surface_is_broad():
    assert len(KEYWORD_CALLS) >= 200 and len(UFUNC_CALLS) >= 250, (len(KEYWORD_CALLS), len(UFUNC_CALLS))
    assert all(_quiet(c) for c in MANY_ARGS), [c for c in MANY_ARGS if not _quiet(c)]


@pytest.mark.parametrize("call", KEYWORD_CALLS)
def test_keyword_call_same_or_plain_with_reason(shell, call):
    _same(shell, call)


@pytest.mark.parametrize("call", UFUNC_CALLS)
def test_ufunc_form_same_or_plain_with_reason(shell, call):
    _same(shell, call)


@pytest.mark.parametrize("call", MANY_ARGS)
def test_call_of_many_arguments_same_or_plain_with_reason(shell, call):
    _same(shell, call)


TYPE_TESTS = ["isinstance(np.add, np.ufunc)", "isinstance(np.fmax, np.ufunc)", "type(np.exp) is np.ufunc",
              "type(np.add).__name__", "isinstance(np.sum, np.ufunc)", "(np.add.nin, np.add.nout, np.add.identity)",
              "[n for n in ('exp', 'heaviside', 'where', 'sort') if isinstance(getattr(np, n), np.ufunc)]"]


@pytest.mark.parametrize("call", TYPE_TESTS)
def test_ufunc_type_tests_read_as_plainly(shell, call):
    """Ufuncs stay ufuncs for isinstance/type in a cell (they were a private class)."""
    _same(shell, call)
