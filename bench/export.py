"""A loaded export against the live compiled function (issue 15's target: the same speed,
within 10%).

Workloads, forward passes in inference (``no_grad``):

* ``tutorial``: the MLP of notebooks/04 (1 → 64 → 64 → 1, GELU) on a batch of 8 points (where
  the per-call overhead shows: live re-traces, loaded does not) and of 4096;
* ``mlp``: bench/workloads.py's MLP shape (Linear 1024 → 1024, ReLU, Linear 1024 → 1024) on a
  batch of 512 (256 with ``--quick``).

*live* is ``nb.compile(model, backend="numba")`` (it traces each call, then runs the cached
kernels); *loaded* is the model exported with a dynamic batch, saved, read back with
``nb.load`` and run with ``backend="numba"`` (no tracing: it checks the inputs and runs the
program). Both are warmed up and checked against the eager model first. The two run
interleaved, round by round (who goes first alternates); each round times a short block of
calls; the ratio is loaded / live per round (median, min, max). Below 1.0 the loaded program
is faster.

    NUMBA_NUM_THREADS=2 python -m bench.export [--quick]
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time



def _models():
    import nbaccel as nb
    from nbaccel import nn
    nb.manual_seed(0)
    tutorial = nn.Sequential(nn.Linear(1, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 1))
    mlp = nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1024))
    return tutorial, mlp


def _case(name, model, batch, rounds, calls):
    import nbaccel as nb
    from .timing import check
    x = nb.randn(batch, model[0].in_features)
    with nb.no_grad():
        want = model(x)
        live = nb.compile(model, backend="numba")
        check(f"{name} live", live(x), want)
        ep = nb.export(model, x, dynamic_shapes={"input": {0: nb.export.Dim("batch", max=1 << 16)}})
        path = os.path.join(tempfile.mkdtemp(prefix="nbaccel-bench-export-"), name)
        ep.save(path)
        loaded = nb.load(path)
        check(f"{name} loaded", loaded.run(x, backend="numba"), want)
        impls = {"live": lambda: live(x), "loaded": lambda: loaded.run(x, backend="numba")}
        for fn in impls.values():
            fn()
        times = {k: [] for k in impls}
        order = list(impls)
        for r in range(rounds):
            for k in (order if r % 2 == 0 else order[::-1]):   # alternate who goes first
                fn = impls[k]
                t0 = time.perf_counter()
                for _ in range(calls):
                    fn()
                times[k].append((time.perf_counter() - t0) / calls)
    ratios = [b / a for a, b in zip(times["live"], times["loaded"])]
    return {"name": name, "batch": batch, "calls_per_round": calls,
            "seconds": {k: {"median": statistics.median(v), "min": min(v), "max": max(v), "runs": len(v)}
                        for k, v in times.items()},
            "ratio": {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}}


def run(quick: bool = False) -> dict:
    """Both workloads; ``quick`` keeps the whole run to a few seconds."""
    tutorial, mlp = _models()
    rounds = 15 if quick else 61
    cases = [_case("tutorial", tutorial, 8, rounds, 20),
             _case("tutorial", tutorial, 4096, rounds, 3),
             _case("mlp", mlp, 256 if quick else 512, rounds, 1)]
    from .timing import machine_info
    return {"quick": quick, "machine": machine_info(), "target_ratio": 1.10, "cases": cases}


def markdown(results) -> str:
    lines = ["| workload | live compiled | loaded export | loaded / live (median, min–max) | target |",
             "|---|---|---|---|---|"]
    for c in results["cases"]:
        s, r = c["seconds"], c["ratio"]
        lines.append(f"| {c['name']}, batch {c['batch']} | {s['live']['median'] * 1e3:.3f} ms "
                     f"| {s['loaded']['median'] * 1e3:.3f} ms | **{r['median']:.2f}×** "
                     f"({r['min']:.2f}–{r['max']:.2f}) | ≤ {results['target_ratio']:.2f}× |")
    m = results.get("machine", {})
    lines.append(f"\nnumba threads {m.get('numba_threads')}; per-call times, medians over rounds")
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    res = run(quick="--quick" in argv)
    print(markdown(res))
    if "--json" in argv:
        print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
