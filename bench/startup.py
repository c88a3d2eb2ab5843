"""Start-up counted from the process's first line: the 20-op function compiled and called in a
new Python process, cold (fresh caches) and warm (the same caches, a new process).

    python -m bench.startup [--quick] [--rounds N] [--backend auto|numba] [--base DIR]

Each measurement is one whole process, ``python -c SCRIPT``, timed by this process from before
it starts to after it exits (interpreter start and exit included). SCRIPT is what a user writes:
``import numpy``, ``import nbaccel as nb``, the function, ``nb.compile(f)``, ``f(x, y)``. It
prints, at the end, the wall-clock moments it reached each line, from which the stages are
split: interpreter start, ``import numpy``, ``import nbaccel``, the first call (compile or
disk-cache load included), and exit (for ``backend="auto"`` with a cold cache that includes the
wait for the background compile that fills the disk cache).

The process runs as a user's would: the environment without nbaccel's, numba's, OpenMP's and
BLAS's variables (and without ``PYTHONDONTWRITEBYTECODE``: an installed package has its
bytecode, so one untimed process writes it first), with a fresh ``NBACCEL_CACHE_DIR`` and
``NUMBA_CACHE_DIR`` per round. ``--base DIR`` runs another checkout in the same interleaved
rounds for a before/after comparison.

The disk cache's directory name includes a hash of nbaccel's sources: a file edited between a
cold and a warm run makes the warm run miss. Measure a snapshot (``git archive HEAD | tar -x -C
DIR``, then ``--base`` or ``cd DIR && python -m bench.startup``); a miss is reported, not timed.
"""
from __future__ import annotations

import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_COLD, TARGET_WARM = 1.0, 0.4
STAGES = ("interpreter", "import numpy", "import nbaccel", "first call", "exit")
_DROP_PREFIXES = ("NBACCEL_", "NUMBA_", "OMP_", "OPENBLAS_", "MKL_", "KMP_", "GOMP_")
_DROP = {"PYTHONDONTWRITEBYTECODE", "PYTHONSTARTUP", "PYTHONPATH"}


def script(backend: str) -> str:
    """The measured process's source: the user's lines, then one JSON line of moments."""
    from .workloads import f20
    return "\n".join([
        "import time; _t = [time.time()]",
        "import numpy as np; _t.append(time.time())",
        "import nbaccel as nb; _t.append(time.time())",
        inspect.getsource(f20),
        "rng = np.random.default_rng(1)",
        "x = rng.standard_normal((1024, 1024), dtype=np.float32)",
        "y = rng.standard_normal((1024, 1024), dtype=np.float32)",
        f"f = nb.compile(f20(nb), backend={backend!r})",
        "out = f(x, y); _t.append(time.time())",
        "import json",
        "ok = bool(np.allclose(out, f20(np)(x, y), rtol=1e-4, atol=1e-4))",
        "print(json.dumps({'t': _t, 'tier': f.report.tier, 'cache': f.report.cache, 'ok': ok}))",
    ]) + "\n"


def plain_env(root: str, cache_root: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _DROP and not k.startswith(_DROP_PREFIXES)}
    env.update(PYTHONPATH=root, NBACCEL_CACHE_DIR=os.path.join(cache_root, "nbaccel"),
               NUMBA_CACHE_DIR=os.path.join(cache_root, "numba"))
    return env


def one(root: str, cache_root: str, backend: str) -> dict:
    """One whole process: its wall time and its stages (seconds)."""
    t_wall, t0 = time.perf_counter(), time.time()
    p = subprocess.run([sys.executable, "-c", script(backend)], cwd=root, capture_output=True, text=True,
                       env=plain_env(root, cache_root), timeout=600)
    total = time.perf_counter() - t_wall
    if p.returncode != 0:
        raise RuntimeError(f"{root}: the process failed:\n{(p.stderr or p.stdout)[-2000:]}")
    got = json.loads(p.stdout.strip().splitlines()[-1])
    if not got["ok"]:
        raise RuntimeError(f"{root}: wrong result")
    marks = [t0] + got["t"]
    stages = dict(zip(STAGES, [b - a for a, b in zip(marks, marks[1:])]))
    stages["exit"] = total - (marks[-1] - t0)
    return {"total": total, "stages": stages, "tier": got["tier"], "cache": got["cache"]}


def prime(root: str):
    """Write the bytecode an installed package has (untimed)."""
    subprocess.run([sys.executable, "-c", "import nbaccel, numba, scipy.linalg, nbaccel.compiler.api, "
                    "nbaccel.compiler.codegen.fastmath"], cwd=root, env=plain_env(root, tempfile.gettempdir()),
                   capture_output=True, timeout=300)


def _stats(v):
    return {"median": statistics.median(v), "min": min(v), "max": max(v)} if v else None


def run(rounds: int = 5, backend: str = "auto", base: str | None = None) -> dict:
    roots = {"this": ROOT}
    if base:
        roots["base"] = os.path.abspath(base)
    for root in roots.values():
        prime(root)
    raw = {k: {"cold": [], "warm": [], "misses": 0} for k in roots}
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="nbaccel-startup-") as tmp:
        for r in range(rounds):
            for name, root in roots.items():        # interleaved: the load's drift hits both alike
                d = os.path.join(tmp, f"{name}-{r}")
                cold = one(root, d, backend)
                warm = one(root, d, backend)
                raw[name]["cold"].append(cold)
                # (auto: a warm process's first call runs the NumPy tier while numba and the
                # cached machine code load, and its exit does not wait for them: its first
                # call reports no disk hit, and that is the warm start a user gets)
                if warm["cache"] == "disk" or (backend == "auto" and warm.get("tier") == "numpy"):
                    raw[name]["warm"].append(warm)
                else:                               # sources edited between the two: not warm
                    raw[name]["misses"] += 1
            load.append(os.getloadavg()[0])
    out = {"rounds": rounds, "backend": backend, "load": load, "cpus": os.cpu_count(),
           "targets": {"cold": TARGET_COLD, "warm": TARGET_WARM}, "results": {}}
    for name, v in raw.items():
        res = {"root": roots[name], "warm_misses": v["misses"]}
        for kind in ("cold", "warm"):
            res[kind] = _stats([m["total"] for m in v[kind]])
            res[kind + "_stages"] = {s: _stats([m["stages"][s] for m in v[kind]]) for s in STAGES}
        out["results"][name] = res
    return out


def _s(st):
    return "—" if not st else f"{st['median']:.2f} s ({st['min']:.2f}–{st['max']:.2f})"


def markdown(res) -> str:
    load = ", ".join(f"{x:.1f}" for x in res["load"])
    lines = [f"### Start-up from the process's first line: 20-op function, backend={res['backend']!r} "
             f"({res['rounds']} interleaved rounds, {res['cpus']} CPUs, load average {load}; targets: "
             f"cold ≤ {res['targets']['cold']} s, warm ≤ {res['targets']['warm']} s)", "",
             "| checkout | process | total | " + " | ".join(STAGES) + " |",
             "|---|---|---|" + "---|" * len(STAGES)]
    for name, r in res["results"].items():
        for kind in ("cold", "warm"):
            st = r[kind + "_stages"]
            lines.append(f"| {name} | {kind} | {_s(r[kind])} | "
                         + " | ".join(f"{st[s]['median']:.2f}" if st[s] else "—" for s in STAGES) + " |")
        if r["warm_misses"]:
            lines.append(f"| {name} | warm misses (sources edited meanwhile) | {r['warm_misses']} | |")
    return "\n".join(lines)


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    val = lambda flag, default: args[args.index(flag) + 1] if flag in args else default  # noqa: E731
    rounds = 2 if "--quick" in args else int(val("--rounds", 5))
    res = run(rounds, val("--backend", "auto"), val("--base", None))
    print(markdown(res))
    print(json.dumps(res))


if __name__ == "__main__":
    main()
