"""A failure inside the compiler never reaches the user: the graph runs eagerly, the report
says "compiler error → ran eagerly", and nb.config['strict'] raises instead."""
import numpy as np
import pytest

import nbaccel as nb
from nbaccel.compiler.replay import entries
from nbaccel.compiler.runtime import runtime
from nbaccel.compiler.codegen import common, numba as nb_codegen, numpy as np_codegen


def boom(*args, **kwargs):
    raise RuntimeError("injected fault")


STAGES = {
    "decompose": (entries, "decompose"),
    "schedule": (runtime, "schedule"),
    "numpy codegen": (np_codegen, "render_kernel"),
    "program codegen": (common, "render_program"),
}


def f(x):
    return np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1) * 2


@pytest.fixture
def lenient(monkeypatch):
    monkeypatch.setitem(nb.config, "strict", False)


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_a_fault_at_each_stage_runs_eagerly_and_is_reported(stage, lenient, monkeypatch):
    mod, name = STAGES[stage]
    monkeypatch.setattr(mod, name, boom)
    x = np.random.default_rng(0).random((5, 7)).astype(np.float32)
    cf = nb.compile(f, backend="numpy")
    out = cf(x)
    np.testing.assert_allclose(out, f(x), rtol=1e-6)
    assert out.dtype == f(x).dtype
    notes = [k.get("note", "") for k in cf.report.kernels]
    assert any("compiler error → ran eagerly" in n and "injected fault" in n for n in notes)
    assert cf.report.tier == "eager"


def test_a_jit_fault_stays_on_the_numpy_tier(lenient, monkeypatch):
    monkeypatch.setattr(runtime.NumbaKernel, "_compile", boom)
    x = np.random.default_rng(1).random((6, 3)).astype(np.float32)
    cf = nb.compile(lambda x: np.tanh(x) * 3 + 1, backend="numba")
    out = cf(x)
    np.testing.assert_allclose(out, np.tanh(x) * 3 + 1, rtol=1e-6)
    assert any("injected fault" in (k.get("note") or "") for k in cf.report.kernels)


def test_a_fault_while_running_generated_code_falls_back(lenient, monkeypatch):
    real = runtime.KernelSlot.__call__
    calls = []

    def faulty(self, *arrays):
        calls.append(1)
        raise IndexError("injected run-time fault")
    monkeypatch.setattr(runtime.KernelSlot, "__call__", faulty)
    x = np.arange(12.0).reshape(3, 4)
    cf = nb.compile(lambda x: x * 2 + 1, backend="numpy")
    np.testing.assert_array_equal(cf(x), x * 2 + 1)
    monkeypatch.setattr(runtime.KernelSlot, "__call__", real)
    np.testing.assert_array_equal(cf(x), x * 2 + 1)      # later calls stay eager: no retry
    assert len(calls) == 1
    assert any("injected run-time fault" in (k.get("note") or "") for k in cf.report.kernels)


def test_user_errors_are_still_numpys_errors(lenient):
    cf = nb.compile(lambda x: x.max(axis=1), backend="numpy")
    with pytest.raises(ValueError, match="zero-size"):
        cf(np.zeros((3, 0)))


@pytest.mark.parametrize("stage", ["schedule", "numpy codegen"])
def test_the_switch_raises_instead(stage, monkeypatch):
    monkeypatch.setitem(nb.config, "strict", True)
    mod, name = STAGES[stage]
    monkeypatch.setattr(mod, name, boom)
    with pytest.raises(RuntimeError, match="injected fault"):
        nb.compile(f, backend="numpy")(np.ones((2, 3), np.float32))


def _fault_from_the_second_call(monkeypatch):
    """Generated code that raises from now on (a later call's values, say), as OverflowError."""
    def faulty(self, *arrays):
        raise OverflowError("injected replay fault")
    monkeypatch.setattr(runtime.KernelSlot, "__call__", faulty)


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_a_replay_whose_program_fails_runs_eagerly_as_the_first_call_does(mode, lenient, monkeypatch):
    monkeypatch.setitem(nb.config, "decide_functions", False)   # every call runs compiled
    real = runtime.KernelSlot.__call__
    x = np.arange(12.0).reshape(3, 4)
    cf = nb.compile(lambda x: np.exp(x) * 2 + 1, backend="numpy", mode=mode)
    np.testing.assert_array_equal(cf(x), np.exp(x) * 2 + 1)
    _fault_from_the_second_call(monkeypatch)
    out = cf(x)                                  # a replay: its program raises, the call does not
    assert cf.stats["replays"] == 1
    np.testing.assert_array_equal(out, np.exp(x) * 2 + 1)
    assert type(out) is np.ndarray and out.dtype == np.float64
    monkeypatch.setattr(runtime.KernelSlot, "__call__", real)
    calls = []
    monkeypatch.setattr(runtime.KernelSlot, "__call__", lambda self, *a: calls.append(1) or real(self, *a))
    np.testing.assert_array_equal(cf(x + 1), np.exp(x + 1) * 2 + 1)   # eager from now on
    assert cf.stats["replays"] == 2 and not calls
    if mode == "default":
        assert cf.stats["eager_fallbacks"] == 1
        assert "injected replay fault" in cf.report.replay["reason"]


def test_a_replays_user_error_is_numpys_own(lenient, monkeypatch):
    """Where the plain code raises too, the replay raises NumPy's error, with no internal one
    attached, whether or not the kernel raised first."""
    monkeypatch.setitem(nb.config, "decide_functions", False)
    x = np.arange(12.0)
    cf = nb.compile(lambda x, i: np.take(x * 2, i) + 1, backend="numpy")
    np.testing.assert_array_equal(cf(x, np.array([1, 2])), [3.0, 5.0])
    _fault_from_the_second_call(monkeypatch)
    with pytest.raises(IndexError) as plain:
        np.take(x * 2, np.array([1, 20]))
    with pytest.raises(IndexError) as compiled:
        cf(x, np.array([1, 20]))
    assert cf.stats["replays"] == 1
    assert str(compiled.value) == str(plain.value)
    assert compiled.value.__context__ is None and compiled.value.__cause__ is None


def test_a_replay_fault_raises_under_strict(monkeypatch):
    monkeypatch.setitem(nb.config, "strict", True)
    monkeypatch.setitem(nb.config, "decide_functions", False)
    x = np.arange(6.0)
    cf = nb.compile(lambda x: x * 2 + 1, backend="numpy")
    cf(x)
    _fault_from_the_second_call(monkeypatch)
    with pytest.raises(OverflowError, match="injected replay fault"):
        cf(x)


def _sgd_step():
    nb.manual_seed(0)
    model = nb.nn.Sequential(nb.nn.Linear(8, 16), nb.nn.ReLU(), nb.nn.Linear(16, 4))
    opt = nb.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = nb.tensor(np.random.default_rng(0).standard_normal((6, 8)).astype(np.float32))
    y = nb.tensor(np.arange(6) % 4)

    def step():
        opt.zero_grad()
        loss = nb.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return model, step


def _step_replay(cf):
    """The compiled function's one replay (reduce-overhead keeps it by key, the default mode on guards)."""
    (rp,) = list(cf._replays.values()) + [e.replay for e in cf._guarded.entries.values()]
    return rp


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_a_replayed_step_fault_before_any_in_place_write_runs_eagerly(mode, lenient, monkeypatch):
    """A replayed training step whose kernels write the parameters in place: a kernel fault
    before any of them had a parameter's buffer (the forward's and backward's kernels come
    first) leaves the inputs intact, so the step falls back as any replay does, with eager's
    losses and weights (it raised nbaccel's internal error before)."""
    monkeypatch.setitem(nb.config, "decide_functions", False)
    model, eager = _sgd_step()
    want = [float(eager()) for _ in range(4)]
    compiled_model, step = _sgd_step()
    cf = nb.compile(step, backend="numpy", mode=mode)
    got = [float(cf()) for _ in range(2)]      # (the first call makes the momentum buffers)
    rp = _step_replay(cf)
    assert getattr(rp.prog, "destinations", None), "the step writes its parameters in place"
    real = runtime.KernelSlot.__call__
    _fault_from_the_second_call(monkeypatch)
    got.append(float(cf()))                     # a replay: its first kernel raises
    assert cf.stats["replays"] >= 1 and rp.fell_back and "injected replay fault" in rp.fell_back
    monkeypatch.setattr(runtime.KernelSlot, "__call__", real)
    got.append(float(cf()))
    _as_eager(got, want, compiled_model, model)


def _as_eager(got, want, compiled_model, model):
    """The compiled step's losses and final weights are eager's."""
    np.testing.assert_allclose(got, want, rtol=1e-5)
    for p, q in zip(compiled_model.parameters(), model.parameters()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-5, atol=1e-7)


def _late_fault(monkeypatch, rp):
    """Kernels raise once one of them had a parameter's buffer (the inputs are half updated)."""
    real = runtime.KernelSlot.__call__

    def late_fault(self, *arrays):
        if not rp.inputs_intact():
            raise OverflowError("injected late fault")
        return real(self, *arrays)
    monkeypatch.setattr(runtime.KernelSlot, "__call__", late_fault)
    return real


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_a_replayed_step_fault_after_an_in_place_write_puts_the_weights_back(mode, lenient, monkeypatch):
    """Kernels on the NumPy tier could raise after an earlier one wrote a parameter in place:
    the run keeps the old values of the buffers it hands out, puts them back on a fault and
    falls back as any replay does, with eager's losses and weights (the fault was raised
    before, the parameters half updated)."""
    monkeypatch.setitem(nb.config, "decide_functions", False)
    model, eager = _sgd_step()
    want = [float(eager()) for _ in range(4)]
    compiled_model, step = _sgd_step()
    cf = nb.compile(step, backend="numpy", mode=mode)
    got = [float(cf()) for _ in range(2)]
    rp = _step_replay(cf)
    assert getattr(rp.prog, "destinations", None), "the step writes its parameters in place"
    real = _late_fault(monkeypatch, rp)
    got.append(float(cf()))
    assert rp.fell_back and "injected late fault" in rp.fell_back
    monkeypatch.setattr(runtime.KernelSlot, "__call__", real)
    got.append(float(cf()))
    _as_eager(got, want, compiled_model, model)


def test_an_all_numba_steps_fault_after_an_in_place_write_stays(lenient, monkeypatch):
    """Every kernel on numba (which raises nothing once it runs, and whose refusal comes before
    it writes): no old values are kept, so a fault injected after a write is raised. (Stood in
    for by the NumPy tier told it is all numba: a step's kernels are not all numba's.)"""
    from nbaccel.compiler.replay import train_step
    monkeypatch.setitem(nb.config, "decide_functions", False)
    monkeypatch.setattr(train_step, "_numpy_kernels", lambda prog: False)
    _, step = _sgd_step()
    cf = nb.compile(step, backend="numpy")
    cf(), cf()
    rp = _step_replay(cf)
    _late_fault(monkeypatch, rp)
    with pytest.raises(OverflowError, match="injected late fault"):
        cf()


def _numba_refuses(monkeypatch):
    """numba's dispatcher refuses the arguments (as for a layout it has no machine code for)."""
    from nbaccel.compiler.codegen import numba_launch

    def refuse(fn, arrays, P, parallel):
        raise TypeError("No matching definition for argument type(s) (injected)")
    monkeypatch.setattr(numba_launch, "launch", refuse)


def test_a_kernel_numba_refuses_runs_its_numpy_version(monkeypatch):
    monkeypatch.setitem(nb.config, "decide_functions", False)
    x = np.arange(12.0).reshape(3, 4)
    cf = nb.compile(lambda x: np.exp(x) * 2 + 1, backend="numba")
    np.testing.assert_array_equal(cf(x), np.exp(x) * 2 + 1)
    _numba_refuses(monkeypatch)
    np.testing.assert_array_equal(cf(x + 1), np.exp(x + 1) * 2 + 1)     # strict: no fault at all
    (k,) = _step_replay(cf).prog.kernels()        # (the replay's program ran the call)
    assert k["backend"] == "numpy" and "numba refused the arguments" in k["note"]


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_a_replayed_step_whose_numba_kernels_are_refused_still_steps(mode, monkeypatch):
    """numba refuses before a kernel writes anything, so even the kernels that write parameters
    in place (after which a fault could not be run again) fall back to their NumPy versions."""
    monkeypatch.setitem(nb.config, "decide_functions", False)
    model, eager = _sgd_step()
    want = [float(eager()) for _ in range(4)]
    compiled_model, step = _sgd_step()
    cf = nb.compile(step, backend="numba", mode=mode)
    got = [float(cf()) for _ in range(2)]
    assert getattr(_step_replay(cf).prog, "destinations", None)
    _numba_refuses(monkeypatch)
    got += [float(cf()) for _ in range(2)]
    _as_eager(got, want, compiled_model, model)
    assert cf.stats["replays"] >= 2 and not cf.stats["eager_fallbacks"]
