"""The "plain process" column (issue 26): quantized and 2:4 models called the way a user calls
them, in a fresh process with no environment set, against the machine's read bandwidth.

``make bench`` pins thread counts, sets ``OMP_WAIT_POLICY=ACTIVE`` and runs float32 and the
kernels in separate worker processes. A notebook user has none of that. Here one child process
is started with every thread and OpenMP variable removed from its environment (``SCRUBBED``).
It builds the models with ``nb.nn.Linear`` and converts them with ``quantize_`` /
``apply_2_4_``, then calls ``model(x)`` eagerly under ``no_grad``:

* **decode**: one token through 8 layers of 4096×4096: float32, int8 and int4 (group 128)
  weight-only, and 2:4 sparse;
* **gemm64**: a batch of 64 through one 4096×4096 layer: float32, int8 dynamic and 2:4;
* **read bandwidth**, in the same rounds: a STREAM-style parallel read (a numba ``prange``
  sum over int64 words) of exactly the bytes each model's weights occupy. ``read_fraction`` =
  read time / model time is the share of the measured bandwidth a model reaches.

Everything runs interleaved, round by round, each timing after a pause of ``SETTLE_S``: OpenBLAS's
worker spins for about 0.1 s after each float32 call (docs/threads.md), and without the pause
the kind timed right after float32 ran inside that window (int8 decode: 12.0 against 6.0 ms
per token 0.3 s later, even on one thread; docs/quantization.md). A user decoding with an
int8 model does not run a float32 model between tokens. The figures are medians with min–max,
and each ratio is the median of the per-round ratios. ``python -m bench.plain [--quick]``.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRUBBED = ("OMP_", "GOMP_", "KMP_", "NUMBA_", "OPENBLAS_", "GOTO_", "MKL_", "VECLIB_", "NUMEXPR_",
            "BLIS_", "NBACCEL_")
TARGETS = {"int8 decode": 3.0, "int4 decode": 5.0, "2:4 gemv": 1.5, "int8-dynamic gemm64": 1.5,
           "2:4 gemm64": 1.1, "read fraction": 0.75}
# seconds between one kind's timed calls and the next kind's: longer than OpenBLAS's spin
SETTLE_S = 0.15


def plain_env() -> dict:
    """This process's environment without any thread or OpenMP setting."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH", "")) if p)
    return env


def _summary(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "rounds": len(xs)}


# ---- the child process -----------------------------------------------------------------------

def _reader():
    import numba
    import numpy as np

    @numba.njit(parallel=True, cache=True)
    def read(words):
        s = np.int64(0)
        for i in numba.prange(words.shape[0]):
            s += words[i]
        return s

    def read_all(arrays):
        for a in arrays:
            read(a)
    return read_all


def _weights(model):
    """The NumPy buffers a model's layers read (as int64 words, for the bandwidth read)."""
    import numpy as np
    from nbaccel.quant import QuantizedTensor
    out = []
    for m in model.modules():
        w = m.__dict__.get("weight")
        parts = list(w.tensors().values()) if isinstance(w, QuantizedTensor) else []
        parts += [t for _, t in m.named_parameters(recurse=False)]
        parts += [t for _, t in m.named_buffers(recurse=False)]
        for t in parts:
            if t is None:
                continue
            a = np.ascontiguousarray(t.numpy()).reshape(-1).view(np.uint8)
            a = a[: a.size - a.size % 8].view(np.int64)
            if a.size:
                out.append(a)
    return out


def _models(layers, dim, seed):
    import nbaccel as nb
    from nbaccel import nn
    nb.manual_seed(seed)
    return nn.Sequential(*[nn.Linear(dim, dim, bias=False) for _ in range(layers)])


def _convert(model, kind):
    import nbaccel as nb
    from nbaccel import quant
    cfg = {"int8": quant.int8_weight_only, "int4": lambda: quant.int4_weight_only(group_size=128),
           "int8-dynamic": quant.int8_dynamic_activation_int8_weight}.get(kind)
    if cfg is not None:
        quant.quantize_(model, cfg())
    elif kind == "2:4":
        nb.sparse.apply_2_4_(model)
    return model


def child(p: dict) -> dict:
    t0 = time.perf_counter()
    import nbaccel as nb
    import_seconds = time.perf_counter() - t0
    import numpy as np
    read_all = _reader()
    out = {"import_nbaccel": import_seconds, "env": {k: v for k, v in os.environ.items()
                                                     if k.startswith(SCRUBBED)}}
    for what, kinds, layers, batch in (("decode", ("float32", "int8", "int4", "2:4"), p["layers"], 1),
                                       ("gemm64", ("float32", "int8-dynamic", "2:4"), 1, p["batch"])):
        models = {k: _convert(_models(layers, p["dim"], 0), k) for k in kinds}
        x = nb.randn(batch, p["dim"])
        ref = None
        impls = {}
        for k, m in models.items():
            impls[k] = (lambda m=m: m(x))
            impls["read " + k] = (lambda ws=_weights(m): read_all(ws))
        with nb.no_grad():
            ref = models["float32"](x).numpy()
            errs = {k: float(np.linalg.norm(m(x).numpy() - ref) / np.linalg.norm(ref))
                    for k, m in models.items() if k != "float32"}
            for f in impls.values():
                f()
            per = {k: [] for k in impls}
            for _ in range(p["rounds"]):
                for k, f in impls.items():
                    time.sleep(SETTLE_S)
                    t = time.perf_counter()
                    for _ in range(p["calls"]):
                        f()
                    per[k].append((time.perf_counter() - t) / p["calls"])
        nbytes = {k: sum(a.nbytes for a in _weights(m)) for k, m in models.items()}
        out[what] = {
            "seconds": {k: _summary(v) for k, v in per.items()},
            "speedup_vs_float32": {k: _summary([a / b for a, b in zip(per["float32"], per[k])])
                                   for k in kinds if k != "float32"},
            "read_fraction": {k: _summary([r / t for r, t in zip(per["read " + k], per[k])])
                              for k in kinds},
            "read_gb_per_s": {k: nbytes[k] / statistics.median(per["read " + k]) / 1e9 for k in kinds},
            "weight_bytes": nbytes, "relative_error": errs, "layers": layers, "batch": batch,
            "dim": p["dim"]}
    import numba
    out["threads"] = {"numba": numba.config.NUMBA_NUM_THREADS, "layer": numba.threading_layer(),
                      "OMP_WAIT_POLICY (set by nbaccel)": os.environ.get("OMP_WAIT_POLICY")}
    return out


# ---- start-up in fresh plain processes -------------------------------------------------------

def _import_seconds(env, module="nbaccel"):
    code = (f"import time; t = time.perf_counter(); import {module}; import sys; "
            "print(time.perf_counter() - t, any(m.split('.')[0] in ('numba', 'ml_dtypes', 'triton', "
            "'cupy', 'torch') for m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    secs, heavy = p.stdout.split()
    return float(secs), heavy == "True"


def startup(env, rounds) -> dict:
    runs = [_import_seconds(env) for _ in range(rounds)]
    return {"import_nbaccel": _summary([s for s, _ in runs]),
            "heavy_modules_imported": any(h for _, h in runs)}


def run(quick: bool = False) -> dict:
    p = ({"layers": 2, "dim": 512, "batch": 64, "rounds": 3, "calls": 2} if quick else
         {"layers": 8, "dim": 4096, "batch": 64, "rounds": 9, "calls": 3})
    env = plain_env()
    proc = subprocess.run([sys.executable, "-m", "bench.plain", "--child", json.dumps(p)], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"plain-process child failed:\n{proc.stderr[-3000:]}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    res.update(quick=quick, params=p, startup=startup(env, 3 if quick else 7))
    d, g = res["decode"], res["gemm64"]
    measured = {"int8 decode": d["speedup_vs_float32"]["int8"]["median"],
                "int4 decode": d["speedup_vs_float32"]["int4"]["median"],
                "2:4 gemv": d["speedup_vs_float32"]["2:4"]["median"],
                "int8-dynamic gemm64": g["speedup_vs_float32"]["int8-dynamic"]["median"],
                "2:4 gemm64": g["speedup_vs_float32"]["2:4"]["median"],
                "read fraction": min(d["read_fraction"][k]["median"] for k in ("int8", "int4", "2:4"))}
    res["targets"] = {k: {"target": TARGETS[k], "measured": v, "met": v >= TARGETS[k]}
                      for k, v in measured.items()}
    return res


def _fmt(s, scale=1.0, digits=2, unit=""):
    return (f"{s['median'] * scale:.{digits}f}{unit} "
            f"({s['min'] * scale:.{digits}f}–{s['max'] * scale:.{digits}f})")


def markdown(res: dict) -> str:
    d, g, st = res["decode"], res["gemm64"], res["startup"]
    lines = [f"### Plain process ({'quick shapes' if res['quick'] else 'full size'}; no environment "
             f"set; numba {res['threads']['numba']} threads, layer {res['threads']['layer']})", "",
             f"`import nbaccel` in a fresh process: {_fmt(st['import_nbaccel'], 1, 3, ' s')}; heavy "
             f"modules (numba, ml_dtypes, triton, cupy, torch) imported: "
             f"{'yes' if st['heavy_modules_imported'] else 'no'}.", ""]
    for name, r in (("Batch-1 decoding", d), (f"Batch-{g['batch']} GEMM", g)):
        lines += [f"{name}, `model(x)` through {r['layers']} layer(s) of {r['dim']}×{r['dim']} "
                  "(median, min–max over rounds):", "",
                  "| weights | ms | speedup vs float32 | read bandwidth (same bytes) | share of it "
                  "| rel. error |",
                  "|---|---|---|---|---|---|"]
        for k in r["read_fraction"]:
            sp = "1" if k == "float32" else _fmt(r["speedup_vs_float32"][k], unit="×")
            err = "—" if k == "float32" else f"{r['relative_error'][k]:.1e}"
            lines.append(f"| {k} | {_fmt(r['seconds'][k], 1e3)} | {sp} | {r['read_gb_per_s'][k]:.1f} GB/s | "
                         f"{_fmt(r['read_fraction'][k], 100, 0, '%')} | {err} |")
        lines.append("")
    lines += ["| target (plain process) | wanted | measured | met |", "|---|---|---|---|"]
    for k, v in res["targets"].items():
        lines.append(f"| {k} | ≥ {v['target']} | {v['measured']:.2f} | {'yes' if v['met'] else 'no'} |")
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        print(json.dumps(child(json.loads(argv[1]))))
        return
    res = run(quick="--quick" in argv)
    if "--json" in argv:
        with open(argv[argv.index("--json") + 1], "w") as f:
            json.dump(res, f, indent=1)
    print(markdown(res))


if __name__ == "__main__":
    main()
