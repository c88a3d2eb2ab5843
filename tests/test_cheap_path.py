"""The cheap path for small graphs (compiler/replay/cheap_path.py) and a cell's plain runs chosen by its
decision (compiler/replay/decision.py, magics/plain_runs.py): which path ran and why, and that every
path behaves exactly like the plain cell. Structure and values only, never wall-clock time: the
decisions that depend on timings are given their timings."""
import sys
import pathlib

import numpy as np
import pytest

pytest.importorskip("IPython")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from tests.cells import catalogue, harness  # noqa: E402

import nbaccel as nb  # noqa: E402
from nbaccel.compiler.replay import cheap_path  # noqa: E402
from nbaccel.compiler.replay.decision import PROBES  # noqa: E402
from nbaccel.compiler.capture.capture import TraceSession  # noqa: E402,F401  (the engine is importable)

# cells that go plain for their own reasons (per-element Python calls, a failing compiled try)
PLAIN_BY_DESIGN = {"vectorize", "frompyfunc_apply", "error_shape", "error_after_side_effect"}


@pytest.fixture(scope="module")
def shell():
    sh = harness.get_shell("auto")
    yield sh
    sh.run_line_magic("nbaccel", "config report=auto backend=auto")
    sh.reset(new_session=False)


def _last_report(shell):
    from nbaccel.magics import get_extension
    return get_extension(shell).last[1]


# -- the catalogue: compiled, measured against plain, decided: all as the plain cell --------------

RUNS_TO_DECIDE = 1 + 1 + 2 * PROBES      # the compiling run, then alternating steady runs


@pytest.mark.parametrize("cell", catalogue.CELLS, ids=lambda c: c.name)
@pytest.mark.usefixtures("not_strict")       # as a user sees it: the safety net too
def test_catalogue_cell_on_every_path_matches_plain(shell, cell):
    if not harness.available(cell):
        pytest.skip(f"needs {cell.needs}")
    plain = harness.run(shell, cell, compiled=False)
    paths = []
    for _ in range(RUNS_TO_DECIDE):
        comp = harness.run(shell, cell, compiled=True)
        assert harness.differences(plain, comp) == []
        paths.append(_last_report(shell).path)
    if cell.name not in PLAIN_BY_DESIGN and plain.error is None and _last_report(shell).verdict:
        assert "plain" in paths and set(paths) - {"plain"}     # both sides ran, for the verdict


def _cell(shell, source, **ns):
    shell.user_ns.update(np=np, **ns)      # each test stands alone, whatever ran before it
    res = shell.run_cell("%%compile -o rep\n" + source)
    res.raise_error()
    return shell.user_ns["rep"]


def test_small_graph_runs_as_one_numpy_function(shell):
    shell.run_line_magic("nbaccel", "reset")
    x = np.linspace(-1, 1, 300).astype(np.float32)
    rep = _cell(shell, "y = np.tanh(x * 2.0) + x[::2].sum()\nz = (y > 0).astype(np.int32)\n", x=x)
    assert rep.path == "cheap" and rep.tier == "cheap"
    assert [k["name"] for k in rep.kernels] == ["cheap"] and rep.kernels[0]["backend"] == "numpy"
    assert "cheap path" in rep.path_reason and "one NumPy function" in rep.path_reason
    assert rep.eager_estimate_seconds is not None and rep.eager_estimate_seconds < 100e-6
    y = shell.user_ns["y"]
    want = np.tanh(x * 2.0) + x[::2].sum()
    assert type(y) is np.ndarray and y.dtype == np.float32
    np.testing.assert_allclose(y, want, rtol=1e-6)
    z = shell.user_ns["z"]
    assert z.dtype == np.int32 and np.array_equal(z, (want > 0).astype(np.int32))
    assert "def run(inputs)" in rep.code
    import nbaccel_ext
    d = rep.to_dict()
    assert "path: cheap — cheap path" in nbaccel_ext.render_text(d)
    assert "path: cheap" in nbaccel_ext.ReportView(d)._repr_mimebundle_()["text/html"]


def _decision(shell):
    from nbaccel.magics import get_extension
    return max(get_extension(shell).decisions.values(), key=lambda d: d.last_used)


def _settle(d, plain, compiled):
    """Give a decision the timings a measurement would have (the decision logic itself is
    tests/test_decision.py's): they stand for the whole plain cell, IPython's work on its text
    included (cell_clock.py's plain_extra)."""
    d.plain_extra = 0.0
    while d.choice is None:
        d.record("plain", plain)
        d.record("compiled", compiled)


def test_a_cell_measured_slower_compiled_runs_plainly_and_the_report_says_why(shell):
    shell.run_line_magic("nbaccel", "reset")
    x = np.arange(1000, dtype=np.float64)
    src = "m = x.mean()\nv = x - m\n"
    first = _cell(shell, src, x=x)
    assert first.path == "cheap" and first.fallback is None and first.verdict["path"] == "compiled"
    _settle(_decision(shell), plain=1e-6, compiled=1e-3)
    second = _cell(shell, src, x=x)
    assert second.path == "plain" and second.tier == "plain" and second.cache == ""
    assert "runs plainly" in second.verdict["label"] and "measured as fast" in second.path_reason
    assert second.verdict["ratio"] == pytest.approx(1e-3)
    import nbaccel_ext
    text = nbaccel_ext.render_text(second.to_dict())
    assert "compile" not in text.split("\n", 1)[1] and "cache" not in text   # a plain run compiled nothing
    assert type(shell.user_ns["m"]) is np.float64 and shell.user_ns["m"] == x.mean()
    np.testing.assert_array_equal(shell.user_ns["v"], x - x.mean())


def test_a_cell_measured_faster_compiled_says_so_against_the_plain_cell(shell):
    shell.run_line_magic("nbaccel", "reset")
    src = "y = np.exp(x) * 2\n"
    _cell(shell, src, x=np.ones(100, np.float32))
    _settle(_decision(shell), plain=8e-3, compiled=1e-3)
    rep = _cell(shell, src, x=np.ones(100, np.float32))
    assert rep.path != "plain" and rep.verdict["choice"] == "compiled" and rep.baseline == "plain"
    assert rep.verdict["label"] == "faster than the plain cell"
    import nbaccel_ext
    head = nbaccel_ext.render_text(rep.to_dict()).splitlines()[0]
    assert "faster than the plain cell" in head and "(plain 8.00 ms" in head and "eager" not in head


def test_a_bigger_input_has_a_decision_of_its_own(shell):
    from nbaccel.magics import get_extension
    shell.run_line_magic("nbaccel", "reset")
    src = "y = np.exp(x) * 2\n"
    _cell(shell, src, x=np.ones(100, np.float32))
    _settle(_decision(shell), plain=1e-6, compiled=1e-3)
    assert _cell(shell, src, x=np.ones(100, np.float32)).path == "plain"
    big = np.ones((1024, 1024), np.float32)
    rep = _cell(shell, src, x=big)             # another shape: not that decision's inputs
    assert rep.path == "compiled" and rep.fallback is None and len(get_extension(shell).decisions) == 2
    assert "above the cheap path" in rep.path_reason
    assert all(k["name"] != "cheap" for k in rep.kernels)
    np.testing.assert_allclose(shell.user_ns["y"], np.exp(big) * 2, rtol=1e-6)
    # an int the cell reads is part of the inputs' kind (a loop count changes the work)
    shell.run_line_magic("nbaccel", "reset")
    loop = "acc = np.zeros(4)\nfor i in range(n):\n    acc = acc + i\n"
    _cell(shell, loop, n=3)
    _settle(_decision(shell), plain=1e-6, compiled=1e-3)
    assert _cell(shell, loop, n=3).path == "plain"
    assert _cell(shell, loop, n=4).path != "plain"
    assert np.array_equal(shell.user_ns["acc"], np.full(4, 6.0))


def test_first_run_plain_compiles_once_the_plain_runs_have_cost_a_compile(shell, monkeypatch):
    monkeypatch.setitem(nb.config, "cell_first_run", "plain")
    shell.run_line_magic("nbaccel", "reset")
    x = np.arange(10.0)
    first = _cell(shell, "y = x * 2\n", x=x)
    assert first.path == "plain" and first.graphs == 0 and "not compiled yet" in first.verdict["label"]
    d = _decision(shell)
    d.record("plain", d.compile_estimate)          # as if its runs had cost a compile by now
    rep = _cell(shell, "y = x * 2\n", x=x)
    assert rep.path in ("cheap", "compiled") and rep.verdict["path"] == "compiled"
    np.testing.assert_array_equal(shell.user_ns["y"], x * 2)
    res = shell.run_cell("%%compile --now -o rep2\nz = x + 1\n")    # --now: compiled at once
    res.raise_error()
    assert shell.user_ns["rep2"].verdict["path"] == "compiled"


def test_the_compile_estimate_counts_machine_code_and_reaches_waiting_cells(shell, monkeypatch):
    """A cell's compile costs its trace and codegen now and its numba compile later (in the
    background, on the same CPU and GIL): the estimate of the next compile counts both, and a
    cell still running plainly waits for what compiles cost by now, not for the estimate of
    the moment it first ran."""
    from nbaccel.magics import get_extension, plain_runs
    monkeypatch.setitem(nb.config, "cell_first_run", "plain")
    shell.run_line_magic("nbaccel", "reset")
    x = np.arange(10.0)
    _cell(shell, "w = x * 3\n", x=x)
    waiting = _decision(shell)
    ext = get_extension(shell)
    plain_runs.note_compile(ext, "a", 0.04)
    plain_runs.note_compile(ext, "a", 0.5, add=True)      # its numba compile finished since
    assert ext.compile_costs == {"a": pytest.approx(0.54)}
    _cell(shell, "w = x * 3\n", x=x)
    assert waiting.compile_estimate == pytest.approx(0.54) and not waiting.has_compiled


@pytest.mark.parametrize("opts", ["--backend numpy", "--backend numba", "--mode max-autotune", "--fullgraph"])
def test_a_backend_or_mode_asked_for_by_name_is_compiled(shell, opts):
    shell.run_line_magic("nbaccel", "reset")
    x = np.ones(50, np.float32)
    for _ in range(2):
        shell.user_ns.update(x=x)
        res = shell.run_cell(f"%%compile {opts} -o rep\ny = x * 3 + 1\n")
        res.raise_error()
        rep = shell.user_ns["rep"]
        assert rep.fallback is None and rep.path != "plain"      # never the plain cell path
        if opts != "--fullgraph":                                 # (a full graph may still be cheap)
            assert rep.path == "compiled" and rep.tier != "cheap" and "by name" in rep.path_reason
    np.testing.assert_array_equal(shell.user_ns["y"], x * 3 + 1)


def test_switched_off(shell, monkeypatch):
    monkeypatch.setitem(nb.config, "cheap_enabled", False)
    shell.run_line_magic("nbaccel", "reset")
    for _ in range(2):
        rep = _cell(shell, "y = x + 1\n", x=np.ones(8))
        assert rep.path == "compiled" and "switched off" in rep.path_reason and rep.fallback is None


def test_a_user_error_on_the_plain_path_is_the_plain_error(shell, monkeypatch):
    monkeypatch.setitem(nb.config, "cell_first_run", "plain")
    shell.run_line_magic("nbaccel", "reset")
    shell.user_ns.update(np=np, x=np.arange(5.0), k=1)
    res = shell.run_cell("%%compile\ny = x[:3] + x[:3]\nz = y[k + 9]\n")
    assert isinstance(res.error_in_exec, IndexError) and _last_report(shell).path == "plain"
    assert "index 10 is out of bounds" in str(res.error_in_exec)
    res = shell.run_cell("%%compile\ny = x[:3] + x[:3]\nz = y[k]\n")
    assert res.error_in_exec is None and shell.user_ns["z"] == 2.0


def test_trailing_expression_and_quiet_cells(shell):
    shell.run_line_magic("nbaccel", "reset")
    shell.user_ns.update(x=np.arange(4.0))
    for _ in range(RUNS_TO_DECIDE):         # compiled and plain runs alike
        r = shell.run_cell("%%compile\n(x * 2).sum()\n")
        assert r.result == 12.0 and type(r.result) is np.float64
        q = shell.run_cell("%%compile\n(x * 2).sum();\n")
        assert q.result is None


# -- the estimate and the graph path for nb.compile (opt-in) ---------------------------------------

def test_estimate_grows_with_size_and_counts_matmul_work():
    def estimate(f, *args):
        cf = nb.compile(f, backend="numpy")
        cf(*args)
        return cf.report.eager_estimate_seconds
    small = estimate(lambda a: np.exp(a) + 1, np.ones(10))
    big = estimate(lambda a: np.exp(a) + 1, np.ones(100_000))
    assert 0 < small < big and small < 10e-6 < big
    heavy = estimate(lambda a: np.exp(a), np.ones(100_000))
    light = estimate(lambda a: a + 1, np.ones(100_000))
    assert heavy > 3 * light
    mm = estimate(lambda a, b: a @ b, np.ones((200, 300)), np.ones((300, 200)))
    assert mm > 200 * 200 * 300 * cheap_path.MAC_SECONDS * 0.9


def test_estimate_prices_scalar_loops_per_element():
    """NumPy's float power with an exponent outside its fast ones runs pow() per element, 53 ns
    or more for a negative base and an integral exponent (the GELU's `h ** 3`: 220 µs at 64²,
    where the byte-based price said 0.5 µs); float64 sin too. An integer power, a fast exponent
    and a positive constant base keep the byte-based price."""
    def estimate(f, *args):
        cf = nb.compile(f, backend="numpy")
        cf(*args)
        return cf.report.eager_estimate_seconds
    h = np.linspace(-2, 2, 4096, dtype=np.float32).reshape(64, 64)
    n = h.size
    for f in (lambda a: a ** 3, lambda a: a ** 1.5, lambda a: a ** -2, lambda a: a ** a):
        assert estimate(f, h) >= n * 40e-9
    assert estimate(lambda a: np.sin(a), h.astype(np.float64)) >= n * 5e-9
    assert estimate(lambda a: a % 7, h) >= n * 10e-9
    for f in (lambda a: a ** 2, lambda a: a ** -1, lambda a: 2.0 ** a, lambda a: np.sin(a)):
        assert estimate(f, h) < 10e-6
    assert estimate(lambda a: a ** 3, np.arange(n).reshape(64, 64)) < 10e-6


GELU_SOFTMAX = """\
h = x * w + b
y = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))
p = np.exp(y - y.max(axis=1, keepdims=True))
p /= p.sum(axis=1, keepdims=True)
"""


def test_a_cell_whose_numpy_work_is_above_the_cheap_limit_compiles(shell):
    """bench/headline.py's cell at 64²: 13 NumPy calls, ~230 µs plainly (loaded), of which
    `h ** 3` is ~220 µs; its estimate was 19 µs, so it took the cheap path (~250 µs a run) where
    the fused kernel runs the 4,096 elements in ~20 µs. Its estimate is now above the limit."""
    shell.run_line_magic("nbaccel", "reset")
    x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    ns = dict(x=x, w=np.float32(0.5), b=np.float32(0.1))
    rep = _cell(shell, GELU_SOFTMAX, **ns)
    assert rep.path == "compiled", rep.path_reason
    assert rep.eager_estimate_seconds > nb.config["cheap_graph_seconds"]
    assert "above the cheap path's" in rep.path_reason
    got = shell.user_ns["p"]
    want = {**ns, "np": np}
    exec(GELU_SOFTMAX, want)
    assert got.dtype == want["p"].dtype
    np.testing.assert_allclose(got, want["p"], rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_])
def test_cheap_program_matches_eager_for_functions(monkeypatch, dtype):
    monkeypatch.setitem(nb.config, "cheap_functions", True)

    def f(a, b):
        s = a + b
        return s * 2, s.sum(), (a > b), s[1:3], s.astype(np.float32)

    rng = np.random.default_rng(0)
    a = (rng.standard_normal(16) * 10).astype(dtype)
    b = (rng.standard_normal(16) * 10).astype(dtype)
    cf = nb.compile(f)
    for _ in range(2):
        got = cf(a, b)
        assert cf.report.path == "cheap" and cf.report.tier == "cheap"
        want = f(a, b)
        for g, w in zip(got, want):
            assert type(g) is type(w), (type(g), type(w))
            assert np.asarray(g).dtype == np.asarray(w).dtype
            np.testing.assert_array_equal(g, w)


def test_functions_stay_compiled_by_default():
    cf = nb.compile(lambda a: a * 2 + 1)
    cf(np.ones(4))
    assert cf.report.path == "compiled" and cf.report.tier != "cheap"


# -- a trace that costs more than several plain runs gives up (decision.trace_budget) -----------

LOOP_CELL = "acc = x.copy()\nfor i in range(150):\n    acc = acc * 0.5 + x[i % 8]\ntotal = acc.sum()\n"


def test_a_trace_past_its_budget_runs_the_cell_plainly_with_the_reason(shell, monkeypatch):
    """The compile the decision chose on its own is given a budget from the plain runs; a trace
    past it stops, the cell runs plainly (its values as plainly), and so do its later runs."""
    from nbaccel.compiler.replay import decision
    from nbaccel.magics import plain_runs
    monkeypatch.setitem(nb.config, "cell_first_run", "plain")
    monkeypatch.setattr(decision, "TRACE_BUDGET_MIN", 0.0)
    monkeypatch.setattr(decision, "TRACE_BUDGET_RATIO", 1e-3)    # any trace is past it (450 ops)
    monkeypatch.setattr(plain_runs, "_compile_estimate", lambda ext: 1e-9)   # (and so is the estimate)
    shell.run_line_magic("nbaccel", "reset")
    x = np.linspace(0, 1, 8)
    want = x.copy()
    for i in range(150):
        want = want * 0.5 + x[i % 8]
    first = _cell(shell, LOOP_CELL, x=x)
    assert first.path == "plain"
    d = _decision(shell)
    assert d.trace_budget() == pytest.approx(1e-3 * d.plain_total / d.plain_runs)
    assert d.next_path() == "compiled"                   # its run has cost the (tiny) compile
    for _ in range(2):
        rep = _cell(shell, LOOP_CELL, x=x)
        assert rep.graphs == 0 and "tracing would cost more than its budget" in (rep.fallback or ""), rep.fallback
        np.testing.assert_array_equal(shell.user_ns["acc"], want)
        assert shell.user_ns["total"] == want.sum()


def test_a_compile_the_user_asked_for_has_no_trace_budget(shell, monkeypatch):
    from nbaccel.compiler.replay import decision
    monkeypatch.setattr(decision, "TRACE_BUDGET_MIN", 0.0)
    monkeypatch.setattr(decision, "TRACE_BUDGET_RATIO", 1e-6)
    shell.run_line_magic("nbaccel", "reset")
    shell.user_ns.update(np=np, x=np.linspace(0, 1, 8))
    res = shell.run_cell("%%compile --now -o rep\n" + LOOP_CELL)
    res.raise_error()
    assert shell.user_ns["rep"].graphs >= 1 and shell.user_ns["rep"].fallback is None
    assert decision.Decision(first="compiled").trace_budget() is None


def test_a_function_past_its_trace_budget_runs_plainly_and_warns():
    def f(x):
        for _ in range(600):
            x = x * 0.5 + 1.0
        return x
    cf = nb.compile(f)
    cf.trace_budget = 1e-9                              # set by the caller that timed the plain code
    x = np.arange(4.0)
    with pytest.warns(RuntimeWarning, match="tracing would cost more than its budget"):
        out = cf(x)
    np.testing.assert_array_equal(np.asarray(out), f(x))


STEP_LOOP_SETUP = "@nb.compile\ndef step(v):\n    return (v * 2.0).sum()\n"
STEP_LOOP_CELL = "out = [float(step(x)) for _ in range(20)]\n"


def test_a_loop_that_calls_a_compiled_function_past_a_graph_break_runs_plainly(shell, monkeypatch):
    """``float(step(x))`` in a loop: the trace inlines ``step``, breaks on the float, and calls it
    again; it would trace ``step`` and compile a segment every round (notebooks 07 and 08's
    training loops spent their whole trace budget so) while the plain cell runs it compiled.
    A trace the decision bet on gives up at the second call, with the reason."""
    from nbaccel.magics import plain_runs
    monkeypatch.setitem(nb.config, "cell_first_run", "plain")
    monkeypatch.setattr(plain_runs, "_compile_estimate", lambda ext: 1e-9)   # compile on run 2
    shell.run_line_magic("nbaccel", "reset")
    shell.user_ns.update(nb=nb)
    shell.run_cell(STEP_LOOP_SETUP).raise_error()
    x = np.linspace(0, 1, 64)
    assert _cell(shell, STEP_LOOP_CELL, x=x).path == "plain"
    rep = _cell(shell, STEP_LOOP_CELL, x=x)
    assert rep.graphs == 0 and "calls the compiled function step again after a graph break" in \
        (rep.fallback or ""), rep.fallback
    assert shell.user_ns["out"] == [float((x * 2.0).sum())] * 20
    rep = _cell(shell, STEP_LOOP_CELL, x=x)                 # and so do its later runs
    assert "compiled function step again" in (rep.fallback or "")


def test_a_loop_over_a_compiled_function_compiles_when_asked(shell):
    shell.run_line_magic("nbaccel", "reset")
    shell.user_ns.update(nb=nb, np=np, x=np.linspace(0, 1, 64))
    shell.run_cell(STEP_LOOP_SETUP).raise_error()
    shell.run_cell("%%compile --now -o rep\n" + STEP_LOOP_CELL).raise_error()
    assert shell.user_ns["rep"].fallback is None and len(shell.user_ns["rep"].graph_breaks) == 20


def test_a_cells_first_replay_is_no_sample(shell):
    """An entry's first replay runs a new program once (its kernels load, its buffers are made):
    as for a function, it is not a median sample; the replays after it are."""
    shell.run_line_magic("nbaccel", "reset")
    shell.user_ns.update(np=np, x=np.ones((64, 64), np.float32))
    for _ in range(2):                                   # the trace, then the first replay
        shell.run_cell("%%compile --now\ny = np.tanh(x) * 2 + x\n").raise_error()
    d = _decision(shell)
    assert d.compiled_runs == 2 and len(d.compiled) == 0
    shell.run_cell("%%compile --now\ny = np.tanh(x) * 2 + x\n").raise_error()   # a replay: a sample
    assert d.compiled_runs == 3 and len(d.compiled) == 1
