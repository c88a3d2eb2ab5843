"""The benchmarked functions, each written once per library (NumPy, nbaccel, PyTorch).

Array workloads (a)-(c) take float32 inputs made by ``make_inputs`` and return one array.
(d) is a training step: see ``MLP``. (e) and (f) use ``f20`` and ``chain200``, written
against an array module ``xp`` so the same code is the NumPy reference and the traced
nbaccel function.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

GELU_K0 = math.sqrt(2.0 / math.pi)
GELU_K1 = 0.044715
LN_EPS = 1e-5


# -- (a) gelu_tanh(x * w + b) ----------------------------------------------------------------------
def gelu_numpy(x, w, b):
    z = x * w + b
    return 0.5 * z * (1.0 + np.tanh(GELU_K0 * (z + GELU_K1 * (z * z * z))))


def gelu_nbaccel(x, w, b):
    import nbaccel.nn.functional as F
    return F.gelu(x * w + b, approximate="tanh")


def gelu_torch(x, w, b):
    import torch.nn.functional as F
    return F.gelu(x * w + b, approximate="tanh")


# -- (b) row softmax -----------------------------------------------------------------------------
def softmax_numpy(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_nbaccel(x):
    import nbaccel.nn.functional as F
    return F.softmax(x, dim=-1)


def softmax_torch(x):
    import torch
    return torch.softmax(x, dim=-1)


# -- (c) layer_norm over the last dim, with weight and bias ----------------------------------------
def layer_norm_numpy(x, w, b):
    mu = x.mean(axis=-1, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(axis=-1, keepdims=True)
    return xc / np.sqrt(var + LN_EPS) * w + b


def layer_norm_nbaccel(x, w, b):
    import nbaccel.nn.functional as F
    return F.layer_norm(x, (x.shape[-1],), w, b, eps=LN_EPS)


def layer_norm_torch(x, w, b):
    import torch.nn.functional as F
    return F.layer_norm(x, (x.shape[-1],), w, b, eps=LN_EPS)


# -- (g) pairwise squared distances (k-means, n-body, kernel methods) -------------------------------
def pairwise_sq_dist(X, C):
    """The same code for NumPy, nbaccel and PyTorch: a 3-D broadcast reduced over the last axis."""
    return ((X[:, None, :] - C[None, :, :]) ** 2).sum(-1)


# -- (h) column standardisation ------------------------------------------------------------------------
def standardise_columns(x):
    return (x - x.mean(0)) / x.std(0)


def standardise_columns_torch(x):
    return (x - x.mean(0)) / x.std(0, correction=0)


# -- (i) softmax over axis 0 -------------------------------------------------------------------------
def softmax0_numpy(x):
    e = np.exp(x - x.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


def softmax0_nbaccel(x):
    import nbaccel.nn.functional as F
    return F.softmax(x, dim=0)


def softmax0_torch(x):
    import torch
    return torch.softmax(x, dim=0)


@dataclass
class ArrayWorkload:
    """One of (a)-(c): the same computation in NumPy, nbaccel and PyTorch."""
    key: str
    title: str
    numpy_fn: object
    nbaccel_fn: object
    torch_fn: object
    shapes: tuple           # input shapes, in call order; "N" is the row length
    targets: dict = field(default_factory=dict)   # {"numpy": 10.0, "torch_compile": 1.5}
    rtol: float = 1e-4
    atol: float = 1e-5
    max_kernels: int | None = None                # a structural target: at most this many kernels

    def make_inputs(self, rows: int, cols: int, seed: int = 0):
        rng = np.random.default_rng(seed)
        out = []
        for s in self.shapes:
            shape = s(rows, cols) if callable(s) else (rows, cols) if s == "MN" else (cols,)
            out.append(rng.standard_normal(shape, dtype=np.float32))
        return out


ARRAY_WORKLOADS = [
    ArrayWorkload("a", "gelu_tanh(x*w+b)", gelu_numpy, gelu_nbaccel, gelu_torch, ("MN", "N", "N"),
                  {"numpy": 10.0, "torch_compile": 2.0}),
    ArrayWorkload("b", "row softmax", softmax_numpy, softmax_nbaccel, softmax_torch, ("MN",),
                  {"numpy": 3.0, "torch_compile": 1.2}),
    ArrayWorkload("c", "layer_norm (last dim, affine)", layer_norm_numpy, layer_norm_nbaccel,
                  layer_norm_torch, ("MN", "N", "N"), {"numpy": 3.0, "torch_compile": 1.2}, 1e-4, 1e-4),
    ArrayWorkload("g", "pairwise squared distances (20000x8 vs 64x8)", pairwise_sq_dist, pairwise_sq_dist,
                  pairwise_sq_dist, (lambda r, c: (20000 if r >= 4096 else r, 8), lambda r, c: (64, 8)),
                  {"numpy": 4.0}, 1e-4, 1e-4, max_kernels=1),
    ArrayWorkload("h", "column standardisation (x - x.mean(0)) / x.std(0)", standardise_columns,
                  standardise_columns, standardise_columns_torch, ("MN",), {"numpy": 3.0}, 1e-4, 1e-4,
                  max_kernels=2),
    ArrayWorkload("i", "softmax over axis 0", softmax0_numpy, softmax0_nbaccel, softmax0_torch, ("MN",),
                  {"numpy": 3.0}, max_kernels=1),
]

# A workload for the harness's own tests: cheap, and no torch needed on the NumPy side.
SELFTEST = ArrayWorkload("selftest", "x + 1 (harness self-test)", lambda x: x + 1, lambda x: x + 1,
                         lambda x: x + 1, ("MN",), {"numpy": 1.0})


def workload(key: str) -> ArrayWorkload:
    """The array workload with letter ``key`` (or "selftest")."""
    for wl in ARRAY_WORKLOADS + [SELFTEST]:
        if wl.key == key:
            return wl
    raise KeyError(f"no array workload {key!r}")


# -- (d) 2-layer MLP training step -----------------------------------------------------------------
class MLP:
    """Linear(d_in, hidden) -> ReLU -> Linear(hidden, d_out), MSE loss, plain SGD.

    ``init`` holds the starting weights (PyTorch layout: weight is (out, in)); every
    implementation starts from them so one step can be checked against the NumPy one.
    """

    def __init__(self, batch=512, d_in=1024, hidden=1024, d_out=1024, lr=1e-3, seed=0):
        rng = np.random.default_rng(seed)
        self.batch, self.d_in, self.hidden, self.d_out, self.lr = batch, d_in, hidden, d_out, lr
        b1, b2 = 1 / math.sqrt(d_in), 1 / math.sqrt(hidden)
        f32 = np.float32
        self.init = {
            "w1": rng.uniform(-b1, b1, (hidden, d_in)).astype(f32),
            "b1": rng.uniform(-b1, b1, hidden).astype(f32),
            "w2": rng.uniform(-b2, b2, (d_out, hidden)).astype(f32),
            "b2": rng.uniform(-b2, b2, d_out).astype(f32),
        }
        self.x = rng.standard_normal((batch, d_in), dtype=f32)
        self.y = rng.standard_normal((batch, d_out), dtype=f32)

    # NumPy, forward and backward written by hand; updates ``p`` in place, returns the loss
    def numpy_step(self, p, x, y):
        h = x @ p["w1"].T
        h += p["b1"]
        a = np.maximum(h, 0)
        out = a @ p["w2"].T
        out += p["b2"]
        diff = out - y
        loss = np.mean(diff * diff)
        g = diff * np.float32(2.0 / diff.size)
        gw2 = g.T @ a
        gb2 = g.sum(axis=0)
        ga = g @ p["w2"]
        ga *= h > 0
        gw1 = ga.T @ x
        gb1 = ga.sum(axis=0)
        lr = np.float32(self.lr)
        for k, gk in (("w1", gw1), ("b1", gb1), ("w2", gw2), ("b2", gb2)):
            p[k] -= lr * gk
        return loss

    def numpy_params(self):
        return {k: v.copy() for k, v in self.init.items()}

    def nbaccel_model(self):
        """(step function, params dict name -> Parameter) using nbaccel.nn and nbaccel.optim."""
        import nbaccel as nb
        import nbaccel.nn.functional as F
        model = nb.nn.Sequential(nb.nn.Linear(self.d_in, self.hidden), nb.nn.ReLU(),
                                 nb.nn.Linear(self.hidden, self.d_out))
        params = {"w1": model[0].weight, "b1": model[0].bias,
                  "w2": model[2].weight, "b2": model[2].bias}
        with nb.no_grad():
            for k, prm in params.items():
                prm.copy_(nb.tensor(self.init[k]))
        opt = nb.optim.SGD(model.parameters(), lr=self.lr)

        def step(x, y):
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            return loss
        return step, params

    def torch_model(self, torch):
        """(step function, params dict) using torch.nn and torch.optim."""
        model = torch.nn.Sequential(torch.nn.Linear(self.d_in, self.hidden), torch.nn.ReLU(),
                                    torch.nn.Linear(self.hidden, self.d_out))
        params = {"w1": model[0].weight, "b1": model[0].bias,
                  "w2": model[2].weight, "b2": model[2].bias}
        with torch.no_grad():
            for k, prm in params.items():
                prm.copy_(torch.from_numpy(self.init[k]))
        opt = torch.optim.SGD(model.parameters(), lr=self.lr)
        mse = torch.nn.functional.mse_loss

        def step(x, y):
            opt.zero_grad()
            loss = mse(model(x), y)
            loss.backward()
            opt.step()
            return loss
        return step, params


# -- (e) a 20-op elementwise/reduction function ------------------------------------------------------
def f20(xp):
    """A function of (x, y) with exactly 20 ops (elementwise and reductions) over module ``xp``."""
    def f(x, y):
        a = x * y                                   # 1
        b = a + 0.5                                 # 2
        c = xp.tanh(b)                              # 3
        d = c * x                                   # 4
        e = xp.exp(-xp.abs(d))                      # 5 6 7
        f_ = e + y * 0.25                           # 8 9
        g = xp.sqrt(f_ * f_ + 1.0)                  # 10 11 12
        h = xp.maximum(g, a)                        # 13
        i = h - h.mean(axis=-1, keepdims=True)      # 14 15
        j = i * i                                   # 16
        k = j.sum(axis=-1)                          # 17
        return xp.sqrt(k + 1e-6) * 2.0              # 18 19 20
    return f


F20_OPS = 20


# -- (f) a 200-op elementwise chain ------------------------------------------------------------------
CHAIN_OPS = 200


def chain200(xp):
    """200 elementwise ops on one array: (mul, add, mul, add, tanh) repeated 40 times."""
    def f(x):
        for _ in range(CHAIN_OPS // 5):
            x = xp.tanh((x * 0.9 + 0.01) * 1.1 + 0.02)
        return x
    return f
