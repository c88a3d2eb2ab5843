"""nb.compile'd functions and training steps under the one decision (compiler/replay/decision.py): calls
are timed against the plain function on the same arguments, the faster one runs, and every call
is what the plain function would do. The timings the decisions depend on are given, not
measured."""
import numpy as np
import pytest

import nbaccel as nb
import nbaccel.nn.functional as F
from nbaccel import nn
from tests.test_train_step import _data, _pair, _same


def _settle(cf, plain, compiled):
    d = cf._last_decision
    while d.choice is None:
        d.record("plain", plain)
        d.record("compiled", compiled)
    return d


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_a_training_step_mixing_plain_and_compiled_runs_equals_eager(mode):
    (m1, o1, eager, _), (m2, o2, step, calls) = _pair("SGD", lr=0.05, momentum=0.9)
    cf = nb.compile(step, mode=mode, backend="numpy")
    x, y = _data()
    for i in range(9):                          # traced, replayed or plain: each is a real step
        l1, l2 = eager(x, y), cf(x, y)
        np.testing.assert_allclose(l1.numpy(), l2.numpy(), rtol=1e-5, atol=1e-6, err_msg=f"step {i}")
        _same(m1, m2, exact=False)
    v = cf.report.verdict
    assert v["runs"]["plain"] >= 3 and v["runs"]["compiled"] >= 3 and v["choice"] in ("plain", "compiled")
    assert cf.report.baseline == "plain" and "plain function" in v["label"] or v["note"]


def test_a_step_measured_slower_compiled_runs_plainly_and_says_why():
    (m1, o1, eager, _), (m2, o2, step, calls) = _pair("Adam", lr=1e-2)
    cf = nb.compile(step, backend="numpy")
    x, y = _data()
    cf(x, y)
    eager(x, y)
    _settle(cf, plain=1e-3, compiled=1.0)       # (the real plain runs below join the median)
    n = len(calls)
    for _ in range(3):
        l1, l2 = eager(x, y), cf(x, y)
        np.testing.assert_allclose(l1.numpy(), l2.numpy(), rtol=1e-5, atol=1e-6)
    assert len(calls) == n + 3                   # the plain step ran each time
    v = cf.report.verdict
    assert v["choice"] == "plain" and "runs plainly" in v["label"] and v["ratio"] < 0.5
    assert "slower than the plain function" in v["headline"]


def test_a_faster_compiled_function_reports_against_the_plain_function():
    def f(a):
        return np.tanh(a) * 2 + 1

    cf = nb.compile(f, backend="numpy")
    a = np.linspace(-1, 1, 64, dtype=np.float32)
    cf(a)
    cf(a)
    _settle(cf, plain=4e-3, compiled=1e-3)
    out = cf(a)
    np.testing.assert_allclose(out, f(a), rtol=1e-6)
    rep = cf.report
    assert rep.verdict["headline"].startswith("4.00× faster than the plain function")
    assert rep.speedup == pytest.approx(4.0) and rep.baseline == "plain"


def test_numpy_inputs_a_layer_refuses_stay_compiled():
    """A training step handed NumPy arrays: compiled, they become tensors; plainly, a layer
    would refuse them (as in PyTorch). The plain step cannot stand in: every call is compiled."""
    (m1, o1, _, _), (m2, o2, _, _) = _pair("SGD", lr=0.05)

    def step(x, y):
        o2.zero_grad()
        loss = F.mse_loss(m2(x), y)
        loss.backward()
        o2.step()
        return loss

    cf = nb.compile(step, backend="numpy")
    x, y = (t.numpy() for t in _data())
    for _ in range(8):
        cf(x, y)
    v = cf.report.verdict
    assert v["choice"] == "compiled" and v["runs"]["plain"] == 0 and "NumPy arrays" in v["why"]


def test_switched_off_every_call_is_compiled(monkeypatch):
    monkeypatch.setitem(nb.config, "decide_functions", False)
    calls = []

    def f(a):
        calls.append(1)
        return a * 2

    cf = nb.compile(f, backend="numpy")
    x = nb.ones(4)
    for _ in range(10):
        cf(x)
    assert cf._last_decision is None and cf.stats["cache_hits"] == 9      # (no plain run timed)
