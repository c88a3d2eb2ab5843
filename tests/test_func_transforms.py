"""nbaccel.func's autodiff transforms (grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian,
functional_call) against central finite differences, and against torch.func where PyTorch is
installed; their compositions (grad of grad, vmap of grad, grad of vmap)."""
import numpy as np
import pytest

import nbaccel as nb
import nbaccel.nn.functional as F
from nbaccel import nn
from nbaccel.func import (functional_call, grad, grad_and_value, hessian, jacfwd, jacrev, jvp,
                          vjp, vmap)

rng = np.random.default_rng(1)
A = rng.standard_normal((3, 4))


def T(*shape):
    return nb.tensor(rng.standard_normal(shape))


# scalar functions of one (4,)-vector, each written once for nbaccel and (via ns) for torch
def _fns(ns, F_):
    a = ns.tensor(A)
    return {
        "sin*x": lambda x: (ns.sin(x) * x).sum(),
        "exp-log": lambda x: ns.log(1 + ns.exp(x)).sum() / (1 + (x * x).sum()),
        "tanh matmul": lambda x: ns.tanh(a @ x).sum() ** 2,
        "softmax": lambda x: (F_.softmax(x, -1) * ns.arange(4.0, dtype=x.dtype)).sum(),
        "max and where": lambda x: ns.where(x > 0, x * x, -x).sum() + ns.amax(x * 3),
    }


NB_FNS = _fns(nb, F)


def numeric_grad(f, x, eps=1e-6):
    x = x.numpy().astype(np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (float(f(nb.tensor(x + d))) - float(f(nb.tensor(x - d)))) / (2 * eps)
    return g


def numeric_jac(f, x, eps=1e-6):
    x = x.numpy()
    cols = []
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        cols.append((f(nb.tensor(x + d)).numpy() - f(nb.tensor(x - d)).numpy()) / (2 * eps))
    out = np.stack(cols, -1)
    return out.reshape(out.shape[:-1] + x.shape)


@pytest.mark.parametrize("name", list(NB_FNS))
def test_grad_matches_finite_differences(name):
    f, x = NB_FNS[name], T(4)
    g = grad(f)(x)
    assert g.shape == (4,) and not g.requires_grad
    np.testing.assert_allclose(g.numpy(), numeric_grad(f, x), rtol=1e-5, atol=1e-7)


def test_jacobians_and_jvp_vjp_match_finite_differences():
    a = nb.tensor(A)

    def f(x):
        return nb.tanh(a @ x) * x[:3]
    x = T(4)
    J = numeric_jac(f, x)
    np.testing.assert_allclose(jacrev(f)(x).numpy(), J, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(jacfwd(f)(x).numpy(), J, rtol=1e-5, atol=1e-8)
    t, u = T(4), T(3)
    out, jv = jvp(f, (x,), (t,))
    np.testing.assert_allclose(out.numpy(), f(x).numpy())
    np.testing.assert_allclose(jv.numpy(), J @ t.numpy(), rtol=1e-5, atol=1e-8)
    out, fn = vjp(f, x)
    (vj,) = fn(u)
    np.testing.assert_allclose(vj.numpy(), u.numpy() @ J, rtol=1e-5, atol=1e-8)
    h = hessian(NB_FNS["tanh matmul"])(x)
    hn = numeric_jac(grad(NB_FNS["tanh matmul"]), x)
    np.testing.assert_allclose(h.numpy(), hn, rtol=1e-4, atol=1e-6)


def test_grad_argnums_has_aux_and_pytrees():
    x, y = T(3), T(3)
    f = lambda p, z: ((p["w"] * z).sum() + p["b"][0] ** 2, z * 2)   # noqa: E731
    p = {"w": T(3), "b": T(1)}
    (gp, gz), aux = grad(f, argnums=(0, 1), has_aux=True)(p, x)
    np.testing.assert_allclose(gp["w"].numpy(), x.numpy())
    np.testing.assert_allclose(gp["b"].numpy(), 2 * p["b"].numpy())
    np.testing.assert_allclose(gz.numpy(), p["w"].numpy())
    np.testing.assert_allclose(aux.numpy(), 2 * x.numpy())
    g, v = grad_and_value(lambda a, b: (a * b).sum(), argnums=1)(x, y)
    np.testing.assert_allclose(g.numpy(), x.numpy())
    assert float(v) == pytest.approx(float((x * y).sum()))
    # an input the output does not use gets zeros, as torch.func
    np.testing.assert_array_equal(grad(lambda a, b: a.sum(), argnums=1)(x, y).numpy(), 0)


def test_grad_errors():
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar Tensor"):
        grad(lambda x: x * 2)(T(3))
    with pytest.raises(RuntimeError, match="argnums=2 but only 1 positional"):
        grad(lambda x: x.sum(), argnums=2)(T(3))
    with pytest.raises(RuntimeError, match="should be a tuple"):
        grad(lambda x: x.sum(), has_aux=True)(T(3))
    with pytest.raises(TypeError, match="floating point"):
        grad(lambda x: x.sum())(nb.tensor([1, 2]))


def test_compositions_grad_of_grad_grad_of_vmap_vmap_of_grad():
    x = T(5)
    np.testing.assert_allclose(grad(lambda v: grad(lambda u: (u ** 3).sum())(v).sum())(x).numpy(),
                               6 * x.numpy(), rtol=1e-12)
    # the inner gradient depends on a tensor the inner function closes over
    c = T(5)
    np.testing.assert_allclose(
        grad(lambda v: (grad(lambda u: (v * u).sum())(c) ** 2).sum())(x).numpy(), 2 * x.numpy())
    X = T(6, 4)
    np.testing.assert_allclose(grad(lambda m: vmap(lambda r: (r * r).sum())(m).sum())(X).numpy(),
                               2 * X.numpy())
    f = NB_FNS["tanh matmul"]
    per = vmap(grad(f))(X)
    for i in range(6):
        np.testing.assert_allclose(per[i].numpy(), grad(f)(X[i]).numpy(), rtol=1e-12)
    # jacrev of a vmapped function, and vmap of jacrev
    np.testing.assert_allclose(vmap(jacrev(nb.sin))(X).numpy(),
                               np.stack([np.diag(np.cos(r)) for r in X.numpy()]), atol=1e-12)


def test_functional_call_swaps_in_and_restores_even_on_error():
    nb.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    before = {k: v for k, v in model.named_parameters()}
    zeros = {k: nb.zeros_like(v) for k, v in before.items()}
    out = functional_call(model, zeros, (T(4, 3),))
    np.testing.assert_array_equal(out.numpy(), 0)
    assert all(getattr(model[0], k.split(".")[1]) is v for k, v in before.items())

    class Boom(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            raise ValueError("boom")
    m = Boom()
    w = m.lin.weight
    with pytest.raises(ValueError, match="boom"):
        functional_call(m, {"lin.weight": nb.zeros((2, 2))}, (T(2),))
    assert m.lin.weight is w
    with pytest.raises(RuntimeError, match="missing keys"):
        functional_call(m, {"lin.weight": nb.zeros((2, 2))}, (T(2),), strict=True)


def _tutorial_mlp():
    """notebooks/04's MLP shape (Linear, GELU, Linear, GELU, Linear), smaller, float64."""
    nb.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 8), nn.GELU(), nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 1))
    params = {k: v.detach().astype(nb.float64) for k, v in model.named_parameters()}
    return model, params


def test_mlp_per_example_gradients_match_finite_differences():
    model, params = _tutorial_mlp()
    X, Y = T(6, 3), T(6, 1)

    def loss(p, x, y):
        return F.mse_loss(functional_call(model, p, (x[None],)), y[None])

    per = vmap(grad(loss), in_dims=(None, 0, 0))(params, X, Y)
    for k in ("0.bias", "4.weight"):
        assert per[k].shape == (6,) + params[k].shape
        for i in (0, 5):
            num = numeric_grad(lambda w: loss(dict(params, **{k: w}), X[i], Y[i]), params[k])
            np.testing.assert_allclose(per[k][i].numpy(), num, rtol=1e-5, atol=1e-8)


# ---- against torch.func --------------------------------------------------------------------------

def test_transforms_match_torch_func():
    torch = pytest.importorskip("torch")
    import torch.func as TF
    import torch.nn.functional as TFn
    tfns = _fns(torch, TFn)
    x = rng.standard_normal(4)
    xn, xt = nb.tensor(x), torch.tensor(x)
    for name, f in NB_FNS.items():
        np.testing.assert_allclose(grad(f)(xn).numpy(), TF.grad(tfns[name])(xt).numpy(), rtol=1e-10,
                                   atol=1e-12, err_msg=name)
        np.testing.assert_allclose(hessian(f)(xn).numpy(), TF.hessian(tfns[name])(xt).numpy(),
                                   rtol=1e-8, atol=1e-10, err_msg=name)
    g_nb = lambda v: nb.sin(nb.tensor(A) @ v) * v[1:]          # noqa: E731
    g_t = lambda v: torch.sin(torch.tensor(A) @ v) * v[1:]     # noqa: E731
    for ours, theirs in ((jacrev, TF.jacrev), (jacfwd, TF.jacfwd)):
        np.testing.assert_allclose(ours(g_nb)(xn).numpy(), theirs(g_t)(xt).numpy(), rtol=1e-10, atol=1e-12)
    t = rng.standard_normal(4)
    np.testing.assert_allclose(jvp(g_nb, (xn,), (nb.tensor(t),))[1].numpy(),
                               TF.jvp(g_t, (xt,), (torch.tensor(t),))[1].numpy(), rtol=1e-10, atol=1e-12)
    X = rng.standard_normal((5, 4))
    np.testing.assert_allclose(vmap(grad(NB_FNS["softmax"]))(nb.tensor(X)).numpy(),
                               TF.vmap(TF.grad(tfns["softmax"]))(torch.tensor(X)).numpy(), rtol=1e-10, atol=1e-12)


def test_mlp_per_example_gradients_match_torch_func():
    torch = pytest.importorskip("torch")
    import torch.func as TF
    model, params = _tutorial_mlp()
    tmodel = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.GELU(), torch.nn.Linear(8, 8),
                                 torch.nn.GELU(), torch.nn.Linear(8, 1)).double()
    tparams = {k: torch.tensor(v.numpy()) for k, v in params.items()}
    X, Y = rng.standard_normal((16, 3)), rng.standard_normal((16, 1))

    def loss(p, x, y):
        return F.mse_loss(functional_call(model, p, (x[None],)), y[None])

    def tloss(p, x, y):
        return torch.nn.functional.mse_loss(TF.functional_call(tmodel, p, (x[None],)), y[None])

    ours = vmap(grad(loss), in_dims=(None, 0, 0))(params, nb.tensor(X), nb.tensor(Y))
    theirs = TF.vmap(TF.grad(tloss), in_dims=(None, 0, 0))(tparams, torch.tensor(X), torch.tensor(Y))
    for k in params:
        np.testing.assert_allclose(ours[k].numpy(), theirs[k].numpy(), rtol=1e-9, atol=1e-12, err_msg=k)
