"""Quantized matmul benchmark (issues 11 and 26): batch-1 decoding, a batch-64 GEMM, accuracy.

* **decode**: one token through 8 layers of 4096 x 4096 (512 MiB of float32 weights, far more
  than the last-level cache, so the bytes each token reads are what is measured), the way a
  user runs it: ``model(x)`` on an ``nn.Sequential`` of ``nn.Linear`` converted by
  ``nbaccel.quant.quantize_`` (int8, int4 group 128), eager, under ``no_grad``; float32 is the
  same model unconverted. The bare kernels (``nbaccel_kernels.quant.cpu`` on the layers' own
  arrays, against NumPy's ``h @ w.T``) are timed alongside, which shows what the eager path
  costs. In the same rounds, a STREAM-style read (a float32 sum on the kernels' own launcher,
  ``kernels/quant/_pool.py``, on all threads and on one: per round the faster) of a buffer of
  exactly the bytes each quantized model holds gives the machine's read bandwidth for that
  size; ``read_fraction`` = read time / model time.
  It runs twice: with this bench's thread settings, and in a *plain* process (every thread
  and OpenMP variable removed from the workers' environment, ``bench.plain.SCRUBBED``).
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

TARGETS = {"int8 decode": 3.0, "int4 decode": 5.0, "int8 read fraction": 0.75,
           "int4 read fraction": 0.75, "int8-dynamic gemm64": 1.5, "int8 top-1": 0.99,
           "int4 top-1": 0.97}
DECODE_KINDS = ("int8", "int4")
IL_KERNEL = "int4 rows4x64 kernel"     # the int4 bare kernel on row-interleaved codes


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


def _reader():
    """``read(buf, threads)``: a STREAM-style read (a float32 sum) of ``buf``, on the quantized
    kernels' launcher (the calling thread and helpers claiming chunks, ``kernels/quant/_pool``);
    ``buffer(nbytes)``: a buffer of ones of that many bytes, with its chunking."""
    import numba
    from numba import njit
    from nbaccel_kernels.quant import _pool

    @njit(nogil=True, fastmath={"reassoc", "contract", "nsz"})
    def part(words, sums, chunk, ctr, n_chunks, wait):
        n = np.uint64(words.shape[0])
        while True:
            c = _pool.claim(ctr, n_chunks)
            if c < 0:
                break
            s = np.uint64(c) * np.uint64(chunk)
            acc = np.float32(0)
            for i in range(s, min(n, s + np.uint64(chunk))):
                acc += words[i]
            sums[c] = acc
            _pool.finish(ctr, False, n_chunks)
        _pool.finish(ctr, wait, n_chunks)

    def buffer(nbytes):
        words = np.ones(nbytes // 4, np.float32)     # ones: no denormals, no NaNs
        chunk = max(1, -(-words.size // (numba.get_num_threads() * 16)))
        return words, np.zeros(-(-words.size // chunk), np.float32), chunk

    def read(buf, threads):
        words, sums, chunk = buf
        _pool.run(part, (words, sums, chunk), sums.size, threads)
    return read, buffer


def _decode_model(p, kind):
    """The decode model: ``p["layers"]`` bias-free 4096 x 4096 ``nn.Linear`` (seeded, so both
    workers build the same weights), converted to ``kind`` (float32: left as it is)."""
    from bench import plain
    return plain._convert(plain._models(p["layers"], p["dim"], 0), kind)


def _layer_arrays(model):
    """Per layer: the NumPy arrays the kernels read (float weight, or qdata / scale / zeros),
    int4 codes row-major (the bare-kernel rows; quantize_ may have interleaved them)."""
    from nbaccel.quant import QuantizedTensor
    out = []
    for m in model:
        w = m.weight
        if isinstance(w, QuantizedTensor):
            w = w.with_layout("rows")
            out.append([None if t is None else t.numpy() for t in (w.qdata, w.scale, w.zero_point)])
        else:
            out.append([w.detach().numpy()])
    return out


def _build_decode(kind, p):
    import nbaccel as nb
    x_np = np.random.default_rng(1).standard_normal((1, p["dim"]), dtype=np.float32)
    x = nb.tensor(x_np)
    if kind == "float32":
        model = _decode_model(p, "float32")
        ws = [a[0] for a in _layer_arrays(model)]
        impls = {"float32": lambda: model(x),
                 "float32 kernel": _chain([lambda h, w=w: h @ w.T for w in ws], x_np)}
        return impls, {"weight_bytes": {"float32": sum(w.nbytes for w in ws)}}
    from bench import plain
    from nbaccel_kernels.quant import cpu, packing
    g = p["group_size"]
    with nb.no_grad():
        want = _decode_model(p, "float32")(x).numpy()
    import numba
    read, buffer = _reader()
    impls, info = {}, {"errors": {}, "weight_bytes": {}}
    for k in DECODE_KINDS:
        model = _decode_model(p, k)
        arrays = _layer_arrays(model)
        if k == "int8":
            kern = [lambda h, q=q, s=s: cpu.int8_weight_only_matmul(h, q, s) for q, s, _ in arrays]
        else:
            kern = [lambda h, q=q, s=s, z=z: cpu.int4_weight_only_matmul(h, q, s, z, group_size=g)
                    for q, s, z in arrays]
        impls[k] = lambda model=model: model(x)
        impls[k + " kernel"] = _chain(kern, x_np)
        if k == "int4" and all(packing.int4_interleavable(*q.shape) for q, _, _ in arrays):
            # the same codes in the "rows4x64" layout (issue 39 item 2; what quantize_ picks here)
            il = [(packing.interleave_int4(q), s, z) for q, s, z in arrays]
            impls[IL_KERNEL] = _chain(
                [lambda h, q=q, s=s, z=z: cpu.int4_weight_only_matmul(h, q, s, z, group_size=g,
                                                                      layout="rows4x64")
                 for q, s, z in il], x_np)
        nbytes = sum(a.nbytes for a in plain._weights(model))
        buf = buffer(nbytes)
        impls["read " + k] = lambda buf=buf: read(buf, numba.get_num_threads())
        impls["read " + k + " 1 thread"] = lambda buf=buf: read(buf, 1)
        with nb.no_grad():
            got = model(x).numpy()
        info["errors"][k] = float(np.linalg.norm(got - want) / np.linalg.norm(want))
        info["weight_bytes"][k] = nbytes
    return impls, info


def _build(kind, what, p):
    """The implementations one worker process times, and what it knows about them.

    ``kind`` "float32" builds NumPy/BLAS baselines and never imports numba; "quant" builds
    the quantized kernels (and computes their error against float32 before dropping the
    float weights)."""
    if what == "decode":
        return _build_decode(kind, p)
    ws = _layers(1, p["dim"], seed=2)
    x = np.random.default_rng(3).standard_normal((p["batch"], p["dim"]), dtype=np.float32)
    f32 = _chain([lambda h, w=w: h @ w.T for w in ws], x)
    if kind == "float32":
        return {"float32": f32}, {"weight_bytes": {"float32": sum(w.nbytes for w in ws)}}
    from nbaccel_kernels.quant import cpu, packing
    g = p["group_size"]
    q8 = [packing.quantize_int8(w) for w in ws]
    q4 = [packing.quantize_int4(w, g) for w in ws]
    impls = {"int8-dynamic": _chain([lambda h, q=q: cpu.int8_dynamic_matmul(h, *q) for q in q8], x)}
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
    if what == "decode":
        import nbaccel as nb
        nb.no_grad().__enter__()        # inference: the whole worker runs without autograd
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


def _interleaved(what, params, rounds, calls, settle=0.25, env=None):
    """Seconds per call of each implementation, float32 and the quantized kernels each in its
    own worker process, interleaved round by round.

    Separate processes because numba's OpenMP pool and OpenBLAS's pool in one process slow
    each other down (measured here: an OpenBLAS GEMV 2-3x slower once numba's parallel pool
    has started). Before each implementation runs, everything idles for ``settle`` seconds:
    OpenBLAS's threads spin for about 0.1 s after a call, and on a 2-core machine a spinning
    pool takes the core that the next implementation's threads need. ``env``: the workers'
    whole environment (default: this process's)."""
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    workers, order, info = [], [], {"errors": {}, "weight_bytes": {}}
    try:
        for kind in ("float32", "quant"):
            here, there = ctx.Pipe()
            proc = ctx.Process(target=_worker, args=(there, kind, what, params), daemon=True)
            saved = dict(os.environ)
            try:
                if env is not None:         # a spawned worker starts with os.environ
                    os.environ.clear()
                    os.environ.update(env)
                proc.start()
            finally:
                if env is not None:
                    os.environ.clear()
                    os.environ.update(saved)
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


def bench_decode(n_layers, dim, rounds, calls, group_size=128, env=None):
    """``env``: the workers' environment (``None``: this bench's settings)."""
    per, info = _interleaved("decode", {"layers": n_layers, "dim": dim, "group_size": group_size},
                             rounds, calls, env=env)
    wb = info["weight_bytes"]
    wb.update({k + " kernel": wb[k] for k in ("float32",) + DECODE_KINDS})
    if IL_KERNEL in per:
        wb[IL_KERNEL] = wb["int4"]
    models = [k for k in per if not k.startswith("read ")]
    for k in DECODE_KINDS:      # the read: the faster of all threads and one, per round
        per["read " + k] = [min(a, b) for a, b in zip(per["read " + k], per.pop("read " + k + " 1 thread"))]
    return {
        "layers": n_layers, "dim": dim, "group_size": group_size,
        "env": "plain" if env is not None else "bench",
        "tokens_per_s": {k: _summary([1 / t for t in per[k]]) for k in models},
        "seconds_per_token": {k: _summary(v) for k, v in per.items()},
        # model(x) against the float32 model(x); a kernel against NumPy's GEMV
        "speedup_vs_float32": {k: _summary([b / t for b, t in zip(
            per["float32 kernel" if k.endswith(" kernel") else "float32"], per[k])])
            for k in models if not k.startswith("float32")},
        "weight_bytes_per_token": wb,
        "read_gb_per_s": {k: wb[k] / statistics.median(per[k]) / 1e9 for k in models},
        "stream_read_gb_per_s": {k: wb[k] / statistics.median(per["read " + k]) / 1e9
                                 for k in DECODE_KINDS},
        "read_fraction": {k: _summary([r / t for r, t in zip(per["read " + k.split()[0]], per[k])])
                          for k in models if not k.startswith("float32")},
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
    from bench import plain
    from nbaccel_kernels.quant import cpu
    # the explicit-SIMD variants this CPU runs (the first one usable for a layer runs it)
    res["simd"] = {"int4 gemv": list(cpu.INT4_GEMV_SIMD), "int8 gemv": list(cpu.INT8_GEMV_SIMD)}
    layers, dim, rounds = (2, 512, 3) if quick else (8, 4096, 7)
    res["decode"] = bench_decode(layers, dim, rounds=rounds, calls=3)
    res["decode_plain"] = bench_decode(layers, dim, rounds=rounds, calls=3, env=plain.plain_env())
    res["gemm"] = bench_gemm(64, dim, rounds=rounds, calls=3)
    res["load_average"] = os.getloadavg()
    res["accuracy"] = bench_accuracy()
    g, a = res["gemm"]["speedup_vs_float32"], res["accuracy"]
    measured = {}
    for col in ("decode", "decode_plain"):
        d = res[col]
        tag = "" if col == "decode" else " (plain)"
        for k in DECODE_KINDS:
            measured[f"{k} decode{tag}"] = (TARGETS[f"{k} decode"], d["speedup_vs_float32"][k]["median"])
            measured[f"{k} read fraction{tag}"] = (TARGETS[f"{k} read fraction"],
                                                   d["read_fraction"][k]["median"])
    measured.update({
        "int8-dynamic gemm64": (TARGETS["int8-dynamic gemm64"], g["int8-dynamic"]["median"]),
        "int8 top-1": (TARGETS["int8 top-1"], a["int8"]["top1_agreement"]),
        "int4 top-1": (TARGETS["int4 top-1"], a["int4"]["top1_agreement"])})
    res["targets"] = {k: {"target": t, "measured": v, "met": v >= t} for k, (t, v) in measured.items()}
    return res


def _fmt(s, unit="", scale=1.0, digits=1):
    return (f"{s['median'] * scale:.{digits}f}{unit} "
            f"({s['min'] * scale:.{digits}f}–{s['max'] * scale:.{digits}f})")


def _decode_table(d):
    lines = ["| model | tokens/s | speedup vs float32 | weight MiB read per token | GB/s | "
             "share of read bandwidth | rel. error |", "|---|---|---|---|---|---|---|"]
    rows = ("float32",) + DECODE_KINDS + ("float32 kernel",) + tuple(k + " kernel" for k in DECODE_KINDS)
    for k in rows + ((IL_KERNEL,) if IL_KERNEL in d["tokens_per_s"] else ()):
        base = k.split()[0]
        sp = "1" if base == "float32" else _fmt(d["speedup_vs_float32"][k], "×", digits=2)
        share = "—" if base == "float32" else _fmt(d["read_fraction"][k], "%", 100, 0)
        err = "—" if base == "float32" else f"{d['relative_error_after_all_layers'][base]:.2e}"
        name = k.replace(" kernel", " (bare kernel)")
        if base == "int4":
            name = name.replace("int4", f"int4 g{d['group_size']}")
        lines.append(f"| {name} | {_fmt(d['tokens_per_s'][k])} | {sp} | "
                     f"{d['weight_bytes_per_token'][k] / 2**20:.1f} | {d['read_gb_per_s'][k]:.1f} | "
                     f"{share} | {err} |")
    reads = ", ".join(f"{d['weight_bytes_per_token'][k] / 2**20:.1f} MiB: "
                      f"{d['stream_read_gb_per_s'][k]:.1f} GB/s" for k in DECODE_KINDS)
    lines += ["", f"STREAM-style read of the same bytes, same rounds ({reads})."]
    return lines


def markdown(results: dict) -> str:
    d, g, a = results["decode"], results["gemm"], results["accuracy"]
    lines = [f"### Quantized matmul ({'quick shapes' if results['quick'] else 'full size'}; "
             f"threads: numba {results['threads']['numba']}, OpenBLAS "
             f"{results['threads']['OPENBLAS_NUM_THREADS']}; load average "
             f"{results.get('load_average', [float('nan')])[0]:.1f}; SIMD GEMVs: "
             + ", ".join(f"{k} {v[0] if v else 'portable'}" for k, v in results.get("simd", {}).items())
             + ")", "",
             f"Batch-1 decoding through {d['layers']} layers of {d['dim']}x{d['dim']}, "
             "`model(x)` eager (the bare kernels below; median, min–max over rounds):", ""]
    lines += _decode_table(d)
    if "decode_plain" in results:
        lines += ["", "The same in a plain process (no thread or OpenMP variable set):", ""]
        lines += _decode_table(results["decode_plain"])
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
        unit = "×" if "top-1" not in k and "fraction" not in k else ""
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
