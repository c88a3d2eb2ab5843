"""A reshape is a view or a copy by its operand's strides (schedule/views.py): a program traced
for one layout of an input must not be replayed for another layout of the same shape and dtype
where NumPy decides otherwise, and a ufunc of a transposed input is laid out transposed by
NumPy, so its ravel is a copy. Every call here runs compiled (no plain run chosen by timing,
which would hide a wrong replay), and is compared with NumPy's values, types and the writes
into its inputs."""
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

import nbaccel as nb
from tests.fuzz.check import LAYOUTS, relaid

BACKENDS = [{"backend": "numpy"}, {"backend": "numba"}, {}]
MODES = ["default", "reduce-overhead"]


def write_input_view(a):
    t = a.reshape(-1)       # a view of a C-contiguous a, a copy of a transposed one
    t[0] = 5
    return a * 1


def return_written_view(a):
    t = a.reshape(-1)
    t[0] = 5
    return t


def write_ufunc_ravel(a):
    b = a + 1               # NumPy lays it out as a is: F order for a transposed a
    t = b.ravel()           # so this is a copy there, a view of a C-ordered b
    t[0] = 100
    return b


def write_exp_of_transpose(a):
    b = np.exp(a.T)         # F order for a C-contiguous a
    t = b.reshape(-1)
    t[1] = 0
    return b, t


def write_after_inplace(a):
    b = np.where(a > 3, 0.5, 1.5)   # laid out as a: F order for a transposed a
    b[:] = 1.5                      # NumPy writes into b's buffer: the layout stays
    t = b.reshape(-1)               # a copy of an F-ordered b, a view of a C-ordered one
    b -= 2
    return t * -1


def write_np_copy_ravel(a):
    b = np.copy(a)                  # order "K": F order for a transposed a (a.copy() is C)
    t = b.ravel()
    t[0] = 100
    return b


def write_asarray_copy_ravel(a):
    b = np.asarray(a, copy=True)    # np.asarray's copy is order "K", as np.copy's
    t = b.ravel()
    t[0] = 100
    return b


def write_concat_reshape(a):
    b = np.concatenate([a, a])      # F order for F-ordered operands
    t = b.reshape(-1)
    t[0] = 100
    return b


def write_pad_reshape(a):
    b = np.pad(a, 1)                # F order for an F-ordered operand
    t = b.reshape(-1)
    t[0] = 100
    return b


def write_roll_column(a):
    b = np.roll(a, (0, 4), (0, 1)) if a.shape[1] == 4 else np.roll(a, (0, 3), (0, 1))
    t = np.ravel(b[:, 1])           # a whole roll: a copy laid out as a; a column of an
    b[::2, 1] = -7                  # F-ordered b is contiguous, so its ravel is a view
    return t


def write_sort_reshape(a):
    b = np.sort(a, axis=0)          # sorts a copy laid out as a: F order for a transposed a
    t = b.reshape(-1)               # (taken as C order before: a view where NumPy copies)
    t[0] = 100
    return b


def write_cumsum_reshape(a):
    b = np.cumsum(a, axis=1)        # laid out as a, as a ufunc's result
    t = b.reshape(-1)
    t[1] = 100
    return b


def layout(kind):
    base = np.arange(12, dtype=np.float64)
    return {"C": lambda: base.reshape(3, 4).copy(),
            "T": lambda: base.reshape(4, 3).copy().T,
            "S": lambda: np.arange(24, dtype=np.float64).reshape(3, 8)[:, ::2]}[kind]()


pytestmark = pytest.mark.usefixtures("compiled_runs_only")   # (tests/conftest.py)


def _same(want, got):
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    assert len(want) == len(got)
    for w, g in zip(want, got):
        g = g.numpy() if isinstance(g, nb.Tensor) else g
        assert type(np.asarray(w)) is type(np.asarray(g))
        np.testing.assert_allclose(g, w, rtol=1e-12)     # (numba's exp: one ulp)


@pytest.mark.parametrize("kw", BACKENDS, ids=lambda kw: kw.get("backend", "default"))
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tensors", [False, True], ids=["ndarray", "Tensor"])
@pytest.mark.parametrize("fn", [write_input_view, return_written_view, write_ufunc_ravel,
                                write_exp_of_transpose, write_after_inplace, write_np_copy_ravel,
                                write_concat_reshape, write_pad_reshape, write_roll_column,
                                write_sort_reshape, write_cumsum_reshape],
                         ids=lambda f: f.__name__)
def test_replay_follows_numpy_for_every_layout(fn, tensors, mode, kw):
    """C, T, S and back: each call traces or replays, and matches NumPy on a fresh input."""
    cf = nb.compile(fn, mode=mode, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # the recompile limit, if ever
        for kind in "CCTTSCTC":
            mine, theirs = layout(kind), layout(kind)
            want = fn(theirs)
            got = cf(nb.from_numpy(mine) if tensors else mine)
            _same(want, got)
            np.testing.assert_array_equal(mine, theirs)     # the input written as NumPy writes it


def test_a_layout_change_is_named_where_it_retraces():
    """A Tensor's key holds no strides: the decision that read them guards them, and the
    re-trace says so (the guard failure and the recompile's reason)."""
    cf = nb.compile(return_written_view)
    cf(nb.from_numpy(layout("T")))
    cf(nb.from_numpy(layout("T")))
    assert cf.stats["replays"] == 1
    cf(nb.from_numpy(layout("C")))
    why = cf.report.replay["last_guard_failure"]
    assert "`a`'s layout is now C-contiguous" in why and "was F-contiguous" in why
    assert cf.report.recompiles[-1]["reason"].startswith("`a`'s layout: F-contiguous → C-contiguous")


def test_calls_whose_decisions_read_no_layout_keep_sharing_entries():
    """No reshape, no guard: a transposed Tensor replays the C trace's program (its kernels
    read strides), and so does reduce-overhead's replay."""
    for mode in MODES:
        cf = nb.compile(lambda a: np.tanh(a) * 2 + a.sum(axis=0), mode=mode)
        for kind in "CTS":
            x = layout(kind)
            np.testing.assert_allclose(cf(nb.from_numpy(x)).numpy(), np.tanh(x) * 2 + x.sum(axis=0))
        assert cf.stats["compiles"] == 1 and cf.stats["replays"] == 2, (mode, cf.stats)


def test_the_same_layout_replays():
    """The guard holds for the layout it read: a second transposed call replays."""
    cf = nb.compile(write_ufunc_ravel, mode="reduce-overhead")
    for _ in range(3):
        _same(write_ufunc_ravel(layout("T")), cf(layout("T")))
    assert cf.stats["compiles"] == 1 and cf.stats["replays"] == 2


def test_fuzzer_layouts_keep_values_shapes_and_dtypes():
    for a in (np.arange(24, dtype=np.int32).reshape(2, 3, 4), np.arange(5.0), np.float32(3)[()],
              np.zeros((0, 3), bool)):
        a = np.asarray(a)
        for how in set(LAYOUTS):
            b = relaid(a, how)
            assert b.shape == a.shape and b.dtype == a.dtype
            np.testing.assert_array_equal(a, b)
            if how != "C" and a.ndim and a.size > 1:
                assert not b.flags.c_contiguous


CELL = "b = a + 1\nt = b.ravel()\nt[0] = 100\nr = b * 1"


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_cell_ravel_of_a_ufunc_result_follows_numpy(backend):
    """The same %%compile cell run for a C-contiguous and then a transposed ``a``."""
    from tests.cells import harness
    shell = harness.get_shell(backend)
    for kind in "CTT":
        setup = {"C": "import numpy as np\na = np.arange(12.).reshape(3, 4).copy()",
                 "T": "import numpy as np\na = np.arange(12.).reshape(4, 3).copy().T"}[kind]
        cell = SimpleNamespace(setup=setup, source=CELL, needs=())
        plain = harness.run(shell, cell, compiled=False)
        for _ in range(2):                  # (the second run compiles where the first ran plainly)
            assert not harness.differences(plain, harness.run(shell, cell, compiled=True)), kind


ONLY = ("unary", "reshape", "inplace", "binary", "transpose")


@pytest.mark.parametrize("seed", [1000382, 1000438, 1000530])
def test_fuzzer_layout_phase_programs(seed):
    """Three programs of ``tests.fuzz.run --seed 1000000 --only unary,reshape,inplace,binary,
    transpose`` that failed check_layouts before the fix (F inputs after a C trace: a wrong
    value, or an input written where NumPy's ravel copied)."""
    from tests.fuzz import rules
    from tests.fuzz.check import check
    from tests.fuzz.programs import generate
    weights = {n: (w if n in ONLY else 0) for n, w in rules.WEIGHTS.items()}
    outcome = check(generate(seed, weights), "numpy")
    assert outcome.ok, str(outcome)


@pytest.mark.parametrize("seed", [2101476, 2104298])
def test_fuzzer_layouts_of_writes_and_whole_rolls(seed):
    """Two programs of ``tests.fuzz.run --seed 2100000`` that gave wrong values for F inputs,
    traced or replayed: an in-place write recorded as a new value took C order instead of its
    buffer's (np.where's F-ordered result, then ``t[:] = ...``), and a roll by whole turns was a
    C-order copy where np.roll's is laid out as its operand."""
    from tests.fuzz.check import check
    from tests.fuzz.programs import generate
    outcome = check(generate(seed), "numpy")
    assert outcome.ok, str(outcome)


@pytest.mark.parametrize("kw", BACKENDS, ids=lambda kw: kw.get("backend", "default"))
def test_np_asarray_copy_is_laid_out_as_its_operand(kw):
    """np.asarray(a, copy=True) of an ndarray is order "K" (ndarray.copy is C order). (Arrays
    only: np.asarray of a Tensor copies its __array__, C order plainly too.)"""
    cf = nb.compile(write_asarray_copy_ravel, **kw)
    for kind in "CTSC":
        mine, theirs = layout(kind), layout(kind)
        _same(write_asarray_copy_ravel(theirs), cf(mine))
