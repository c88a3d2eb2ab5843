"""End to end: small MLPs trained with SGD+momentum and AdamW; the loss must fall clearly."""
import time

import numpy as np
import pytest

import nbaccel as nb
import nbaccel.nn.functional as F
from nbaccel import nn, optim


def regression_data(n=128):
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, size=(n, 2)).astype(np.float32)
    y = (np.sin(x[:, :1]) * x[:, 1:] + 0.5 * x[:, :1]).astype(np.float32)
    return nb.from_numpy(x), nb.from_numpy(y)


def xor_data(n=128):
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, size=(n, 2)).astype(np.float32)
    y = ((x[:, 0] > 0) ^ (x[:, 1] > 0)).astype(np.int64)
    return nb.from_numpy(x), nb.from_numpy(y)


def train(model, opt, loss_fn, x, y, steps=100):
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("make_opt", [
    lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9),
    lambda ps: optim.AdamW(ps, lr=0.02),
], ids=["sgd-momentum", "adamw"])
def test_mlp_regression_loss_falls(make_opt):
    nb.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 1))
    x, y = regression_data()
    t0 = time.perf_counter()
    losses = train(model, make_opt(model.parameters()), F.mse_loss, x, y)
    assert time.perf_counter() - t0 < 5
    assert losses[-1] < losses[0] / 10, (losses[0], losses[-1])


@pytest.mark.parametrize("make_opt", [
    lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
    lambda ps: optim.AdamW(ps, lr=0.03),
], ids=["sgd-momentum", "adamw"])
def test_mlp_xor_classification(make_opt):
    nb.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 2))
    x, y = xor_data()
    t0 = time.perf_counter()
    losses = train(model, make_opt(model.parameters()), F.cross_entropy, x, y)
    assert time.perf_counter() - t0 < 5
    assert losses[-1] < losses[0] / 4, (losses[0], losses[-1])
    model.eval()
    with nb.no_grad():
        acc = (np.asarray(model(x)).argmax(1) == np.asarray(y)).mean()
    assert acc > 0.9


def test_tiny_transformer_block_trains():
    """Embedding + attention + layer norm + dropout: gradients reach every parameter and the
    loss falls on a copy task."""
    nb.manual_seed(0)

    class Block(nn.Module):
        def __init__(self, vocab=8, dim=16):
            super().__init__()
            self.emb = nn.Embedding(vocab, dim)
            self.attn = nn.MultiheadAttention(dim, 2, batch_first=True, dropout=0.1)
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, vocab)

        def forward(self, idx):
            h = self.emb(idx)
            a, _ = self.attn(h, h, h, need_weights=False)
            return self.head(self.norm(h + a))

    model = Block()
    rng = np.random.default_rng(0)
    idx = nb.asarray(rng.integers(0, 8, size=(16, 6)), _np=False)
    opt = optim.AdamW(model.parameters(), lr=0.02)

    def loss_fn(logits, target):
        return F.cross_entropy(logits.reshape((-1, 8)), target.reshape((-1,)))
    losses = train(model, opt, loss_fn, idx, idx, steps=60)
    assert all(p.grad is not None for p in model.parameters())
    assert losses[-1] < losses[0] / 4, (losses[0], losses[-1])
