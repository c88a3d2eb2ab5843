"""What the disk cache's safety costs: warm restarts, a cold race of processes, and the
per-kernel price of the trust check and the lock file.

    python -m bench.cache_reliability [--quick]

* warm restart: a new process on a warm cache runs three compiled functions; the first call
  of each (milliseconds; the first includes numba's own start-up).
* cold race: N processes started at the same moment on an empty cache compile one graph;
  the wall time and how many of them compiled (the lock should make it one).
* overhead: the trust check (``cache.numba_dir``) and a lock acquire + release, in µs.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WARM = textwrap.dedent("""
    import json, time
    import numpy as np, nbaccel as nb
    fs = [lambda x, w: np.tanh(x * w + 1.0) * 0.5, lambda x, w: (x - w) * 3.0,
          lambda x, w: np.exp(x * w).sum(axis=-1, keepdims=True)]
    x = np.linspace(-2, 2, 64 * 32, dtype=np.float32).reshape(64, 32)
    w = np.linspace(0, 1, 32, dtype=np.float32)
    out = []
    for f in fs:
        cf = nb.compile(f, backend="numba")
        t = time.perf_counter(); cf(x, w); out.append([time.perf_counter() - t, cf.report.cache])
    print(json.dumps(out))
""")

RACE = textwrap.dedent("""
    import json, os, sys, time
    import numpy as np, nbaccel as nb
    open(sys.argv[1], "w").close()
    while not os.path.exists(sys.argv[2]):
        time.sleep(0.002)
    x = np.linspace(-2, 2, 512, dtype=np.float32).reshape(32, 16)
    cf = nb.compile(lambda x: (x * 0.5 + 2.0) * x, backend="numba")
    ok = bool(np.allclose(cf(x), (x * 0.5 + 2.0) * x, rtol=1e-6, atol=1e-6))
    print(json.dumps({"ok": ok, "cache": cf.report.cache, "t": time.time()}))
""")


def _env(cache_dir):
    return dict(os.environ, NBACCEL_CACHE_DIR=cache_dir, NUMBA_NUM_THREADS="2",
                PYTHONPATH=os.pathsep.join([_ROOT, os.environ.get("PYTHONPATH", "")]))


def _stats(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def _warm(tmp, rounds):
    d = os.path.join(tmp, "warm")
    subprocess.run([sys.executable, "-c", WARM], env=_env(d), check=True, capture_output=True)
    first, nxt, states = [], [], set()
    for _ in range(rounds):
        out = subprocess.run([sys.executable, "-c", WARM], env=_env(d), check=True, capture_output=True, text=True)
        rows = json.loads(out.stdout.strip().splitlines()[-1])
        first.append(rows[0][0] * 1e3)
        nxt.extend(r[0] * 1e3 for r in rows[1:])
        states.update(r[1] for r in rows)
    return {"first_kernel_ms": _stats(first), "next_kernel_ms": _stats(nxt), "cache_states": sorted(states)}


def _race(tmp, n, rounds):
    walls, misses, ok = [], [], True
    for r in range(rounds):
        d = os.path.join(tmp, f"race{r}")
        go = os.path.join(tmp, f"go{r}")
        readies = [os.path.join(tmp, f"ready{r}-{i}") for i in range(n)]
        procs = [subprocess.Popen([sys.executable, "-c", RACE, readies[i], go], env=_env(d),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(n)]
        while not all(os.path.exists(p) for p in readies):
            if any(p.poll() not in (None, 0) for p in procs):
                raise RuntimeError([p.communicate()[1] for p in procs])
            time.sleep(0.01)
        t0 = time.time()
        open(go, "w").close()
        res = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
        walls.append(max(x["t"] for x in res) - t0)
        misses.append(sum(x["cache"] == "miss" for x in res))
        ok = ok and all(x["ok"] for x in res)
    return {"processes": n, "wall_s": _stats(walls), "compiled": _stats(misses), "all_correct": ok}


def _overhead(tmp, reps):
    from nbaccel import cache_fs
    from nbaccel.compiler.cache import cache
    from nbaccel.compiler.config import config
    config["cache_dir"] = os.path.join(tmp, "overhead")     # the environment is read at import
    cache._reset_session_for_tests()
    cache.numba_dir(for_write=False)
    out = {}
    for name, fn in (("trust_check_us", lambda: cache.numba_dir(for_write=False)),
                     ("lock_us", lambda: cache_fs.FileLock(os.path.join(tmp, "x.lock")).__enter__().release())):
        ts = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t) * 1e6)
        out[name] = _stats(ts)
    return out


def run(quick: bool = False) -> dict:
    with tempfile.TemporaryDirectory(prefix="nbaccel-bench-cache-") as tmp:
        return {"warm_restart": _warm(tmp, 2 if quick else 5),
                "cold_race": _race(tmp, 4, 1 if quick else 3),
                "overhead": _overhead(tmp, 200 if quick else 2000)}


def markdown(results: dict) -> str:
    def f(s, unit):
        return f"{s['median']:.3g} {unit} ({s['min']:.3g}–{s['max']:.3g}, n={s['n']})"
    w, r, o = results["warm_restart"], results["cold_race"], results["overhead"]
    return "\n".join([
        "| disk cache | median (min–max) |", "|---|---|",
        f"| warm restart, first kernel | {f(w['first_kernel_ms'], 'ms')} |",
        f"| warm restart, next kernels | {f(w['next_kernel_ms'], 'ms')} |",
        f"| cold race, {r['processes']} processes, wall | {f(r['wall_s'], 's')} |",
        f"| cold race, processes that compiled | {f(r['compiled'], '')} (all correct: {r['all_correct']}) |",
        f"| trust check per kernel load | {f(o['trust_check_us'], 'µs')} |",
        f"| lock acquire + release | {f(o['lock_us'], 'µs')} |",
    ])


if __name__ == "__main__":
    res = run(quick="--quick" in sys.argv)
    print(markdown(res))
