"""Fused eager kernels inside compiled graphs (issue 36 item 5): BatchNorm's training ops declare
an ``extern_backend``, so a compiled step keeps them whole and runs the same fused kernels the
eager step does (compiler/capture/decompose.py). Compiled against eager, values and gradients
(input, weight, bias) and running statistics, on both eager paths (the numba kernels and the
NumPy fallback that runs while they load), float32 and float64, several shapes; and the
schedule's regression behind the old IndexError (a constants-only 0-d value)."""
import numpy as np
import pytest

import nbaccel as nb
from nbaccel.ops import kernel_modules

BN_OPS = {"batch_norm_stats", "batch_norm_train", "batch_norm_backward",
          "batch_norm_affine_backward"}


@pytest.fixture
def always_compiled():
    """Every call runs compiled (the plain-or-compiled decision would pick either)."""
    before = nb.config["decide_functions"]
    nb.config["decide_functions"] = False
    yield
    nb.config["decide_functions"] = before


def _tol(dt):
    return dict(rtol=2e-5, atol=2e-6) if dt == "float32" else dict(rtol=1e-12, atol=1e-13)


def _bn_module(shape, affine, dt, seed):
    kind = "BatchNorm2d" if len(shape) == 4 else "BatchNorm1d"
    m = getattr(nb.nn, kind)(shape[1], affine=affine)
    rng = np.random.default_rng(seed)
    if affine:
        m.weight.data = nb.tensor(rng.standard_normal(shape[1]).astype(dt))
        m.bias.data = nb.tensor(rng.standard_normal(shape[1]).astype(dt))
    m.to(getattr(nb, dt))
    return m


def _bn_step(m, x, g):
    def step():
        for p in m.parameters():
            p.grad = None
        x.grad = None
        y = m(x)
        (y * g).sum().backward()
        return y
    return step


def _np(t):
    """A compiled call without tensor arguments returns NumPy arrays, as the plain one would
    not: compare values either way."""
    return t.numpy() if hasattr(t, "numpy") else np.asarray(t)


def _grads(m, x):
    return [x.grad.numpy().copy()] + [p.grad.numpy().copy() for p in m.parameters()]


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(6, 4, 5, 5), (8, 3), (3, 5, 7), (2, 16, 9, 4)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_compiled_matches_eager(fused_path, always_compiled, dt, shape, affine):
    rng = np.random.default_rng(1)
    xa = (rng.standard_normal(shape) * 2 + 0.5).astype(dt)
    ga = rng.standard_normal(shape).astype(dt)
    sides = []
    for compiled in (False, True):
        m = _bn_module(shape, affine, dt, 2)
        x = nb.tensor(xa, requires_grad=True)
        step = _bn_step(m, x, nb.tensor(ga))
        run = nb.compile(step) if compiled else step
        for _ in range(3):                   # the capture, then cached calls; the stats move
            y = run()
        sides.append((_np(y), _grads(m, x), m.running_mean.numpy(), m.running_var.numpy(),
                      run))
    (ye, ge, me, ve, _), (yc, gc, mc, vc, cf) = sides
    tol = _tol(dt)
    np.testing.assert_allclose(yc, ye, **tol)
    for a, b in zip(gc, ge):
        np.testing.assert_allclose(a, b, **tol)
    np.testing.assert_allclose(mc, me, **tol)
    np.testing.assert_allclose(vc, ve, **tol)
    assert yc.dtype == np.dtype(dt)
    externs = {k["ops"][0]: k["backend"] for k in cf.report.kernels if "ranges" not in k}
    want = BN_OPS if affine else BN_OPS - {"batch_norm_affine_backward"}
    assert set(externs) >= want, externs
    assert {externs[n] for n in want} == {"fused"}


def test_compiled_batch_norm_calls_the_eager_kernels(always_compiled, fused_kernel_calls):
    """The compiled program's BatchNorm steps call the fused kernels themselves."""
    if kernel_modules.load_now("fused") is None:
        pytest.skip("numba kernels unavailable")
    m = _bn_module((4, 3, 6, 6), True, "float32", 0)
    x = nb.tensor(np.random.default_rng(0).standard_normal((4, 3, 6, 6)).astype(np.float32),
                  requires_grad=True)
    cf = nb.compile(_bn_step(m, x, nb.ones(4, 3, 6, 6)))
    cf()
    with fused_kernel_calls() as called:
        cf()
    assert set(called) >= {"batch_norm_stats", "batch_norm_forward", "batch_norm_backward",
                           "batch_norm_affine_backward"}


def test_a_compiled_cnn_step_with_adam_matches_eager(fused_path, always_compiled):
    """conv, BatchNorm, ReLU, max pooling, linear and Adam's first steps (whose step count is a
    constants-only 0-d value: the schedule's old IndexError) compiled against eager."""
    nn = nb.nn

    def build():
        nb.manual_seed(0)
        # no conv bias: BatchNorm cancels it, and Adam would amplify its ~0 gradient's noise
        model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
        opt = nb.optim.Adam(model.parameters(), lr=1e-2)
        rng = np.random.default_rng(3)
        x = nb.tensor(rng.standard_normal((5, 1, 8, 8)).astype(np.float32))
        y = nb.tensor(rng.integers(0, 3, 5))

        def step():
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        return model, step

    (me, se), (mc, sc) = build(), build()
    cf = nb.compile(sc)
    for _ in range(4):
        np.testing.assert_allclose(float(_np(cf())), se().item(), rtol=1e-5, atol=1e-6)
    for (k, a), (_, b) in zip(mc.state_dict().items(), me.state_dict().items()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5, err_msg=k)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_a_stored_constant_value_is_not_loaded_at_another_shape(backend):
    """A constants-only expression has one key at every shape: its stored 0-d value (an output)
    must not stand in for the same constants inside a larger kernel (it did: a 0-d load in a
    (4, 8) kernel, an IndexError in the NumPy renderer)."""
    def f(x):
        step = (nb.zeros((), dtype="float32") + 1).clone()
        return step, x * (1 - 0.9 ** step)

    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    step, y = nb.compile(f, backend=backend)(nb.tensor(x))
    assert float(step) == 1.0
    np.testing.assert_allclose(y.numpy(), x * np.float32(1 - 0.9), rtol=1e-6)


def _run_both(make, arrays, dt):
    """``make(*leaves) -> output`` run as a step (forward, backward of sum(out * g)) eagerly and
    compiled, three calls each; returns (eager, compiled) as (output, grads) and the compiled
    function."""
    sides = []
    for compiled in (False, True):
        leaves = [nb.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]

        def step():
            for t in leaves:
                t.grad = None
            y = make(*leaves)
            g = nb.tensor(np.linspace(-1, 1, y.numel(), dtype=dt).reshape(tuple(y.shape)))
            (y * g).sum().backward()
            return y
        run = nb.compile(step) if compiled else step
        for _ in range(3):
            y = run()
        sides.append((_np(y), [t.grad.numpy().copy() for t in leaves if t.requires_grad], run))
    return sides


def _externs(cf):
    return {k["ops"][0]: k["backend"] for k in cf.report.kernels if "ranges" not in k}


CASES = {
    "layer_norm": (lambda x, w, b: nb.nn.functional.layer_norm(x, tuple(w.shape), w, b),
                   {"layer_norm", "layer_norm_backward", "layer_norm_affine_backward"}),
    "layer_norm_plain": (lambda x, w, b: nb.nn.functional.layer_norm(x, tuple(w.shape)) * w + b,
                         {"layer_norm", "layer_norm_backward"}),
    "gelu": (lambda x, w, b: nb.nn.functional.gelu(x * w + b), {"gelu", "gelu_backward"}),
    "softmax": (lambda x, w, b: nb.nn.functional.softmax(x * w + b, -1), {"softmax_backward"}),
    "log_softmax": (lambda x, w, b: nb.nn.functional.log_softmax(x * w + b, -1),
                    {"softmax_backward"}),
}


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(4, 16), (3, 5, 12), (2, 64)])
@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_ops_compiled_match_eager(fused_path, always_compiled, case, shape, dt):
    make, want = CASES[case]
    rng = np.random.default_rng(4)
    arrays = [(rng.standard_normal(shape) * 2).astype(dt),
              rng.standard_normal(shape[-1:]).astype(dt), rng.standard_normal(shape[-1:]).astype(dt)]
    (ye, ge, _), (yc, gc, cf) = _run_both(make, arrays, dt)
    tol = _tol(dt)
    np.testing.assert_allclose(yc, ye, **tol)
    assert yc.dtype == np.dtype(dt)
    for a, b in zip(gc, ge):
        np.testing.assert_allclose(a, b, **tol)
    externs = _externs(cf)
    assert set(externs) >= want and {externs[n] for n in want} == {"fused"}, externs


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(8, 10), (2, 10, 3)])
def test_cross_entropy_compiled_matches_eager(fused_path, always_compiled, shape, dt):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(shape) * 3).astype(dt)
    t = rng.integers(0, 10, (shape[0],) + shape[2:])
    (ye, ge, _), (yc, gc, cf) = _run_both(
        lambda x, t: nb.nn.functional.cross_entropy(x, t), [x, t], dt)
    np.testing.assert_allclose(yc, ye, **_tol(dt))
    np.testing.assert_allclose(gc[0], ge[0], **_tol(dt))
    externs = _externs(cf)
    assert {"cross_entropy", "cross_entropy_backward"} <= set(externs), externs


def test_forms_without_a_kernel_still_decompose(always_compiled):
    """GELU's tanh form and cross-entropy with label smoothing have no fused kernel: their
    extern_backend says None and the compiler decomposes them into its own kernels."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((6, 10)).astype(np.float32)
    t = rng.integers(0, 10, 6)
    for make, args, gone in (
            (lambda x: nb.nn.functional.gelu(x, approximate="tanh"), [x], {"gelu", "gelu_backward"}),
            (lambda x, t: nb.nn.functional.cross_entropy(x, t, label_smoothing=0.1), [x, t],
             {"cross_entropy", "cross_entropy_backward"})):
        (ye, ge, _), (yc, gc, cf) = _run_both(make, args, "float32")
        np.testing.assert_allclose(yc, ye, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(gc[0], ge[0], rtol=1e-5, atol=1e-6)
        assert not gone & set(_externs(cf)), _externs(cf)
