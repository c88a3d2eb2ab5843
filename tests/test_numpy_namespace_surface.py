"""The NumPy namespace, measured (issue 21, item 2; second part): every public function of
numpy, numpy.linalg and numpy.fft that takes one (or two) 2-D float64 arrays plainly is called
that way plainly and under %%compile; names, values, types, dtypes, output and exception
must match (compiled, or in a plain run with its reason). Functions that read or write files,
change global state or return uninitialised memory are left out."""
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

# what a user sees, the plain re-run included (tests/conftest.py: not_strict)
pytestmark = pytest.mark.usefixtures("not_strict")

SETUP = ("import numpy as np\nA = np.arange(1.0, 13.0).reshape(3, 4) / 7\n"
         "B = np.arange(12.0, 0.0, -1).reshape(3, 4) / 5\n")
LEFT_OUT = {"save", "savez", "savez_compressed", "savetxt", "load", "loadtxt", "genfromtxt", "fromfile",
            "memmap", "info", "show_config", "show_runtime", "test", "get_include", "seterr", "seterrcall",
            "setbufsize", "set_printoptions", "printoptions", "errstate", "lookfor", "source", "who",
            "from_dlpack", "frompyfunc", "vectorize", "fromregex", "empty_like", "empty"}


def _names(arity):
    """The public functions that take ``arity`` (3, 4) float64 arrays plainly."""
    out = []
    args = [np.arange(1.0, 13.0).reshape(3, 4) / 7, np.arange(12.0, 0.0, -1).reshape(3, 4) / 5][:arity]
    for mod, prefix in ((np, ""), (np.linalg, "linalg."), (np.fft, "fft.")):
        for n in sorted(dir(mod)):
            f = getattr(mod, n)
            if n.startswith("_") or n in LEFT_OUT or not callable(f) or isinstance(f, type):
                continue
            try:
                with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                    warnings.simplefilter("ignore")
                    f(*[a.copy() for a in args])
            except Exception:
                continue
            out.append(prefix + n)
    return out


NAMES = _names(1)
BINARY = _names(2)


@pytest.fixture(scope="module")
def shell():
    sh = harness.get_shell("numpy")
    yield sh
    sh.run_line_magic("nbaccel", "config report=auto backend=auto")


def test_the_measured_surface_is_broad():
    assert len(NAMES) >= 150 and len(BINARY) >= 100, (len(NAMES), len(BINARY))


@pytest.mark.parametrize("name", NAMES)
def test_numpy_function_same_or_plain_with_reason(shell, name):
    harness.assert_same_or_plain_with_reason(shell, catalogue.Cell(name, f"r = np.{name}(A)\n", setup=SETUP))


@pytest.mark.parametrize("name", BINARY)
def test_numpy_function_of_two_arrays_same_or_plain_with_reason(shell, name):
    harness.assert_same_or_plain_with_reason(shell, catalogue.Cell(name, f"r = np.{name}(A, B)\n", setup=SETUP))


OTHER_DTYPES = {"int64": "np.arange(12).reshape(3, 4) - 4",
                "float32": "(np.arange(1.0, 13.0).reshape(3, 4) / 7).astype(np.float32)",
                "bool": "np.arange(12).reshape(3, 4) % 3 == 0"}
# NumPy's integer reciprocal of 0 is whatever the C division gives (undefined behaviour)
UNDEFINED = {("int64", "reciprocal")}


def _names_for(expr):
    out = []
    for mod, prefix in ((np, ""), (np.linalg, "linalg."), (np.fft, "fft.")):
        for n in sorted(dir(mod)):
            f = getattr(mod, n)
            if n.startswith("_") or n in LEFT_OUT or not callable(f) or isinstance(f, type):
                continue
            try:
                with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                    warnings.simplefilter("ignore")
                    f(eval(expr))        # noqa: S307 - a fixed expression above
            except Exception:
                continue
            out.append(prefix + n)
    return out


DTYPE_CASES = [(label, n) for label, expr in OTHER_DTYPES.items() for n in _names_for(expr)
               if (label, n) not in UNDEFINED]


@pytest.mark.parametrize("label,name", DTYPE_CASES, ids=lambda v: v)
def test_numpy_function_on_other_dtypes(shell, label, name):
    setup = f"import numpy as np\nA = {OTHER_DTYPES[label]}\n"
    harness.assert_same_or_plain_with_reason(shell, catalogue.Cell(name, f"r = np.{name}(A)\n", setup=setup))
