"""(e) compile latency of the 20-op function and (f) tracing overhead per op.

Cold and warm-start numbers come from fresh processes (``python -m bench.latency MODE``,
one JSON line on stdout) so that nothing compiled or imported earlier in the benchmark
process helps them; the interpreter's own start-up is excluded, ``import nbaccel`` is
timed separately (``process_wall`` is the whole process; ``python -m bench.startup`` times
the user's process from its first line, cold and warm).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

from .timing import WrongResult, check, measure, timed
from .workloads import CHAIN_OPS, F20_OPS, chain200, f20

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _inputs(rows, cols):
    rng = np.random.default_rng(1)
    return (rng.standard_normal((rows, cols), dtype=np.float32),
            rng.standard_normal((rows, cols), dtype=np.float32))


def worker(mode: str, rows: int, cols: int) -> dict:
    """One fresh-process measurement; ``NBACCEL_CACHE_DIR`` is set by the caller."""
    t0 = time.perf_counter()
    import nbaccel as nb
    out = {"mode": mode, "import_nbaccel": time.perf_counter() - t0}
    x, y = _inputs(rows, cols)
    ref = f20(np)(x, y)
    backend = "auto" if mode in ("first-auto", "warm-auto") else "numba"
    cf = nb.compile(f20(nb), backend=backend)
    res, first = timed(lambda: cf(x, y))
    rep = cf.report
    out.update(first_call=first, tier=rep.tier, cache=rep.cache, pending_tier=rep.pending_tier,
               compile_seconds=rep.compile_seconds, compile_breakdown=dict(rep.compile_breakdown),
               jit_breakdown=dict(getattr(rep, "jit_breakdown", None) or {}), kernels=len(rep.kernels))
    check(f"20-op function ({mode})", res, ref)
    if mode == "first-auto":
        _, out["numba_ready_after"] = timed(lambda: cf.wait())
        check("20-op function after the numba tier is ready", cf(x, y), ref)
        out["tier_after_wait"] = cf.report.tier
        # "the run itself": the same graph on the NumPy tier, compiled and warm
        cnp = nb.compile(f20(nb), backend="numpy")
        cnp(x, y)
        out["numpy_tier_run"] = measure(lambda: cnp(x, y), 20)["median"]
        out["numpy_eager_run"] = measure(lambda: f20(np)(x, y), 20)["median"]
    else:
        check(f"20-op function ({mode}, 2nd call)", cf(x, y), ref)
        out["steady"] = measure(lambda: cf(x, y), 20)["median"]
        out["steady_tier"] = cf.report.tier
    return out


def _spawn(mode, cache_dir, rows, cols, timeout=300) -> dict:
    env = dict(os.environ, NBACCEL_CACHE_DIR=cache_dir)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "bench.latency", mode, "--rows", str(rows),
                        "--cols", str(cols)], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=timeout)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).strip().splitlines()[-6:]
        msg = "\n".join(tail)
        if "WrongResult" in msg:
            raise WrongResult(f"{mode}: {msg}")
        raise RuntimeError(f"{mode} worker failed (exit {p.returncode}):\n{msg}")
    res = json.loads(p.stdout.strip().splitlines()[-1])
    res["process_wall"] = wall
    return res


def run_compile_latency(tmp_root: str, rows=1024, cols=1024) -> dict:
    """(e): numba cold, first result with backend='auto', warm start in a new process."""
    cold_dir = os.path.join(tmp_root, "cache-cold")
    auto_dir = os.path.join(tmp_root, "cache-auto")
    out = {"ops": F20_OPS, "shape": [rows, cols]}
    out["numba cold"] = _spawn("cold-numba", cold_dir, rows, cols)
    out["auto first result"] = _spawn("first-auto", auto_dir, rows, cols)
    out["warm new process (numba)"] = _spawn("warm-numba", cold_dir, rows, cols)
    out["warm new process (auto)"] = _spawn("warm-auto", cold_dir, rows, cols)
    return out


def run_tracing_overhead(size=8, repeat=30) -> dict:
    """(f): time per call of a warm compiled 200-op chain on a tiny array, divided by 200."""
    import nbaccel as nb
    x = np.random.default_rng(2).standard_normal(size, dtype=np.float32)
    ref = chain200(np)(x)
    cf = nb.compile(chain200(nb))
    _, first = timed(lambda: cf(x))
    cf.wait()
    check("200-op chain", cf(x), ref)
    r = measure(lambda: cf(x), repeat, warmup=3)
    tx = nb.asarray(x)
    eager = measure(lambda: chain200(nb)(tx), repeat)
    plain = measure(lambda: chain200(np)(x), repeat)
    return {"ops": CHAIN_OPS, "size": size, "first_call": first, "tier": cf.report.tier,
            "cache": cf.report.cache, "call": r,
            "per_op": r["median"] / CHAIN_OPS, "per_op_min": r["min"] / CHAIN_OPS,
            "nbaccel_eager_per_op": eager["median"] / CHAIN_OPS,
            "numpy_per_op": plain["median"] / CHAIN_OPS}


def run_schedule_time(repeat=20) -> dict:
    """Median seconds to schedule the decomposed 200-op chain (the loop-IR scheduler alone)."""
    import nbaccel as nb
    from nbaccel.compiler.capture.decompose import decompose
    from nbaccel.compiler.schedule.schedule import schedule
    x = np.ones((64, 64), np.float32)
    cf = nb.compile(chain200(nb), backend="numpy")
    cf(x)
    graph = next(iter(cf.cache.entries.values())).programs
    prim = next(iter(graph.values())).graph
    assert len(prim.nodes) >= CHAIN_OPS, len(prim.nodes)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        schedule(prim)
        times.append(time.perf_counter() - t0)
    times.sort()
    return {"nodes": len(prim.nodes), "seconds": times[len(times) // 2], "min": times[0], "max": times[-1]}


def main():
    ap = argparse.ArgumentParser(description="fresh-process worker for bench (e)")
    ap.add_argument("mode", choices=("cold-numba", "first-auto", "warm-numba", "warm-auto"))
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--cols", type=int, default=1024)
    a = ap.parse_args()
    print(json.dumps(worker(a.mode, a.rows, a.cols)))


if __name__ == "__main__":
    main()
