"""(e) in detail: the numba tier's cold compile of the 20-op function, its split, warm starts,
and what importing numba costs.

    python -m bench.cold_compile [--quick] [--base DIR]

Every measurement is a fresh process (``python -m bench.latency MODE``) with a fresh
``NBACCEL_CACHE_DIR`` *and* a fresh ``NUMBA_CACHE_DIR`` for the cold runs, so nothing compiled
earlier (by nbaccel or by numba's own cache of the fastmath helpers) helps; the warm run is a
new process on the cold run's caches. ``--base DIR`` runs the same protocol against another
checkout (say, the commit before a change), interleaved round by round with this one, for a
before/after comparison under the same machine load. Reported: median / min / max of the first
call (compile included), of the warm start, and of each part of the JIT time (numba typing,
numba lowering, LLVM, cache save, other: ``report.jit_breakdown``), plus ``import numba`` and
``import nbaccel`` in fresh processes.

These are parts of a start-up: the first call alone, with the interpreter, ``import numpy``,
``import nbaccel`` and the process's exit left out. ``python -m bench.startup`` times the whole
process from its first line, which is what the start-up targets count.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_COLD, TARGET_WARM = 1.0, 0.3      # the first call alone (bench.startup: whole processes)


def _env(root, cache_root, cold):
    env = dict(os.environ, PYTHONPATH=root, NBACCEL_CACHE_DIR=os.path.join(cache_root, "nbaccel"),
               NUMBA_CACHE_DIR=os.path.join(cache_root, "numba"))
    env.setdefault("NUMBA_NUM_THREADS", "2")
    return env


def _worker(root, mode, cache_root):
    p = subprocess.run([sys.executable, "-m", "bench.latency", mode], cwd=root, capture_output=True, text=True,
                       env=_env(root, cache_root, mode.startswith("cold")), timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"{mode} in {root} failed:\n{(p.stderr or p.stdout)[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _import_seconds(root, module):
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    p = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=root), timeout=120)
    return float(p.stdout.strip().splitlines()[-1])


def _stats(v):
    return {"median": statistics.median(v), "min": min(v), "max": max(v)} if v else None


def run(quick: bool = False, base: str | None = None) -> dict:
    rounds = 2 if quick else 5
    roots = {"this": ROOT}
    if base:
        roots["base"] = os.path.abspath(base)
    raw = {k: {"cold": [], "warm": [], "split": [], "import_numba": [], "import_nbaccel": []} for k in roots}
    with tempfile.TemporaryDirectory(prefix="nbaccel-cold-") as tmp:
        for r in range(rounds):
            for name, root in roots.items():          # interleaved: drift hits both alike
                d = os.path.join(tmp, f"{name}-{r}")
                cold = _worker(root, "cold-numba", d)
                warm = _worker(root, "warm-numba", d)
                raw[name]["cold"].append(cold["first_call"])
                raw[name]["warm"].append(warm["first_call"])
                raw[name]["split"].append(cold.get("jit_breakdown") or {})
                raw[name]["import_numba"].append(_import_seconds(root, "numba"))
                raw[name]["import_nbaccel"].append(_import_seconds(root, "nbaccel"))
                if cold["tier"] != "numba" or warm["cache"] != "disk":
                    raise RuntimeError(f"{name}: cold tier {cold['tier']}, warm cache {warm['cache']}")
    out = {"rounds": rounds, "targets": {"cold": TARGET_COLD, "warm": TARGET_WARM},
           "threads": os.environ.get("NUMBA_NUM_THREADS", "2"), "results": {}}
    for name, v in raw.items():
        keys = sorted({k for s in v["split"] for k in s})
        out["results"][name] = {
            "root": roots[name], "cold": _stats(v["cold"]), "warm": _stats(v["warm"]),
            "jit_split": {k: _stats([s.get(k, 0.0) for s in v["split"]]) for k in keys},
            "import_numba": _stats(v["import_numba"]), "import_nbaccel": _stats(v["import_nbaccel"])}
    return out


def _s(st):
    return "—" if not st else f"{st['median']:.3f} s ({st['min']:.3f}–{st['max']:.3f})"


def markdown(results) -> str:
    lines = [f"### (e) numba cold compile of the 20-op function ({results['rounds']} rounds, fresh processes "
             f"and caches, {results['threads']} threads; targets: cold ≤ {results['targets']['cold']} s, "
             f"warm ≤ {results['targets']['warm']} s)", "",
             "| checkout | cold first call | warm start | import numba | import nbaccel |", "|---|---|---|---|---|"]
    for name, r in results["results"].items():
        lines.append(f"| {name} | {_s(r['cold'])} | {_s(r['warm'])} | {_s(r['import_numba'])} | "
                     f"{_s(r['import_nbaccel'])} |")
    for name, r in results["results"].items():
        if r["jit_split"]:
            lines += ["", f"JIT split of the cold compile ({name}): " + " · ".join(
                f"{k} {v['median']:.3f} s" for k, v in r["jit_split"].items())]
    return "\n".join(lines)


if __name__ == "__main__":
    args = sys.argv[1:]
    base = args[args.index("--base") + 1] if "--base" in args else None
    res = run(quick="--quick" in args, base=base)
    print(markdown(res))
    print(json.dumps(res, indent=1))
