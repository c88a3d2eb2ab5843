"""(d) The MLP training step (bench/workloads.py ``MLP``): compiled vs eager vs NumPy vs torch.

Implementations, each checked against the NumPy step first, then timed *interleaved*: every
round runs each implementation once (after one untimed call, so that a thread pool that
spins after the previous library's call does not land on the next one), so drift on a shared
machine hits them all alike. Results are medians with min/max over rounds, and the median of
the per-round ratios with its spread (max/min of those ratios).

* ``numpy``: forward and backward written by hand (``MLP.numpy_step``);
* ``nbaccel eager``: nbaccel.nn + nbaccel.optim, op by op;
* ``nbaccel compiled``: the same step under ``nb.compile(mode="reduce-overhead",
  backend="numba")``: one replayed program (compiler/replay/train_step.py);
* ``nbaccel compiled (default mode)``: the same program, replayed on guards (its Python reads
  and the modules' and optimizer's state: compiler/replay/guarded.py);
* ``torch eager`` / ``torch.compile``: when PyTorch is installed, in a child process of their
  own (beside a NumPy step of their own, through which they are compared).

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


def _prepare(mlp, quick, with_torch=True, with_nbaccel=True):
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
    if with_nbaccel:
        checked("nbaccel eager", step, params, lambda step=step: step(xt, yt))
    for name, mode in (("nbaccel compiled", "reduce-overhead"),
                       ("nbaccel compiled (default mode)", "default"))[:2 if with_nbaccel else 0]:
        step, params = mlp.nbaccel_model()
        cf = nb.compile(step, backend="numba", mode=mode)
        checked(name, step, params, lambda cf=cf: cf(xt, yt))
        info[name].update(replays=cf.stats.get("replays", 0), tier=cf.report.tier)
        rps = list(cf._replays.values())
        if rps:
            info[name]["kernels"] = [k["name"] for k in rps[0].prog.kernels()]
    if not with_torch:
        return impls, info
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


def _time(impls, rounds):
    times = {k: [] for k in impls}
    for _ in range(rounds):
        for name, fn in impls.items():
            fn()
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def _torch_process(quick):
    """numpy and torch variants timed in a child process: with OMP_WAIT_POLICY=ACTIVE, torch's
    OpenMP pool and numba's would spin against each other (and against OpenBLAS) in one
    process."""
    import json
    import subprocess
    cmd = [sys.executable, "-m", "bench.step", "--torch-only"] + (["--quick"] if quick else [])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=True).stdout
        return json.loads(out.strip().splitlines()[-1])
    except Exception as e:      # torch missing or failing must not hide nbaccel's figures
        return {"error": f"{type(e).__name__}: {str(e)[:200]}"}


def run(quick: bool = False, torch_only: bool = False) -> dict:
    mlp = MLP() if not quick else MLP(batch=128, d_in=256, hidden=256, d_out=256)
    impls, info = _prepare(mlp, quick, with_torch=torch_only, with_nbaccel=not torch_only)
    rounds = 5 if quick else 15
    times = _time(impls, rounds)
    if torch_only:
        return {k: {"median": statistics.median(v), "min": min(v), "max": max(v), **info.get(k, {})}
                for k, v in times.items()}
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
    peer = _torch_process(quick)
    if "error" in peer:
        res["torch"] = peer
        return res
    # torch ran beside its own NumPy step: compare through the NumPy step of each process
    np_here, np_there = res["variants"]["numpy"]["median"], peer["numpy"]["median"]
    for name in ("torch eager", "torch.compile"):
        if name in peer:
            v = dict(peer[name])
            scaled = v["median"] / np_there * np_here
            v["compiled_speedup"] = {"median": scaled / statistics.median(base), "min": None, "max": None,
                                     "note": "other process; via each process's NumPy step"}
            v["numpy_same_process"] = np_there
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
        spread = f"({r['min']:.2f}-{r['max']:.2f})" if r.get("min") is not None else \
            f"(own process; its NumPy step {v['numpy_same_process'] * 1e3:.2f} ms)"
        lines.append(f"| {name} | {v['median'] * 1e3:.2f} | {v['min'] * 1e3:.2f} | {v['max'] * 1e3:.2f} | "
                     f"{r['median']:.2f}x {spread} |")
    if "torch" in results:
        lines.append(f"\ntorch: {results['torch']['error']}")
    return "\n".join(lines)


if __name__ == "__main__":
    if "--torch-only" in sys.argv:
        import json
        print(json.dumps(run(quick="--quick" in sys.argv, torch_only=True)))
        sys.exit(0)
    out = run(quick="--quick" in sys.argv)
    print(markdown(out))
    k = out["variants"]["nbaccel compiled"].get("kernels")
    if k:
        print("\ncompiled step program:", ", ".join(k))
