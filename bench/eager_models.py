"""The workloads of bench/eager.py, written once for any torch-like module ``T`` (``nbaccel``
or ``torch``): a small MLP, CNN and GPT with their data and one training step, and notebook
11's digits CNN and epoch. ``_build`` seeds the weights, so both sides start from the same ones."""
from __future__ import annotations

import numpy as np


def _mlp(T, cfg):
    return T.nn.Sequential(T.nn.Linear(cfg["inp"], cfg["hidden"]), T.nn.ReLU(),
                           T.nn.Linear(cfg["hidden"], cfg["hidden"]), T.nn.ReLU(),
                           T.nn.Linear(cfg["hidden"], 10))


def _cnn(T, cfg):
    nn = T.nn
    c = cfg["channels"]
    return nn.Sequential(
        nn.Conv2d(1, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(c, 2 * c, 3, padding=1, bias=False), nn.BatchNorm2d(2 * c), nn.ReLU(),
        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(2 * c * (cfg["size"] // 4) ** 2, 10))


def _gpt_classes(T):
    nn, F = T.nn, T.nn.functional

    class Block(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            d = cfg["d"]
            self.tok = nn.Embedding(cfg["vocab"], d)
            self.pos = nn.Embedding(cfg["T"], d)
            self.blocks = nn.ModuleList([Block(d, cfg["heads"]) for _ in range(cfg["layers"])])
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, cfg["vocab"], bias=False)

        def forward(self, idx):
            t = idx.shape[1]
            x = self.tok(idx) + self.pos(T.arange(t))
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln(x))
    return GPT


def _gpt(T, cfg):
    return _gpt_classes(T)(cfg)


def _data(kind, cfg):
    rng = np.random.default_rng(1)
    n = cfg["batch"]
    if kind == "mlp":
        return rng.standard_normal((n, cfg["inp"])).astype(np.float32), rng.integers(0, 10, n)
    if kind == "cnn":
        return (rng.standard_normal((n, 1, cfg["size"], cfg["size"])).astype(np.float32),
                rng.integers(0, 10, n))
    idx = rng.integers(0, cfg["vocab"], (n, cfg["T"] + 1))
    return idx[:, :-1], idx[:, 1:]


def _step(T, model, opt, kind, x, y):
    F = T.nn.functional

    def step():
        opt.zero_grad()
        out = model(x)
        if kind == "gpt":
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        else:
            loss = F.cross_entropy(out, y)
        loss.backward()
        opt.step()
        return loss
    return step


def _build(kind, T, cfg, state=None):
    T.manual_seed(0)
    model = {"mlp": _mlp, "cnn": _cnn, "gpt": _gpt}[kind](T, cfg)
    if state is not None:
        model.load_state_dict({k: T.tensor(v) for k, v in state.items()})
    if kind == "gpt":
        opt = T.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    elif kind == "cnn":
        opt = T.optim.Adam(model.parameters(), lr=1e-3)
    else:
        opt = T.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    xa, ya = _data(kind, cfg)
    x = T.tensor(xa)
    y = T.tensor(ya)
    return model, _step(T, model, opt, kind, x, y)


def _digits():
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        return None
    d = load_digits()
    X = (d.images / 16.0).astype(np.float32)[:, None]
    y = d.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(X))
    return X, y, order[360:]


def _nb11_model(T):
    nn = T.nn
    T.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))


def _nb11_epoch(T, model, X, y, train, batches):
    """Notebook 11's ``run_epoch`` (its batch 64, Adam at 2e-2), eager."""
    F = T.nn.functional
    opt = T.optim.Adam(model.parameters(), lr=2e-2)
    conv = T.from_numpy if hasattr(T, "from_numpy") else T.tensor

    def epoch():
        idx = np.random.default_rng(0).permutation(train)
        loss = None
        for i in range(0, batches * 64, 64):
            b = idx[i:i + 64]
            opt.zero_grad()
            loss = F.cross_entropy(model(conv(X[b])), conv(y[b]))
            loss.backward()
            opt.step()
        return loss
    return epoch
