"""Ratios, the issue's targets and the markdown tables of bench/results.md."""
from __future__ import annotations

from .steady import VARIANTS

JUDGED = "nbaccel numba tier"   # what backend="auto" settles on: the targets judge it


def _med(v):
    return v.get("median") if isinstance(v, dict) else None


def add_ratios(variants: dict):
    """Speedups of each variant over NumPy eager, torch.compile and nbaccel eager (in place)."""
    bases = {"vs_numpy": "numpy eager", "vs_torch_compile": "torch.compile",
             "vs_nbaccel_eager": "nbaccel eager"}
    for v in variants.values():
        m = _med(v)
        for key, base in bases.items():
            b = _med(variants.get(base, {}))
            v[key] = b / m if (m and b) else None


def _target(tid, text, measured, met, unit="x"):
    return {"id": tid, "target": text, "measured": measured, "unit": unit, "met": met}


def targets(results: dict) -> list:
    """Each target of the issue, the measured value and whether it was met (None: not measured)."""
    out = []
    steady = results.get("workloads", {})
    for key, pairs in (("a", (("vs_numpy", 10.0, "NumPy eager"), ("vs_torch_compile", 1.5, "torch.compile"))),
                       ("b", (("vs_numpy", 3.0, "NumPy eager"), ("vs_torch_compile", 1.2, "torch.compile"))),
                       ("c", (("vs_numpy", 3.0, "NumPy eager"), ("vs_torch_compile", 1.2, "torch.compile"))),
                       ("g", (("vs_numpy", 4.0, "NumPy eager"),)),
                       ("h", (("vs_numpy", 3.0, "NumPy eager"),)),
                       ("i", (("vs_numpy", 3.0, "NumPy eager"),)),
                       ("d", (("vs_nbaccel_eager", 1.5, "nbaccel eager"),))):
        if key not in steady:
            continue
        v = steady[key]["variants"].get(JUDGED, {})
        for ratio, need, what in pairs:
            r = v.get(ratio)
            out.append(_target(key, f">= {need}x {what}", r, None if r is None else r >= need))
        limit = steady[key].get("max_kernels")
        if limit is not None:
            nk = v.get("kernels")
            out.append(_target(key, f"<= {limit} kernel{'s' if limit > 1 else ''}", nk,
                               None if nk is None else nk <= limit, "kernels"))
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


def _met(m):
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


def steady_table(results: dict) -> str:
    tmap = {}
    for t in results.get("targets", []):
        if t["id"] in "abcdghi":
            tmap.setdefault(t["id"], []).append(f"{t['target']}: {_met(t['met'])}")
    lines = ["| workload | implementation | median ms | min ms | max ms | vs NumPy eager | "
             "vs torch.compile | vs nbaccel eager | first call s | target met? |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for key, w in results.get("workloads", {}).items():
        for name in VARIANTS:
            v = w["variants"].get(name, {"status": "not run"})
            label = f"({key}) {w['title']}"
            tgt = "; ".join(tmap.get(key, [])) if name == JUDGED else ""
            if "median" not in v:
                lines.append(f"| {label} | {name} | {v.get('status', '')} | | | | | | | {tgt} |")
                continue
            first = f"{v['first_call']:.2f}" if v.get("first_call") is not None else ""
            note = f" ({v['note']})" if v.get("note") else ""
            lines.append(f"| {label} | {name}{note} | {_ms(v['median'])} | {_ms(v['min'])} | "
                         f"{_ms(v['max'])} | {_x(v.get('vs_numpy'))} | {_x(v.get('vs_torch_compile'))} | "
                         f"{_x(v.get('vs_nbaccel_eager'))} | {first} | {tgt} |")
    return "\n".join(lines)


def latency_table(results: dict) -> str:
    e = results.get("compile_latency")
    f = results.get("tracing_overhead")
    lines = ["| measurement | seconds | details |", "|---|---|---|"]
    if e and "error" in e:
        lines.append(f"| (e) compile latency | {e['error']} | |")
    elif e:
        c = e["numba cold"]
        br = ", ".join(f"{k} {v:.3f}" for k, v in c["compile_breakdown"].items())
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
    lines = ["| workload | target | measured | target met? |", "|---|---|---|---|"]
    for t in results.get("targets", []):
        lines.append(f"| ({t['id']}) | {t['target']} | {_fmt_measured(t)} | {_met(t['met'])} |")
    return "\n".join(lines)


def markdown(results: dict) -> str:
    m = results["machine"]
    head = (f"Machine: {m['cpu']}, {m['cores']} cores; NumPy {m['numpy']}, numba {m['numba']}, "
            f"torch {m['torch']}; OPENBLAS_CORETYPE={m['env'].get('OPENBLAS_CORETYPE')}, "
            f"OPENBLAS_L2_SIZE={m['env'].get('OPENBLAS_L2_SIZE')}; numba threading layer "
            f"{m.get('numba_threading_layer')}; load average at start "
            f"{', '.join(f'{x:.1f}' for x in m.get('load_average', ()))}, at end "
            f"{', '.join(f'{x:.1f}' for x in m.get('load_average_end', ()))}. "
            f"Shapes: {results['config']['shape_note']}. Times are medians of "
            f"{results['config']['repeat']} runs after warm-up; compiled results were checked "
            f"against NumPy first.")
    parts = [head, "", "### Targets", "", targets_table(results), "",
             "### Steady state, (a)-(d)", "", steady_table(results), "",
             "### Compile latency (e) and tracing overhead (f)", "", latency_table(results)]
    fails = results.get("failures", [])
    if fails:
        parts += ["", "### FAILURES", ""] + [f"- {x}" for x in fails]
    return "\n".join(parts) + "\n"
