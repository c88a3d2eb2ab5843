"""Warnings are output: a compiled cell issues NumPy's floating-point warnings as the plain
cell does (issue 37 item 3) — the same category and message naming the user's op, the user's
line, the same count under each filter and errstate, and FloatingPointError where errstate says
raise. compiler/runtime/fpflags.py does it; docs/compiler.md ("Floating-point warnings") says how."""
from __future__ import annotations

import types
import warnings

import numpy as np
import pytest

import nbaccel as nb
from tests.cells import harness

SETUP = "import numpy as np\n"
JULIA_SETUP = SETUP + ("x, y = np.meshgrid(np.linspace(-2, 2, 40), np.linspace(-2, 2, 40))\n"
                       "mesh = x + 1j * y\nc = -0.75 + 0.4j\n")
JULIA = "z = mesh.copy()\nfor n in range(15):\n    z = np.square(z) + c\nout = np.abs(z) < 2\n"

CELLS = {
    "julia": (JULIA_SETUP, JULIA),
    "julia_pow": (JULIA_SETUP, "z = mesh.copy()\nfor n in range(15):\n    z = z**2 + c\n"),
    "overflow": (SETUP, "a = np.array([1e200, 2.0, 3.0])\nb = a * a\nc = np.exp(a)\nd = b + 1\n"),
    "divide": (SETUP, "a = np.array([1.0, 0.0, -1.0])\nb = 1.0 / a\nc = np.log(a)\n"),
    "invalid": (SETUP, "a = np.array([-1.0, 4.0])\nb = np.sqrt(a)\nc = np.arccos(a * 2)\n"),
    "two_lines": (SETUP, "a = np.array([0.0, 1.0])\nb = a / a\nc = a / a\nd = np.log(a) + np.log(a)\n"),
    "errstate_inside": (SETUP, "a = np.array([0.0, 1e300])\nwith np.errstate(over='ignore', divide='ignore'):\n"
                               "    b = a * a\n    c = 1 / a\nd = a * a\n"),
    "hidden_intermediate": (SETUP, "a = np.array([1e200, 1.0])\nb = 1.0 / (a * a)\n"),
    "int_floor_divide": (SETUP, "a = np.arange(4)\nb = a // (a - a)\n"),
    "nan_cast": (SETUP, "a = np.array([np.nan, 1.0])\nb = (a * 2).astype(np.int64)\n"),
    "print_between": (SETUP, "a = np.array([0.0, 2.0])\nb = np.log(a)\nprint(b)\nc = np.log(a - 2)\n"),
    "reduce_overflow": (SETUP, "a = np.full(4, 1e308)\ns = np.sum(a)\nt = np.sum(a * 1.0)\n"),
}


def _cell(name, tag=""):
    """(``tag``: a comment that makes the cell new to nbaccel, which then compiles it at once
    rather than timing it against the plain cell first)"""
    setup, src = CELLS[name]
    return types.SimpleNamespace(name=name, setup=setup, source=src + (f"# {tag}\n" if tag else ""), needs=())


@pytest.fixture(scope="module")
def shell():
    return harness.get_shell("numpy")


def _both(shell, cell, action):
    with warnings.catch_warnings():
        if action is not None:
            warnings.simplefilter(action)
        plain = harness.run(shell, cell, compiled=False)
        comp = harness.run(shell, cell, compiled=True)
        again = harness.run(shell, cell, compiled=True, fresh=True)
    return plain, comp, again


@pytest.mark.parametrize("action", ["default", "always"])
@pytest.mark.parametrize("name", sorted(CELLS))
def test_cell_warns_as_plainly(shell, name, action):
    cell = _cell(name, action)
    plain, comp, again = _both(shell, cell, action)
    assert plain.warnings, "the cell is meant to warn plainly"
    assert harness.differences(plain, comp) == []
    assert harness.differences(plain, again) == []
    assert comp.fallback is None, comp.fallback
    for row in comp.warnings:                    # never a file of nbaccel's (a kernel's)
        assert "nbaccel" not in row[2], row


def test_julia_warns_twice_at_the_users_line(shell):
    cell = _cell("julia", "twice")
    plain, comp, _ = _both(shell, cell, "default")
    assert [(c, m, f, ln) for c, m, f, ln in comp.warnings] == [
        ("RuntimeWarning", "overflow encountered in square", "<cell>", 3),
        ("RuntimeWarning", "invalid value encountered in square", "<cell>", 3)]


def test_error_filter_raises_as_plainly(shell, not_strict):
    cell = _cell("overflow", "error")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plain = harness.run(shell, cell, compiled=False)
        comp = harness.run(shell, cell, compiled=True)
    assert plain.error == ("RuntimeWarning", "overflow encountered in multiply")
    assert comp.error == plain.error
    assert set(comp.names) == set(plain.names)


@pytest.mark.parametrize("mode,expect", [("ignore", None), ("raise", "FloatingPointError")])
def test_errstate_around_the_cell(shell, mode, expect, not_strict):
    cell = _cell("overflow", mode)
    with np.errstate(over=mode), warnings.catch_warnings():
        warnings.simplefilter("always")
        plain = harness.run(shell, cell, compiled=False)
        comp = harness.run(shell, cell, compiled=True)
    assert (plain.error or (None,))[0] == expect
    assert harness.differences(plain, comp) == []
    if mode == "ignore":
        assert not any("overflow" in w[1] for w in comp.warnings)


def test_errstate_raise_inside_the_cell(shell, not_strict):
    cell = types.SimpleNamespace(setup=SETUP, needs=(), source=(
        "a = np.array([0.0, 1e300])\nb = a + 1\nwith np.errstate(over='raise'):\n    c = a * a\nd = 2\n"))
    plain = harness.run(shell, cell, compiled=False)
    comp = harness.run(shell, cell, compiled=True)
    assert plain.error == ("FloatingPointError", "overflow encountered in multiply")
    assert harness.differences(plain, comp) == []


def test_errstate_call_and_catch_warnings_inside(shell):
    cell = types.SimpleNamespace(setup=SETUP, needs=(), source=(
        "import warnings\nseen = []\na = np.array([0.0, 1e300])\n"
        "with np.errstate(all='call', call=lambda kind, flag: seen.append(kind)):\n    b = a * a\n"
        "with warnings.catch_warnings():\n    warnings.simplefilter('ignore')\n    c = np.log(a)\n"
        "d = np.log(a)\n"))
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        plain = harness.run(shell, cell, compiled=False)
        comp = harness.run(shell, cell, compiled=True)
    assert plain.names["seen"] == ["overflow"]
    assert harness.differences(plain, comp) == []


def test_quiet_cells_pay_nothing(shell, monkeypatch):
    """No flag: the graph is not replayed."""
    from nbaccel.compiler.runtime import fpflags
    calls = []
    monkeypatch.setattr(fpflags, "_replay", lambda *a: calls.append(a))
    cell = types.SimpleNamespace(setup=SETUP, needs=(), source="a = np.arange(5.0)\nb = np.log(a + 1) * 2\n")
    comp = harness.run(shell, cell, compiled=True)
    assert comp.error is None and not calls and not comp.warnings


def _f(z, c):
    for _ in range(15):
        z = np.square(z) + c
    w = np.log(z.real * 0)
    return z, w


@pytest.mark.parametrize("backend,mode", [("numpy", "default"), ("numba", "default"),
                                          ("numpy", "reduce-overhead")])
@pytest.mark.parametrize("action", ["default", "always"])
def test_compiled_function_warns_as_the_plain_function(backend, mode, action):
    if backend == "numba":
        pytest.importorskip("numba")
    x, y = np.meshgrid(np.linspace(-2, 2, 8), np.linspace(-2, 2, 8))
    z = x + 1j * y
    cf = nb.compile(_f, backend=backend, mode=mode)

    def rows(fn):
        harness.settle_background()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter(action)
            for _ in range(4):
                fn(z, -0.75 + 0.4j)
        return [(x.category, str(x.message), x.filename, x.lineno) for x in w]
    if backend == "numba":
        cf(z, -0.75 + 0.4j)
        cf.wait()
    plain = rows(_f)
    assert plain and rows(cf) == plain


def test_verify_compares_warnings(shell, capsys):
    from nbaccel.magics import get_extension
    cell = _cell("divide", "verify")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        harness.run(shell, cell, compiled=True, verify=True)
    verdict = get_extension(shell).last_verify
    assert "warnings" in verdict.checked and verdict.differences == []


def test_verify_names_a_warning_difference(shell, monkeypatch):
    from nbaccel.compiler.runtime import fpflags
    from nbaccel.magics import get_extension
    monkeypatch.setattr(fpflags, "_replay", lambda *a: None)      # a compiled run that stays silent
    cell = _cell("divide", "planted")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        harness.run(shell, cell, compiled=True, verify=True)
    d = get_extension(shell).last_verify.differences
    assert any(x.startswith("warnings: the plain cell issued RuntimeWarning at <cell>:2") for x in d), d


@pytest.mark.parametrize("name", ["julia", "divide", "invalid", "int_floor_divide", "nan_cast"])
def test_numba_tier_warns_as_plainly(shell, name):
    """numba kernels set no warnings: their results say when to replay (docs/compiler.md)."""
    pytest.importorskip("numba")
    shell.run_line_magic("nbaccel", "config backend=numba")
    try:
        cell = _cell(name, "numba")
        plain, comp, again = _both(shell, cell, "default")
    finally:
        shell.run_line_magic("nbaccel", "config backend=numpy")
    assert plain.warnings and comp.fallback is None, comp.fallback
    assert harness.differences(plain, comp) == []
    assert harness.differences(plain, again) == []


def _g(z):
    return np.square(z) * 1e308


@pytest.mark.parametrize("action", ["default", "always"])
def test_replayed_function_warns_as_plainly(action, monkeypatch):
    """mode="reduce-overhead" replays the program without tracing: the same warnings."""
    from nbaccel.compiler.runtime import fpflags
    replayed = []
    run = fpflags.run
    monkeypatch.setattr(fpflags, "run", lambda *a, **k: replayed.append(k.get("replayed")) or run(*a, **k))
    cf = nb.compile(_g, backend="numpy", mode="reduce-overhead")
    x = np.linspace(-2, 2, 8)

    def rows(fn):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter(action)
            for _ in range(6):
                fn(x)
        return [(x.category, str(x.message), x.filename, x.lineno) for x in w]
    plain = rows(_g)
    assert plain and rows(cf) == plain and True in replayed


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_numba_kernels_flag_the_inf_or_nan_they_store(dtype):
    """A numba kernel sets its program's flag when it stores an inf or a NaN, and only then
    (fpflags replays the graph for the warnings when it is set; no pass over the outputs)."""
    import warnings as w
    cf = nb.compile(lambda x: np.exp(x) * 2, backend="numba")
    big = np.array([1.0, 1e4], dtype)
    small = np.array([1.0, 2.0], dtype)
    with w.catch_warnings():
        w.simplefilter("ignore")
        cf(small)
        cf.wait()
        programs = [p for e in cf.cache.entries.values() for p in e.programs.values()]
        assert programs and all(p.tier() == "numba" for p in programs)
        assert "nonfinite_ |=" in programs[0].code()
        for p in programs:
            p.stored_nonfinite()
        cf(small)
        assert not any(p.stored_nonfinite() for p in programs)
        with w.catch_warnings(record=True) as caught:
            w.simplefilter("always")
            cf(big)
        assert [str(c.message) for c in caught] == [str(c.message) for c in _plain_warnings(big)]
        cf(small)
        assert not any(p.stored_nonfinite() for p in programs)


def _plain_warnings(x):
    import warnings as w
    with w.catch_warnings(record=True) as caught:
        w.simplefilter("always")
        np.exp(x) * 2
    return caught
