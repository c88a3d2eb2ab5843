"""Compiled training steps against eager nbaccel (issue 36 item 5): the small CNN and GPT steps
of ``bench/eager.py``, each once eagerly and once under ``nb.compile`` in the default mode.

Both sides start from the same weights (``bench.eager_models._build`` seeds them) and must give the
same losses for the first steps before anything is timed ("WRONG RESULT" otherwise). Then
they run interleaved, round by round (the order rotates), and the headline is the median of
the per-round ratios eager / compiled, with its quartiles: the compiled step's speedup over
eager (issue 36's target for the CNN step: >= 1.2x). The plain-or-compiled decision
(``decide_functions``) is switched off for the run, so the compiled side always runs compiled;
the report also lists the compiled program's steps and which of them are extern kernels.

    python -m bench.compiled_steps [--quick] [--json PATH] [--only cnn|gpt]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

os.environ.setdefault("NUMBA_NUM_THREADS", "2")

from .eager import _threads  # noqa: E402
from .eager_models import _build  # noqa: E402
from .rounds import Local, run_rounds  # noqa: E402
from .timing import ratio_stats, time_stats  # noqa: E402

CONFIGS = {"cnn": dict(channels=16, size=28, batch=64),
           "gpt": dict(layers=4, d=128, heads=4, T=64, vocab=256, batch=16)}
QUICK = {"cnn": dict(channels=4, size=8, batch=8),
         "gpt": dict(layers=1, d=32, heads=4, T=8, vocab=32, batch=2)}
TARGETS = {"cnn": 1.2}
CHECK_STEPS = 3


def _program(cf) -> list:
    """The compiled step's program as (step name, backend, extern?) triples."""
    return [(k["name"], k["backend"], "ranges" not in k) for k in cf.report.kernels]


def one(nb, kind, cfg, rounds) -> dict:
    _, eager = _build(kind, nb, cfg)
    _, traced = _build(kind, nb, cfg)
    compiled = nb.compile(traced)
    row = {"config": cfg}
    for i in range(CHECK_STEPS):        # the same losses, step by step, before any timing
        le, lc = float(eager().item()), float(compiled().item())
        if not math.isclose(le, lc, rel_tol=1e-4, abs_tol=1e-5):
            row["error"] = f"WRONG RESULT: step {i} loss {lc:.7g} (compiled) != {le:.7g} (eager)"
            return row
    for _ in range(3):
        compiled()
    compiled.wait()                     # the numba tier compiles in the background: let it land
    compiled()
    row["program"] = _program(compiled)
    row["tier"] = compiled.report.tier
    times = run_rounds({"eager": Local(eager), "compiled": Local(compiled)}, rounds,
                       keep_last=False, warmup=1)
    row.update({k: time_stats(v) for k, v in times.items()})
    row["speedup"] = ratio_stats(times["eager"], times["compiled"])      # eager / compiled
    return row


def run(quick: bool = False, only=None) -> dict:
    import nbaccel as nb
    from nbaccel.ops import kernel_modules
    kernel_modules.load_now("fused")     # eager's fused kernels, as bench.eager waits for them
    res = {"threads": _threads(), "rounds": 3 if quick else 15, "quick": quick,
           "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None, "steps": {}}
    before = nb.config["decide_functions"]
    nb.config["decide_functions"] = False
    try:
        for kind, cfg in (QUICK if quick else CONFIGS).items():
            if only in (None, kind):
                res["steps"][kind] = one(nb, kind, cfg, res["rounds"])
    finally:
        nb.config["decide_functions"] = before
    res["load_average_after"] = os.getloadavg() if hasattr(os, "getloadavg") else None
    errors = [f"{k}: {v['error']}" for k, v in res["steps"].items() if "error" in v]
    if errors:
        res["error"] = "; ".join(errors)
    return res


def markdown(res) -> str:
    la = ", ".join(f"{x:.1f}" for x in res["load_average"] or ())
    lines = [f"### Compiled (default mode) against eager nbaccel ({res['threads']} threads, "
             f"{res['rounds']} interleaved rounds{', quick' if res['quick'] else ''}; load "
             f"average {la})", "",
             "| step | eager ms | compiled ms | compiled speedup (quartiles) | target |",
             "|---|---|---|---|---|"]
    for kind, row in res["steps"].items():
        if "error" in row:
            lines.append(f"| {kind} | {row['error']} | | | |")
            continue
        s = row["speedup"]
        target = TARGETS.get(kind)
        lines.append(f"| {kind} {row['config']} | {row['eager']['median'] * 1e3:.1f} | "
                     f"{row['compiled']['median'] * 1e3:.1f} | **{s['median']:.2f}x** "
                     f"({s['q1']:.2f}-{s['q3']:.2f}) | "
                     f"{f'>= {target}x' if target else '-'} |")
    for kind, row in res["steps"].items():
        if "program" in row:
            externs = [f"{n} ({b})" for n, b, ext in row["program"] if ext]
            lines += ["", f"{kind}: {len(row['program'])} steps on the {row['tier']} tier; "
                      f"externs: {', '.join(externs)}"]
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(prog="python -m bench.compiled_steps",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 rounds and toy models")
    ap.add_argument("--only", choices=sorted(CONFIGS), default=None)
    ap.add_argument("--json", default=None, help="write the results here")
    a = ap.parse_args()
    out = run(a.quick, a.only)
    print(markdown(out))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
    sys.exit(1 if "error" in out else 0)
