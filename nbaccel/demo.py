"""A terminal demonstration (``make demo`` / ``python -m nbaccel.demo``): no browser needed.

It compiles a NumPy function, shows the captured graph, the fused kernels, a recompile that
makes a dimension dynamic, a graph break, and a compiled training step.
"""
from __future__ import annotations

import time

import numpy as np

import nbaccel as nb


def _title(text):
    print("\n" + text + "\n" + "-" * len(text))


def gelu_softmax(x, w, b):
    y = 0.5 * (x * w + b) * (1 + np.tanh(0.7978845608 * ((x * w + b) + 0.044715 * (x * w + b) ** 3)))
    e = np.exp(y - y.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def branchy(x):
    if x.mean() > 0:          # needs a concrete value: a graph break
        return np.exp(x)
    return np.exp(-x)


def main(size=1024):
    from nbaccel_ext import render_text
    rng = np.random.default_rng(0)
    x = rng.standard_normal((size, size)).astype(np.float32)
    w = rng.standard_normal(size).astype(np.float32)
    b = rng.standard_normal(size).astype(np.float32)

    _title("1. Compile a NumPy function (NumPy tier now, numba in the background)")
    f = nb.compile(gelu_softmax)
    t0 = time.perf_counter()
    out = f(x, w, b)
    print(f"first call: {1e3 * (time.perf_counter() - t0):.1f} ms, "
          f"max error vs NumPy {np.abs(out - gelu_softmax(x, w, b)).max():.2e}")
    print(f.report.graph)
    f.wait()
    f(x, w, b)
    print(render_text(f.report.to_dict()))

    _title("2. A new size recompiles once; the changed dim becomes dynamic")
    for n in (size // 2, size // 4):
        f(x[:n], w, b)
    for r in f.report.recompiles:
        print("recompile:", r["reason"])
    print("stats:", dict(f.stats))

    _title("3. A data-dependent branch breaks the graph and says where")
    g = nb.compile(branchy, backend="numpy")
    g(x)
    for br in g.report.graph_breaks:
        print(f"line {br['lineno']}: {br['line']}\n  why: {br['reason']}\n  fix: {br['fix']}")

    _title("4. A compiled training step (forward, backward, SGD) is one graph")
    nb.manual_seed(0)
    model = nb.nn.Sequential(nb.nn.Linear(64, 128), nb.nn.GELU(), nb.nn.Linear(128, 1))
    opt = nb.optim.SGD(model.parameters(), lr=0.05)
    xs, ys = nb.randn(256, 64), nb.randn(256, 1)

    @nb.compile(backend="numpy")
    def step(x, y):
        loss = nb.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    losses = [float(step(xs, ys)) for _ in range(20)]
    print("loss:", " ".join(f"{v:.3f}" for v in losses[::4]), f"... {losses[-1]:.3f}")
    print(f"graphs per step: {step.report.graphs}, kernels: {len(step.report.kernels)}, "
          f"compiles: {step.stats['compiles']}")


if __name__ == "__main__":
    main()
