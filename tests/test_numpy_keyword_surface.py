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

SETUP = ("import numpy as np\nA = np.arange(1.0, 13.0).reshape(3, 4) / 7\n"
         "B = np.arange(12.0, 0.0, -1).reshape(3, 4) / 5\nM = (np.arange(12) % 3 == 0).reshape(3, 4)\n"
         "C = np.zeros((3, 4))\n")
ENV = {}
exec(SETUP, ENV)  # noqa: S102 - the fixed setup above
KEYWORDS = ["axis=0", "axis=1", "axis=-1, keepdims=True", "axis=None", "dtype=np.float32", "ord=1",
            "n=6", "norm='ortho'", "decimals=2", "k=1", "ddof=1", "q=30", "return_counts=True"]
UFUNC_FORMS = ["{u}(A, out=C)", "{u}(A, where=M, out=C)", "{u}(A, dtype=np.float32)"]
BINARY_UFUNC_FORMS = ["{u}(A, B, out=C)", "{u}(A, B, where=M, out=C)", "{u}(A, B, dtype=np.float64)",
                      "{u}.reduce(A, axis=1)", "{u}.reduce(A, axis=0, keepdims=True)",
                      "{u}.accumulate(A, axis=1)", "{u}.outer(A[0], B[:, 0])", "{u}.at(C, [0, 2], 1.5)",
                      "{u}.reduceat(A, [0, 2], axis=1)"]
MANY_ARGS = ["np.clip(A, 0.2, 0.8)", "np.clip(A, a_min=0.2, a_max=None)", "np.where(M, A, B)",
             "np.where(A > 0.5)", "np.einsum('ij,kj->ik', A, B)", "np.einsum('ij,ij,ij->i', A, B, A)",
             "np.concatenate([A, B, A], axis=1)", "np.stack([A, B], axis=-1)", "np.linspace(A[0], B[0], 5)",
             "np.linspace(0, 1, 7, endpoint=False, retstep=True)", "np.arange(1, 10, 2, dtype=np.float32)",
             "np.full((2, 3), 7, dtype=np.int16)", "np.pad(A, ((1, 0), (2, 1)), mode='reflect')",
             "np.pad(A, 1, constant_values=-1)", "np.interp(A, [0, 1, 2], [5, 3, 1])",
             "np.histogram(A, bins=4, range=(0, 2))", "np.percentile(A, [10, 90], axis=0)",
             "np.quantile(A, 0.5, method='nearest')", "np.take_along_axis(A, np.argsort(A, axis=1), axis=1)",
             "np.put_along_axis(C, np.argmax(A, axis=1, keepdims=True), 9.0, axis=1)",
             "np.select([A < 0.5, A > 1], [A, B], default=-1)", "np.piecewise(A, [A < 0.5], [0, 1])",
             "np.tensordot(A, B, axes=([1], [1]))", "np.moveaxis(np.stack([A, B]), 0, -1)",
             "np.swapaxes(A, 0, 1)", "np.roll(A, (1, -1), axis=(0, 1))", "np.tile(A, (2, 1))",
             "np.repeat(A, [1, 2, 0, 1], axis=1)", "np.split(A, [1, 3], axis=1)",
             "np.array_split(A, 3, axis=1)", "np.diff(A, n=2, axis=1, prepend=0)",
             "np.cumsum(A, axis=1, dtype=np.float32)", "np.sum(A, axis=(0, 1), where=M)",
             "np.mean(A, axis=1, where=M)", "np.std(A, axis=0, ddof=1, keepdims=True)",
             "np.average(A, axis=1, weights=B[0])", "np.isclose(A, B, rtol=0.1, atol=0.2)",
             "np.allclose(A, A + 1e-9, equal_nan=True)", "np.round(A, 3, out=C)",
             "np.matmul(A, B.T, out=np.empty((3, 3)))", "np.dot(A, B.T)", "np.outer(A[0], B[1])",
             "np.cross(A[:, :3], B[:, :3], axis=1)", "np.convolve(A[0], B[0], mode='same')",
             "np.correlate(A[0], B[0], 'full')", "np.polyval([1, 2, 3], A)", "np.polyfit(A[0], B[0], 2)",
             "np.trapezoid(A, dx=0.5, axis=1)", "np.meshgrid(A[0], B[:, 0], indexing='ij')",
             "np.searchsorted(np.sort(A[0]), B[0], side='right')", "np.digitize(A, [0.3, 0.9], right=True)",
             "np.bincount(np.arange(6) % 4, weights=A.ravel()[:6], minlength=5)",
             "np.nan_to_num(A / (A - A), nan=0.5, posinf=9)", "np.unique(A.round(), return_index=True, "
             "return_inverse=True)", "np.linalg.norm(A, ord='fro', axis=(0, 1))",
             "np.linalg.norm(A, 2, axis=1, keepdims=True)", "np.linalg.solve(A[:, :3] + np.eye(3), B[:, :3])",
             "np.linalg.lstsq(A, B[:, 0], rcond=None)", "np.linalg.svd(A, full_matrices=False)",
             "np.linalg.eigh(A[:, :3] @ A[:, :3].T, UPLO='U')", "np.fft.fft(A, n=8, axis=0, norm='forward')",
             "np.fft.rfftn(A, s=(4, 6), axes=(0, 1))", "np.fft.irfft(A, 10)", "np.fft.fftfreq(8, d=0.1)",
             "np.apply_along_axis(np.sort, 1, A)", "np.add(A, B, out=(C,), casting='unsafe')",
             "np.multiply(A, 2, out=A)", "np.divide(A, B, out=np.zeros_like(A), where=B > 1)"]


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
