"""Per-example gradients (issue 15): ``nb.compile(vmap(grad(loss)))`` against a Python loop of
eager ``grad`` calls, one per example, and against ``torch.func.vmap(grad)`` (eager, and under
``torch.compile`` when that works on this machine).

The model is notebooks/04's MLP (1 -> 64 -> 64 -> 1, GELU, MSE loss; 4,353 parameters) at
batch 256; every implementation computes the 256 gradients of every parameter. They run
interleaved, round by round; a speedup is the median of the per-round ratios, with its min
and max. Each implementation's result is checked against the loop's before timing.

    python -m bench.func [--quick] [--json]
"""
from __future__ import annotations

import json
import statistics
import sys
import time

import numpy as np

BATCH = 256
TARGET = 10.0     # compiled per-example gradients vs the Python loop


def _model():
    import nbaccel as nb
    from nbaccel import nn
    nb.manual_seed(0)
    model = nn.Sequential(nn.Linear(1, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 1))
    params = {k: v.detach() for k, v in model.named_parameters()}
    rng = np.random.default_rng(0)
    x = np.linspace(-3, 3, BATCH, dtype=np.float32).reshape(-1, 1)
    y = np.sin(2 * x) + 0.1 * rng.standard_normal(x.shape).astype(np.float32)
    return model, params, x, y


def _nbaccel_impls(model, params, x, y):
    import nbaccel as nb
    import nbaccel.nn.functional as F
    from nbaccel.func import functional_call, grad, vmap

    def loss(p, xi, yi):
        return F.mse_loss(functional_call(model, p, (xi[None],)), yi[None])

    X, Y = nb.tensor(x), nb.tensor(y)
    per_example = vmap(grad(loss), in_dims=(None, 0, 0))
    compiled = nb.compile(per_example)
    # reduce-overhead replays the recorded graph instead of tracing the Python on each call
    replayed = nb.compile(per_example, mode="reduce-overhead")
    for c in (compiled, replayed):
        c(params, X, Y)
        c.wait()                      # the numba tier, compiled in the background
        c(params, X, Y)
    one = grad(loss)
    rows = [(X[i], Y[i]) for i in range(BATCH)]   # slicing is not what is measured

    def loop():
        return [one(params, xi, yi) for xi, yi in rows]

    def as_numpy(res):
        if isinstance(res, list):
            return {k: np.stack([np.asarray(r[k]) for r in res]) for k in params}
        return {k: np.asarray(v) for k, v in res.items()}

    impls = {"nbaccel loop of grad": loop,
             "nbaccel vmap(grad) eager": lambda: per_example(params, X, Y),
             "nbaccel compile(vmap(grad))": lambda: compiled(params, X, Y),
             "nbaccel compile(vmap(grad), mode='reduce-overhead')": lambda: replayed(params, X, Y)}
    report = compiled.report
    info = {"graphs": report.graphs, "kernels": len(report.kernels), "tier": report.tier,
            "graph_breaks": len(report.graph_breaks)}
    return impls, as_numpy, info


def _torch_impls(params, x, y, with_compile):
    """torch.func's vmap(grad), eager and (when it works here) under torch.compile."""
    try:
        import torch
        import torch.func as TF
    except ImportError:
        return {}, {"torch": "not installed"}
    torch.set_num_threads(2)
    tmodel = torch.nn.Sequential(torch.nn.Linear(1, 64), torch.nn.GELU(), torch.nn.Linear(64, 64),
                                 torch.nn.GELU(), torch.nn.Linear(64, 1))
    tp = {k: torch.tensor(np.asarray(v)) for k, v in params.items()}
    X, Y = torch.tensor(x), torch.tensor(y)

    def loss(p, xi, yi):
        return torch.nn.functional.mse_loss(TF.functional_call(tmodel, p, (xi[None],)), yi[None])

    per_example = TF.vmap(TF.grad(loss), in_dims=(None, 0, 0))
    impls = {"torch.func vmap(grad)": lambda: per_example(tp, X, Y)}
    notes = {}
    if with_compile:
        try:
            compiled = torch.compile(per_example)
            t0 = time.perf_counter()
            compiled(tp, X, Y)
            notes["torch.compile seconds"] = time.perf_counter() - t0
            impls["torch.compile(torch.func vmap(grad))"] = lambda: compiled(tp, X, Y)
        except Exception as e:          # no C++ toolchain, an unsupported op: skip, say why
            notes["torch.compile"] = f"skipped: {type(e).__name__}: {str(e).splitlines()[0][:160]}"
    else:
        notes["torch.compile"] = "skipped in --quick (it compiles for tens of seconds)"
    return impls, notes


def run(quick: bool = False) -> dict:
    """All implementations, interleaved; ``quick``: 3 rounds and no torch.compile."""
    rounds = 3 if quick else 7
    model, params, x, y = _model()
    impls, as_numpy, graph_info = _nbaccel_impls(model, params, x, y)
    timpls, notes = _torch_impls(params, x, y, with_compile=not quick)
    want = as_numpy(impls["nbaccel loop of grad"]())
    for name, fn in {**impls, **timpls}.items():
        got = fn()
        got = {k: v.detach().numpy() for k, v in got.items()} if name.startswith("torch") else as_numpy(got)
        for k in want:
            if not np.allclose(got[k], want[k], rtol=1e-4, atol=1e-5):
                raise AssertionError(f"{name}: per-example gradient of {k} differs from the loop's")
    everything = {**impls, **timpls}
    times = {name: [] for name in everything}
    for _ in range(rounds):
        for name, fn in everything.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    loop = times["nbaccel loop of grad"]
    speedups = {name: _stats([lp / t for lp, t in zip(loop, ts)])
                for name, ts in times.items() if name != "nbaccel loop of grad"}
    from .timing import machine_info
    return {"quick": quick, "batch": BATCH, "parameters": sum(int(np.prod(v.shape)) for v in params.values()),
            "machine": machine_info(), "target": TARGET, "graph": graph_info, "notes": notes,
            "seconds": {name: _stats(ts) for name, ts in times.items()},
            "speedup_vs_loop": speedups}


def _stats(v):
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "runs": len(v)}


def markdown(results) -> str:
    lines = [f"Per-example gradients of notebooks/04's MLP ({results['parameters']} parameters), "
             f"batch {results['batch']}:", "",
             "| implementation | time (median, min–max) | vs the Python loop (median, min–max) |",
             "|---|---|---|"]
    for name, s in results["seconds"].items():
        sp = results["speedup_vs_loop"].get(name)
        ratio = "1×" if sp is None else f"**{sp['median']:.1f}×** ({sp['min']:.1f}–{sp['max']:.1f})"
        lines.append(f"| {name} | {s['median'] * 1e3:.2f} ms ({s['min'] * 1e3:.2f}–{s['max'] * 1e3:.2f}) "
                     f"| {ratio} |")
    g = results["graph"]
    for name, sp in results["speedup_vs_loop"].items():
        if name.startswith("nbaccel compile"):
            verdict = "meets" if sp["median"] >= results["target"] else "misses"
            lines.append(f"\nTarget: {name} ≥ {results['target']:.0f}× the loop: {verdict} it "
                         f"({sp['median']:.1f}×, min {sp['min']:.1f}×).")
    lines.append(f"\nThe compiled function is {g['graphs']} graph, {g['kernels']} kernels, tier "
                 f"{g['tier']}, {g['graph_breaks']} graph breaks.")
    for k, v in results["notes"].items():
        lines.append(f"\n{k}: {v if isinstance(v, str) else f'{v:.1f}'}")
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    res = run(quick="--quick" in argv)
    print(markdown(res))
    if "--json" in argv:
        print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
