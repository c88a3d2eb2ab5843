"""Small everyday cells: is a compiled cell's second run at least 0.9x the plain cell?

    python -m bench.small_cells [--quick]

Ten cells a scientist or ML practitioner writes every day, each well under 1 ms plainly (array
sizes of a few hundred to a few thousand elements). Each cell is run in a real IPython shell
(tests/cells/harness.py: a fresh namespace from the cell's setup each run; the setup is not
timed) plainly and under ``%%compile`` (backend auto, the default). After one plain run and two
compiled runs (the first compiles), every round runs the plain cell and the compiled cell,
interleaved, and every run's namespace, stdout and exceptions are compared with the plain run's
(a mismatch stops the benchmark). Reported per cell: median / min / max of both, the median of
the per-round ratios plain / compiled with its spread, the first compiled run, and which path
the compiled run took and why (``report.path``, ``report.path_reason``).
"""
from __future__ import annotations

import os
import pathlib
import statistics
import sys

for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "2")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

TARGET = 0.9

RNG = "import numpy as np\nrng = np.random.default_rng(0)\n"

CELLS = [
    ("finite_differences",   # slicing-heavy: the kind of cell that made 44 kernels
     RNG + "h = 0.01\nu = np.sin(np.arange(1000) * h)\n",
     "d1 = (u[2:] - u[:-2]) / (2 * h)\n"
     "d2 = (u[2:] - 2 * u[1:-1] + u[:-2]) / h ** 2\n"
     "smooth = (u[:-4] + 2 * u[1:-3] + 3 * u[2:-2] + 2 * u[3:-1] + u[4:]) / 9\n"
     "evens, odds = u[::2], u[1::2]\n"
     "err = np.abs(d1[1:-1] - np.cos(np.arange(2, 998) * h)).max()\n"),
    ("standardise_columns",
     RNG + "X = rng.standard_normal((200, 8)) * 3 + 1\n",
     "mu = X.mean(axis=0)\nsd = X.std(axis=0)\nZ = (X - mu) / sd\nworst = np.abs(Z).max()\n"),
    ("softmax_logits",
     RNG + "logits = rng.standard_normal((32, 10)).astype(np.float32)\n",
     "s = logits - logits.max(axis=1, keepdims=True)\np = np.exp(s)\np /= p.sum(axis=1, keepdims=True)\n"
     "pred = p.argmax(axis=1)\n"),
    ("summary_stats",
     RNG + "x = rng.standard_normal(1000)\n",
     "stats = {'mean': x.mean(), 'std': x.std(), 'min': x.min(), 'max': x.max()}\n"
     "q = np.percentile(x, [5, 50, 95])\nprint(f\"mean {stats['mean']:.3f} sd {stats['std']:.3f}\")\n"),
    ("clip_and_mask",
     RNG + "x = rng.standard_normal(1000)\n",
     "c = np.clip(x, -1, 1)\nw = np.where(x > 0, x, 0.0)\nfrac = (x > 0).mean()\nx2 = x.copy()\nx2[x2 < -2] = -2\n"),
    ("kmeans_assign",
     RNG + "P = rng.standard_normal((60, 3))\nC = rng.standard_normal((5, 3))\n",
     "D = ((P[:, None, :] - C[None, :, :]) ** 2).sum(-1)\nlab = D.argmin(axis=1)\n"
     "inertia = D.min(axis=1).sum()\n"),
    ("least_squares",
     RNG + "A = rng.standard_normal((100, 3))\ny = A @ np.array([1.0, -2.0, 0.5]) + rng.standard_normal(100) * 0.1\n",
     "coef = np.linalg.solve(A.T @ A, A.T @ y)\nresid = y - A @ coef\nr2 = 1 - resid.var() / y.var()\n"),
    ("returns_drawdown",
     RNG + "prices = 100 * np.exp(np.cumsum(rng.standard_normal(500) * 0.01))\n",
     "r = np.diff(np.log(prices))\ncum = np.cumsum(r)\ndd = cum - np.maximum.accumulate(cum)\n"
     "worst = dd.min()\nvol = r.std() * np.sqrt(252)\n"),
    ("one_hot_accuracy",
     RNG + "logits = rng.standard_normal((64, 10))\nlabels = rng.integers(0, 10, 64)\n",
     "pred = logits.argmax(axis=1)\nonehot = np.eye(10)[labels]\nacc = (pred == labels).mean()\n"
     "loss = -(onehot * (logits - np.log(np.exp(logits).sum(1, keepdims=True)))).sum(1).mean()\n"),
    ("tiny_mlp_forward",
     RNG + "a = rng.standard_normal((16, 8)).astype(np.float32)\n"
     "W = rng.standard_normal((8, 4)).astype(np.float32)\nb = np.zeros(4, np.float32)\n",
     "h = np.tanh(a @ W + b)\nout = 1 / (1 + np.exp(-h))\nmean_out = out.mean(axis=0)\n"),
]


def _cells():
    from tests.cells.catalogue import Cell
    return [Cell(name, src, setup=setup) for name, setup, src in CELLS]


def run(quick: bool = False) -> dict:
    from tests.cells import harness
    from nbaccel.magics import get_extension
    from .timing import WrongResult
    shell = harness.get_shell("auto")
    rounds = 5 if quick else 15
    shell.run_line_magic("nbaccel", "reset")
    cells = _cells()
    out = {"target": TARGET, "rounds": rounds, "threads": os.environ.get("NUMBA_NUM_THREADS"), "cells": {}}
    for c in cells:
        plain = harness.run(shell, c, compiled=False)
        if plain.error:
            raise WrongResult(f"{c.name}: the plain cell raised {plain.error}")
        first = harness.run(shell, c, compiled=True)
        harness.run(shell, c, compiled=True)
        p_times, c_times, ratios = [], [], []
        paths = set()
        for _ in range(rounds):
            p = harness.run(shell, c, compiled=False)
            k = harness.run(shell, c, compiled=True)
            diff = harness.differences(p, k)
            if diff:
                raise WrongResult(f"{c.name}: the compiled cell differs from the plain one: {diff}")
            rep = get_extension(shell).last[1]
            paths.add((rep.path, rep.path_reason))
            p_times.append(p.seconds)
            c_times.append(k.seconds)
            ratios.append(p.seconds / k.seconds)
        path, why = sorted(paths, key=str)[-1]
        out["cells"][c.name] = {
            "plain": _stats(p_times), "compiled": _stats(c_times), "ratio": _stats(ratios),
            "first_compiled": first.seconds, "path": path, "why": why, "paths": len(paths),
            "met": statistics.median(ratios) >= TARGET}
    shell.run_line_magic("nbaccel", "config report=auto backend=auto")
    out["met"] = sum(v["met"] for v in out["cells"].values())
    return out


def _stats(v):
    return {"median": statistics.median(v), "min": min(v), "max": max(v)}


def markdown(results) -> str:
    lines = [f"### Small cells: the compiled second run against the plain cell "
             f"({len(results['cells'])} cells, {results['rounds']} interleaved rounds, "
             f"{results['threads']} threads; target ≥ {results['target']}×)", "",
             "| cell | plain median (min–max) | compiled median (min–max) | ratio median (min–max) "
             "| first compiled run | path | why |", "|---|---|---|---|---|---|---|"]
    for name, v in results["cells"].items():
        p, c, r = v["plain"], v["compiled"], v["ratio"]
        lines.append(
            f"| {name} | {p['median'] * 1e6:.0f} µs ({p['min'] * 1e6:.0f}–{p['max'] * 1e6:.0f}) "
            f"| {c['median'] * 1e6:.0f} µs ({c['min'] * 1e6:.0f}–{c['max'] * 1e6:.0f}) "
            f"| {'**' if not v['met'] else ''}{r['median']:.2f}×{'**' if not v['met'] else ''} "
            f"({r['min']:.2f}–{r['max']:.2f}) | {v['first_compiled'] * 1e3:.1f} ms | {v['path']} "
            f"| {(v['why'] or '').replace('|', '/')} |")
    lines += ["", f"{results['met']} of {len(results['cells'])} cells meet the target (median ratio ≥ "
              f"{results['target']}×; bold: below it)."]
    return "\n".join(lines)


if __name__ == "__main__":
    import json
    res = run(quick="--quick" in sys.argv)
    print(markdown(res))
    print(json.dumps(res, indent=1, default=str))
