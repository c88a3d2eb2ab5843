"""Small seeded models trained the way notebooks/04 trains its MLP (nn.Sequential of Linear and
GELU, AdamW, full-batch eager steps): the float baselines that the quantization tests, the
benchmark and notebooks/06 quantize. Each trains in well under a second.

* :func:`train_regression_mlp`: notebooks/04's model and data exactly (1 -> 64 -> 64 -> 1,
  a noisy ``sin(2x)``).
* :func:`train_classifier`: the same recipe on a 10-class problem (64 features -> 128 -> 128
  -> 10) with overlapping classes, so that top-1 agreement with float32 means something.
"""
from __future__ import annotations

import numpy as np

import nbaccel as nb
from nbaccel import nn
import nbaccel.nn.functional as F


def _fit(model, loss_fn, steps, lr=1e-2):
    """``steps`` eager AdamW steps (eager: a test or a notebook never waits on compiling)."""
    opt = nb.optim.AdamW(model.parameters(), lr=lr)
    for _ in range(steps):
        loss = loss_fn()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return float(loss)


def regression_data():
    """notebooks/04's data: 256 points of ``sin(2x) + noise`` on [-3, 3]."""
    rng = np.random.default_rng(0)
    x = np.linspace(-3, 3, 256, dtype=np.float32).reshape(-1, 1)
    y = np.sin(2 * x) + 0.1 * rng.standard_normal(x.shape).astype(np.float32)
    return nb.tensor(x), nb.tensor(y)


def train_regression_mlp(steps: int = 300):
    """notebooks/04's MLP trained eagerly: returns ``(model, X, Y, final_loss)``."""
    X, Y = regression_data()
    nb.manual_seed(0)
    model = nn.Sequential(nn.Linear(1, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 1))
    loss = _fit(model, lambda: F.mse_loss(model(X), Y), steps)
    return model, X, Y, loss


def classification_data(n: int, seed: int, features: int = 64, classes: int = 10):
    """Gaussian classes whose centres lie close enough to overlap: ``(X [n, features], labels)``."""
    centres = np.random.default_rng(7).standard_normal((classes, features)).astype(np.float32)
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    x = centres[labels] + 1.6 * rng.standard_normal((n, features)).astype(np.float32)
    return nb.tensor(x), nb.tensor(labels)


def train_classifier(steps: int = 60, hidden: int = 128):
    """The 10-class MLP trained on 1024 samples: returns ``(model, X_test, labels_test)``
    with 4096 held-out samples."""
    X, labels = classification_data(1024, seed=0)
    nb.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, hidden), nn.GELU("tanh"), nn.Linear(hidden, hidden), nn.GELU("tanh"),
                          nn.Linear(hidden, 10))
    _fit(model, lambda: F.cross_entropy(model(X), labels), steps)
    X_test, labels_test = classification_data(4096, seed=1)
    return model, X_test, labels_test


def copy_model(model):
    """A float copy (same architecture, same weights) of a Sequential of Linear / GELU."""
    layers = []
    for m in model:
        if isinstance(m, nn.Linear):
            c = nn.Linear(m.in_features, m.out_features, bias=m.bias is not None)
            c.load_state_dict(m.state_dict())
            layers.append(c)
        else:
            layers.append(nn.GELU(m.approximate) if isinstance(m, nn.GELU) else type(m)())
    return nn.Sequential(*layers)
