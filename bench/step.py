"""(d) The MLP training step (bench/workloads.py ``MLP``): compiled vs eager vs NumPy vs torch.

Implementations, each checked against the NumPy step first, then timed *interleaved*: every
round runs each implementation once (after one untimed call, so that a thread pool that
spins after the previous library's call does not land on the next one), so drift on a shared
machine hits them all alike. Results are medians with min/max over rounds, and the median of
the per-round ratios with its spread (max/min of those ratios).

* ``numpy``: forward and backward written by hand (``MLP.numpy_step``);
* ``nbaccel eager``: nbaccel.nn + nbaccel.optim, op by op;
* ``nbaccel compiled``: the same step under ``nb.compile(mode="reduce-overhead",
  backend="numba")``: one replayed program (compiler/train_step.py);
* ``nbaccel compiled (default mode)``: re-traced on every call (the graph cache hits);
* ``torch eager`` / ``torch.compile``: when PyTorch is installed.

    python -m bench.step [--quick]

Thread counts are pinned to 2 (NUMBA_NUM_THREADS, torch.set_num_threads) and recorded.
"""
from __future__ import annotations

import os
import statistics
import sys
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "2")

import numpy as np  # noqa: E402

from .timing import check, to_numpy  # noqa: E402
from .workloads import MLP  # noqa: E402

WARMUP = 4           # untimed calls after the first (torch.compile settles after a few)


def _prepare(mlp, quick):
    import nbaccel as nb
    xt, yt = nb.asarray(mlp.x), nb.asarray(mlp.y)
    ref = mlp.numpy_params()
    ref_loss = mlp.numpy_step(ref, mlp.x, mlp.y)
    impls, info = {}, {}
    p = mlp.numpy_params()
    impls["numpy"] = lambda: mlp.numpy_step(p, mlp.x, mlp.y)

    def checked(name, step, params, call):
        t0 = time.perf_counter()
        loss = call()
        info[name] = {"first_call": time.perf_counter() - t0}
        check(f"{name} loss", to_numpy(loss).reshape(()), np.asarray(ref_loss), 1e-3, 1e-5)
        for k, v in ref.items():
            check(f"{name} {k}", params[k], v, 1e-3, 1e-5)
        for _ in range(WARMUP):
            call()
        impls[name] = call

    step, params = mlp.nbaccel_model()
    checked("nbaccel eager", step, params, lambda step=step: step(xt, yt))
    for name, mode in (("nbaccel compiled", "reduce-overhead"),
                       ("nbaccel compiled (default mode)", "default")):
        step, params = mlp.nbaccel_model()
        cf = nb.compile(step, backend="numba", mode=mode)
        checked(name, step, params, lambda cf=cf: cf(xt, yt))
        info[name].update(replays=cf.stats.get("replays", 0), tier=cf.report.tier)
        rps = list(cf._replays.values())
        if rps:
            info[name]["kernels"] = [k["name"] for k in rps[0].prog.kernels()]
    try:
        import torch
    except ImportError:
        return impls, info
    torch.set_num_threads(int(os.environ.get("NUMBA_NUM_THREADS", "2")))
    tx, ty = torch.from_numpy(mlp.x), torch.from_numpy(mlp.y)
    for name, compiled in (("torch eager", False), ("torch.compile", True)):
        step, tparams = mlp.torch_model(torch)
        fn = torch.compile(step) if compiled else step
        checked(name, step, {k: v.detach() for k, v in tparams.items()}, lambda fn=fn: fn(tx, ty))
    return impls, info


def run(quick: bool = False) -> dict:
    mlp = MLP() if not quick else MLP(batch=128, d_in=256, hidden=256, d_out=256)
    impls, info = _prepare(mlp, quick)
    rounds = 5 if quick else 15
    times = {k: [] for k in impls}
    for _ in range(rounds):
        for name, fn in impls.items():
            fn()
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    res = {"shape": {"batch": mlp.batch, "d_in": mlp.d_in, "hidden": mlp.hidden, "d_out": mlp.d_out},
           "rounds": rounds, "threads": {"NUMBA_NUM_THREADS": os.environ.get("NUMBA_NUM_THREADS"),
                                         "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"),
                                         "torch": int(os.environ.get("NUMBA_NUM_THREADS", "2")),
                                         "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS")},
           "variants": {}}
    base = times["nbaccel compiled"]
    for name, ts in times.items():
        v = {"median": statistics.median(ts), "min": min(ts), "max": max(ts), **info.get(name, {})}
        ratios = [b / c for b, c in zip(ts, base)]      # > 1: compiled is faster than this one
        v["compiled_speedup"] = {"median": statistics.median(ratios), "min": min(ratios),
                                 "max": max(ratios)}
        res["variants"][name] = v
    return res


def markdown(results) -> str:
    s = results["shape"]
    lines = [f"MLP training step, batch {s['batch']}, {s['d_in']}-{s['hidden']}-{s['d_out']}, "
             f"{results['rounds']} interleaved rounds, threads {results['threads']}", "",
             "| implementation | median ms | min ms | max ms | compiled speedup over it (median, min-max of rounds) |",
             "|---|---|---|---|---|"]
    for name, v in results["variants"].items():
        r = v["compiled_speedup"]
        lines.append(f"| {name} | {v['median'] * 1e3:.2f} | {v['min'] * 1e3:.2f} | {v['max'] * 1e3:.2f} | "
                     f"{r['median']:.2f}x ({r['min']:.2f}-{r['max']:.2f}) |")
    return "\n".join(lines)


if __name__ == "__main__":
    out = run(quick="--quick" in sys.argv)
    print(markdown(out))
    k = out["variants"]["nbaccel compiled"].get("kernels")
    if k:
        print("\ncompiled step program:", ", ".join(k))
