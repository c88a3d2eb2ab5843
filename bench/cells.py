"""The notebook-cell catalogue (tests/cells): plain against %%compile, first and second run.

    python -m bench.cells [--quick]

Each round runs every available cell from a fresh namespace: plainly, compiled for the first
time (a new cell: tracing and compiling included), and compiled again (the cached entry).
Implementations are interleaved cell by cell. Reported: the total of each over the catalogue
(median with min/max over rounds), and the cells whose median first compiled run exceeds the
target of 2x the median plain run + 50 ms.
"""
from __future__ import annotations

import os
import pathlib
import statistics
import sys

os.environ.setdefault("NUMBA_NUM_THREADS", "2")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))


def run(quick: bool = False) -> dict:
    """Both the default backend (auto: NumPy tier first, numba loaded or compiled beside it)
    and the NumPy tier alone."""
    return {backend: _run(quick, backend) for backend in ("auto", "numpy")}


def _run(quick, backend):
    from tests.cells import catalogue, harness
    shell = harness.get_shell(backend)
    cells = [c for c in catalogue.CELLS if harness.available(c)]
    rounds = 1 if quick else 3
    totals = {"plain": [], "first": [], "second": []}
    per_cell = {c.name: ([], []) for c in cells}
    mismatches = set()
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
            if harness.differences(p, f) or harness.differences(p, s):
                mismatches.add(c.name)
            per_cell[c.name][0].append(p.seconds)
            per_cell[c.name][1].append(f.seconds)
        for k in t:
            totals[k].append(t[k])
    shell.run_line_magic("nbaccel", "config report=auto backend=auto")
    summary = {k: {"median": statistics.median(v), "min": min(v), "max": max(v)} for k, v in totals.items()}
    # the target, on each cell's medians: first compiled run <= 2x the plain run + 50 ms
    over = {}
    for name, (plain, first) in per_cell.items():
        p, f = statistics.median(plain), statistics.median(first)
        if f > 2 * p + 0.05:
            over[name] = {"plain": p, "first": f, "first_min": min(first), "first_max": max(first)}
    return {"backend": backend, "cells": len(cells), "rounds": rounds, "totals": summary,
            "over_target": over, "mismatches": sorted(mismatches)}


def markdown(results) -> str:
    return "\n\n".join(_markdown(r) for r in results.values())


def _markdown(results) -> str:
    lines = [f"### Notebook cells: plain vs %%compile --backend {results['backend']} "
             f"({results['cells']} cells, {results['rounds']} rounds)", "",
             "| run | total (median) | min | max |", "|---|---|---|---|"]
    for k, label in (("plain", "plain"), ("first", "compiled, first run"), ("second", "compiled, second run")):
        v = results["totals"][k]
        lines.append(f"| {label} | {v['median'] * 1e3:.0f} ms | {v['min'] * 1e3:.0f} ms | {v['max'] * 1e3:.0f} ms |")
    over = results["over_target"]
    lines.append("")
    bad = results.get("mismatches") or []
    lines.append(f"Cells that did not behave as plainly: {', '.join(bad) if bad else 'none'}.")
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
