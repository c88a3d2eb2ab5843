"""The verdict and the markdown page of bench/gpu_check.py (its results dict in, text out)."""
from __future__ import annotations

TARGETS = {"copy_fraction": 0.85, "vs_torch_compile": 1.0}    # issue 13, for (a) and (b)


def problems(results: dict) -> list[str]:
    """Every wrong result and failed stage, one line each (empty: all right)."""
    out = []
    for st in results.get("stages", []):
        if not st.get("ok"):
            out.append(f"stage {st['name']} failed: {st.get('error')}")
            continue
        res = st.get("result") or {}
        if st["name"] == "tests" and not res.get("ok", True):
            out.append(f"GPU tests failed (pytest exit {res.get('returncode')}, {res.get('counts')})")
        counts = (res.get("counts") or {}) if st["name"] == "tests" else {}
        if counts.get("tests") and counts.get("skipped") == counts.get("tests"):
            out.append(f"every GPU test was skipped on a machine with a GPU ({counts})")
        if st["name"] == "workloads":
            for key, w in res.items():
                if "impls" in w and not w.get("triton_ran"):
                    out.append(f"({key}): nbaccel's Triton backend did not run: {'; '.join(w.get('notes', [])[:2])}")
                for name, r in w.get("impls", {}).items():
                    # PyTorch is a peer being measured: its failures are shown, not ours to fail on
                    if not r.get("correct") and not name.startswith("torch"):
                        out.append(f"({key}) {name}: wrong result or error: {r.get('error') or r.get('max_abs_error')}")
        if st["name"] == "attention":
            for key, r in res.items():
                if isinstance(r, dict) and not r.get("correct"):
                    out.append(f"attention {key}: wrong result or error: {r.get('error') or r.get('max_abs_error')}")
    return out


def targets(results: dict) -> list[tuple]:
    """(workload, implementation, copy fraction, ratio to torch.compile) of nbaccel's Triton
    runs of (a) and (b); None where not measured."""
    out = []
    for st in results.get("stages", []):
        if st.get("name") == "workloads" and st.get("ok"):
            for key in ("a", "b"):
                for name, r in (st["result"].get(key) or {}).get("impls", {}).items():
                    if name.startswith("nbaccel triton") and "time" in r:
                        out.append((key, name, r["time"].get("copy_fraction"), r.get("vs_torch_compile")))
    return out


def _verdict(value, target, fmt):
    if value is None:
        return "not measured"
    return f"{fmt.format(value)} ({'met' if value >= target else 'NOT met'})"


def _fmt_err(e):
    return f"{e:.2g}" if isinstance(e, (int, float)) else str(e)


def _fmt_ms(s):
    return "–" if s is None else f"{s * 1e3:.3f} ms"


def _fmt_seconds(s):
    return "" if s is None else f"{s:.2f} s" if s >= 0.1 else f"{s * 1e3:.1f} ms"


def _fmt_time(t):
    if not t:
        return "–"
    return f"{_fmt_ms(t['median'])} ({t['min'] * 1e3:.3f}–{t['max'] * 1e3:.3f})"


def markdown(results: dict) -> str:
    """The results as a markdown page (what DIR/gpu_check.md holds)."""
    lines = ["# nbaccel GPU check", "", f"- when: {results.get('when')}, host: {results.get('host')}"]
    if not results.get("gpu"):
        lines += [f"- **no GPU**: {results.get('no_gpu_reason')}", "",
                  "Nothing was run on a GPU. Install CuPy for your CUDA (`pip install -e '.[gpu,test]'`) "
                  "on a machine with an NVIDIA GPU and run `python -m bench.gpu_check --out DIR` again."]
        return "\n".join(lines) + "\n"
    stages = {s["name"]: s for s in results.get("stages", [])}
    env = (stages.get("environment") or {}).get("result") or {}
    if env:
        lines.append("- " + ", ".join(f"{k} {v}" for k, v in env.items()))
    lines.append(f"- size {results['size']}×{results['size']} float32, {results['rounds']} rounds, "
                 "GPU time by CUDA events (median, min–max)")
    lines.append(f"- Triton backend API assumed: {results.get('triton_api')}")
    for note in results.get("setup") or []:
        lines.append(f"- setup: {note}")
    bad = problems(results)
    lines += ["", f"**verdict: {'all right' if not bad else f'{len(bad)} problem(s)'}**", ""]
    lines += [f"- {p}" for p in bad]
    t = (stages.get("tests") or {}).get("result")
    if t:
        lines += ["", "## GPU tests", "", f"pytest -m gpu: exit {t.get('returncode')}, {t.get('counts')}"]
    c = (stages.get("copy") or {}).get("result")
    if c:
        lines += ["", "## Copy bandwidth (cupy.copyto, device to device)", "",
                  f"{_fmt_time(c)} for {c['bytes'] / 1e6:.0f} MB moved: **{c['gb_per_s']:.0f} GB/s**"]
    w = (stages.get("workloads") or {}).get("result")
    if w:
        lines += ["", "## Workloads (a)–(c)", "",
                  "| workload | implementation | time (10 calls queued) | of copy bandwidth | vs torch.compile "
                  "| one call | first call | correct | kernels |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for key, rec in w.items():
            if "skipped" in rec:
                lines.append(f"| ({key}) {rec['title']} | – | skipped: {rec['skipped']} | | | | | | |")
                continue
            for name, r in rec["impls"].items():
                frac = (r.get("time") or {}).get("copy_fraction")
                vs = r.get("vs_torch_compile")
                ks = ", ".join(f"{k.get('device')}/{k.get('backend')}" for k in r.get("kernels") or []) or ""
                ok = "yes" if r.get("correct") else f"**no** {r.get('error') or _fmt_err(r.get('max_abs_error'))}"
                lines.append(f"| ({key}) {rec['title']} | {name} | {_fmt_time(r.get('time'))} | "
                             f"{'' if frac is None else f'{100 * frac:.0f}%'} | {'' if vs is None else f'{vs:.2f}x'} | "
                             f"{_fmt_time(r.get('call_time'))} | {_fmt_seconds(r.get('first_call_seconds'))} | "
                             f"{ok} | {ks} |")
            for n in rec.get("notes", []):
                lines.append(f"| ({key}) | note | {n} | | | | | | |")
        lines += ["", f"Targets (issue 13), for (a) and (b): nbaccel triton ≥ {100 * TARGETS['copy_fraction']:.0f}% "
                  f"of the copy bandwidth and ≥ {TARGETS['vs_torch_compile']:.1f}x torch.compile "
                  "(performance, not part of the exit status):", ""]
        for key, impl, frac, vs in targets(results):
            lines.append(f"- ({key}) {impl}: copy bandwidth {_verdict(frac, TARGETS['copy_fraction'], '{:.0%}')}, "
                         f"vs torch.compile {_verdict(vs, TARGETS['vs_torch_compile'], '{:.2f}x')}")
    a = (stages.get("attention") or {}).get("result")
    if a:
        lines += ["", f"## Attention (Triton flash, B, H, L, D = {tuple(a.get('shape', ()))})", "",
                  "| case | time | TFLOP/s | max abs error | correct |", "|---|---|---|---|---|"]
        for key, r in a.items():
            if isinstance(r, dict):
                tf = r.get("tflops")
                lines.append(f"| {key} | {_fmt_time(r.get('time'))} | {'' if tf is None else f'{tf:.1f}'} | "
                             f"{_fmt_err(r.get('max_abs_error', r.get('error', '')))} | "
                             f"{'yes' if r.get('correct') else '**no**'} |")
    failed = [s for s in results.get("stages", []) if not s.get("ok")]
    if failed:
        lines += ["", "## Failed stages", ""]
        for s in failed:
            lines += [f"### {s['name']}: {s.get('error')}", "", "```", (s.get("traceback") or "").strip(), "```"]
    return "\n".join(lines) + "\n"
