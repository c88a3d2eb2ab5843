"""Optimisers against hand-written NumPy updates over 3 steps, plus the Optimizer API."""
import copy

import numpy as np
import pytest

import nbaccel as nb
from nbaccel import nn, optim

C = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
P0 = np.array([[1.0, 2.0, -1.0], [0.5, -0.5, 3.0]])


def grad_np(p):
    """d/dp of sum(C * p**2) + sum(p): a gradient that changes as p moves."""
    return 2 * C * p + 1


def run_nb(make_opt, steps=3, dtype="float64"):
    p = nn.Parameter(nb.asarray(P0.astype(dtype)))
    opt = make_opt([p])
    c = nb.asarray(C.astype(dtype))
    for _ in range(steps):
        opt.zero_grad()
        ((c * p * p).sum() + p.sum()).backward()
        opt.step()
    return p, opt


def sgd_np(lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False):
    p, buf = P0.copy(), None
    for _ in range(3):
        d = grad_np(p) * (-1 if maximize else 1)
        if weight_decay:
            d = d + weight_decay * p
        if momentum:
            buf = d.copy() if buf is None else momentum * buf + (1 - dampening) * d
            d = d + momentum * buf if nesterov else buf
        p = p - lr * d
    return p


def adam_np(lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, decoupled=True):
    p = P0.copy()
    m, v, vmax = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
    for t in range(1, 4):
        g = grad_np(p)
        if weight_decay and decoupled:
            p = p * (1 - lr * weight_decay)
        elif weight_decay:
            g = g + weight_decay * p
        m = betas[0] * m + (1 - betas[0]) * g
        v = betas[1] * v + (1 - betas[1]) * g * g
        vv = np.maximum(vmax, v) if amsgrad else v
        vmax = vv
        denom = np.sqrt(vv) / np.sqrt(1 - betas[1] ** t) + eps
        p = p - lr / (1 - betas[0] ** t) * m / denom
    return p


SGD_CASES = [dict(lr=0.1), dict(lr=0.05, momentum=0.9), dict(lr=0.05, momentum=0.9, dampening=0.3),
             dict(lr=0.05, momentum=0.8, nesterov=True), dict(lr=0.1, weight_decay=0.1),
             dict(lr=0.05, momentum=0.9, weight_decay=0.01, nesterov=True), dict(lr=0.1, maximize=True)]


@pytest.mark.parametrize("kw", SGD_CASES, ids=str)
def test_sgd_matches_numpy(kw):
    p, _ = run_nb(lambda ps: optim.SGD(ps, **kw))
    np.testing.assert_allclose(np.asarray(p), sgd_np(**kw), rtol=1e-12, atol=1e-12)


ADAM_CASES = [dict(lr=0.1), dict(lr=0.05, betas=(0.8, 0.99)), dict(lr=0.1, weight_decay=0.1),
              dict(lr=0.1, amsgrad=True), dict(lr=0.01, eps=1e-3, weight_decay=0.5, amsgrad=True)]


@pytest.mark.parametrize("kw", ADAM_CASES, ids=str)
@pytest.mark.parametrize("cls,decoupled", [(optim.AdamW, True), (optim.Adam, False)])
def test_adam_matches_numpy(kw, cls, decoupled):
    p, opt = run_nb(lambda ps: cls(ps, **kw))
    want = adam_np(decoupled=decoupled, **{"weight_decay": 0.01 if decoupled else 0.0, **kw})
    np.testing.assert_allclose(np.asarray(p), want, rtol=1e-10, atol=1e-12)
    assert opt.state[p]["step"].item() == 3


def test_float32_adamw_close_to_numpy():
    p, _ = run_nb(lambda ps: optim.AdamW(ps, lr=0.1), dtype="float32")
    assert p.dtype == nb.float32
    np.testing.assert_allclose(np.asarray(p), adam_np(0.1, weight_decay=0.01), rtol=1e-5, atol=1e-6)


def test_updates_are_in_place():
    p = nn.Parameter(nb.ones(3))
    data = p._data
    opt = optim.AdamW([p], lr=0.1)
    (p * p).sum().backward()
    opt.step()
    assert p._data is data and p.is_leaf and p.requires_grad and p.grad_fn is None
    assert (np.asarray(p) < 1).all()


def test_zero_grad_and_params_without_grad():
    a, b = nn.Parameter(nb.ones(2)), nn.Parameter(nb.ones(2))
    opt = optim.SGD([a, b], lr=1.0, momentum=0.9)
    (a * 2).sum().backward()
    opt.step()
    np.testing.assert_allclose(np.asarray(a), [-1, -1])
    np.testing.assert_allclose(np.asarray(b), [1, 1])    # no grad: untouched, no state
    assert b not in opt.state
    opt.zero_grad(set_to_none=False)
    assert (np.asarray(a.grad) == 0).all()
    opt.zero_grad()
    assert a.grad is None


def test_param_groups():
    a, b = nn.Parameter(nb.ones(1)), nn.Parameter(nb.ones(1))
    opt = optim.SGD([{"params": [a]}, {"params": b, "lr": 0.5}], lr=0.1)
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[1]["lr"] == 0.5
    (a + b).sum().backward()
    opt.step()
    np.testing.assert_allclose([a.item(), b.item()], [0.9, 0.5])
    with pytest.raises(ValueError, match="more than one"):
        opt.add_param_group({"params": [a]})
    with pytest.raises(ValueError, match="empty"):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="learning rate"):
        optim.SGD([a], lr=-1)
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD([a], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="beta"):
        optim.AdamW([a], betas=(1.0, 0.9))


@pytest.mark.parametrize("make", [lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9),
                                  lambda ps: optim.AdamW(ps, lr=0.05, amsgrad=True)])
def test_state_dict_round_trip_continues_identically(make):
    """3 steps straight == 1 step, save, load into a fresh optimiser on a copy, 2 steps."""
    p_full, _ = run_nb(make, steps=3)
    p, opt = run_nb(make, steps=1)
    sd = copy.deepcopy(opt.state_dict())
    assert sd["param_groups"][0]["params"] == [0] and 0 in sd["state"]
    q = nn.Parameter(nb.asarray(np.asarray(p).copy()))
    opt2 = make([q])
    opt2.load_state_dict(sd)
    c = nb.asarray(C)
    for _ in range(2):
        opt2.zero_grad()
        ((c * q * q).sum() + q.sum()).backward()
        opt2.step()
    np.testing.assert_allclose(np.asarray(q), np.asarray(p_full), rtol=1e-12)


def test_load_state_dict_mismatch():
    opt = optim.SGD([nn.Parameter(nb.ones(1))], lr=0.1)
    other = optim.SGD([nn.Parameter(nb.ones(1)), nn.Parameter(nb.ones(1))], lr=0.1)
    with pytest.raises(ValueError, match="size"):
        opt.load_state_dict(other.state_dict())


def test_step_closure_returns_loss():
    p = nn.Parameter(nb.ones(2))
    opt = optim.SGD([p], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss
    assert opt.step(closure).item() == 2.0
    np.testing.assert_allclose(np.asarray(p), [0.8, 0.8])
