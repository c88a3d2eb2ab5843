"""Attention workload: nbaccel's fused flash kernel vs its math path vs PyTorch's SDPA.

B=4, H=8, D=64, float32, L = S in {512, 1024, 2048, 4096}, causal and not: forward time
(median with min/max over rounds, the implementations interleaved round by round) and peak
memory (tracemalloc: NumPy's allocations; PyTorch's allocator is not visible to it), GFLOP/s
against the sgemm rate measured in the same run, and forward + backward at L=1024. The math
path is skipped where its score buffers alone would pass 4 GB.

    python -m bench.attention [--quick] [--json PATH]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
import tracemalloc

import numpy as np

MATH_LIMIT_BYTES = 4 << 30


def _threads():
    n = os.environ.get("NUMBA_NUM_THREADS", "")
    return int(n) if n.isdigit() and int(n) > 0 else (os.cpu_count() or 1)


def _sgemm_rate(n, rounds):
    a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    a @ a
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        a @ a
        times.append(time.perf_counter() - t0)
    return 2 * n ** 3 / statistics.median(times) / 1e9


def _flops(b, h, n, d, causal, backward=False):
    """Matmul flops: forward 2 products (4 B H L S D), backward 5 more (10 B H L S D);
    causal does about half."""
    f = 4 * b * h * n * n * d * (3.5 if backward else 1.0)
    return f / 2 if causal else f


def _stats(ts):
    return {"median": statistics.median(ts), "min": min(ts), "max": max(ts), "runs": len(ts)}


def _impls(nb, torch, backward):
    """name -> (make(q, k, v arrays) -> zero-arg callable returning the output as NumPy)."""
    from nbaccel.nn.attention import SDPBackend, sdpa_kernel
    F = nb.nn.functional

    def nbaccel_impl(backend):
        def make(arrays, causal):
            ts = [nb.tensor(a, requires_grad=backward) for a in arrays]

            def call():
                with sdpa_kernel([backend]):
                    out = F.scaled_dot_product_attention(*ts, is_causal=causal)
                if backward:
                    out.backward(nb.ones_like(out))
                    for t in ts:
                        t.grad = None
                return out.detach().numpy()
            return call
        return make

    impls = {"flash": nbaccel_impl(SDPBackend.FLASH_ATTENTION),
             "math": nbaccel_impl(SDPBackend.MATH)}
    if torch is not None:
        def torch_make(arrays, causal):
            ts = [torch.tensor(a, requires_grad=backward) for a in arrays]

            def call():
                out = torch.nn.functional.scaled_dot_product_attention(*ts, is_causal=causal)
                if backward:
                    out.backward(torch.ones_like(out))
                    for t in ts:
                        t.grad = None
                return out.detach().numpy()
            return call
        impls["torch"] = torch_make
    return impls


def _peak_bytes(call):
    gc.collect()
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _case(impls, b, h, n, d, causal, rounds, backward, rate):
    rng = np.random.default_rng(n)
    arrays = [rng.standard_normal((b, h, n, d)).astype(np.float32) for _ in range(3)]
    score_bytes = b * h * n * n * 4
    calls, row = {}, {"L": n, "causal": causal, "backward": backward, "impls": {}}
    for name, make in impls.items():
        if name == "math" and 3 * score_bytes > MATH_LIMIT_BYTES:
            row["impls"][name] = {"skipped": f"its L×L buffers would need ~{3 * score_bytes / 2**30:.0f} GB"}
            continue
        calls[name] = make(arrays, causal)
    outs = {name: call() for name, call in calls.items()}          # warm-up (numba load, torch init)
    ref = outs.get("torch", outs.get("math"))
    for name, out in outs.items():
        if ref is not None and not np.allclose(out, ref, rtol=1e-3, atol=1e-4):
            row["impls"][name] = {"error": f"WRONG RESULT: max abs err {np.abs(out - ref).max():.3g}"}
            calls.pop(name)
    times = {name: [] for name in calls}
    for _ in range(rounds):                       # interleaved, round by round
        for name, call in calls.items():
            t0 = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - t0)
    flops = _flops(b, h, n, d, causal, backward)
    for name, ts in times.items():
        st = _stats(ts)
        st["gflops"] = flops / st["median"] / 1e9
        st["of_sgemm"] = st["gflops"] / rate
        st["peak_mb"] = None if name == "torch" else _peak_bytes(calls[name]) / 2**20
        row["impls"][name] = st
    return row


def run(quick: bool = False) -> dict:
    import nbaccel as nb
    try:
        import torch
        torch.set_num_threads(_threads())
    except ImportError:
        torch = None
    if quick:
        b, h, d, lengths, bwd_len, rounds = 1, 2, 64, [128, 256], 128, 2
    else:
        b, h, d, lengths, bwd_len, rounds = 4, 8, 64, [512, 1024, 2048, 4096], 1024, 3
    rate = _sgemm_rate(1024 if quick else 2048, 5)
    results = {"B": b, "H": h, "D": d, "dtype": "float32", "threads": _threads(),
               "sgemm_gflops": rate, "torch": None if torch is None else torch.__version__,
               "forward": [], "forward_backward": []}
    fwd = _impls(nb, torch, backward=False)
    for n in lengths:
        for causal in (False, True):
            results["forward"].append(_case(fwd, b, h, n, d, causal, rounds, False, rate))
    both = _impls(nb, torch, backward=True)
    for causal in (False, True):
        results["forward_backward"].append(_case(both, b, h, bwd_len, d, causal, rounds, True, rate))
    results["targets"] = _targets(results)
    return results


def _median(row, name):
    return row["impls"].get(name, {}).get("median")


def _targets(results) -> dict:
    """The issue's targets, checked against this run's figures."""
    out = {}
    causal = {r["L"]: r for r in results["forward"] if r["causal"]}
    r = causal.get(2048)
    if r and _median(r, "flash") and _median(r, "math"):
        f, m = r["impls"]["flash"], r["impls"]["math"]
        out["L2048 causal: math time / flash time >= 10"] = m["median"] / f["median"]
        out["L2048 causal: math peak / flash peak >= 8"] = m["peak_mb"] / f["peak_mb"]
        if _median(r, "torch"):
            out["L2048 causal: flash time / torch time <= 1.3"] = f["median"] / _median(r, "torch")
    r = causal.get(4096)
    if r:
        out["L4096: flash runs"] = bool(_median(r, "flash"))
    for r in results["forward_backward"]:
        if _median(r, "flash") and _median(r, "math"):
            key = f"L{r['L']} {'causal' if r['causal'] else 'full'} fwd+bwd: math / flash >= 5"
            out[key] = _median(r, "math") / _median(r, "flash")
    return out


def _cell(st):
    if "median" not in st:
        return st.get("skipped", st.get("error", "")), "", ""
    ms = f"{st['median'] * 1e3:.1f} ms ({st['min'] * 1e3:.0f}–{st['max'] * 1e3:.0f})"
    mem = "" if st.get("peak_mb") is None else f"{st['peak_mb']:.1f} MB"
    return ms, mem, f"{st['gflops']:.0f} ({st['of_sgemm'] * 100:.0f}%)"


def markdown(results) -> str:
    names = ["flash", "math", "torch"]
    lines = [f"### Attention: B={results['B']}, H={results['H']}, D={results['D']}, float32, "
             f"{results['threads']} threads; sgemm {results['sgemm_gflops']:.0f} GFLOP/s",
             "", "Time: median (min–max) over rounds, interleaved; peak: tracemalloc (NumPy "
             "allocations; torch's are not seen); GFLOP/s (share of the sgemm rate).", ""]
    for title, rows in (("forward", results["forward"]), ("forward + backward", results["forward_backward"])):
        lines += [f"**{title}**", "",
                  "| L | causal | " + " | ".join(f"{n} time | {n} peak | {n} GFLOP/s" for n in names) + " |",
                  "|---|---|" + "---|---|---|" * len(names)]
        for r in rows:
            cells = []
            for n in names:
                cells += list(_cell(r["impls"].get(n, {"skipped": "not installed"})))
            lines.append(f"| {r['L']} | {'yes' if r['causal'] else 'no'} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["**targets**", ""] + [f"- {k}: {v:.2f}" if not isinstance(v, bool) else f"- {k}: {v}"
                                    for k, v in results["targets"].items()]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small shapes: checks the harness")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)
    results = run(quick=args.quick)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    sys.stdout.write(markdown(results))
    errors = [n for r in results["forward"] + results["forward_backward"]
              for n, st in r["impls"].items() if "error" in st]
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
