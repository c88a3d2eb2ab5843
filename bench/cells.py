"""The notebook-cell catalogue (tests/cells): plain against %%compile, first and second run.

    python -m bench.cells [--quick]

Each round runs every available cell from a fresh namespace: plainly, compiled for the first
time (a new cell: tracing and compiling included), and compiled again (the cached entry).
Implementations are interleaved cell by cell. Reported: the total of each over the catalogue
(median with min/max over rounds), and the cells whose first compiled run exceeded the target
of 2x the plain run + 50 ms.
"""
from __future__ import annotations

import os
import pathlib
import statistics
import sys

os.environ.setdefault("NUMBA_NUM_THREADS", "2")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))


def run(quick: bool = False) -> dict:
    from tests.cells import catalogue, harness
    shell = harness.get_shell("auto")
    cells = [c for c in catalogue.CELLS if harness.available(c)]
    rounds = 1 if quick else 3
    totals = {"plain": [], "first": [], "second": []}
    over = {}
    for _ in range(rounds):
        shell.run_line_magic("nbaccel", "reset")
        t = {"plain": 0.0, "first": 0.0, "second": 0.0}
        for c in cells:
            p = harness.run(shell, c, compiled=False)
            f = harness.run(shell, c, compiled=True)
            s = harness.run(shell, c, compiled=True)
            t["plain"] += p.seconds
            t["first"] += f.seconds
            t["second"] += s.seconds
            if f.seconds > 2 * p.seconds + 0.05:
                over.setdefault(c.name, []).append((p.seconds, f.seconds))
        for k in t:
            totals[k].append(t[k])
    shell.run_line_magic("nbaccel", "config report=auto backend=auto")
    summary = {k: {"median": statistics.median(v), "min": min(v), "max": max(v)} for k, v in totals.items()}
    return {"cells": len(cells), "rounds": rounds, "totals": summary,
            "over_target": {k: {"plain": statistics.median(a for a, _ in v),
                                "first": statistics.median(b for _, b in v), "rounds": len(v)}
                            for k, v in over.items()}}


def markdown(results) -> str:
    lines = [f"### Notebook cells: plain vs %%compile ({results['cells']} cells, {results['rounds']} rounds)", "",
             "| run | total (median) | min | max |", "|---|---|---|---|"]
    for k, label in (("plain", "plain"), ("first", "compiled, first run"), ("second", "compiled, second run")):
        v = results["totals"][k]
        lines.append(f"| {label} | {v['median'] * 1e3:.0f} ms | {v['min'] * 1e3:.0f} ms | {v['max'] * 1e3:.0f} ms |")
    over = results["over_target"]
    lines.append("")
    if over:
        lines.append("First compiled runs over 2x plain + 50 ms: " + ", ".join(
            f"{k} ({v['plain'] * 1e3:.0f} → {v['first'] * 1e3:.0f} ms)" for k, v in sorted(over.items())))
    else:
        lines.append("Every first compiled run was within 2x the plain run + 50 ms.")
    return "\n".join(lines)


if __name__ == "__main__":
    import json
    res = run(quick="--quick" in sys.argv)
    print(markdown(res))
    print(json.dumps(res, indent=1))
