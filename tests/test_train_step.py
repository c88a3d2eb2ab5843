"""mode="reduce-overhead" on training steps: one traced step replayed as one program
(nbaccel/compiler/replay/train_step.py). Every test compares against the same step run eagerly."""
import numpy as np
import pytest

import nbaccel as nb
import nbaccel.nn.functional as F
from nbaccel import nn


@pytest.fixture(autouse=True)
def _compiled_calls_only(monkeypatch):
    """These tests are about replaying the step: every call takes the compiled path (whether a
    call runs the plain step instead is the decision's business: tests/test_function_decisions.py)."""
    monkeypatch.setitem(nb.config, "decide_functions", False)


def _data(seed=0, n=16, d_in=8, d_out=4):
    rng = np.random.default_rng(seed)
    return (nb.asarray(rng.standard_normal((n, d_in), dtype=np.float32)),
            nb.asarray(rng.standard_normal((n, d_out), dtype=np.float32)))


def _pair(opt_name="SGD", seed=0, **opt_kw):
    """Two identical (model, optimizer, step) triples: one to run eagerly, one to compile."""
    out = []
    for _ in range(2):
        nb.manual_seed(seed)
        model = nn.Sequential(nn.Linear(8, 12), nn.ReLU(), nn.Linear(12, 4))
        opt = getattr(nb.optim, opt_name)(model.parameters(), **opt_kw)
        calls = []

        def step(x, y, model=model, opt=opt, calls=calls):
            calls.append(1)
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            return loss
        out.append((model, opt, step, calls))
    return out


def _same(m1, m2, exact=True):
    for (n, a), (_, b) in zip(m1.named_parameters(), m2.named_parameters()):
        if exact:
            np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=n)
        else:
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6, err_msg=n)


@pytest.mark.parametrize("opt_name,kw", [
    ("SGD", {"lr": 0.05}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.01}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True}),
    ("Adam", {"lr": 1e-2}),
    ("AdamW", {"lr": 1e-2, "weight_decay": 0.1}),
    ("Adam", {"lr": 1e-2, "amsgrad": True, "weight_decay": 0.01}),
])
def test_replayed_steps_equal_eager_exactly(opt_name, kw):
    (m1, o1, eager, _), (m2, o2, step, calls) = _pair(opt_name, **kw)
    cf = nb.compile(step, mode="reduce-overhead", backend="numpy")
    x, y = _data()
    for i in range(6):
        l1, l2 = eager(x, y), cf(x, y)
        np.testing.assert_array_equal(np.asarray(l1.numpy()), np.asarray(l2.numpy()), err_msg=f"step {i}")
        _same(m1, m2)
        for p1, p2 in zip(m1.parameters(), m2.parameters()):
            np.testing.assert_array_equal(p1.grad.numpy(), p2.grad.numpy())
    # the first step makes grads (and optimizer state), the second is recorded, the rest replay
    assert cf.stats["replays"] == 4 and len(calls) == 2
    for st1, st2 in zip(o1.state.values(), o2.state.values()):
        for k in st1:
            np.testing.assert_array_equal(st1[k].numpy(), st2[k].numpy(), err_msg=k)


def test_learning_rate_change_is_used_without_retracing():
    (m1, o1, eager, _), (m2, o2, step, calls) = _pair("SGD", lr=0.1, momentum=0.5)
    cf = nb.compile(step, mode="reduce-overhead", backend="numpy")
    x, y = _data()
    for lr in (0.1, 0.1, 0.1, 0.01, 0.0, 0.3):
        for o in (o1, o2):
            o.param_groups[0]["lr"] = lr
        eager(x, y), cf(x, y)
        _same(m1, m2)
    assert len(calls) == 2 and cf.stats["replays"] == 4
    w = m2[0].weight.numpy().copy()
    o2.param_groups[0]["lr"] = 0.0         # lr 0: a replayed step must leave weights alone
    cf(x, y)
    np.testing.assert_array_equal(m2[0].weight.numpy(), w)


def test_branching_hyperparameter_change_retraces():
    (m1, o1, eager, _), (m2, o2, step, calls) = _pair("SGD", lr=0.1)
    cf = nb.compile(step, mode="reduce-overhead", backend="numpy")
    x, y = _data()
    for i in range(7):
        if i == 3:                           # momentum 0 -> 0.9 takes the `if momentum:` branch
            for o in (o1, o2):
                o.param_groups[0]["momentum"] = 0.9
        eager(x, y), cf(x, y)
        _same(m1, m2)
    assert len(calls) > 2


def test_hyperparameter_read_by_the_step_itself_is_guarded_by_value():
    models = []
    for _ in range(2):
        nb.manual_seed(1)
        model = nn.Linear(8, 4)
        opt = nb.optim.SGD(model.parameters(), lr=0.1)
        models.append((model, opt))

    def make(model, opt):
        def step(x, y):
            opt.zero_grad()
            # the lr is read by user code: a Python constant inside the graph
            loss = F.mse_loss(model(x), y) * opt.param_groups[0]["lr"]
            loss.backward()
            opt.step()
            return loss
        return step
    eager = make(*models[0])
    cf = nb.compile(make(*models[1]), mode="reduce-overhead", backend="numpy")
    x, y = _data()
    for lr in (0.1, 0.1, 0.1, 0.5, 0.5):
        for _, o in models:
            o.param_groups[0]["lr"] = lr
        l1, l2 = eager(x, y), cf(x, y)
        np.testing.assert_array_equal(l1.numpy(), l2.numpy())
        _same(models[0][0], models[1][0])


def test_parameter_written_outside_the_step_is_seen():
    (m1, _, eager, _), (m2, _, step, calls) = _pair("SGD", lr=0.1, momentum=0.9)
    cf = nb.compile(step, mode="reduce-overhead", backend="numpy")
    x, y = _data()
    for i in range(6):
        if i == 3:
            for m in (m1, m2):
                with nb.no_grad():
                    m[0].weight.mul_(0.5)       # in place, outside the step
        v_before = m2[0].weight._version[0]
        eager(x, y), cf(x, y)
        _same(m1, m2)
        assert m2[0].weight._version[0] > v_before   # replayed writes bump version counters
    assert cf.stats["replays"] == 4


def test_parameter_replaced_by_a_new_parameter_is_seen():
    (m1, _, eager, _), (m2, _, step, calls) = _pair("SGD", lr=0.1)
    cf = nb.compile(step, mode="reduce-overhead", backend="numpy")
    x, y = _data()
    for i in range(6):
        if i == 3:
            w = np.full((4, 12), 0.25, np.float32)
            m1[2].weight = nn.Parameter(nb.asarray(w.copy()))
            m2[2].weight = nn.Parameter(nb.asarray(w.copy()))
        l1, l2 = eager(x, y), cf(x, y)
        np.testing.assert_array_equal(l1.numpy(), l2.numpy(), err_msg=f"step {i}")
        _same(m1, m2)
    assert len(calls) >= 3                    # the new identity re-traced


@pytest.mark.parametrize("zero", ["none", "zeros", "never"])
def test_gradient_handling_matches_eager(zero):
    models = []
    for _ in range(2):
        nb.manual_seed(2)
        model = nn.Linear(8, 4)
        models.append((model, nb.optim.SGD(model.parameters(), lr=0.05)))

    def make(model, opt):
        def step(x, y):
            if zero == "none":
                opt.zero_grad()
            elif zero == "zeros":
                opt.zero_grad(set_to_none=False)
            loss = F.mse_loss(model(x), y)        # "never": gradients accumulate
            loss.backward()
            opt.step()
            return loss
        return step
    eager = make(*models[0])
    cf = nb.compile(make(*models[1]), mode="reduce-overhead", backend="numpy")
    x, y = _data()
    for i in range(6):
        l1, l2 = eager(x, y), cf(x, y)
        np.testing.assert_array_equal(l1.numpy(), l2.numpy(), err_msg=f"step {i}")
        _same(models[0][0], models[1][0])
        for p1, p2 in zip(models[0][0].parameters(), models[1][0].parameters()):
            np.testing.assert_array_equal(p1.grad.numpy(), p2.grad.numpy())
    assert cf.stats.get("replays", 0) >= 3


def test_grad_set_to_none_after_the_step_stays_none():
    (m1, o1, _, _), _ = _pair("SGD", lr=0.1)

    def step(x, y):
        loss = F.mse_loss(m1(x), y)
        loss.backward()
        o1.step()
        o1.zero_grad()
        return loss
    cf = nb.compile(step, mode="reduce-overhead", backend="numpy")
    x, y = _data()
    for _ in range(4):
        cf(x, y)
        assert all(p.grad is None for p in m1.parameters())
    assert cf.stats["replays"] >= 2


def test_eval_mode_and_no_grad_are_part_of_the_guard():
    (m1, o1, eager, _), (m2, o2, step, calls) = _pair("SGD", lr=0.1)
    cf = nb.compile(step, mode="reduce-overhead", backend="numpy")
    x, y = _data()
    for _ in range(3):
        eager(x, y), cf(x, y)
    n = len(calls)
    m1.eval(), m2.eval()
    eager(x, y), cf(x, y)
    assert len(calls) == n + 1
    _same(m1, m2)


def test_step_with_random_mask_is_never_replayed():
    nb.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 12), nn.Dropout(0.5), nn.Linear(12, 4))
    opt = nb.optim.SGD(model.parameters(), lr=0.1)
    calls = []

    def step(x, y):
        calls.append(1)
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss
    cf = nb.compile(step, mode="reduce-overhead", backend="numpy")
    x, y = _data()
    for _ in range(4):
        cf(x, y)
    assert len(calls) == 4 and not cf.stats.get("replays")


def test_numpy_inputs_and_tuple_results():
    (m1, o1, _, _), (m2, o2, _, _) = _pair("Adam", lr=1e-2)

    def make(m, o):
        def step(x, y):
            o.zero_grad()
            out = m(x)
            loss = F.mse_loss(out, y)
            loss.backward()
            o.step()
            return loss, out.detach().sum(), "ok"
        return step
    eager, cf = make(m1, o1), nb.compile(make(m2, o2), mode="reduce-overhead", backend="numpy")
    x, y = (a.numpy() for a in _data())
    for _ in range(4):
        a, b = eager(nb.asarray(x), nb.asarray(y)), cf(x, y)
        assert b[2] == "ok" and isinstance(b[0], (np.ndarray, np.generic))
        np.testing.assert_array_equal(np.asarray(a[0].numpy()), b[0])
        np.testing.assert_array_equal(np.asarray(a[1].numpy()), b[1])
    assert cf.stats["replays"] == 2


def test_replayed_program_fuses_the_optimizer_update():
    """Structure: the whole step is one program; the momentum-SGD update of all parameters is
    one kernel per parameter shape class (two weights, two biases: two kernels); no transposed
    copy is recomputed for BLAS (5 matmuls, 5 fused kernels in all)."""
    nb.manual_seed(3)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
    opt = nb.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss
    cf = nb.compile(step, mode="reduce-overhead", backend="numpy")
    x, y = _data(d_out=8)
    for _ in range(3):
        cf(x, y)
    (rp,) = cf._replays.values()
    kernels = [k for k in rp.prog.kernels() if k.get("ranges")]
    externs = [k for k in rp.prog.kernels() if not k.get("ranges")]
    assert [k["ops"] for k in externs] == [["matmul"]] * 5
    updates = [k for k in kernels if k["ranges"] in ("(8, 8)", "(8)")]
    assert sorted(k["ranges"] for k in updates) == ["(8)", "(8, 8)"], [k["name"] for k in kernels]
    assert len(kernels) == 5, [k["name"] for k in kernels]


def test_default_mode_learning_rate_change_does_not_recompile():
    (m1, o1, eager, _), (m2, o2, step, _) = _pair("SGD", lr=0.1)
    cf = nb.compile(step, backend="numpy")
    x, y = _data()
    for lr in (0.1, 0.1, 0.05, 0.01):
        for o in (o1, o2):
            o.param_groups[0]["lr"] = lr
        eager(x, y), cf(x, y)
        _same(m1, m2)
    assert cf.stats["recompiles"] == 0


@pytest.mark.parametrize("opt_name,kw", [("SGD", {"lr": 0.1, "momentum": 0.9, "maximize": True}),
                                         ("Adam", {"lr": 1e-2, "weight_decay": 0.1}),
                                         ("AdamW", {"lr": 1e-2, "amsgrad": True})])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_eager_array_path_equals_the_op_path(opt_name, kw, dtype):
    """The eager optimizers update float32/float64 parameters on the arrays, in place; a traced
    step (and float16 parameters eagerly) take the op path. Both round the same."""
    ps = []
    for _ in range(2):
        rng = np.random.default_rng(4)
        w = nn.Parameter(nb.asarray(rng.standard_normal((5, 3)).astype(dtype)))
        ps.append((w, getattr(nb.optim, opt_name)([w], **kw)))
    (w1, o1), (w2, o2) = ps
    cf = nb.compile(lambda: o2.step(), backend="numpy")
    for i in range(4):
        g = nb.asarray(np.random.default_rng(i).standard_normal((5, 3)).astype(dtype))
        w1.grad, w2.grad = g, g.clone()
        v = w1._version[0]
        o1.step()
        cf()
        assert w1._version[0] > v
        if dtype == "float16":   # (compiled float16 kernels may compute in float32)
            np.testing.assert_allclose(w1.numpy(), w2.numpy(), rtol=2e-2, atol=2e-3)
        else:
            np.testing.assert_array_equal(w1.numpy(), w2.numpy(), err_msg=f"step {i}")


def test_update_kernels_write_into_the_parameters():
    """The replayed program's update kernels write the new values straight into the
    parameter and momentum buffers (no copy after the program), and stay exact."""
    (m1, o1, eager, _), (m2, o2, step, _) = _pair("SGD", lr=0.1, momentum=0.9)
    cf = nb.compile(step, mode="reduce-overhead", backend="numpy")
    x, y = _data()
    bufs = [p._data for p in m2.parameters()]
    for _ in range(5):
        eager(x, y), cf(x, y)
        _same(m1, m2)
    (rp,) = cf._replays.values()
    # the 4 parameters (a momentum buffer is re-read by the parameter's store after its own
    # store in the same kernel, so it is copied instead)
    placed = {id(a[1]) for a in rp.prog.destinations.values()}
    assert {id(p) for p in m2.parameters()} <= placed
    assert all(p._data is b for p, b in zip(m2.parameters(), bufs))


def test_numba_tier_replay_matches_eager():
    """The replay on the numba tier (compiled synchronously with backend="numba"): the same
    values as eager within float32 rounding, parameters updated in their own buffers."""
    pytest.importorskip("numba")
    (m1, _, eager, _), (m2, _, step, calls) = _pair("SGD", lr=0.1, momentum=0.9)
    cf = nb.compile(step, mode="reduce-overhead", backend="numba")
    x, y = _data()
    bufs = [p._data for p in m2.parameters()]
    for _ in range(5):
        l1, l2 = eager(x, y), cf(x, y)
        np.testing.assert_allclose(l1.numpy(), l2.numpy(), rtol=1e-5)
        _same(m1, m2, exact=False)
    (rp,) = cf._replays.values()
    assert rp.prog.tier() == "numba" and len(calls) == 2
    assert all(p._data is b for p, b in zip(m2.parameters(), bufs))


def test_zero_grad_outside_the_step_still_replays():
    (m1, o1, _, _), (m2, o2, _, _) = _pair("SGD", lr=0.1, momentum=0.9)
    calls = []

    def make(m, o, log):
        def step(x, y):
            log.append(1)
            loss = F.mse_loss(m(x), y)
            loss.backward()
            o.step()
            return loss
        return step
    eager, cf = make(m1, o1, []), nb.compile(make(m2, o2, calls), mode="reduce-overhead", backend="numpy")
    x, y = _data()
    for _ in range(6):
        o1.zero_grad(), o2.zero_grad()
        l1, l2 = eager(x, y), cf(x, y)
        np.testing.assert_array_equal(l1.numpy(), l2.numpy())
        _same(m1, m2)
    # call 1 makes the momentum buffers; call 2 (grads None at entry, as every later call) records
    assert len(calls) == 2 and cf.stats["replays"] == 4


def test_in_place_updates_of_arguments_replay_like_eager():
    calls = []

    def f(x, y):
        calls.append(1)
        x += 1
        y *= 2
        return x * 2, y
    cf = nb.compile(f, mode="reduce-overhead", backend="numpy")
    x, y = np.zeros(3, np.float32), np.ones(3, np.float32)
    for i in range(4):
        a, b = cf(x, y)
        np.testing.assert_array_equal(x, i + 1)
        np.testing.assert_array_equal(a, 2 * (i + 1))
        assert b is y and float(y[0]) == 2 ** (i + 1)    # an argument updated in place is returned itself
    assert len(calls) == 1
    t = nb.zeros(3)
    inc = nb.compile(lambda t: t.add_(1), mode="reduce-overhead", backend="numpy")
    for i in range(3):
        v = t._version[0]
        assert inc(t) is t and t._version[0] == v + 1
    np.testing.assert_array_equal(t.numpy(), 3)


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_state_made_inside_a_traced_step_is_one_array_per_parameter(mode):
    """Adam's per-parameter step counts are made inside the first (traced) step as equal
    `zeros(())` values, which the compiler merges: each parameter still gets its own array, so the
    same step run eagerly afterwards counts each once (it counted 4x: a silent wrong update)."""
    (m1, o1, eager, _), (m2, o2, step, _) = _pair("Adam", lr=1e-2)
    cf = nb.compile(step, mode=mode, backend="numpy")
    x, y = _data()
    np.testing.assert_array_equal(eager(x, y).numpy(), cf(x, y).numpy())
    steps = [st["step"] for st in o2.state.values()]
    assert len({st._data.__array_interface__["data"][0] for st in steps}) == len(steps)
    for i in range(3):                     # the same step, plainly, after the traced one
        np.testing.assert_array_equal(eager(x, y).numpy(), step(x, y).numpy(), err_msg=f"step {i}")
    assert [float(st) for st in steps] == [4.0] * len(steps)
    _same(m1, m2)
