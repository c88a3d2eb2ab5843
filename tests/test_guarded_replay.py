"""Guarded replay (compiler/replay/guarded.py, readset.py): later calls check guards on what the code
read and replay the compiled program; every kind of dependency changed between calls must give
the plain function's result (never stale), and code whose reads cannot be guarded re-traces."""
import types

import numpy as np
import pytest

import nbaccel as nb
from tests.fuzz.check import backend_supported    # sets Triton's interpreter up without a GPU

BACKENDS = ["numpy", "numba", "auto"] + (["triton"] if backend_supported("triton") else [])

SCALE = 2.0
OFFSET = np.float32(1.0)
CFG = {"shift": 0.5}
TABLE = [1.0, 2.0]
W = np.ones((4, 4), np.float32)
WT = nb.ones(4, 4)
cfg = types.SimpleNamespace(scale=3.0)


def helper(t):
    return t * 2


def f_global(x):
    return np.tanh(x) * SCALE + OFFSET


def f_dict(x):
    return x + CFG["shift"]


def f_attr(x):
    return x * cfg.scale


def f_helper(x):
    return helper(x) + 1


def f_list(x):
    return x * max(TABLE)


def f_list_item(x):
    return x * TABLE[0]          # a constant subscript is a chain: guarded by its value


def f_array(x):
    return x @ W


def f_tensor(x):
    return x @ WT


def f_default(x, k=2.0):
    return x * k


def run_calls(cf, x, times=4):
    out = None
    for _ in range(times):
        out = cf(x)
        cf.wait()
    return out


def check(cf, plain, x):
    got = cf(x)
    want = plain(x)
    assert type(got) is type(want)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)


@pytest.fixture(autouse=True)
def _compiled_calls_only(monkeypatch):
    """These tests are about guards and replays: every call takes the compiled path (whether a
    call runs the plain function instead is the function's decision, tested below and in
    tests/test_decision.py)."""
    monkeypatch.setitem(nb.config, "decide_functions", False)


@pytest.fixture
def x():
    return np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_global_scalar_change_retraces_and_names_the_guard(backend, x):
    global SCALE
    cf = nb.compile(f_global, backend=backend)
    run_calls(cf, x)
    assert cf.stats["replays"] >= 2, cf.report.replay
    old = SCALE
    try:
        SCALE = 5.0
        check(cf, f_global, x)
        assert "SCALE" in cf.report.replay["last_guard_failure"]
        assert "5.0" in cf.report.replay["last_guard_failure"]
        check(cf, f_global, x)
    finally:
        SCALE = old
    check(cf, f_global, x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_closure_cell_change(backend, x):
    k = 2.0

    def f(t):
        return t * k + 1

    cf = nb.compile(f, backend=backend)
    run_calls(cf, x)
    assert cf.stats.get("replays", 0) >= 2
    k = 7.0     # noqa: F841 - read by f through its closure cell
    check(cf, f, x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_attribute_and_constant_subscript_change(backend, x):
    cf_attr, cf_dict = nb.compile(f_attr, backend=backend), nb.compile(f_dict, backend=backend)
    run_calls(cf_attr, x)
    run_calls(cf_dict, x)
    assert cf_attr.stats.get("replays", 0) >= 2 and cf_dict.stats.get("replays", 0) >= 2
    old_s, old_d = cfg.scale, CFG["shift"]
    try:
        cfg.scale, CFG["shift"] = -1.5, 4.0
        check(cf_attr, f_attr, x)
        check(cf_dict, f_dict, x)
        assert "cfg.scale" in cf_attr.report.replay["last_guard_failure"]
    finally:
        cfg.scale, CFG["shift"] = old_s, old_d


@pytest.mark.parametrize("backend", BACKENDS)
def test_redefined_helper_function(backend, x):
    global helper
    cf = nb.compile(f_helper, backend=backend)
    run_calls(cf, x)
    assert cf.stats.get("replays", 0) >= 2
    old = helper
    try:
        def helper(t):      # noqa: F811 - the notebook redefines the helper
            return t * 10
        check(cf, f_helper, x)
    finally:
        helper = old


@pytest.mark.parametrize("backend", BACKENDS)
def test_method_of_a_notebook_class(backend, x):
    class Scaler:
        def __init__(self, s):
            self.s = s

        def apply(self, t):
            return t * self.s

    sc = Scaler(2.0)

    def f(t):
        return sc.apply(t) + 1

    cf = nb.compile(f, backend=backend)
    run_calls(cf, x)
    assert cf.stats.get("replays", 0) >= 2, cf.report.replay
    sc.s = 9.0                               # an attribute the method reads through self
    check(cf, f, x)
    Scaler.apply = lambda self, t: t - self.s   # the method itself replaced
    check(cf, f, x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_global_array_in_place_and_rebound(backend, x):
    global W
    cf = nb.compile(f_array, backend=backend)
    run_calls(cf, x)
    assert cf.stats.get("replays", 0) >= 2
    old = W
    try:
        W[0, 0] = 5.0                        # in place: the replay reads the buffer
        check(cf, f_array, x)
        W = np.full((4, 4), 3.0, np.float32)    # rebound: the identity guard fails
        check(cf, f_array, x)
        W = np.ones((4, 2), np.float32)          # another shape
        check(cf, f_array, x)
    finally:
        W = old
        W[0, 0] = 1.0


def test_global_tensor_in_place(x):
    cf = nb.compile(f_tensor, backend="numpy")
    xt = nb.asarray(x)
    for _ in range(4):
        cf(xt)
    assert cf.stats.get("replays", 0) >= 2
    with nb.no_grad():
        WT.mul_(3.0)
    try:
        np.testing.assert_allclose(cf(xt).numpy(), f_tensor(xt).numpy(), rtol=1e-6)
    finally:
        with nb.no_grad():
            WT.div_(3.0)


def test_default_argument_change(x):
    cf = nb.compile(f_default, backend="numpy")
    run_calls(cf, x)
    assert cf.stats.get("replays", 0) >= 2
    f_default.__defaults__ = (4.0,)
    try:
        check(cf, f_default, x)
    finally:
        f_default.__defaults__ = (2.0,)


def test_list_read_retraces_every_call_and_says_why(x):
    cf = nb.compile(f_list, backend="numpy")
    run_calls(cf, x)
    assert cf.stats.get("replays", 0) == 0
    assert "TABLE" in cf.report.replay["reason"] and "list" in cf.report.replay["reason"]
    item = nb.compile(f_list_item, backend="numpy")
    run_calls(item, x)
    assert item.stats.get("replays", 0) >= 2
    TABLE[0] = 6.0
    try:
        check(cf, f_list, x)
        check(item, f_list_item, x)
    finally:
        TABLE[0] = 1.0


def test_side_effects_and_random_draws_are_never_replayed(x, capsys):
    log = []

    def printing(t):
        print("called")
        return t + 1

    def appending(t):
        log.append(1)
        return t + 1

    def drawing(t):
        return t + nb.rand(4, 4).numpy()

    for fn in (printing, appending):
        cf = nb.compile(fn, backend="numpy")
        run_calls(cf, x)
        assert cf.stats.get("replays", 0) == 0
        assert "re-traces" in cf.report.replay["reason"]
    assert capsys.readouterr().out.count("called") == 4
    assert len(log) == 4
    cf = nb.compile(drawing, backend="numpy")
    a, b = cf(x), cf(x)
    c = cf(x)
    assert not np.array_equal(b, c) and not np.array_equal(a, b)
    assert "random" in cf.report.replay["reason"]


def test_shapes_dtypes_and_scalars_are_part_of_the_key():
    def f(t, k):
        return t * k

    cf = nb.compile(f, backend="numpy")
    for shape, dtype, k in [((3,), np.float32, 2), ((3,), np.float64, 2), ((5,), np.float32, 2),
                            ((3,), np.float32, 3), ((3,), np.float32, 2.5)] * 3:
        a = np.arange(np.prod(shape), dtype=dtype).reshape(shape)
        got, want = cf(a, k), f(a, k)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want)
    assert cf.stats.get("replays", 0) >= 5
    assert cf.stats["compiles"] <= 5


def test_plain_or_compiled_is_measured_and_the_output_type_is_kept(x, monkeypatch):
    """A tiny function: after the measurement it may run plainly; every call still returns the
    plain function's type and values, and the report's headline is against the plain run."""
    monkeypatch.setitem(nb.config, "decide_functions", True)
    cf = nb.compile(f_global, backend="numpy")
    for _ in range(12):
        check(cf, f_global, x)
    rep = cf.report
    assert rep.baseline == "plain" and rep.plain_seconds is not None
    assert rep.verdict["runs"]["plain"] >= 3 and rep.verdict["choice"] in ("plain", "compiled")
    assert "vs plain" in rep.summary() or rep.speedup_note


def test_nbaccel_functions_on_numpy_inputs_keep_returning_numpy(x, monkeypatch):
    monkeypatch.setitem(nb.config, "decide_functions", True)

    def f(t):
        return nb.tanh(nb.asarray(t)) * 2     # plainly a Tensor; compiled: NumPy in, NumPy out

    cf = nb.compile(f, backend="numpy")
    outs = [cf(x) for _ in range(10)]
    assert {type(o) for o in outs} == {np.ndarray}
    np.testing.assert_allclose(outs[-1], np.tanh(x) * 2, rtol=1e-6)
    assert cf.report.verdict["choice"] == "compiled" and "stays compiled" in cf.report.verdict["why"]


def test_guard_failure_then_replay_again(x):
    global SCALE
    cf = nb.compile(f_global, backend="numpy")
    run_calls(cf, x)
    n = cf.stats["replays"]
    old = SCALE
    try:
        SCALE = 3.0
        run_calls(cf, x)            # one trace, then replays on the new value
        assert cf.stats["replays"] >= n + 2
        check(cf, f_global, x)
    finally:
        SCALE = old


RNG = np.random.default_rng(0)


def test_generators_read_by_the_code_are_never_replayed(x):
    def legacy(t):
        return t + np.random.rand(4, 4)

    def own(t):
        return t + RNG.standard_normal((4, 4))

    for fn in (legacy, own):
        cf = nb.compile(fn, backend="numpy")
        outs = [cf(x) for _ in range(4)]
        assert not any(np.array_equal(outs[i], outs[i + 1]) for i in range(3))
        assert "random" in cf.report.replay["reason"]


def test_an_input_updated_in_place_is_never_replayed():
    def bump(a):
        a += 1
        return a * 2

    cf = nb.compile(bump, backend="numpy")
    a, b = np.zeros(3), np.zeros(3)
    for _ in range(4):
        got, want = cf(a), bump(b)
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(a, b)
    assert cf.stats.get("replays", 0) == 0
    assert "in place" in cf.report.replay["reason"]


def test_a_local_boolean_mask_write_stays_one_replayed_graph():
    def life(Z):
        N = Z[:-2, 1:-1] + Z[2:, 1:-1] + Z[1:-1, :-2] + Z[1:-1, 2:]
        out = np.zeros_like(Z)
        out[1:-1, 1:-1][(N == 2) | (N == 3)] = 1
        return out

    Z = (np.arange(64).reshape(8, 8) % 3 == 0).astype(np.int64)
    cf = nb.compile(life, backend="numpy")
    for _ in range(5):
        np.testing.assert_array_equal(cf(Z), life(Z))
    assert cf.report.graph_breaks == [] and cf.stats.get("replays", 0) >= 3


def test_a_compiled_module_sees_new_parameters_and_modes():
    model = nb.nn.Sequential(nb.nn.Linear(6, 8), nb.nn.Dropout(0.5), nb.nn.Linear(8, 2))
    model.eval()
    cm = nb.compile(model, backend="numpy")
    x = nb.randn(4, 6)
    with nb.no_grad():
        for _ in range(4):
            cm(x)
        assert cm.stats.get("replays", 0) >= 2
        model[0].weight.mul_(2.0)                         # in place: read live
        np.testing.assert_allclose(cm(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-6)
        model[0].weight = nb.nn.Parameter(nb.randn(8, 6))   # rebound: the module guard fails
        np.testing.assert_allclose(cm(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-6)
        assert "module" in cm.report.replay["last_guard_failure"]
        model.train()                                     # dropout now draws: never replayed
        a, b = cm(x).numpy(), cm(x).numpy()
        assert not np.array_equal(a, b)


def test_a_c_method_of_a_global_array_is_guarded_by_its_owner(x):
    global W
    def f(t):
        return t + W.sum()

    cf = nb.compile(f, backend="numpy")
    run_calls(cf, x)
    assert cf.stats.get("replays", 0) >= 2, cf.report.replay
    old = W
    try:
        W = np.full((4, 4), 2.0, np.float32)
        check(cf, f, x)
    finally:
        W = old


def test_a_global_array_used_outside_the_graph_is_guarded_by_its_values(x):
    def f(t):
        return t * np.tanh(W).sum()      # computed from the concrete array: a graph constant

    cf = nb.compile(f, backend="numpy")
    run_calls(cf, x)
    assert cf.stats.get("replays", 0) >= 2, cf.report.replay
    W[1, 1] = -3.0
    try:
        check(cf, f, x)
    finally:
        W[1, 1] = 1.0


def test_a_compiled_helper_called_inside_is_walked(x):
    global SCALE
    inner = nb.compile(lambda t: t * SCALE)

    def outer(t):
        return inner(t) + 1

    cf = nb.compile(outer, backend="numpy")
    run_calls(cf, x)
    assert cf.stats.get("replays", 0) >= 2, cf.report.replay
    old = SCALE
    try:
        SCALE = -4.0
        check(cf, outer, x)
    finally:
        SCALE = old


def test_reduce_overhead_guards_a_pure_functions_reads_too(x):
    global SCALE
    cf = nb.compile(f_global, mode="reduce-overhead", backend="numpy")
    run_calls(cf, x)
    assert cf.stats.get("replays", 0) >= 2
    old = SCALE
    try:
        SCALE = 7.0
        check(cf, f_global, x)
    finally:
        SCALE = old


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_a_step_that_calls_backward_sets_fresh_gradients_every_call(mode):
    model = nb.nn.Linear(4, 2)

    def step(x, y):
        model.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        return loss

    cf = nb.compile(step, mode=mode, backend="numpy")
    rng = np.random.default_rng(0)
    for _ in range(4):
        x, y = nb.asarray(rng.standard_normal((8, 4))), nb.asarray(rng.standard_normal((8, 2)))
        cf(x, y)
        got = model.weight.grad.numpy().copy()
        step(x, y)
        np.testing.assert_allclose(got, model.weight.grad.numpy(), rtol=1e-5, atol=1e-6)


# ---- %%compile cells replay too: the cell function's other inputs arrive in one object whose
# values are guarded on every run (readset ENV_ARG)

@pytest.fixture
def shell():
    from tests.cells import harness
    sh = harness.get_shell("numpy")
    old = nb.config["cheap_enabled"]
    nb.config["cheap_enabled"] = False      # small test cells would run plainly otherwise
    sh.run_cell("import numpy as np", store_history=False)
    yield sh
    nb.config["cheap_enabled"] = old


def _cell(shell, src, compiled=True):
    res = shell.run_cell(("%%compile\n" if compiled else "") + src, store_history=False)
    assert res.error_in_exec is None, res.error_in_exec
    return shell.user_ns


def test_a_cell_run_again_replays_and_stays_fresh(shell):
    from nbaccel.magics import get_extension
    src = "y = np.tanh(x) * k\nz = y.sum(axis=0)\n"
    shell.user_ns.update(x=np.linspace(0, 1, 12).reshape(3, 4), k=2.0)
    for _ in range(4):
        _cell(shell, src)
    entry, rep = get_extension(shell).last
    assert entry.cf.stats.get("replays", 0) >= 2, rep.replay
    assert type(shell.user_ns["z"]) is np.ndarray
    for k, x in ((3.0, shell.user_ns["x"]), (3.0, np.ones((3, 4)))):   # a scalar, then the array
        shell.user_ns.update(k=k, x=x)
        got = _cell(shell, src)["z"].copy()
        want = _cell(shell, src, compiled=False)["z"]
        np.testing.assert_allclose(got, want)


def test_a_cell_that_prints_runs_its_print_every_time(shell, capsys):
    shell.user_ns.update(x=np.ones(3))
    for _ in range(3):
        _cell(shell, "y = x + 1\nprint('shown')\n")
    assert capsys.readouterr().out.count("shown") == 3
