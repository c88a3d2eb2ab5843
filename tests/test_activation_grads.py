"""tanh's and relu's gradients as one op each (ops/activation_grads.py): the same bits as the
expressions they replace, one op per node of a backward walk, and a double backward through
their decompositions."""
import numpy as np
import pytest

import nbaccel as nb
from nbaccel import dispatch

SPECIAL = [0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 20.0]


def _values(dtype):
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.standard_normal(40) * 3, SPECIAL]).astype(dtype)
    return x, rng.permutation(np.concatenate([rng.standard_normal(40), SPECIAL])).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["tanh", "relu"])
def test_gradients_have_the_old_expressions_bits(name, dtype):
    xa, ga = _values(dtype)
    x = nb.tensor(xa, requires_grad=True)
    y = getattr(x, name)()
    y.backward(nb.tensor(ga))
    out = y.detach().numpy()
    with np.errstate(invalid="ignore"):
        want = ga * (1 - out * out) if name == "tanh" else np.where(out > 0, ga, 0)
    assert x.grad.dtype == x.dtype
    np.testing.assert_array_equal(x.grad.numpy().view(np.uint8), want.astype(dtype).view(np.uint8))


def test_each_node_runs_one_op(monkeypatch):
    x = nb.tensor(np.linspace(-2, 2, 12, dtype=np.float32), requires_grad=True)
    loss = x.tanh().relu().tanh().sum()
    names = []
    short = dispatch._short
    monkeypatch.setattr(dispatch, "_short", lambda op, a, p: names.append(op.name) or
                        short(op, a, p))
    loss.backward()
    assert names.count("tanh_backward") == 2 and names.count("relu_backward") == 1
    assert not {"multiply", "subtract", "greater", "where"} & set(names)


def test_double_backward_goes_through_the_decompositions():
    xa = np.array([-1.5, -0.3, 0.2, 0.9, 2.0])
    x = nb.tensor(xa, requires_grad=True)
    (g,) = nb.autograd.grad((x.tanh() * x.relu()).sum(), [x], create_graph=True)
    g.sum().backward()
    t = np.tanh(xa)
    r, dr = np.maximum(xa, 0), (xa > 0).astype(float)
    # d/dx [ (1 - t^2) r + t dr ] = -2 t (1 - t^2) r + 2 (1 - t^2) dr  (dr' = 0)
    np.testing.assert_allclose(g.detach().numpy(), (1 - t * t) * r + t * dr, rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), -2 * t * (1 - t * t) * r + 2 * (1 - t * t) * dr,
                               rtol=1e-12)
