"""Speed at every size: plain against compiled from 16² to 4096², as ``nb.compile`` and as
``%%compile`` cells (issue 20's size sweep).

    python -m bench.sweep [--quick] [--plot docs/img/size-sweep.png]

Four workloads (gelu + row softmax, a Game of Life step written with slices and a boolean-mask
write, a 20-op elementwise chain, a 3-layer MLP forward), each at sizes 16², 64², 256², 1024²
and 4096² (the MLP's input has that many elements, 64 features wide). For each point: the plain
function and the compiled one (default mode, backend auto: guarded replay, plain-or-compiled
by measurement) run interleaved, round by round, after warm-up calls that let numba finish;
reported: the median of per-round ratios plain / compiled with its spread, and the report's own
headline for the same calls (``report.speedup``, against the plain function), so the two can be
compared. The cell column runs the same code as a ``%%compile`` cell in a real IPython shell.
This runs in the plain process: no thread or wait-policy variables are set.
"""
from __future__ import annotations

import pathlib
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

SIZES = (16, 64, 256, 1024, 4096)
TARGET = 0.9        # compiled ≥ 0.9× plain at every point


def gelu_softmax(x):
    y = 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))
    e = np.exp(y - y.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def life(Z):
    N = (Z[0:-2, 0:-2] + Z[0:-2, 1:-1] + Z[0:-2, 2:] + Z[1:-1, 0:-2] + Z[1:-1, 2:]
         + Z[2:, 0:-2] + Z[2:, 1:-1] + Z[2:, 2:])
    birth = (N == 3) & (Z[1:-1, 1:-1] == 0)
    survive = ((N == 2) | (N == 3)) & (Z[1:-1, 1:-1] == 1)
    out = np.zeros_like(Z)
    out[1:-1, 1:-1][birth | survive] = 1
    return out


def chain20(x):
    y = x
    for _ in range(10):          # 20 elementwise ops
        y = y * 0.99 + 0.01
    return y


W1, W2, W3 = (np.random.default_rng(i).standard_normal((64, 64)).astype(np.float32) * 0.1 for i in range(3))
B = np.zeros(64, np.float32)


def mlp(x):
    h = np.maximum(x @ W1 + B, 0)
    h = np.maximum(h @ W2 + B, 0)
    return h @ W3 + B


def _inputs(name, n):
    rng = np.random.default_rng(0)
    if name == "life":
        return (rng.integers(0, 2, (n, n)).astype(np.int64),)
    if name == "mlp":
        return (rng.standard_normal((max(n * n // 64, 1), 64)).astype(np.float32),)
    return (rng.standard_normal((n, n)).astype(np.float32),)


WORKLOADS = {"gelu_softmax": gelu_softmax, "life": life, "chain20": chain20, "mlp": mlp}
CELL_SOURCE = {
    "gelu_softmax": "y = 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))\n"
                    "e = np.exp(y - y.max(axis=1, keepdims=True))\nout = e / e.sum(axis=1, keepdims=True)\n",
    "chain20": "y = x\nfor _ in range(10):\n    y = y * 0.99 + 0.01\n",
}


def _time(fn, args):
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def _rounds_for(seconds):
    return max(5, min(40, int(0.4 / max(seconds, 1e-6))))


def function_point(name, n):
    import nbaccel as nb
    fn = WORKLOADS[name]
    args = _inputs(name, n)
    cf = nb.compile(fn)
    cf(*args)
    cf.wait(60)
    for _ in range(10):                     # replay and the plain-or-compiled measurement
        cf(*args)
    plain = _time(fn, args)
    rounds = _rounds_for(plain)
    ratios, p_times, c_times = [], [], []
    for _ in range(rounds):
        p, c = _time(fn, args), _time(cf, args)
        p_times.append(p)
        c_times.append(c)
        ratios.append(p / c)
    got, want = cf(*args), fn(*args)
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64),
                               rtol=2e-3, atol=1e-4)
    rep = cf.report
    return {"ratio": statistics.median(ratios), "lo": min(ratios), "hi": max(ratios),
            "plain": statistics.median(p_times), "compiled": statistics.median(c_times),
            "headline": rep.speedup, "note": rep.speedup_note, "path": rep.path,
            "state": rep.replay.get("state")}


def cell_point(shell, name, n):
    from nbaccel.magics import get_extension
    src = CELL_SOURCE[name]
    shell.run_cell("import numpy as np", store_history=False)
    shell.user_ns["x"] = _inputs(name, n)[0]
    shell.run_cell(src, store_history=False)           # plain
    for _ in range(3):
        shell.run_cell("%%compile\n" + src, store_history=False)
    ratios = []
    t_plain = None
    for _ in range(_rounds_for(0.01)):
        t0 = time.perf_counter()
        shell.run_cell(src, store_history=False)
        p = time.perf_counter() - t0
        t0 = time.perf_counter()
        shell.run_cell("%%compile\n" + src, store_history=False)
        c = time.perf_counter() - t0
        ratios.append(p / c)
        t_plain = p
        if p > 0.2:
            break
    last = get_extension(shell).last
    rep = last[1] if last else None
    return {"ratio": statistics.median(ratios), "lo": min(ratios), "hi": max(ratios), "plain": t_plain,
            "headline": getattr(rep, "speedup", None), "path": getattr(rep, "path", None)}


def run(quick: bool = False) -> dict:
    sizes = (16, 64, 256) if quick else SIZES
    out = {"sizes": list(sizes), "target": TARGET, "function": {}, "cell": {}}
    for name in WORKLOADS:
        out["function"][name] = {str(n): function_point(name, n) for n in sizes}
    try:
        from tests.cells import harness
        shell = harness.get_shell("auto")
        for name in CELL_SOURCE:
            out["cell"][name] = {str(n): cell_point(shell, name, n) for n in sizes}
    except Exception as e:       # noqa: BLE001 - the cell column needs IPython; say why it is missing
        out["cell_error"] = f"{type(e).__name__}: {e}"
    pts = [p for w in out["function"].values() for p in w.values()]
    out["met"] = sum(p["ratio"] >= TARGET for p in pts)
    out["points"] = len(pts)
    return out


def markdown(results) -> str:
    sizes = results["sizes"]
    lines = [f"### Size sweep: plain / compiled, median of interleaved rounds (min–max); "
             f"target ≥ {results['target']}× everywhere", "",
             "`nb.compile` (default mode). In brackets: the report's own headline for the same function.", "",
             "| workload | " + " | ".join(f"{n}²" for n in sizes) + " |",
             "|---|" + "---|" * len(sizes)]
    for name, pts in results["function"].items():
        cells = []
        for n in sizes:
            p = pts[str(n)]
            head = f"{p['headline']:.2f}×" if p.get("headline") else (p.get("note") or "—")
            bold = "**" if p["ratio"] < results["target"] else ""
            cells.append(f"{bold}{p['ratio']:.2f}×{bold} ({p['lo']:.2f}–{p['hi']:.2f}) [{head}]")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if results.get("cell"):
        lines += ["", "`%%compile` cells (the same code as a cell, in a real IPython shell):", "",
                  "| cell | " + " | ".join(f"{n}²" for n in sizes) + " |", "|---|" + "---|" * len(sizes)]
        for name, pts in results["cell"].items():
            cells = []
            for n in sizes:
                p = pts[str(n)]
                bold = "**" if p["ratio"] < results["target"] else ""
                cells.append(f"{bold}{p['ratio']:.2f}×{bold} ({p['lo']:.2f}–{p['hi']:.2f})")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if results.get("cell_error"):
        lines.append(f"\ncells not measured: {results['cell_error']}")
    lines += ["", f"{results['met']} of {results['points']} function points meet the target."]
    return "\n".join(lines)


def plot(results, path):
    """Ratio plain / compiled against size, one line per workload (log-log), the 0.9 target."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sizes = results["sizes"]
    fig, ax = plt.subplots(figsize=(7, 4))
    for kind, style in (("function", "-o"), ("cell", "--s")):
        for name, pts in results.get(kind, {}).items():
            ys = [pts[str(n)]["ratio"] for n in sizes]
            ax.plot([n * n for n in sizes], ys, style, label=f"{name} ({'nb.compile' if kind == 'function' else '%%compile'})")
    ax.axhline(results["target"], color="grey", lw=1, ls=":")
    ax.axhline(1.0, color="black", lw=0.5)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("elements (16² … 4096²)")
    ax.set_ylabel("plain time / compiled time")
    ax.set_title("nbaccel against the plain code, by size (median of interleaved rounds)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    res = run("--quick" in sys.argv)
    print(markdown(res))
    if "--plot" in sys.argv:           # python -m bench.sweep --plot docs/img/size-sweep.png
        plot(res, sys.argv[sys.argv.index("--plot") + 1])
