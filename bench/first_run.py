"""What a notebook costs run top to bottom under ``%%compile``: first run and second run against
the plain notebook, compile included (issue 35's first-run targets: <= 1.25x and <= 1.0x).

    python -m bench.first_run [--quick] [--policy plain|compiled]

Two "notebooks" are measured, each in one IPython shell with the default options:

* the cell catalogue (tests/cells/catalogue.py) as one notebook: every cell after its own setup;
* the tutorial notebooks in ``notebooks/`` that need no cluster (``NOTEBOOKS``): their code
  cells with the magics taken out for the plain run, and with ``%%compile`` on every code cell for
  the compiled run.

Per notebook and round: a fresh namespace runs the plain notebook twice, then (with nbaccel's
state reset) a fresh namespace runs the compiled notebook twice; notebooks are interleaved. The
totals' medians over rounds, with min and max, and the ratios are reported. ``--policy compiled``
measures the old behaviour (every cell compiles on its first run) for comparison.
"""
from __future__ import annotations

import json
import os
import pathlib
import statistics
import sys
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "2")
ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NOTEBOOKS = ("01-quickstart", "02-dynamic-shapes-and-recompiles", "03-graph-breaks-and-explain",
             "05-attention", "07-export-and-func", "08-sparsity")


def _plain_cell(src: str) -> str | None:
    """A code cell as plain Python: magic lines and a %%compile header dropped."""
    lines = [ln for ln in src.splitlines() if not ln.lstrip().startswith(("%", "!"))]
    body = "\n".join(lines).strip()
    return body + "\n" if body else None


def notebook_cells(name: str) -> list[str]:
    nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
    cells = []
    for c in nb["cells"]:
        if c["cell_type"] != "code":
            continue
        body = _plain_cell("".join(c["source"]))
        if body is not None:
            cells.append(body)
    return cells


def catalogue_cells() -> list[tuple[str, str]]:
    from tests.cells import catalogue, harness
    return [(c.setup, c.source) for c in catalogue.CELLS if harness.available(c)]


def _run_pass(shell, cells, compiled: bool) -> float:
    """One pass over ``cells`` ((setup, source) pairs; setup None: the notebook's own state)."""
    import contextlib
    import io
    total = 0.0
    for setup, src in cells:
        if setup:
            shell.run_cell(setup, store_history=False, silent=True)
        cell = ("%%compile\n" + src) if compiled else src
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            t0 = time.perf_counter()
            shell.run_cell(cell, store_history=True)
            total += time.perf_counter() - t0
    return total


def _fresh(shell):
    from tests.cells import harness
    harness._fresh(shell, "")


def run(quick: bool = False, policy: str = "plain") -> dict:
    import warnings
    import nbaccel
    from tests.cells import harness
    warnings.simplefilter("ignore")
    shell = harness.get_shell("auto")
    shell.run_line_magic("nbaccel", "config report=none")
    nbaccel.config["cell_first_run"] = policy
    books = {"catalogue": catalogue_cells()}
    for name in NOTEBOOKS[:2] if quick else NOTEBOOKS:
        books[name] = [(None, c) for c in notebook_cells(name)]
    rounds = 1 if quick else 3
    times = {b: {"plain1": [], "plain2": [], "comp1": [], "comp2": []} for b in books}
    for cells in books.values():            # imports, page faults, NumPy's own first calls: not timed
        _fresh(shell)
        _run_pass(shell, cells, False)
    for _ in range(rounds):
        for name, cells in books.items():
            _fresh(shell)
            times[name]["plain1"].append(_run_pass(shell, cells, False))
            times[name]["plain2"].append(_run_pass(shell, cells, False))
            _fresh(shell)
            shell.run_line_magic("nbaccel", "reset")
            times[name]["comp1"].append(_run_pass(shell, cells, True))
            times[name]["comp2"].append(_run_pass(shell, cells, True))
    out = {}
    for name, t in times.items():
        med = {k: statistics.median(v) for k, v in t.items()}
        out[name] = {"cells": len(books[name]), "rounds": rounds,
                     **{k: {"median": med[k], "min": min(v), "max": max(v)} for k, v in t.items()},
                     "first_ratio": med["comp1"] / med["plain1"], "second_ratio": med["comp2"] / med["plain2"]}
    all_p1 = sum(o["plain1"]["median"] for o in out.values())
    all_c1 = sum(o["comp1"]["median"] for o in out.values())
    all_p2 = sum(o["plain2"]["median"] for o in out.values())
    all_c2 = sum(o["comp2"]["median"] for o in out.values())
    return {"policy": policy, "notebooks": out,
            "total": {"first_ratio": all_c1 / all_p1, "second_ratio": all_c2 / all_p2,
                      "plain1": all_p1, "comp1": all_c1, "plain2": all_p2, "comp2": all_c2}}


def markdown(res) -> str:
    lines = [f"### Notebooks top to bottom under %%compile (cell_first_run={res['policy']})", "",
             "| notebook | cells | plain, 1st | compiled, 1st | ratio | plain, 2nd | compiled, 2nd | ratio |",
             "|---|---|---|---|---|---|---|---|"]
    for name, o in res["notebooks"].items():
        lines.append(f"| {name} | {o['cells']} | {o['plain1']['median']:.2f} s | {o['comp1']['median']:.2f} s "
                     f"({o['comp1']['min']:.2f}–{o['comp1']['max']:.2f}) | {o['first_ratio']:.2f}× | "
                     f"{o['plain2']['median']:.2f} s | {o['comp2']['median']:.2f} s | {o['second_ratio']:.2f}× |")
    t = res["total"]
    lines.append(f"| **all** | | {t['plain1']:.2f} s | {t['comp1']:.2f} s | **{t['first_ratio']:.2f}×** | "
                 f"{t['plain2']:.2f} s | {t['comp2']:.2f} s | **{t['second_ratio']:.2f}×** |")
    lines.append("")
    lines.append("Targets: first run <= 1.25x the plain notebook, second run <= 1.0x (medians).")
    return "\n".join(lines)


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(prog="python -m bench.first_run", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one round, the catalogue and two notebooks")
    ap.add_argument("--policy", choices=("plain", "compiled"), default="plain",
                    help="a cell's first run: plain until compiling pays (the default), or compiled")
    a = ap.parse_args()
    res = run(quick=a.quick, policy=a.policy)
    print(markdown(res))
    print(json.dumps(res, indent=1))
