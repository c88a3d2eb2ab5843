"""Quantized matmul benchmark (issue 11): batch-1 decoding, a batch-64 GEMM, and accuracy.

* **decode**: one token through 8 layers of 4096 x 4096 (512 MiB of float32 weights, far more
  than the last-level cache, so the bytes each token reads are what is measured): float32
  (NumPy's BLAS GEMV) vs nbaccel's int8 and int4 (group 128) weight-only kernels. Tokens/s and
  weight bytes read per token.
* **gemm**: a batch of 64 tokens through one 4096 x 4096 layer: float32 BLAS GEMM vs int8
  dynamic (per-token activation quantization included), int8 and int4 weight-only.
* **accuracy**: the tutorial-recipe classifier (``nbaccel.quant.tutorial``): relative output
  error and top-1 agreement of each config against float32.

float32 and the quantized kernels run in two worker processes (their thread pools slow each
other down in one process), interleaved round by round; each figure is the median over
rounds with min and max, and each speedup is the median of the per-round ratios.
``python -m bench.quant [--quick]``; ``run(quick)`` returns the JSON-serialisable results.
"""
from __future__ import annotations

import os

# Same thread count for OpenBLAS and numba (only effective when run as a script, before
# NumPy starts its thread pool; the values in effect are recorded in the results).
os.environ.setdefault("OPENBLAS_NUM_THREADS", os.environ.get("NUMBA_NUM_THREADS", "2"))
# OMP_WAIT_POLICY is left as it is: the quantized kernels run in a process of their own, where
# OpenMP's default (spin briefly, then sleep) mirrors what OpenBLAS's threads do.

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

TARGETS = {"int8 decode": 2.5, "int4 decode": 4.0, "int8-dynamic gemm64": 1.5,
           "int8 top-1": 0.99, "int4 top-1": 0.97}


def _summary(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "rounds": len(xs)}


def _layers(n_layers, dim, seed=0):
    rng = np.random.default_rng(seed)
    scale = np.float32(1 / np.sqrt(dim))       # keeps activations O(1) through the chain
    return [(rng.standard_normal((dim, dim), dtype=np.float32) * scale) for _ in range(n_layers)]


def _chain(layer_fns, x):
    def run():
        h = x
        for f in layer_fns:
            h = f(h)
        return h
    return run


def _build(kind, what, p):
    """The implementations one worker process times, and what it knows about them.

    ``kind`` "float32" builds NumPy/BLAS baselines and never imports numba; "quant" builds
    the quantized kernels (and computes their error against float32 before dropping the
    float weights)."""
    if what == "decode":
        ws = _layers(p["layers"], p["dim"])
        x = np.random.default_rng(1).standard_normal((1, p["dim"]), dtype=np.float32)
    else:
        ws = _layers(1, p["dim"], seed=2)
        x = np.random.default_rng(3).standard_normal((p["batch"], p["dim"]), dtype=np.float32)
    f32 = _chain([lambda h, w=w: h @ w.T for w in ws], x)
    if kind == "float32":
        return {"float32": f32}, {"weight_bytes": {"float32": sum(w.nbytes for w in ws)}}
    from nbaccel_kernels.quant import cpu, packing
    g = p["group_size"]
    q8 = [packing.quantize_int8(w) for w in ws]
    q4 = [packing.quantize_int4(w, g) for w in ws]
    impls = {}
    if what == "gemm":
        impls["int8-dynamic"] = _chain([lambda h, q=q: cpu.int8_dynamic_matmul(h, *q) for q in q8], x)
    impls["int8"] = _chain([lambda h, q=q: cpu.int8_weight_only_matmul(h, *q) for q in q8], x)
    impls["int4"] = _chain([lambda h, q=q: cpu.int4_weight_only_matmul(h, *q, group_size=g)
                            for q in q4], x)
    want = f32()
    info = {"errors": {k: float(np.linalg.norm(f() - want) / np.linalg.norm(want))
                       for k, f in impls.items()},
            "weight_bytes": {"int8": sum(q.nbytes + s.nbytes for q, s in q8),
                             "int4": sum(a.nbytes + s.nbytes for a, s, _ in q4)}}
    del ws, f32
    return impls, info


def _worker(conn, kind, what, params):
    impls, info = _build(kind, what, params)
    for fn in impls.values():       # warm-up: JIT compilation, first touch of the outputs
        fn()
    conn.send((list(impls), info))
    while True:
        msg = conn.recv()
        if msg is None:
            return
        name, calls = msg
        fn = impls[name]
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        conn.send((time.perf_counter() - t0) / calls)


def _interleaved(what, params, rounds, calls, settle=0.25):
    """Seconds per call of each implementation, float32 and the quantized kernels each in its
    own worker process, interleaved round by round.

    Separate processes because numba's OpenMP pool and OpenBLAS's pool in one process slow
    each other down (measured here: an OpenBLAS GEMV 2-3x slower once numba's parallel pool
    has started). Before each implementation runs, everything idles for ``settle`` seconds:
    OpenBLAS's threads spin for about 0.1 s after a call, and on a 2-core machine a spinning
    pool takes the core that the next implementation's threads need."""
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    workers, order, info = [], [], {"errors": {}, "weight_bytes": {}}
    try:
        for kind in ("float32", "quant"):
            here, there = ctx.Pipe()
            proc = ctx.Process(target=_worker, args=(there, kind, what, params), daemon=True)
            proc.start()
            names, got = here.recv()
            workers.append((proc, here))
            order += [(here, n) for n in names]
            for k in info:
                info[k].update(got.get(k, {}))
        per = {n: [] for _, n in order}
        for _ in range(rounds):
            for conn, name in order:
                time.sleep(settle)
                conn.send((name, calls))
                per[name].append(conn.recv())
    finally:
        for proc, conn in workers:
            try:
                conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            proc.join(timeout=30)
    return per, info


def _ratios(per, base):
    return {name: _summary([b / t for b, t in zip(per[base], ts)]) for name, ts in per.items()
            if name != base}


def bench_decode(n_layers, dim, rounds, calls, group_size=128):
    per, info = _interleaved("decode", {"layers": n_layers, "dim": dim, "group_size": group_size},
                             rounds, calls)
    wb = info["weight_bytes"]
    return {
        "layers": n_layers, "dim": dim, "group_size": group_size,
        "tokens_per_s": {k: _summary([1 / t for t in v]) for k, v in per.items()},
        "seconds_per_token": {k: _summary(v) for k, v in per.items()},
        "speedup_vs_float32": _ratios(per, "float32"),
        "weight_bytes_per_token": wb,
        "read_gb_per_s": {k: wb[k] / statistics.median(v) / 1e9 for k, v in per.items()},
        "relative_error_after_all_layers": info["errors"],
    }


def bench_gemm(batch, dim, rounds, calls, group_size=128):
    per, info = _interleaved("gemm", {"batch": batch, "dim": dim, "group_size": group_size},
                             rounds, calls)
    return {"batch": batch, "dim": dim,
            "seconds": {k: _summary(v) for k, v in per.items()},
            "gflops": {k: 2 * batch * dim * dim / statistics.median(v) / 1e9 for k, v in per.items()},
            "speedup_vs_float32": _ratios(per, "float32"),
            "relative_error": info["errors"]}


def bench_accuracy():
    import nbaccel as nb
    from nbaccel.quant import (int4_weight_only, int8_dynamic_activation_int8_weight,
                               int8_weight_only, model_bytes, quantize_, tutorial)
    model, X, labels = tutorial.train_classifier()
    with nb.no_grad():
        ref = model(X).numpy()
    out = {"float32": {"bytes": model_bytes(model),
                       "accuracy": float((ref.argmax(1) == labels.numpy()).mean())}}
    for name, cfg in (("int8", int8_weight_only()), ("int8-dynamic", int8_dynamic_activation_int8_weight()),
                      ("int4", int4_weight_only(group_size=64)), ("int4-g32", int4_weight_only(group_size=32))):
        q = tutorial.copy_model(model)
        quantize_(q, cfg)
        with nb.no_grad():
            got = q(X).numpy()
        out[name] = {"bytes": model_bytes(q),
                     "relative_error": float(np.linalg.norm(got - ref) / np.linalg.norm(ref)),
                     "top1_agreement": float((got.argmax(1) == ref.argmax(1)).mean()),
                     "accuracy": float((got.argmax(1) == labels.numpy()).mean())}
    return out


def run(quick: bool = False) -> dict:
    """The whole benchmark; ``quick`` uses small shapes (checks the harness, not the targets)."""
    import numba
    res = {"quick": quick,
           "threads": {"numba": numba.config.NUMBA_NUM_THREADS,
                       "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
                       "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY")}}
    if quick:
        res["decode"] = bench_decode(2, 512, rounds=3, calls=3)
        res["gemm"] = bench_gemm(64, 512, rounds=3, calls=3)
    else:
        res["decode"] = bench_decode(8, 4096, rounds=7, calls=3)
        res["gemm"] = bench_gemm(64, 4096, rounds=7, calls=3)
    res["accuracy"] = bench_accuracy()
    d, g, a = res["decode"]["speedup_vs_float32"], res["gemm"]["speedup_vs_float32"], res["accuracy"]
    measured = {"int8 decode": d["int8"]["median"], "int4 decode": d["int4"]["median"],
                "int8-dynamic gemm64": g["int8-dynamic"]["median"],
                "int8 top-1": a["int8"]["top1_agreement"], "int4 top-1": a["int4"]["top1_agreement"]}
    res["targets"] = {k: {"target": TARGETS[k], "measured": v, "met": v >= TARGETS[k]}
                      for k, v in measured.items()}
    return res


def _fmt(s, unit="", scale=1.0, digits=1):
    return (f"{s['median'] * scale:.{digits}f}{unit} "
            f"({s['min'] * scale:.{digits}f}–{s['max'] * scale:.{digits}f})")


def markdown(results: dict) -> str:
    d, g, a = results["decode"], results["gemm"], results["accuracy"]
    lines = [f"### Quantized matmul ({'quick shapes' if results['quick'] else 'full size'}; "
             f"threads: numba {results['threads']['numba']}, OpenBLAS "
             f"{results['threads']['OPENBLAS_NUM_THREADS']})", "",
             f"Batch-1 decoding through {d['layers']} layers of {d['dim']}x{d['dim']} "
             "(median, min–max over rounds):", "",
             "| weights | tokens/s | speedup vs float32 | weight MiB read per token | GB/s | rel. error |",
             "|---|---|---|---|---|---|"]
    for k in ("float32", "int8", "int4"):
        sp = "1" if k == "float32" else _fmt(d["speedup_vs_float32"][k], "×", digits=2)
        err = "—" if k == "float32" else f"{d['relative_error_after_all_layers'][k]:.2e}"
        lines.append(f"| {k}{' (g' + str(d['group_size']) + ')' if k == 'int4' else ''} | "
                     f"{_fmt(d['tokens_per_s'][k])} | {sp} | {d['weight_bytes_per_token'][k] / 2**20:.1f} | "
                     f"{d['read_gb_per_s'][k]:.1f} | {err} |")
    lines += ["", f"Batch-{g['batch']} GEMM, one {g['dim']}x{g['dim']} layer:", "",
              "| kernel | ms | GFLOP/s | speedup vs float32 | rel. error |", "|---|---|---|---|---|"]
    for k in ("float32", "int8-dynamic", "int8", "int4"):
        sp = "1" if k == "float32" else _fmt(g["speedup_vs_float32"][k], "×", digits=2)
        err = "—" if k == "float32" else f"{g['relative_error'][k]:.2e}"
        lines.append(f"| {k} | {_fmt(g['seconds'][k], '', 1e3, 2)} | {g['gflops'][k]:.0f} | {sp} | {err} |")
    lines += ["", "Tutorial-recipe classifier (64 → 128 → 128 → 10), 4096 held-out samples:", "",
              "| config | model KiB | accuracy | top-1 agreement | rel. output error |", "|---|---|---|---|---|"]
    for k, v in a.items():
        lines.append(f"| {k} | {v['bytes'] / 1024:.1f} | {v['accuracy']:.4f} | "
                     f"{v.get('top1_agreement', 1.0):.4f} | {v.get('relative_error', 0.0):.2e} |")
    lines += ["", "| target | wanted | measured | met |", "|---|---|---|---|"]
    for k, v in results["targets"].items():
        unit = "×" if "top-1" not in k else ""
        lines.append(f"| {k} | ≥ {v['target']}{unit} | {v['measured']:.3f}{unit} | {'yes' if v['met'] else 'no'} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small shapes (checks the harness)")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args(argv)
    res = run(quick=args.quick)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    print(markdown(res))


if __name__ == "__main__":
    main()
