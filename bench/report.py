"""Ratios, the issue's targets and the markdown tables of bench/results.md."""
from __future__ import annotations

from .steady import JUDGED_MODE, VARIANTS
from .timing import SPREAD_LIMIT, ratio_stats, verdict

JUDGED = "nbaccel numba tier"   # what backend="auto" settles on: the targets judge it
BASES = {"vs_numpy": "numpy eager", "vs_torch_eager": "torch eager", "vs_torch_compile": "torch.compile",
         "vs_nbaccel_eager": "nbaccel eager"}
BASE_LABEL = {"vs_numpy": "NumPy eager", "vs_torch_eager": "torch eager",
              "vs_torch_compile": "torch.compile", "vs_nbaccel_eager": "nbaccel eager"}
# the issues' targets: workload -> ((ratio key, at least), ...)
TARGETS = {"a": (("vs_numpy", 10.0), ("vs_torch_compile", 2.0)),
           "b": (("vs_numpy", 3.0), ("vs_torch_compile", 1.2)),
           "c": (("vs_numpy", 3.0), ("vs_torch_compile", 1.2)),
           "g": (("vs_numpy", 4.0),),
           "h": (("vs_numpy", 3.0),),
           "i": (("vs_numpy", 3.0),),
           "d": (("vs_nbaccel_eager", 1.5), ("vs_numpy", 1.0), ("vs_torch_compile", 1.0))}


def _med(v):
    return v.get("median") if isinstance(v, dict) else None


def add_ratios(variants: dict):
    """Per-round speedups of each variant over each base, per allocator mode (in place):
    ``v["ratios"][mode]["vs_numpy"]`` = ``timing.ratio_stats``; ``v["vs_numpy"]`` etc. are the
    judged mode's medians, for a quick look."""
    for v in variants.values():
        if not isinstance(v, dict) or "modes" not in v:
            continue
        v["ratios"] = {}
        for mode, tm in v["modes"].items():
            v["ratios"][mode] = {}
            for key, base in BASES.items():
                b = variants.get(base, {}).get("modes", {}).get(mode)
                v["ratios"][mode][key] = ratio_stats(b["times"], tm["times"]) if b else None
        j = v["ratios"].get(JUDGED_MODE, {})
        for key in BASES:
            v[key] = j.get(key)["median"] if j.get(key) else None


def _target(tid, text, measured, met, unit="x", **extra):
    return dict({"id": tid, "target": text, "measured": measured, "unit": unit, "met": met}, **extra)


def ratio_targets(key: str, w: dict) -> list:
    """The targets of workload ``key``, judged on the median per-round ratio of the judged mode."""
    out = []
    v = w["variants"].get(JUDGED, {})
    for ratio, need in TARGETS.get(key, ()):
        st = v.get("ratios", {}).get(JUDGED_MODE, {}).get(ratio)
        vd = verdict(st, need)
        other = {m: (r.get(ratio) or {}).get("median") for m, r in v.get("ratios", {}).items() if m != JUDGED_MODE}
        out.append(_target(key, f">= {need}x {BASE_LABEL[ratio]}", st["median"] if st else None, vd["met"],
                           state=vd["state"], spread=vd["spread"], ratio=st, other_modes=other,
                           mode=JUDGED_MODE))
    limit = w.get("max_kernels")
    if limit is not None:
        nk = v.get("kernels")
        out.append(_target(key, f"<= {limit} kernel{'s' if limit > 1 else ''}", nk,
                           None if nk is None else nk <= limit, "kernels"))
    return out


def targets(results: dict) -> list:
    """Each target of the issue, the measured value and whether it was met (None: not measured)."""
    out = []
    for key, w in results.get("workloads", {}).items():
        out += ratio_targets(key, w)
    sched = results.get("schedule_200")
    if sched and "error" not in sched:
        out.append(_target("f", "scheduling a 200-node graph <= 5 ms", sched["seconds"],
                           sched["seconds"] <= 5e-3, "s"))
    e = results.get("compile_latency")
    if e and "error" not in e:
        cold = e["numba cold"]["first_call"]
        out.append(_target("e", "numba tier cold <= 1 s (20-op function)", cold, cold <= 1.0, "s"))
        a = e["auto first result"]
        limit = 0.05 + a["numpy_tier_run"]
        out.append(_target("e", f"first result (auto) <= 50 ms + run ({1e3 * limit:.1f} ms)",
                           a["first_call"], a["first_call"] <= limit, "s"))
        w = e["warm new process (numba)"]["first_call"]
        out.append(_target("e", "warm start in a new process <= 0.3 s", w, w <= 0.3, "s"))
    f = results.get("tracing_overhead")
    if f and "error" not in f:
        out.append(_target("f", "<= 20 us per traced op", f["per_op"], f["per_op"] <= 20e-6, "s"))
    return out


def _ms(s):
    return "" if s is None else f"{1e3 * s:.1f}" if s >= 0.01 else f"{1e3 * s:.2f}"


def _x(r):
    return "" if r is None else f"{r:.2f}x"


def _pct(x):
    return "" if x is None else f"{100 * x:.0f}%"


def _met(m, state=None):
    if state == "too wide":
        return f"spread too wide to judge (median {'meets' if m else 'short'})"
    return "not measured" if m is None else "**yes**" if m else "**NO**"


def _fmt_measured(t):
    if t["measured"] is None:
        return "n/a"
    if t["unit"] == "s":
        v = t["measured"]
        return f"{v * 1e6:.1f} us" if v < 1e-3 else f"{v * 1e3:.1f} ms" if v < 1 else f"{v:.2f} s"
    if t["unit"] == "kernels":
        return f"{t['measured']} kernel{'s' if t['measured'] != 1 else ''}"
    return f"{t['measured']:.2f}x"


def _ratio_cell(st):
    """'2.31x (±8%)': the median per-round ratio and its spread."""
    return "" if not st else f"{st['median']:.2f}x ({_pct(st['spread'])})"


def steady_table(results: dict) -> str:
    tmap = {}
    for t in results.get("targets", []):
        if t["id"] in results.get("workloads", {}):
            tmap.setdefault(t["id"], []).append(f"{t['target']}: {_met(t['met'], t.get('state'))}")
    modes = [JUDGED_MODE] + [m for m in ("fresh", "reused") if m != JUDGED_MODE]
    other = modes[1]
    lines = [f"| workload | implementation | median ms | min ms | max ms | {other} outputs: median ms | "
             "vs NumPy eager | vs torch eager | vs torch.compile | vs nbaccel eager | first call s | target met? |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for key, w in results.get("workloads", {}).items():
        for name in VARIANTS:
            v = w["variants"].get(name, {"status": "not run"})
            label = f"({key}) {w['title']}"
            tgt = "; ".join(tmap.get(key, [])) if name == JUDGED else ""
            if "median" not in v:
                lines.append(f"| {label} | {name} | {v.get('status', '')} | | | | | | | | | {tgt} |")
                continue
            first = f"{v['first_call']:.2f}" if v.get("first_call") is not None else ""
            note = f" ({v['note']})" if v.get("note") else ""
            if v.get("kernels") is not None:
                note += f", {v['kernels']} kernel{'s' if v['kernels'] != 1 else ''}"
            r = v.get("ratios", {}).get(JUDGED_MODE, {})
            om = v.get("modes", {}).get(other, {}).get("median")
            lines.append(f"| {label} | {name}{note} | {_ms(v['median'])} | {_ms(v['min'])} | {_ms(v['max'])} | "
                         f"{_ms(om)} | {_ratio_cell(r.get('vs_numpy'))} | {_ratio_cell(r.get('vs_torch_eager'))} | "
                         f"{_ratio_cell(r.get('vs_torch_compile'))} | {_ratio_cell(r.get('vs_nbaccel_eager'))} | "
                         f"{first} | {tgt} |")
    return "\n".join(lines)


def latency_table(results: dict) -> str:
    e = results.get("compile_latency")
    f = results.get("tracing_overhead")
    lines = ["| measurement | seconds | details |", "|---|---|---|"]
    if e and "error" in e:
        lines.append(f"| (e) compile latency | {e['error']} | |")
    elif e:
        c = e["numba cold"]
        br = ", ".join(f"{k} {v:.3f}" for k, v in c["compile_breakdown"].items()
                       if not isinstance(v, dict))
        split = c["compile_breakdown"].get("jit_split") or c.get("jit_breakdown") or {}
        if split:
            br += " (jit: " + ", ".join(f"{k} {v:.3f}" for k, v in split.items()) + ")"
        lines.append(f"| (e) numba tier, cold (empty cache), first call | {c['first_call']:.3f} | "
                     f"compile breakdown s: {br}; tier {c['tier']}; steady call {_ms(c['steady'])} ms |")
        a = e["auto first result"]
        lines.append(f"| (e) backend=auto, time to first result | {a['first_call']:.3f} | "
                     f"answered by the {a['tier']} tier; NumPy tier run itself "
                     f"{_ms(a['numpy_tier_run'])} ms (NumPy eager {_ms(a['numpy_eager_run'])} ms); "
                     f"numba tier ready {a['numba_ready_after']:.2f} s later |")
        for k in ("warm new process (numba)", "warm new process (auto)"):
            w = e[k]
            lines.append(f"| (e) {k}, first call | {w['first_call']:.3f} | cache {w['cache']}, "
                         f"tier {w['tier']}; `import nbaccel` {w['import_nbaccel']:.3f} s (excluded); "
                         f"steady call {_ms(w['steady'])} ms |")
    if f and "error" in f:
        lines.append(f"| (f) tracing overhead | {f['error']} | |")
    elif f:
        lines.append(f"| (f) per traced op ({f['ops']}-op chain, {f['size']} elements) | "
                     f"{f['per_op'] * 1e6:.1f} us | call {_ms(f['call']['median'])} ms on the "
                     f"{f['tier']} tier; nbaccel eager {f['nbaccel_eager_per_op'] * 1e6:.1f} us/op; "
                     f"NumPy {f['numpy_per_op'] * 1e6:.1f} us/op |")
    return "\n".join(lines)


def targets_table(results: dict) -> str:
    lines = ["| workload | target | measured (median ratio) | spread (IQR/median) | min-max of rounds | "
             "other output mode | target met? |", "|---|---|---|---|---|---|---|"]
    for t in results.get("targets", []):
        st = t.get("ratio")
        rng = f"{st['min']:.2f}x-{st['max']:.2f}x" if st else ""
        other = ", ".join(f"{m} {x:.2f}x" for m, x in (t.get("other_modes") or {}).items() if x is not None)
        lines.append(f"| ({t['id']}) | {t['target']} | {_fmt_measured(t)} | {_pct(t.get('spread'))} | {rng} | "
                     f"{other} | {_met(t['met'], t.get('state'))} |")
    return "\n".join(lines)


def method_note(results: dict) -> str:
    """How the numbers were taken, in one paragraph of results.md."""
    c = results["config"]
    th = results["machine"].get("threads", {})
    return (f"Method: the implementations of a workload run interleaved, round by round (the order "
            f"rotates), {c['rounds']} rounds after one untimed round, in two allocator modes: "
            f"**fresh** outputs (each call's output is new memory, first-touched; the previous result "
            f"stays alive, as in `y = f(x)` in a loop) and **reused** outputs (freed memory stays "
            f"in the heap and results are dropped, so outputs are warm). Ratios are the median of the "
            f"per-round ratios, judged in the {JUDGED_MODE} mode; spread = (q3 - q1) / median of "
            f"those ratios, and a target whose spread is {100 * SPREAD_LIMIT:.0f}% or more is marked "
            f"\"spread too wide to judge\". Every library runs with {c['threads']} thread(s) "
            f"(numba {th.get('numba')}, torch {th.get('torch')}, BLAS {th.get('blas')}); PyTorch runs in "
            f"a separate worker process (pid {results['machine'].get('peer_worker_pid')}), driven over "
            f"a pipe and timing its own calls.")


def markdown(results: dict) -> str:
    m = results["machine"]
    head = (f"Machine: {m['cpu']}, {m['cores']} cores; NumPy {m['numpy']}, numba {m['numba']}, "
            f"torch {m['torch']}; OPENBLAS_CORETYPE={m['env'].get('OPENBLAS_CORETYPE')}, "
            f"OPENBLAS_L2_SIZE={m['env'].get('OPENBLAS_L2_SIZE')}; OMP_WAIT_POLICY="
            f"{m['env'].get('OMP_WAIT_POLICY')}; numba threading layer "
            f"{m.get('numba_threading_layer')}; load average at start "
            f"{', '.join(f'{x:.1f}' for x in m.get('load_average', ()))}, at end "
            f"{', '.join(f'{x:.1f}' for x in m.get('load_average_end', ()))}. "
            f"Shapes: {results['config']['shape_note']}. Compiled and peer results were checked "
            f"against NumPy first.")
    parts = [head, "", method_note(results), "", "### Targets", "", targets_table(results), "",
             "### Steady state", "", steady_table(results), "",
             "### Compile latency (e) and tracing overhead (f)", "", latency_table(results)]
    fails = results.get("failures", [])
    if fails:
        parts += ["", "### FAILURES", ""] + [f"- {x}" for x in fails]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":   # python -m bench.report [results.json]: results.md again, no rerun
    import json
    import os
    import sys
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "results.json")
    with open(path) as f:
        res = json.load(f)
    res["targets"] = targets(res)
    from .run import render
    text = render(res)
    with open(os.path.join(os.path.dirname(os.path.abspath(path)), "results.md"), "w") as f:
        f.write(text)
    print(text)
