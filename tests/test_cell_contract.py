"""The %%compile contract on a catalogue of everyday cells: each runs plainly and compiled in a
real IPython shell; namespaces (names, values, dtypes, types), stdout and exceptions match."""
import sys
import pathlib
import warnings

import numpy as np
import pytest

pytest.importorskip("IPython")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from tests.cells import catalogue, harness, tutorial  # noqa: E402

import nbaccel as nb  # noqa: E402
from nbaccel.compiler import api as capi  # noqa: E402

# what a user sees, the plain re-run included (tests/conftest.py: not_strict)
pytestmark = pytest.mark.usefixtures("not_strict")

# cells that are meant to run plainly (per-element Python calls) or whose compiled attempt
# fails inside nbaccel with the user's own error (the plain run then raises NumPy's message)
PLAIN_BY_DESIGN = {"vectorize", "frompyfunc_apply", "error_shape", "error_after_side_effect",
                   # the user's own error, detected by nbaccel first (NumPy's comes from the plain run)
                   "error_index", "error_reshape", "error_type_mix", "ex_promotion",
                   # star imports need module scope
                   "star_import_numpy", "star_import_math",
                   # they need a real ndarray: flags, shape changed in place, memory layout
                   "ex_readonly", "inplace_resize_plain", "inplace_strides_info", "ex_copy_vs_view",
                   # a data-dependent shape of a list input; timedelta64[m] arithmetic
                   "ex_nonzero_indices", "datetime_series",
                   # scipy's sparse matrix @ an array made in the cell fails inside scipy
                   "scipy_sparse_ops"}
KNOWN: dict[str, str] = {}     # cell name -> why it is expected to differ (none today)
# cell name -> why its warnings differ (the rest of the cell is compared)
KNOWN_WARNINGS = {"matrix_ops": "np.matrix's PendingDeprecationWarning names magics/boundary.py, "
                                "which calls it for the cell (docs/compiler.md, floating-point warnings)"}


@pytest.fixture(scope="module")
def shell():
    sh = harness.get_shell("numpy")
    yield sh
    sh.run_line_magic("nbaccel", "config report=auto backend=auto")
    sh.reset(new_session=False)


ALL_CELLS = catalogue.CELLS + tutorial.CELLS


def test_catalogue_is_large_enough():
    assert len(ALL_CELLS) >= 250
    assert len({c.name for c in ALL_CELLS}) == len(ALL_CELLS)


@pytest.mark.parametrize("cell", ALL_CELLS, ids=lambda c: c.name)
def test_cell_matches_plain(shell, cell):
    if not harness.available(cell):
        pytest.skip(f"needs {cell.needs}")
    if cell.name in KNOWN:
        pytest.xfail(KNOWN[cell.name])
    plain = harness.run(shell, cell, compiled=False)
    comp = harness.run(shell, cell, compiled=True)
    if cell.name in KNOWN_WARNINGS:
        plain.warnings = comp.warnings = ()
    assert harness.differences(plain, comp) == []
    if cell.name not in PLAIN_BY_DESIGN:
        assert comp.fallback is None, comp.fallback
    # the second run of the same cell (a cached entry) behaves the same, and --verify (the
    # plain cell as a shadow on copies) finds no difference either
    again = harness.run(shell, cell, compiled=True, verify=True)
    if cell.name in KNOWN_WARNINGS:
        again.warnings = ()
    assert harness.differences(plain, again) == []
    from nbaccel.magics import get_extension
    assert [d for d in get_extension(shell).last_verify.differences
            if not (cell.name in KNOWN_WARNINGS and d.startswith("warnings:"))] == []


def _run(shell, setup, source):
    cell = catalogue.Cell("adhoc", source, setup=setup)
    return harness.run(shell, cell, compiled=False), harness.run(shell, cell, compiled=True)


def _report(shell):
    from nbaccel.magics import get_extension
    rep = get_extension(shell).last[1]
    rep.measure_eager()            # (reports switched off: finish it as showing it would)
    return rep


def test_mask_writes_lower_to_where_without_a_break(shell):
    plain, comp = _run(shell, catalogue.RNG, "t = x * 1.0\nt[t > 1] = 1.0\nt[t < 0] += 2\nc = x * 1.0\n"
                                            "m = y > 0\nc[m] = y[m]\n")
    assert harness.differences(plain, comp) == []
    rep = _report(shell)
    assert rep.graph_breaks == []
    assert "where" in rep.graph


def test_mask_read_is_a_break_with_a_reason(shell):
    plain, comp = _run(shell, catalogue.RNG, "pos = x[x > 0] * 2\n")
    assert harness.differences(plain, comp) == []
    reasons = [b["reason"] for b in _report(shell).graph_breaks]
    assert any("data-dependent" in r for r in reasons), reasons


def test_values_for_other_code_are_numpy(shell):
    src = ("seen = []\nclass Probe:\n    pass\n"
           "def probe(*vals):\n    seen.extend(type(v).__name__ for v in vals)\n")
    cell = catalogue.Cell("probe", "import json\nz = x[:4] * 2\nkinds = []\n"
                          "json.dumps(float(z.sum()))\nisinstance(z, np.ndarray) and kinds.append('nd')\n",
                          setup=catalogue.RNG + src)
    plain = harness.run(shell, cell, compiled=False)
    comp = harness.run(shell, cell, compiled=True)
    assert harness.differences(plain, comp) == []
    assert comp.names["kinds"] == ["nd"]


def test_too_many_graph_breaks_go_plain_for_later_runs_too(shell):
    src = "tot = 0.0\nfor i in range(100):\n    v = x[i] * 2\n    if v > 0:\n        tot += float(v)\n"
    cell = catalogue.Cell("breaks", src, setup=catalogue.RNG)
    plain = harness.run(shell, cell, compiled=False)
    comp = harness.run(shell, cell, compiled=True)
    assert harness.differences(plain, comp) == []
    assert comp.fallback and "too many graph breaks" in comp.fallback and "line" in comp.fallback
    again = harness.run(shell, cell, compiled=True)
    assert again.fallback == comp.fallback          # decided once: later runs go plain at once
    assert _report(shell).fallback == comp.fallback


def test_safety_net_reruns_plainly_and_prints_once(shell, monkeypatch):
    from nbaccel.compiler.replay import entries

    def broken(self, *a, **k):
        raise RuntimeError("internal error: injected")
    monkeypatch.setattr(entries.GraphCache, "run", broken)
    plain, comp = _run(shell, catalogue.RNG, "print('start')\ns = np.tanh(x).sum()\nprint(s)\n")
    assert harness.differences(plain, comp) == []
    assert comp.stdout.count("start") == 1
    assert "injected" in comp.fallback
    assert "injected" in _report(shell).fallback


def test_safety_net_restores_inputs_updated_in_place(shell, monkeypatch):
    from nbaccel.compiler.capture import capture
    real = capture.TraceSession.flush
    calls = {"n": 0}

    def flaky(self, final=None):
        calls["n"] += 1
        real(self, final)
        if calls["n"] == 1:
            raise RuntimeError("internal error: after the first segment")
    monkeypatch.setattr(capture.TraceSession, "flush", flaky)
    plain, comp = _run(shell, catalogue.RNG, "x += 1\nprint(float(x[0]))\ny2 = x * 2\n")
    assert harness.differences(plain, comp) == []
    assert comp.fallback is not None


def test_strict_raises_the_internal_failure(shell, monkeypatch):
    from nbaccel.compiler.replay import entries

    def broken(self, *a, **k):
        raise RuntimeError("internal error: injected")
    monkeypatch.setattr(entries.GraphCache, "run", broken)
    monkeypatch.setitem(nb.config, "strict", True)
    cell = catalogue.Cell("tm", "s = np.tanh(x).sum()\n", setup=catalogue.RNG)
    comp = harness.run(shell, cell, compiled=True)
    assert comp.error == ("RuntimeError", "internal error: injected")


def test_user_exception_keeps_names_bound_before_it(shell):
    plain, comp = _run(shell, catalogue.RNG, "a1 = x * 2\nb1 = undefined + 1\n")
    assert harness.differences(plain, comp) == []
    assert "a1" in comp.names and comp.error[0] == "NameError"


def test_cell_functions_are_named_and_read_globals_as_plain(shell):
    plain, comp = _run(shell, catalogue.NP, "k = 2\ndef scale(v):\n    return v * k\nclass M:\n"
                                           "    def f(self):\n        return k\nr = scale(np.ones(2))\n")
    assert harness.differences(plain, comp) == []
    assert comp.names["scale"].__qualname__ == "scale"
    assert comp.names["M"].f.__qualname__ == "M.f"
    shell.user_ns["k"] = 5                       # a later plain cell rebinds k: scale sees it
    assert shell.user_ns["scale"](1) == 5


def test_nb_compile_falls_back_after_too_many_breaks():
    def f(x):
        tot = 0.0
        for i in range(80):
            if x[i] > 0:
                tot = tot + x[i]
        return tot
    x = np.linspace(-1, 1, 80)
    cf = nb.compile(f, backend="numpy")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = cf(x)
    assert np.isclose(float(out), f(x))
    assert any("too many graph breaks" in str(m.message) for m in w)
    assert cf.eager_only


def test_report_speedups_are_honest():
    from nbaccel.compiler.report.report import CompileReport, fmt_ratio
    r = CompileReport(eager_seconds=5e-6, compiled_seconds=8e-6)
    r._set_speedup()
    assert r.speedup is None and r.speedup_note == "too short to measure"
    assert "too short to measure" in repr(r)
    r = CompileReport(eager_seconds=1e-3, compiled_seconds=0.04)
    r._set_speedup()
    assert "0.0x" not in repr(r) and "0.025x" in repr(r)
    assert fmt_ratio(0.004) == "0.004x" and fmt_ratio(12.34) == "12.3x"
    r = CompileReport(eager_seconds=1e-3, compiled_seconds=0.9e-3)
    r._set_speedup(noise=5e-4)
    assert r.speedup is None                     # the difference is inside the noise


def test_report_times_both_sides_warm_and_shows_first_call():
    f = nb.compile(lambda x: np.tanh(x * 2.0 + 1.0).sum(), backend="numpy")
    x = np.random.default_rng(0).standard_normal(200_000)
    f(x)
    rep = f.report
    assert rep.first_call_seconds is not None and rep.first_call_seconds >= rep.compiled_seconds
    assert rep.eager_seconds is None             # the plain side is measured over the next calls
    for _ in range(8):                            # 3 steady timings a side, interleaved
        f(x)
    rep = f.report
    assert rep.eager_seconds is not None and rep.compiled_seconds > 0
    assert rep.speedup is not None or rep.speedup_note in ("too short to measure", "within noise")


def test_compiled_function_report_has_html_and_text():
    f = nb.compile(lambda x: x * 2 + 1, backend="numpy")
    f(np.ones(4))
    bundle = f.report._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert "text/plain" in data and "text/html" in data
    assert "nbaccel" in data["text/plain"]


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.bool_])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_nan_reductions_and_outer_are_captured(dtype, axis):
    import nbaccel.numpy as xnp
    a = np.random.default_rng(0).standard_normal((5, 4))
    if dtype in (np.float64, np.float32):
        a[1, 2] = a[3, 0] = np.nan
    a = (a > 0) if dtype is np.bool_ else a.astype(dtype)
    cf = nb.compile(lambda v: (xnp.nansum(v, axis=axis), xnp.nanmean(v, axis=axis),
                               xnp.multiply.outer(v[0], v[:, 1])), backend="numpy")
    s, m, o = cf(a)
    for got, want in ((s, np.nansum(a, axis=axis)), (m, np.nanmean(a, axis=axis)),
                      (o, np.multiply.outer(a[0], a[:, 1]))):
        want = np.asarray(want)
        assert np.asarray(got).dtype == want.dtype
        np.testing.assert_allclose(np.asarray(got, dtype=float), want.astype(float), rtol=1e-5)
    assert cf.report.graph_breaks == []


def test_plain_cells_report_why_and_store_the_report(shell):
    cell = catalogue.Cell("vec", "vf = np.vectorize(lambda v: v + 1)\nout = vf(x[:3])\n", setup=catalogue.RNG)
    comp = harness.run(shell, cell, compiled=True)
    assert "np.vectorize" in comp.fallback and "line 1" in comp.fallback
    shell.run_cell("%%compile -o rep\n" + cell.source)
    rep = shell.user_ns["rep"]
    assert rep.fallback and rep.tier == "plain" and "ran plainly" in repr(rep)
    from nbaccel_ext import render_text
    assert "ran plainly: np.vectorize" in render_text(rep.to_dict())


def test_tracing_costlier_than_plain_goes_plain_after_one_comparison(shell, monkeypatch):
    monkeypatch.setitem(capi.config, "plain_probe", {"breaks": 4, "seconds": 0.0, "ratio": 0.0,
                                                         "slack": 0.0})
    src = "tot = 0.0\nfor i in range(6):\n    if x[i] > 0:\n        tot += 1.0\n"
    cell = catalogue.Cell("probe", src, setup=catalogue.RNG)
    plain = harness.run(shell, cell, compiled=False)
    first = harness.run(shell, cell, compiled=True)
    assert first.fallback is None and harness.differences(plain, first) == []
    second = harness.run(shell, cell, compiled=True)       # the comparison run: plain
    assert harness.differences(plain, second) == []
    assert "tracing cost more than running plainly" in second.fallback and "line" in second.fallback
    third = harness.run(shell, cell, compiled=True)
    assert third.fallback == second.fallback


def test_an_interrupted_cell_still_shows_what_it_printed(shell):
    cell = catalogue.Cell("intr", "print('working')\nv = np.tanh(x)\nraise KeyboardInterrupt\n",
                          setup=catalogue.RNG)
    comp = harness.run(shell, cell, compiled=True)
    assert comp.stdout == "working\n" and comp.error[0] == "KeyboardInterrupt"


def test_text_and_html_reports_never_say_zero_speedup():
    from nbaccel_ext import render_html, render_text
    from nbaccel_ext.html import fmt_speedup
    assert fmt_speedup(0.004) == "0.004×" and fmt_speedup(0.04) == "0.04×" and fmt_speedup(2.5) == "2.50×"
    r = {"name": "In[1]", "eager_seconds": 4e-5, "compiled_seconds": 1e-3, "speedup": 0.04}
    assert "0.04× slower" in render_text(r) and "0.0×" not in render_html(r)
    short = dict(r, speedup=None, speedup_note="too short to measure")
    assert "too short to measure" in render_text(short) and "too short to measure" in render_html(short)
    plain = {"name": "In[2]", "fallback": "np.vectorize calls a Python function per element"}
    assert "ran plainly: np.vectorize" in render_text(plain) and "ran plainly" in render_html(plain)


def test_numpy_imported_in_a_cell_and_used_by_its_functions(shell):
    src = "import numpy as np\ndef f(v):\n    return np.exp(v) + 1\nr = f(np.arange(3.0))\nv = np.__version__\n"
    plain, comp = _run(shell, "", src)
    assert harness.differences(plain, comp) == []
    assert comp.names["np"] is np
    assert np.allclose(comp.names["f"](np.zeros(2)), 2.0)      # f reads the notebook's np later
