"""Training extras (issue 24) against PyTorch: optimizers' trajectories, schedulers' lr
sequences, gradient clipping, and the compiled (replayed) training step with each optimizer."""
import math

import numpy as np
import pytest

import nbaccel as nb

torch = pytest.importorskip("torch")


def _problem(seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((4, 3)).astype(dtype), rng.standard_normal(3).astype(dtype),
            rng.standard_normal((8, 4)).astype(dtype))


def _loss(lib, w, b, x):
    y = lib.tanh(x @ w + b)
    return (y * y).sum() + (w * w).mean()


OPTIMIZERS = [
    ("Adadelta", {}), ("Adadelta", dict(lr=0.5, rho=0.8, weight_decay=0.1, eps=1e-5)),
    ("RMSprop", {}), ("RMSprop", dict(momentum=0.9, centered=True, weight_decay=0.01)),
    ("RMSprop", dict(lr=0.001, alpha=0.9, maximize=True)),
    ("Adagrad", {}), ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.1,
                                      initial_accumulator_value=0.1)),
    ("Adam", dict(lr=0.01, amsgrad=True)), ("AdamW", dict(lr=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
]


@pytest.mark.parametrize("name,kw", OPTIMIZERS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(OPTIMIZERS)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_optimizer_trajectory_equals_torch(name, kw, dtype):
    w0, b0, x = _problem(dtype=dtype)
    nw, nbias = nb.nn.Parameter(nb.tensor(w0)), nb.nn.Parameter(nb.tensor(b0))
    tw, tb = torch.nn.Parameter(torch.tensor(w0)), torch.nn.Parameter(torch.tensor(b0))
    nopt = getattr(nb.optim, name)([nw, nbias], **kw)
    topt = getattr(torch.optim, name)([tw, tb], **kw)
    nx, tx = nb.tensor(x), torch.tensor(x)
    tol = 2e-5 if dtype == np.float32 else 1e-12
    for _ in range(8):
        nopt.zero_grad(), topt.zero_grad()
        _loss(nb, nw, nbias, nx).backward()
        _loss(torch, tw, tb, tx).backward()
        nopt.step(), topt.step()
        np.testing.assert_allclose(nw.detach().numpy(), tw.detach().numpy(), rtol=tol, atol=tol)
        np.testing.assert_allclose(nbias.detach().numpy(), tb.detach().numpy(), rtol=tol, atol=tol)
    # same state names, shapes and hyper-parameters: a torch optimizer state loads here
    nsd, tsd = nopt.state_dict(), topt.state_dict()
    assert nsd["state"].keys() == tsd["state"].keys()
    for i in tsd["state"]:
        assert nsd["state"][i].keys() == tsd["state"][i].keys()
        for k, v in tsd["state"][i].items():
            assert tuple(nsd["state"][i][k].shape) == tuple(v.shape)
    assert set(tsd["param_groups"][0]) - {"fused", "decoupled_weight_decay",
                                                                             "foreach", "differentiable", "capturable"} <= set(nsd["param_groups"][0])
    loaded = {"state": {i: {k: nb.tensor(v.numpy()) for k, v in s.items()} for i, s in tsd["state"].items()},
              "param_groups": [{k: v for k, v in g.items() if k in nsd["param_groups"][0]}
                               for g in tsd["param_groups"]]}
    nopt.load_state_dict(loaded)


@pytest.mark.parametrize("name,kw", [("Adadelta", {}), ("RMSprop", dict(momentum=0.5, centered=True)),
                                     ("Adagrad", dict(lr_decay=0.01))])
def test_new_optimizers_in_a_replayed_compiled_step(name, kw):
    nb.manual_seed(0)
    model = nb.nn.Sequential(nb.nn.Linear(4, 8), nb.nn.Tanh(), nb.nn.Linear(8, 1))
    ref = nb.nn.Sequential(nb.nn.Linear(4, 8), nb.nn.Tanh(), nb.nn.Linear(8, 1))
    ref.load_state_dict(model.state_dict())
    x, y = nb.randn(16, 4), nb.randn(16, 1)
    opt = getattr(nb.optim, name)(model.parameters(), lr=0.05, **kw)
    ropt = getattr(nb.optim, name)(ref.parameters(), lr=0.05, **kw)
    sched = nb.optim.lr_scheduler.ExponentialLR(opt, 0.9)
    rsched = nb.optim.lr_scheduler.ExponentialLR(ropt, 0.9)

    def step(m, o):
        o.zero_grad()
        loss = nb.nn.functional.mse_loss(m(x), y)
        loss.backward()
        nb.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        o.step()
        return loss

    compiled = nb.compile(lambda: step(model, opt), mode="reduce-overhead")
    for _ in range(6):
        a = compiled()
        b = step(ref, ropt)
        sched.step(), rsched.step()
        np.testing.assert_allclose(a.item(), b.item(), rtol=1e-5)
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-5, atol=1e-6)
    # traced twice (the first step makes state), then replayed although the lr changed each step
    assert compiled.stats.get("replays", 0) >= 3


def _lrs(lib, make, steps=25, opt="SGD", groups=1):
    params = [{"params": [lib.nn.Parameter(lib.ones(1))], "lr": 0.1 * (i + 1)} for i in range(groups)]
    o = getattr(lib.optim, opt)(params, lr=0.1, **({"momentum": 0.9} if opt == "SGD" else {}))
    s = make(lib.optim.lr_scheduler, o)
    out = []
    for _ in range(steps):
        o.step()
        s.step()
        out.append(list(s.get_last_lr()) + [g.get("momentum", g.get("betas", (None,))[0]) for g in o.param_groups])
    return out


SCHEDULERS = {
    "StepLR": lambda L, o: L.StepLR(o, step_size=3, gamma=0.5),
    "MultiStepLR": lambda L, o: L.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.3),
    "ExponentialLR": lambda L, o: L.ExponentialLR(o, gamma=0.93),
    "CosineAnnealingLR": lambda L, o: L.CosineAnnealingLR(o, T_max=7, eta_min=0.001),
    "LambdaLR": lambda L, o: L.LambdaLR(o, lambda e: 1 / (1 + e)),
    "MultiplicativeLR": lambda L, o: L.MultiplicativeLR(o, lambda e: 0.9),
    "LinearLR": lambda L, o: L.LinearLR(o, start_factor=0.25, total_iters=6),
    "ConstantLR": lambda L, o: L.ConstantLR(o, factor=0.5, total_iters=4),
    "OneCycleLR": lambda L, o: L.OneCycleLR(o, max_lr=1.0, total_steps=25),
    "OneCycleLR-3": lambda L, o: L.OneCycleLR(o, max_lr=[1.0, 2.0], total_steps=30, three_phase=True,
                                              anneal_strategy="linear"),
}


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
@pytest.mark.parametrize("opt", ["SGD", "AdamW"])
def test_scheduler_lr_sequence_equals_torch(name, opt):
    make = SCHEDULERS[name]
    groups = 2 if name == "OneCycleLR-3" else 1
    assert _lrs(nb, make, opt=opt, groups=groups) == _lrs(torch, make, opt=opt, groups=groups)


def test_scheduler_state_dict_round_trip():
    o = nb.optim.SGD([nb.nn.Parameter(nb.ones(1))], lr=1.0)
    s = nb.optim.lr_scheduler.StepLR(o, 2)
    for _ in range(3):
        s.step()
    o2 = nb.optim.SGD([nb.nn.Parameter(nb.ones(1))], lr=1.0)
    s2 = nb.optim.lr_scheduler.StepLR(o2, 5)
    s2.load_state_dict(s.state_dict())
    assert s2.last_epoch == 3 and s2.step_size == 2


def test_reduce_lr_on_plateau_equals_torch():
    def run(lib):
        o = lib.optim.SGD([lib.nn.Parameter(lib.ones(1))], lr=1.0)
        s = lib.optim.lr_scheduler.ReduceLROnPlateau(o, patience=2, factor=0.5, cooldown=1)
        out = []
        for m in [5, 4, 4, 4, 4, 4, 3, 3, 3, 3, 3, 3]:
            s.step(m)
            out.append(o.param_groups[0]["lr"])
        return out
    assert run(nb) == run(torch)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf])
def test_clip_grad_norm_and_value_equal_torch(norm_type):
    rng = np.random.default_rng(1)
    gs = [rng.standard_normal(s).astype(np.float32) * 3 for s in [(3, 4), (5,), ()]]
    nps = [nb.nn.Parameter(nb.zeros(g.shape)) for g in gs]
    tps = [torch.nn.Parameter(torch.zeros(g.shape)) for g in gs]
    for p, q, g in zip(nps, tps, gs):
        p.grad, q.grad = nb.tensor(g), torch.tensor(g)
    n1 = nb.nn.utils.clip_grad_norm_(nps, 1.5, norm_type=norm_type)
    n2 = torch.nn.utils.clip_grad_norm_(tps, 1.5, norm_type=norm_type)
    np.testing.assert_allclose(n1.item(), n2.item(), rtol=1e-6)
    for p, q in zip(nps, tps):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-6, atol=1e-7)
    nb.nn.utils.clip_grad_value_(nps, 0.1)
    torch.nn.utils.clip_grad_value_(tps, 0.1)
    for p, q in zip(nps, tps):        # (the clipped norm above may differ in the last bit)
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-6, atol=1e-8)
    with pytest.raises(RuntimeError, match="non-finite"):
        nps[0].grad = nb.full((3, 4), float("nan"))
        nb.nn.utils.clip_grad_norm_(nps, 1.0, error_if_nonfinite=True)
    v = nb.nn.utils.parameters_to_vector(nps)
    assert v.shape == (18,)


@pytest.mark.parametrize("red", ["mean", "sum", "none"])
def test_binary_and_nll_losses_equal_torch(red):
    rng = np.random.default_rng(2)
    p = rng.uniform(0.01, 0.99, (6, 3)).astype(np.float32)
    p[0, 0], p[0, 1] = 0.0, 1.0                      # PyTorch clamps the logs at -100
    y = (rng.random((6, 3)) > 0.5).astype(np.float32)
    w = rng.random(3).astype(np.float32)
    z = rng.standard_normal((6, 3)).astype(np.float32) * 4
    cases = [
        (lambda L: L.nn.BCELoss(reduction=red), p, y),
        (lambda L: L.nn.BCELoss(weight=L.tensor(w), reduction=red), p, y),
        (lambda L: L.nn.BCEWithLogitsLoss(reduction=red), z, y),
        (lambda L: L.nn.BCEWithLogitsLoss(weight=L.tensor(w), pos_weight=L.tensor(w * 3), reduction=red), z, y),
    ]
    for make, a, b in cases:
        na, ta = nb.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        nl, tl = make(nb)(na, nb.tensor(b)), make(torch)(ta, torch.tensor(b))
        np.testing.assert_allclose(nl.detach().numpy(), tl.detach().numpy(), rtol=1e-5, atol=1e-5)
        nl.sum().backward(), tl.sum().backward()
        np.testing.assert_allclose(na.grad.numpy(), ta.grad.numpy(), rtol=1e-4, atol=1e-5)
    logp = np.log(rng.dirichlet(np.ones(5), 6)).astype(np.float32)
    t = np.array([0, 4, 2, -100, 1, 3])
    for kw in ({}, {"weight": w.tolist() + [0.5, 2.0]}, {"ignore_index": 2}):
        t = np.array([0, 4, 2, 1, 1, 3]) if "ignore_index" in kw else np.array([0, 4, 2, -100, 1, 3])
        nkw = {k: (nb.tensor(v, dtype=nb.float32) if k == "weight" else v) for k, v in kw.items()}
        tkw = {k: (torch.tensor(v, dtype=torch.float32) if k == "weight" else v) for k, v in kw.items()}
        na, ta = nb.tensor(logp, requires_grad=True), torch.tensor(logp, requires_grad=True)
        nl = nb.nn.NLLLoss(reduction=red, **nkw)(na, nb.tensor(t))
        tl = torch.nn.NLLLoss(reduction=red, **tkw)(ta, torch.tensor(t))
        np.testing.assert_allclose(nl.detach().numpy(), tl.detach().numpy(), rtol=1e-5)
        nl.sum().backward(), tl.sum().backward()
        np.testing.assert_allclose(na.grad.numpy(), ta.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_bce_compiles_like_eager():
    x, y = nb.rand(5, 2) * 0.9 + 0.05, (nb.rand(5, 2) > 0.5).float()
    f = lambda a, b: nb.nn.functional.binary_cross_entropy(a, b) + \
        nb.nn.functional.binary_cross_entropy_with_logits(a, b)  # noqa: E731
    np.testing.assert_allclose(nb.compile(f)(x, y).item(), f(x, y).item(), rtol=1e-6)
