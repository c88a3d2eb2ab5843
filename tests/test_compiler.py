"""The compiler's promises: structure (kernel counts), recompiles and dynamic shapes, graph
breaks, autograd through compiled graphs, and every compiled graph checked against eager."""
import numpy as np
import pytest

import nbaccel as nb

BACKENDS = ["numpy", "numba", "triton"]


def _np(x):
    return np.asarray(x.detach() if isinstance(x, nb.Tensor) else x)


def check_against_eager(fn, *args, backend="numpy", rtol=2e-5, atol=1e-6, **kw):
    """Run fn eagerly and compiled; compare every output. Returns the compiled function."""
    want = fn(*args)
    cf = nb.compile(fn, backend=backend, **kw)
    got = cf(*args)
    ws = want if isinstance(want, (tuple, list)) else [want]
    gs = got if isinstance(got, (tuple, list)) else [got]
    assert len(ws) == len(gs)
    for w, g in zip(ws, gs):
        assert type(g) is type(w) or (isinstance(w, np.generic) and np.ndim(g) == 0), (type(g), type(w))
        np.testing.assert_allclose(_np(g), _np(w), rtol=rtol, atol=atol)
        assert _np(g).dtype == _np(w).dtype
    return cf


def six_op_chain(x, w, b):
    return np.tanh(x * w + b) * 0.5 + np.exp(-x)


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layer_norm(x, g, b):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * g + b


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((64, 96)).astype(np.float32),
            "w": rng.standard_normal(96).astype(np.float32),
            "b": rng.standard_normal(96).astype(np.float32)}


@pytest.mark.parametrize("backend", BACKENDS)
def test_elementwise_chain_is_one_kernel(data, backend):
    cf = check_against_eager(six_op_chain, data["x"], data["w"], data["b"], backend=backend)
    assert len(cf.report.kernels) == 1
    assert cf.report.kernels[0]["ops"] == ["multiply", "add", "tanh", "multiply", "negative", "exp", "add"]
    assert cf.report.kernels[0]["backend"] == backend


@pytest.mark.parametrize("backend", BACKENDS)
def test_softmax_is_one_kernel(data, backend):
    cf = check_against_eager(softmax, data["x"], backend=backend)
    assert len(cf.report.kernels) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_layer_norm_at_most_two_kernels(data, backend):
    cf = check_against_eager(layer_norm, data["x"], data["w"], data["b"], backend=backend, rtol=1e-4, atol=1e-5)
    assert len(cf.report.kernels) <= 2


def test_numpy_in_numpy_out_tensor_in_tensor_out(data):
    cf = nb.compile(softmax, backend="numpy")
    assert isinstance(cf(data["x"]), np.ndarray)
    assert isinstance(cf(nb.asarray(data["x"])), nb.Tensor)
    assert isinstance(cf(nb.tensor(data["x"])), nb.Tensor)


def test_report_is_json_and_complete(data):
    import json
    cf = nb.compile(six_op_chain, backend="numpy")
    cf(data["x"], data["w"], data["b"])
    d = cf.report.to_dict()
    json.dumps(d)
    for key in ("cache", "tier", "compile_seconds", "compile_breakdown", "eager_seconds", "compiled_seconds",
                "speedup", "recompiles", "graph_breaks", "kernels", "graph", "code"):
        assert key in d
    assert set(d["compile_breakdown"]) == {"capture", "lowering", "codegen", "jit"}
    assert d["cache"] == "miss" and d["tier"] == "numpy"
    assert "graph(x: f32[64, 96]" in d["graph"] and "def run(inputs)" in d["code"]
    cf(data["x"], data["w"], data["b"])
    assert cf.report.cache == "hit"
    assert cf.stats["calls"] == 2 and cf.stats["compiles"] == 1 and cf.stats["cache_hits"] == 1


@pytest.mark.parametrize("dynamic,compiles", [(None, 2), (False, 5), (True, 1)])
def test_recompiles_and_automatic_dynamic(dynamic, compiles):
    def f(x):
        return np.exp(x * 3 + 1).sum(axis=-1)
    cf = nb.compile(f, backend="numpy", dynamic=dynamic)
    for b in (8, 16, 32, 64, 128):
        x = np.random.default_rng(b).standard_normal((b, 4)).astype(np.float32)
        np.testing.assert_allclose(cf(x), f(x), rtol=1e-5)
    assert cf.stats["compiles"] == compiles
    reasons = [r["reason"] for r in cf.report.recompiles]
    assert len(reasons) == (compiles - 1)
    for r in reasons:
        assert "x.shape[0]" in r
    if dynamic is None:
        assert "now dynamic" in reasons[0]
        assert cf.report.dynamic_dims == ["x.shape[0]"]


def test_sizes_zero_and_one_stay_specialised():
    cf = nb.compile(lambda x: x * 2, backend="numpy")
    for b in (8, 16, 1, 32, 0):
        cf(nb.ones(b, 3))
    # 8 static, 16 dynamic, 1 and 0 each their own entry; 32 hits the dynamic one
    assert cf.stats["compiles"] == 4


def test_dtype_recompile_reason():
    cf = nb.compile(lambda x: x + 1, backend="numpy")
    cf(nb.ones(3))
    cf(nb.ones(3, dtype=nb.float64))
    assert cf.report.recompiles[-1]["reason"] == "x.dtype: float32 → float64"


def test_constant_change_reason_names_line():
    scale = {"v": 2.0}

    def f(x):
        return x * scale["v"]
    cf = nb.compile(f, backend="numpy")
    cf(nb.ones(3))
    scale["v"] = 3.0
    np.testing.assert_allclose(_np(cf(nb.ones(3))), 3.0)   # never stale: the constant is guarded
    assert "constant changed" in cf.report.recompiles[-1]["reason"]


def test_mark_dynamic_compiles_once():
    cf = nb.compile(lambda x: x.exp(), backend="numpy")
    for b in (8, 16, 32):
        x = nb.ones(b, 4)
        nb.mark_dynamic(x, 0)
        cf(x)
    assert cf.stats["compiles"] == 1


def test_recompile_limit_falls_back_to_eager_with_warning(monkeypatch):
    # every call compiled (the one decision would time some calls plainly, and a plain call
    # does not recompile: whether the limit is reached would depend on the timings)
    monkeypatch.setitem(nb.compiler.config, "decide_functions", False)
    nb.compiler.config["recompile_limit"] = 3
    try:
        cf = nb.compile(lambda x, k: x * k, backend="numpy")
        with pytest.warns(RuntimeWarning, match="recompiled"):
            for k in range(6):
                out = cf(nb.ones(2), float(k))
                np.testing.assert_allclose(_np(out), float(k))
        assert cf.eager_only
    finally:
        nb.compiler.config["recompile_limit"] = 8


def branchy(x):
    y = x * 2
    if y.sum() > 0:  # the break line
        return y + 1
    return y - 1


def test_graph_break_on_data_dependent_branch():
    import inspect
    line = inspect.getsourcelines(branchy)[1] + 2
    x = nb.randn(4, 5)
    cf = nb.compile(branchy, backend="numpy")
    np.testing.assert_allclose(_np(cf(x)), _np(branchy(x)))
    np.testing.assert_allclose(_np(cf(-x.abs())), _np(branchy(-x.abs())))
    breaks = cf.report.graph_breaks
    assert len(breaks) == 1
    assert breaks[0]["lineno"] == line and breaks[0]["filename"] == __file__
    assert "if y.sum() > 0" in breaks[0]["line"]
    assert breaks[0]["fix"]
    ex = nb.explain(branchy, x)
    assert ex["graph_count"] == 2 and ex["graph_break_count"] == 1 and ex["op_count"] >= 3


def test_fullgraph_error_names_the_line():
    import inspect
    line = inspect.getsourcelines(branchy)[1] + 2
    with pytest.raises(nb.GraphBreakError, match=f"{__file__}:{line}"):
        nb.compile(branchy, fullgraph=True, backend="numpy")(nb.randn(3))


def test_item_and_print_break_but_stay_correct(capsys):
    def f(x):
        m = x.max().item()
        print("max", round(m, 3))
        return x / m
    x = nb.rand(5) + 1
    cf = nb.compile(f, backend="numpy")
    np.testing.assert_allclose(_np(cf(x)), _np(f(x)), rtol=1e-6)
    assert len(cf.report.graph_breaks) == 1
    assert capsys.readouterr().out.count("max") == 2


def test_input_mutation_is_written_back():
    def f(x):
        x += 1
        return x * 2
    a = np.ones(4, np.float32)
    b = a.copy()
    out = nb.compile(f, backend="numpy")(a)
    want = f(b)
    np.testing.assert_allclose(out, want)
    np.testing.assert_allclose(a, b)


@pytest.mark.parametrize("backend", BACKENDS)
def test_backward_through_compiled_graph(backend):
    x = nb.randn(6, 5)
    w = nb.randn(5, 3, requires_grad=True)
    b = nb.randn(3, requires_grad=True)

    def f(x, w, b):
        return ((x @ w + b).tanh() ** 2).sum()
    cf = nb.compile(f, backend=backend)
    loss = cf(x, w, b)
    loss.backward()
    gw, gb = _np(w.grad).copy(), _np(b.grad).copy()
    w.grad = b.grad = None
    f(x, w, b).backward()
    np.testing.assert_allclose(gw, _np(w.grad), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gb, _np(b.grad), rtol=1e-5, atol=1e-6)
    assert cf.stats["backward_compiles"] == 1


def test_compiled_training_step_matches_eager():
    def make():
        nb.manual_seed(3)
        return [nb.randn(8, 16).mul(0.3).requires_grad_(), nb.randn(16, 1).mul(0.3).requires_grad_()]

    def step_fn(params):
        def step(x, y):
            w1, w2 = params
            loss = (((x @ w1).tanh() @ w2 - y) ** 2).mean()
            for p in params:
                p.grad = None
            loss.backward()
            with nb.no_grad():
                for p in params:
                    p -= 0.1 * p.grad
            return loss
        return step
    x, y = nb.randn(32, 8), nb.randn(32, 1)
    pe = make()
    eager = [float(step_fn(pe)(x, y)) for _ in range(5)]
    pc = make()
    cs = nb.compile(step_fn(pc), backend="numpy")
    comp = [float(cs(x, y)) for _ in range(5)]
    np.testing.assert_allclose(comp, eager, rtol=1e-5)
    assert eager[-1] < eager[0]
    assert cs.stats["compiles"] == 1 and cs.report.graphs == 1
    for a, b in zip(pe, pc):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-5, atol=1e-6)


def test_random_inside_compiled_function_stays_random():
    cf = nb.compile(lambda x: x + nb.rand(3), backend="numpy")
    a, b = _np(cf(nb.zeros(3))), _np(cf(nb.zeros(3)))
    assert not np.allclose(a, b)
    assert cf.stats["compiles"] == 1


def test_reductions_over_other_axes_and_full(data):
    def f(x):
        return x.sum(axis=0), x.max(), (x * 2).mean(axis=(0, 1)), x.argmax(axis=1)
    check_against_eager(f, data["x"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_int_and_bool_kernels(backend):
    def f(a, b):
        return (a * 3 + b) // 2, (a > b) & (b >= 0), np.where(a > 0, a, -b)
    rng = np.random.default_rng(1)
    a = rng.integers(-5, 5, (16, 8)).astype(np.int32)
    b = rng.integers(-5, 5, (8,)).astype(np.int32)
    check_against_eager(f, a, b, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_and_inf_propagate_like_numpy(backend):
    x = np.array([[1.0, np.nan, 3.0], [np.inf, -np.inf, 0.0], [100.0, -100.0, 0.5]], np.float32)
    check_against_eager(lambda x: (np.exp(x), x.max(axis=-1), np.tanh(x)), x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bool_add_and_multiply_are_logical_inside_a_fused_int_kernel(backend):
    # NumPy: True + True is True (logical or), so (m + m) * k == k; an int sum would double it
    m = np.array([[True, False, True], [False, False, True]])
    k = np.array([-2, 3, 5], np.int64)
    check_against_eager(lambda m, k: ((m + m) * k, (m * m.T[:1].T) * k, np.max(m) + np.max(m)),
                        m, k, backend=backend)


def test_empty_and_zero_d_inputs():
    check_against_eager(lambda x: (x * 2 + 1).sum(axis=-1), np.zeros((0, 4), np.float32))
    check_against_eager(lambda x: np.exp(x) * 2, np.float32(1.5) * np.ones((), np.float32))
    with pytest.raises(ValueError):
        nb.compile(lambda x: x.max(axis=-1), backend="numpy")(np.zeros((3, 0), np.float32))


def test_module_compile():
    from nbaccel import nn
    nb.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    x = nb.randn(5, 8)
    cm = nb.compile(m, backend="numpy")
    np.testing.assert_allclose(_np(cm(x)), _np(m(x)), rtol=1e-5, atol=1e-6)
    assert "0.weight" in cm.report.graph


@pytest.mark.parametrize("backend", BACKENDS)
def test_maximum_minimum_propagate_nan(backend):
    a = np.array([[1.0, np.nan, 3.0, -np.inf]], np.float32)
    b = np.array([[np.nan, 2.0, 1.0, 0.0]], np.float32)
    check_against_eager(lambda a, b: (np.maximum(a, b), np.minimum(a, b), np.maximum(b, a)), a, b, backend=backend)


def test_shift_by_bit_width_matches_numpy():
    a = np.array([[1, 2, 3]], np.int32)
    s = np.array([[31, 32, 40]], np.int32)
    cf = check_against_eager(lambda a, s: (np.left_shift(a, s), np.right_shift(a, s)), a, s, backend="numba")
    assert cf.report.kernels[0]["backend"] == "numpy"   # numba's shifts differ: stays on NumPy


def test_module_compile_in_place():
    from nbaccel import nn
    nb.manual_seed(1)
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    x = nb.randn(3, 4)
    want = _np(m(x))
    assert m.compile(backend="numpy") is m
    np.testing.assert_allclose(_np(m(x)), want, rtol=1e-6)
    assert m.compiled.stats["calls"] == 1 and m.compiled.report.kernels


def test_reduce_overhead_replays_pure_functions_without_tracing():
    calls = []

    def f(x, w, k):
        calls.append(1)
        return np.tanh(x * w) * k, x.sum(axis=-1)
    cf = nb.compile(f, mode="reduce-overhead", backend="numpy")
    x = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
    w = np.ones(4, np.float32)
    for _ in range(3):
        a, b = cf(x, w, 2.0)
    assert len(calls) == 1 and cf.stats["replays"] == 2
    np.testing.assert_allclose(a, np.tanh(x * w) * 2.0, rtol=1e-6)
    np.testing.assert_allclose(b, x.sum(axis=-1), rtol=1e-6)
    x2 = x + 1                       # new values, same metadata: replayed with the new data
    np.testing.assert_allclose(cf(x2, w, 2.0)[0], np.tanh(x2 * w) * 2.0, rtol=1e-6)
    cf(x, w, 3.0)                    # a different scalar re-traces
    cf(x[:4], w, 2.0)                # a different shape re-traces
    assert len(calls) == 3


def test_reduce_overhead_reads_parameters_current_values():
    w = nb.ones(4)
    cf = nb.compile(lambda x: x * w, mode="reduce-overhead", backend="numpy")
    x = nb.ones(4)
    cf(x)
    with nb.no_grad():
        w.copy_(nb.full((4,), 5.0))
    np.testing.assert_allclose(_np(cf(x)), 5.0)


@pytest.mark.parametrize("opt,kw", [("SGD", {"lr": 0.05, "momentum": 0.9}),
                                    ("AdamW", {"lr": 1e-2, "weight_decay": 0.1})])
def test_compiled_optimizer_steps_match_eager_exactly(opt, kw):
    """Optimizer state made inside the trace (momentum buffers) and in-place updates of
    concrete parameters (weight decay) must behave exactly as in eager mode."""
    from nbaccel import nn
    import nbaccel.nn.functional as F
    X = nb.linspace(-3, 3, 64, dtype=nb.float64).reshape(-1, 1)
    Y = nb.sin(X)

    def make():
        nb.manual_seed(0)
        m = nn.Sequential(nn.Linear(1, 16), nn.GELU(), nn.Linear(16, 1)).to(nb.float64)
        return m, getattr(nb.optim, opt)(m.parameters(), **kw)

    def step_of(m, o):
        def step(x, y):
            loss = F.mse_loss(m(x), y)
            o.zero_grad()
            loss.backward()
            o.step()
            return loss
        return step
    (m1, o1), (m2, o2) = make(), make()
    eager, comp = step_of(m1, o1), nb.compile(step_of(m2, o2), backend="numpy")
    for _ in range(4):
        np.testing.assert_allclose(float(comp(X, Y)), float(eager(X, Y)), rtol=1e-12)
    for p, q in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_allclose(_np(q), _np(p), rtol=1e-12, atol=1e-14)
    assert comp.stats["compiles"] <= 2     # AdamW's first step differs (state is created)


@pytest.mark.parametrize("backend", BACKENDS)
def test_infinite_and_nan_constants(backend):
    x = nb.tensor([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]])

    def f(x):
        masked = nb.where(x > 0, x, float("-inf"))
        return masked.softmax(-1), x * float("inf"), nb.maximum(x, float("nan")), (x + float("-inf")).amax()
    check_against_eager(f, x, backend=backend)


def _write_through_root_after_break(x):
    y = x * 2
    v = y[1:]
    np.asarray(y)          # a graph break realizes y and v
    y[2] = 100.0           # NumPy: v sees this write (it shares y's memory)
    return v + 0


def _view_made_after_break(x):
    y = x * 2
    np.asarray(y)
    v = y[1:]              # a view of the realized y
    y[2] = 100.0
    return v + 0


def _view_of_view_after_break(x):
    y = x * 2
    v = y[1:]
    np.asarray(y)
    w = v[1:]              # its root is y, through v
    v[1] = -5.0
    return w + 0, y + 0


@pytest.mark.parametrize("fn", [_write_through_root_after_break, _view_made_after_break,
                                _view_of_view_after_break])
def test_views_keep_sharing_memory_across_a_graph_break(fn):
    x = np.arange(5.0)
    want = fn(x.copy())
    got = nb.compile(fn, backend="numpy")(x.copy())
    want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
    for w, g in zip(want, got):
        np.testing.assert_array_equal(np.asarray(g), w)


def test_numpy_tier_writes_a_stored_value_straight_into_the_output():
    """The last op of a stored value writes the output's chunk (no chunk buffer + np.copyto);
    a value that later ops still read keeps its buffer."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((300, 70)).astype(np.float32)
    f = nb.compile(lambda t: ((t - t.mean(0)) / t.std(0), t * 2, (t * 2).sum(0)), backend="numpy")
    a, b, c = f(nb.tensor(x))
    np.testing.assert_allclose(a.numpy(), (x - x.mean(0)) / x.std(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b.numpy(), x * 2, rtol=1e-6)
    np.testing.assert_allclose(c.numpy(), (x * 2).sum(0), rtol=1e-4, atol=1e-4)
    code = f.report.code
    assert "out=w" in code, code


def test_numpy_tier_direct_store_matches_whole_buffer_names():
    """out=t0 must not match out=t03 (regression: a llama step's kernel wrote w03)."""
    from nbaccel.compiler.codegen import numpy as C
    r = object.__new__(C._Renderer)
    r.temps = [("t0", (4,), "np.dtype('<f4')"), ("t03", (4,), "np.dtype('<f4')")]
    r.stored = {"w0": ((4,), "np.dtype('<f4')")}
    r.body = ["np.exp(v0, out=t03, casting='unsafe')", "np.copyto(w0, t0, casting='unsafe')"]
    before = list(r.body)
    r._store_directly()
    assert r.body == before
    r.body = ["np.exp(v0, out=t0, casting='unsafe')", "np.copyto(w0, t0, casting='unsafe')"]
    r._store_directly()
    assert r.body == ["np.exp(v0, out=w0, casting='unsafe')"]


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_a_python_loop_fused_hundreds_of_levels_deep_with_reductions(backend, monkeypatch):
    """A loop of 400 steps fuses into kernels whose expressions nest hundreds of levels deep;
    the reduction passes walked them recursively (a RecursionError, and the safety net ran the
    cell plainly). They walk without recursion now."""
    def f(x):
        acc = x.copy()
        for i in range(400):
            acc = acc * 0.5 + x[i % 8]
        return acc, acc.sum()

    def g(x):
        acc = x.copy()
        for i in range(400):
            acc = acc * 0.5 + x[i % 8]
        return (acc * acc).mean(), acc.max()
    monkeypatch.setitem(nb.config, "strict", True)      # a compile failure raises, never hides
    check_against_eager(f, np.linspace(0, 1, 8), backend=backend)
    check_against_eager(g, np.linspace(0, 1, 8), backend=backend)
