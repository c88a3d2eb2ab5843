"""A training step under ``nb.compile`` in the default mode: traced once its optimizer state
exists, then replayed on guards (compiler/replay/guarded.py with train_step.py's StepReplay),
never re-traced on every call. Every test runs the same step eagerly beside it and compares
the loss, the parameters, their gradients, the optimizer's state and BatchNorm's running
statistics exactly (backend="numpy": the replay runs the ops eager runs)."""
import types

import numpy as np
import pytest

import nbaccel as nb
import nbaccel.nn.functional as F
from nbaccel import nn
from nbaccel.ops import kernel_modules

SCALE = 1.0


@pytest.fixture(autouse=True)
def _compiled_calls_only(monkeypatch):
    """Every call takes the compiled path (the plain-or-compiled decision is tested last), and
    the eager fused kernels are loaded first: an eager op runs NumPy while they load, and the
    compiled step calls the kernel (one rounding apart, at random)."""
    monkeypatch.setitem(nb.config, "decide_functions", False)
    kernel_modules.load_now("fused")


def _mlp():
    return nn.Sequential(nn.Linear(8, 12), nn.ReLU(), nn.Linear(12, 3))


def _cnn():
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))


OPTS = {"SGD": lambda ps: nb.optim.SGD(ps, lr=0.05, momentum=0.9),
        "Adam": lambda ps: nb.optim.Adam(ps, lr=1e-2),
        "AdamW": lambda ps: nb.optim.AdamW(ps, lr=1e-2, weight_decay=0.1)}


def _pair(make_model, opt="Adam"):
    """Two identical (model, optimizer, step): one run eagerly, one compiled."""
    out = []
    for _ in range(2):
        nb.manual_seed(0)
        model = make_model()
        o = OPTS[opt](model.parameters())

        def step(x, y, model=model, o=o):
            o.zero_grad()
            loss = F.cross_entropy(model(x), y) * SCALE
            loss.backward()
            o.step()
            return loss
        out.append((model, o, step))
    return out


def _batch(shape, seed=0):
    rng = np.random.default_rng(seed)
    return nb.tensor(rng.standard_normal(shape).astype(np.float32)), nb.tensor(rng.integers(0, 3, shape[0]))


def _same(a, b):
    (m1, o1), (m2, o2) = a, b
    for (n, t1), (_, t2) in zip(m1.state_dict().items(), m2.state_dict().items()):
        np.testing.assert_array_equal(np.asarray(t1.numpy()), np.asarray(t2.numpy()), err_msg=n)
    for p1, p2 in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_array_equal(p1.grad.numpy(), p2.grad.numpy())
    for s1, s2 in zip(o1.state.values(), o2.state.values()):
        for k in s1:
            np.testing.assert_array_equal(s1[k].numpy(), s2[k].numpy(), err_msg=k)


def _run(eager, cf, x, y, pair, calls):
    for i in range(calls):
        l1, l2 = eager(x, y), cf(x, y)
        assert type(l1) is type(l2)
        np.testing.assert_array_equal(l1.numpy(), l2.numpy(), err_msg=f"call {i}")
        _same(*pair)


@pytest.mark.parametrize("opt", sorted(OPTS))
def test_an_mlp_step_is_replayed_not_retraced(opt):
    (m1, o1, eager), (m2, o2, step) = _pair(_mlp, opt)
    cf = nb.compile(step, backend="numpy")
    x, y = _batch((16, 8))
    _run(eager, cf, x, y, ((m1, o1), (m2, o2)), 8)
    # the first call creates the optimizer's state (traced, not recorded); the second is
    # recorded; the other six replay
    assert cf.stats["replays"] == 6
    assert cf.report.replay["state"] == "replayed"


def test_a_cnn_step_with_batchnorm_is_replayed():
    (m1, o1, eager), (m2, o2, step) = _pair(_cnn, "Adam")
    cf = nb.compile(step, backend="numpy")
    x, y = _batch((6, 1, 8, 8))
    _run(eager, cf, x, y, ((m1, o1), (m2, o2)), 6)
    assert cf.stats["replays"] == 4        # (conv's kernels are nbaccel's code, not the user's)
    assert int(m2[1].num_batches_tracked.item()) == 6


def test_new_batches_a_learning_rate_and_a_mode_change():
    (m1, o1, eager), (m2, o2, step) = _pair(_cnn, "SGD")
    cf = nb.compile(step, backend="numpy")
    pair = ((m1, o1), (m2, o2))
    for i in range(4):
        _run(eager, cf, *_batch((6, 1, 8, 8), seed=i), pair, 1)
    assert cf.stats["replays"] == 2
    for o in (o1, o2):                     # a graph input: used at once, no new trace
        o.param_groups[0]["lr"] = 0.01
    _run(eager, cf, *_batch((6, 1, 8, 8), seed=9), pair, 2)
    assert cf.stats["replays"] == 4
    for m in (m1, m2):                     # BatchNorm now uses its running statistics
        m.eval()
    _run(eager, cf, *_batch((6, 1, 8, 8), seed=10), pair, 3)
    assert "module" in cf.report.replay["last_guard_failure"]


def test_a_global_the_step_reads_is_guarded():
    global SCALE
    (m1, o1, eager), (m2, o2, step) = _pair(_mlp, "SGD")
    cf = nb.compile(step, backend="numpy")
    x, y = _batch((16, 8))
    pair = ((m1, o1), (m2, o2))
    _run(eager, cf, x, y, pair, 4)
    try:
        SCALE = 3.0
        _run(eager, cf, x, y, pair, 3)
    finally:
        SCALE = 1.0
    assert "SCALE" in cf.report.replay["last_guard_failure"]
    assert cf.stats["replays"] == 2 + 2    # the guard's failure traces once, then replays again


def test_a_step_with_a_side_effect_runs_it_every_call():
    model = _mlp()
    o = nb.optim.SGD(model.parameters(), lr=0.1)
    losses = []

    def step(x, y):
        o.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        o.step()
        losses.append(loss)
        return loss

    cf = nb.compile(step, backend="numpy")
    x, y = _batch((16, 8))
    for _ in range(5):
        cf(x, y)
    assert len(losses) == 5 and cf.stats.get("replays", 0) == 0
    assert "append" in cf.report.replay["reason"]


def test_a_module_reached_through_an_attribute_chain_is_not_replayed():
    """``holder.model``: the snapshot that guards the modules' state does not reach it (only the
    optimizer's parameters), so a replay would miss a parameter rebound on the module."""
    nets = []
    for _ in range(2):
        nb.manual_seed(0)
        model = _mlp()
        nets.append((model, nb.optim.SGD(model.parameters(), lr=0.1), types.SimpleNamespace(model=model)))

    def make(holder, o):
        def step(x, y):
            o.zero_grad()
            loss = F.cross_entropy(holder.model(x), y)
            loss.backward()
            o.step()
            return loss
        return step
    eager, cf = make(nets[0][2], nets[0][1]), nb.compile(make(nets[1][2], nets[1][1]), backend="numpy")
    pair = ((nets[0][0], nets[0][1]), (nets[1][0], nets[1][1]))
    x, y = _batch((16, 8))
    _run(eager, cf, x, y, pair, 3)
    for m, _, _ in nets:
        nb.manual_seed(1)
        m[2].weight = nn.Parameter(nb.randn(3, 12))
    _run(eager, cf, x, y, pair, 2)
    assert cf.stats.get("replays", 0) == 0
    assert "attribute chain" in cf.report.replay["reason"]


def test_a_closure_tensors_method_is_guarded_with_the_tensor():
    """``target.reshape(-1)`` on a closure tensor: a guard on the tensor, which stays a graph
    input (its new values are read); a new tensor bound to the name traces again."""
    model = _mlp()
    o = nb.optim.SGD(model.parameters(), lr=0.1)
    ref = _mlp()
    ref.load_state_dict(model.state_dict())
    o_ref = nb.optim.SGD(ref.parameters(), lr=0.1)
    box = {"y": _batch((16, 8))[1].reshape(16, 1)}

    def make(model, o, y):
        def step(x):
            o.zero_grad()
            loss = F.cross_entropy(model(x), y.reshape(-1))
            loss.backward()
            o.step()
            return loss
        return step
    y = box["y"]
    cf, eager = nb.compile(make(model, o, y), backend="numpy"), make(ref, o_ref, y)
    x = _batch((16, 8))[0]
    for i in range(5):
        if i == 3:
            with nb.no_grad():
                y.copy_(nb.tensor(np.arange(16).reshape(16, 1) % 3))   # in place: read live
        np.testing.assert_array_equal(cf(x).numpy(), eager(x).numpy())
    assert cf.stats["replays"] == 3


def test_a_step_program_counts_in_pending_and_wait():
    (_, _, _), (_, _, step) = _pair(_mlp, "SGD")
    cf = nb.compile(step, backend="numpy")
    x, y = _batch((16, 8))
    for _ in range(3):
        cf(x, y)
    (entry,) = cf._guarded.entries.values()
    assert entry.replay.prog in cf._replay_programs()


def test_the_decision_times_the_plain_step_and_the_replay(monkeypatch):
    """With the plain-or-compiled decision on, every call is one step (plain or replayed), so
    the values still follow the eager step's exactly, and the verdict compares the two."""
    monkeypatch.setitem(nb.config, "decide_functions", True)
    (m1, o1, eager), (m2, o2, step) = _pair(_mlp, "Adam")
    cf = nb.compile(step, backend="numpy")
    x, y = _batch((16, 8))
    _run(eager, cf, x, y, ((m1, o1), (m2, o2)), 12)
    v = cf.report.verdict
    assert v["choice"] in ("plain", "compiled") and v["plain_seconds"] and v["compiled_seconds"]
    assert cf.stats.get("replays", 0) >= 3


def test_an_inputs_value_read_into_python_is_never_replayed():
    """``x.item()`` on an argument: its value became a constant of the graph; a replay would
    keep the first call's value (it did: 1, 1, 1, ...)."""
    def f(x, y):
        return y * x.item()

    cf = nb.compile(f, backend="numpy")
    y = nb.ones(3)
    for v in (1.0, 2.0, 3.0, 4.0):
        np.testing.assert_array_equal(cf(nb.tensor(v), y).numpy(), f(nb.tensor(v), y).numpy())
    assert cf.stats.get("replays", 0) == 0
    assert "value into Python" in cf.report.replay["reason"]
    ro = nb.compile(f, backend="numpy", mode="reduce-overhead")
    for v in (1.0, 2.0, 3.0, 4.0):
        np.testing.assert_array_equal(ro(nb.tensor(v), y).numpy(), f(nb.tensor(v), y).numpy())


class _Net(nn.Module):
    """A user's module: its ``__init__`` sets attributes, which a step never runs."""

    def __init__(self):
        super().__init__()
        self.body = _mlp()
        self.scale = 2.0

    def forward(self, x):
        return self.body(x) * self.scale


def test_a_users_module_class_is_guarded_on_the_methods_the_step_ran():
    (m1, o1, eager), (m2, o2, step) = _pair(_Net, "AdamW")
    cf = nb.compile(step, backend="numpy")
    x, y = _batch((16, 8))
    pair = ((m1, o1), (m2, o2))
    _run(eager, cf, x, y, pair, 4)
    assert cf.stats["replays"] == 2, cf.report.replay
    for m in (m1, m2):                     # read by forward: guarded by value
        m.scale = 0.5
    _run(eager, cf, x, y, pair, 2)
    assert "scale" in cf.report.replay["last_guard_failure"]


def test_an_entrys_first_replay_is_no_sample_of_the_compiled_side(monkeypatch):
    """Its first replay runs a new program once (kernels load, buffers are made): as a code's
    first plain run, the decision counts it but does not time by it."""
    from nbaccel.compiler.replay.decision import Decision
    monkeypatch.setitem(nb.config, "decide_functions", True)
    seen = []
    real = Decision.record

    def record(self, path, seconds, compile_seconds=0.0, steady=True):
        seen.append((path, steady, cf.stats.get("replays", 0)))
        return real(self, path, seconds, compile_seconds, steady)
    monkeypatch.setattr(Decision, "record", record)
    (_, _, _), (_, _, step) = _pair(_mlp, "SGD")
    cf = nb.compile(step, backend="numpy")
    x, y = _batch((16, 8))
    for _ in range(12):
        cf(x, y)
    replays = [(steady, n) for path, steady, n in seen if path == "compiled" and n >= 1]
    assert replays[0] == (False, 1)                    # the first replay
    assert any(steady for steady, n in replays[1:])    # later ones are samples


def test_an_updates_scalar_factors_are_computed_once_per_kernel_run():
    """Adam's bias corrections (``1 - beta1 ** step`` from 0-d inputs) inside the elementwise
    update kernel: computed before its loop, not once per element (numba tier)."""
    def update(p, m, b, s, lr):
        return p - lr / (1 - b ** s) * m

    cf = nb.compile(update, backend="numba")
    rng = np.random.default_rng(0)
    p, m = (nb.tensor(rng.standard_normal((64, 64)).astype(np.float32)) for _ in range(2))
    b, s, lr = nb.tensor(np.float32(0.9)), nb.tensor(np.float32(3.0)), nb.tensor(np.float32(0.01))
    np.testing.assert_allclose(cf(p, m, b, s, lr).numpy(), update(p, m, b, s, lr).numpy(), rtol=1e-6, atol=1e-7)
    code = cf.report.code
    assert code.index("**") < code.index("for t in range"), code


def test_a_compiled_batchnorm_forward_in_training_mode_updates_its_statistics():
    """No backward, but BatchNorm's running statistics are updated in place: a replay repeats
    the updates (under no_grad); with gradients, the result's history escapes and it traces."""
    def mk():
        nb.manual_seed(0)
        return nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU())
    m1, m2 = mk(), mk()
    cm = nb.compile(m2, backend="numpy")
    rng = np.random.default_rng(0)
    with nb.no_grad():
        for _ in range(5):
            x = nb.tensor(rng.standard_normal((16, 6)).astype(np.float32))
            np.testing.assert_array_equal(m1(x).numpy(), cm(x).numpy())
            for (k, t1), (_, t2) in zip(m1.state_dict().items(), m2.state_dict().items()):
                np.testing.assert_array_equal(t1.numpy(), t2.numpy(), err_msg=k)
    assert cm.stats["replays"] == 4 and int(m2[1].num_batches_tracked.item()) == 5
    x = nb.tensor(rng.standard_normal((16, 6)).astype(np.float32))
    m1(x).sum().backward()
    cm(x).sum().backward()
    np.testing.assert_array_equal(m1[0].weight.grad.numpy(), m2[0].weight.grad.numpy())
    assert "autograd history" in cm.report.replay["reason"]


def test_a_step_over_closure_tensors_returns_what_the_plain_step_returns(monkeypatch):
    """No array argument, data made from NumPy arrays (``nb.tensor(ndarray)``) held by the
    closure: the plain step returns a Tensor, so the compiled one does too (it handed back a
    NumPy scalar, and the decision, seeing other types, never compared the two)."""
    monkeypatch.setitem(nb.config, "decide_functions", True)
    pair = []
    for _ in range(2):
        nb.manual_seed(0)
        model = _mlp()
        o = nb.optim.SGD(model.parameters(), lr=0.1)
        x, y = _batch((16, 8))

        def step(model=model, o=o, x=x, y=y):
            o.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            o.step()
            return loss
        pair.append((model, o, step))
    (m1, o1, eager), (m2, o2, step) = pair
    cf = nb.compile(step, backend="numpy")
    for _ in range(12):
        a, b = eager(), cf()
        assert type(a) is type(b) is nb.Tensor
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        _same((m1, o1), (m2, o2))
    v = cf.report.verdict
    assert v["plain_seconds"] and v["compiled_seconds"], v
