"""Eager mode: nbaccel's op dispatch and small training steps against PyTorch eager and NumPy.

What issue 36 measures, in one process, interleaved round by round (the order rotates), as
medians of per-round ratios with their spread (IQR / median):

- **per-op cost** on 8x8 float32 tensors, without and with autograd (the inputs require grad,
  so every op records its backward node), for add, mul, matmul, relu, exp, sum, view,
  indexing, transpose and softmax: microseconds per op (a timed call runs the op ``inner``
  times), and nbaccel's time as a multiple of PyTorch's; the geometric mean over the 10 ops is
  the headline (issue 36's target: <= 1.5x with autograd);
- a **100-op chain** on 8x8 (mul, add, relu, tanh, 25 times), forward only without autograd,
  forward + backward with it;
- a training **step** of a small MLP, a small CNN and a small GPT, each written once for a
  torch-like module (``import nbaccel as torch``), the same initial weights on both sides
  (copied through state_dict), and one step's loss checked against PyTorch's before timing;
- **notebook 11's epoch** (notebooks/11-convnet.ipynb: its digits CNN, batch 64, Adam), eager.

NumPy has no autograd: it appears in the per-op and chain rows without it, as the floor of
what one small array operation costs from Python.

    python -m bench.eager [--quick] [--json PATH] [--profile] [--one-thread]

``--profile`` adds cProfile's view of one small op (add with autograd): where the
microseconds go (docs/eager.md discusses it). ``make bench`` runs this suite as "eager".
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import math
import os
import pstats
import time

import numpy as np

from .eager_models import _build, _digits, _nb11_epoch, _nb11_model
from .rounds import Local, run_rounds
from .timing import ratio_stats, time_stats

OPS = ("add", "mul", "matmul", "relu", "exp", "sum", "view", "index", "transpose", "softmax")
TARGETS = {"per-op (autograd), geometric mean": 1.5, "CNN step": 1.5, "GPT step": 1.5,
           "notebook 11 epoch": 1.5}


def _threads():
    if ONE_THREAD:
        return 1
    n = os.environ.get("NUMBA_NUM_THREADS", "")
    return int(n) if n.isdigit() and int(n) > 0 else (os.cpu_count() or 1)


# --one-thread: both sides on one thread (nbaccel's kernels, OpenBLAS, PyTorch's pool), timed in
# process CPU time: the work each does, which another process's load disturbs far less than
# wall time (two-thread PyTorch steps stalled to 10-40x their quiet time under load; docs/eager.md)
ONE_THREAD = False


class _CpuTime(Local):
    """A timer of this process's CPU time (all its threads) instead of wall time."""

    def __call__(self, keep_last: bool) -> float:
        if not keep_last:
            self.last = None
        t0 = time.process_time()
        out = self.fn()
        dt = time.process_time() - t0
        self.last = out if keep_last else None
        return dt


def _timer(fn):
    return _CpuTime(fn) if ONE_THREAD else Local(fn)


def _one_thread():
    """Put nbaccel's kernels and OpenBLAS on one thread (PyTorch: _torch)."""
    global ONE_THREAD
    ONE_THREAD = True
    os.environ["NBACCEL_KERNEL_THREADS"] = "1"
    from nbaccel_kernels import _openblas
    _openblas.single_threaded_blas()


def _torch():
    from .peers import torch_or_none
    torch = torch_or_none()
    if torch is not None:
        torch.set_num_threads(_threads())
    return torch


# ---- per-op -----------------------------------------------------------------------------------

def _softmax_np(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def op_fn(name, lib):
    """``f(x, y)`` applying op ``name`` in ``lib`` ("nbaccel"/"torch": Tensor methods and
    operators, the spelling a PyTorch program uses; "numpy": NumPy's)."""
    if lib == "numpy":
        return {"add": lambda x, y: x + y, "mul": lambda x, y: x * y,
                "matmul": lambda x, y: x @ y, "relu": lambda x, y: np.maximum(x, 0),
                "exp": lambda x, y: np.exp(x), "sum": lambda x, y: x.sum(),
                "view": lambda x, y: x.reshape(64), "index": lambda x, y: x[2],
                "transpose": lambda x, y: x.transpose(1, 0),
                "softmax": lambda x, y: _softmax_np(x)}[name]
    return {"add": lambda x, y: x + y, "mul": lambda x, y: x * y,
            "matmul": lambda x, y: x @ y, "relu": lambda x, y: x.relu(),
            "exp": lambda x, y: x.exp(), "sum": lambda x, y: x.sum(),
            "view": lambda x, y: x.view(64), "index": lambda x, y: x[2],
            "transpose": lambda x, y: x.transpose(0, 1),
            "softmax": lambda x, y: x.softmax(-1)}[name]


def _inputs(lib, mod, grad):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((8, 8)).astype(np.float32) for _ in range(2))
    if lib == "numpy":
        return a, b
    return (mod.tensor(a, requires_grad=grad), mod.tensor(b, requires_grad=grad))


def _loop(f, x, y, inner):
    def call():
        for _ in range(inner):
            f(x, y)
    return call


def _chain(lib, mod, x, y, grad):
    """100 ops: (mul, add, relu, tanh) 25 times; with autograd, forward + backward."""
    if lib == "numpy":
        def call():
            z = x
            for _ in range(25):
                z = np.tanh(np.maximum(z * 0.9 + y, 0))
            return z
        return call

    def call():
        z = x
        for _ in range(25):
            z = (z * 0.9 + y).relu().tanh()
        if grad:
            z.sum().backward()
            x.grad = y.grad = None
        return z
    return call


def _ratio_row(times, n_base=1):
    row = {lib: time_stats([t / n_base for t in ts]) for lib, ts in times.items()}
    if "torch" in times:
        row["ratio_vs_torch"] = ratio_stats(times["nbaccel"], times["torch"])   # nbaccel / torch
    if "numpy" in times:
        row["ratio_vs_numpy"] = ratio_stats(times["nbaccel"], times["numpy"])
    return row


def per_op(nb, torch, rounds, inner) -> dict:
    mods = {"nbaccel": nb, "torch": torch, "numpy": np}
    out = {}
    for grad in (False, True):
        key = "autograd" if grad else "no_grad"
        libs = ["nbaccel"] + (["torch"] if torch is not None else []) + ([] if grad else ["numpy"])
        rows = {}
        for name in OPS:
            timers = {}
            for lib in libs:
                x, y = _inputs(lib, mods[lib], grad)
                timers[lib] = _timer(_loop(op_fn(name, lib), x, y, inner))
            times = run_rounds(timers, rounds, keep_last=False, warmup=1)
            rows[name] = _ratio_row(times, inner)
        chain = {}
        for lib in libs:
            x, y = _inputs(lib, mods[lib], grad)
            chain[lib] = _timer(_chain(lib, mods[lib], x, y, grad))
        rows["chain100"] = _ratio_row(run_rounds(chain, rounds, keep_last=False, warmup=1))
        ratios = [rows[n]["ratio_vs_torch"]["median"] for n in OPS
                  if rows[n].get("ratio_vs_torch")]
        out[key] = {"ops": rows, "geomean_vs_torch":
                    math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None}
    return out


# ---- training steps ---------------------------------------------------------------------------

def steps(nb, torch, rounds, quick, kinds=("mlp", "cnn", "gpt")) -> dict:
    cfgs = {"mlp": dict(inp=784, hidden=256, batch=64),
            "cnn": dict(channels=16, size=28, batch=64),
            "gpt": dict(layers=4, d=128, heads=4, T=64, vocab=256, batch=16)}
    if quick:
        cfgs["mlp"].update(hidden=32, batch=8)
        cfgs["cnn"].update(channels=4, size=8, batch=8)
        cfgs["gpt"].update(layers=1, d=32, T=8, vocab=32, batch=2)
    out = {}
    for kind, cfg in cfgs.items():
        if kind not in kinds:
            continue
        model, nb_step = _build(kind, nb, cfg)
        timers = {"nbaccel": _timer(nb_step)}
        row = {"config": cfg}
        if torch is not None:
            state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
            model, nb_step = _build(kind, nb, cfg, state)      # a fresh optimizer on both sides
            _, t_step = _build(kind, torch, cfg, state)
            ln, lt = float(nb_step().item()), float(t_step().item())
            row["first_loss"] = {"nbaccel": ln, "torch": lt}
            if not math.isclose(ln, lt, rel_tol=1e-3, abs_tol=1e-4):
                row["error"] = f"WRONG RESULT: first-step loss {ln:.6g} (nbaccel) != {lt:.6g} (torch)"
                out[kind] = row
                continue
            timers = {"nbaccel": _timer(nb_step), "torch": _timer(t_step)}
        row.update(_ratio_row(run_rounds(timers, rounds, keep_last=False, warmup=1)))
        out[kind] = row
    return out


# ---- notebook 11's epoch ----------------------------------------------------------------------

def notebook11(nb, torch, rounds, quick) -> dict:
    data = _digits()
    if data is None:
        return {"skipped": "scikit-learn is not installed (notebook 11's digits)"}
    X, y, train = data
    batches = 2 if quick else len(train) // 64
    model = _nb11_model(nb)
    timers = {"nbaccel": _timer(_nb11_epoch(nb, model, X, y, train, batches))}
    if torch is not None:
        tm = _nb11_model(torch)
        tm.load_state_dict({k: torch.tensor(v.detach().numpy())
                            for k, v in model.state_dict().items()})
        timers["torch"] = _timer(_nb11_epoch(torch, tm, X, y, train, batches))
    row = {"batches": batches}
    row.update(_ratio_row(run_rounds(timers, rounds, keep_last=False, warmup=1)))
    return row


# ---- profile ----------------------------------------------------------------------------------

def profile(nb, n=20000, top=18) -> str:
    """cProfile of ``n`` adds of 8x8 tensors that require grad: the functions one op runs."""
    x, y = _inputs("nbaccel", nb, True)
    for _ in range(100):
        x + y
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(n):
        x + y
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(top)
    return s.getvalue()


# ---- the suite --------------------------------------------------------------------------------

PARTS = ("per_op", "mlp", "cnn", "gpt", "notebook11")


def run(quick: bool = False, with_profile: bool = False, only=PARTS, one_thread=False) -> dict:
    """The suite, or the ``only`` parts of it (names from PARTS); ``one_thread``: see
    ONE_THREAD."""
    import nbaccel as nb
    if one_thread:
        _one_thread()
    torch = _torch()
    rounds = 3 if quick else 15
    inner = 20 if quick else 400
    res = {"threads": _threads(), "cpu_time": ONE_THREAD, "rounds": rounds, "inner": inner,
           "quick": quick,
           "torch": None if torch is None else torch.__version__,
           "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None}
    # the fused eager kernels (LayerNorm, BatchNorm, GELU, cross-entropy, Adam) load on a
    # background thread at first use and the ops run NumPy meanwhile: wait for them here so
    # that the rounds time the steady state, and report what the wait cost (a first run
    # compiles them, later processes load numba's disk cache)
    from nbaccel.ops import kernel_modules
    t0 = time.perf_counter()
    res["fused_kernels"] = {"loaded": kernel_modules.load_now("fused") is not None,
                            "load_s": round(time.perf_counter() - t0, 2)}
    if "per_op" in only:
        res["per_op"] = per_op(nb, torch, rounds, inner)
    res["steps"] = steps(nb, torch, rounds, quick, [k for k in ("mlp", "cnn", "gpt") if k in only])
    if "notebook11" in only:
        res["notebook11"] = notebook11(nb, torch, rounds, quick)
    if with_profile:
        res["profile"] = profile(nb, n=2000 if quick else 20000)
    res["targets"] = _targets(res)
    errors = [f"{k}: {v['error']}" for k, v in res["steps"].items() if "error" in v]
    if errors:
        res["error"] = "; ".join(errors)
    return res


def _targets(res) -> dict:
    """issue 36's targets: nbaccel's time as a multiple of PyTorch's (lower is better)."""
    out = {}
    g = res["per_op"]["autograd"]["geomean_vs_torch"] if "per_op" in res else None
    if g is not None:
        out["per-op (autograd), geometric mean"] = g
    for kind, name in (("cnn", "CNN step"), ("gpt", "GPT step")):
        r = res["steps"].get(kind, {}).get("ratio_vs_torch")
        if r:
            out[name] = r["median"]
    r = res.get("notebook11", {}).get("ratio_vs_torch")
    if r:
        out["notebook 11 epoch"] = r["median"]
    return {k: {"value": v, "target": TARGETS[k], "met": v <= TARGETS[k]} for k, v in out.items()}


def _us(st):
    return f"{st['median'] * 1e6:.1f}"


def _ms(st):
    return f"{st['median'] * 1e3:.1f}"


def _ratio(r):
    if not r:
        return "-"
    return f"{r['median']:.2f}x ({r['q1']:.2f}-{r['q3']:.2f}, spread {r['spread']:.0%})"


def markdown(results) -> str:
    lines = [f"### Eager: nbaccel against PyTorch eager and NumPy ({results['threads']} threads"
             f"{', process CPU time' if results.get('cpu_time') else ''}, "
             f"{results['rounds']} interleaved rounds{', quick' if results['quick'] else ''}; "
             f"load average {', '.join(f'{x:.1f}' for x in results['load_average'] or ())})", ""]
    fk = results.get("fused_kernels")
    if fk:
        lines += [f"Fused eager kernels (nbaccel_kernels.fused): "
                  f"{'loaded' if fk['loaded'] else 'NOT loaded (NumPy paths)'} in {fk['load_s']} s "
                  "before timing (a background load the first ops do not wait for)", ""]
    for key, title in (("no_grad", "without autograd"), ("autograd", "with autograd (inputs require grad)")):
        if "per_op" not in results:
            break
        block = results["per_op"][key]
        has_np = key == "no_grad"
        lines += [f"Per-op cost on 8x8 float32, {title}: microseconds per op (median), and "
                  "nbaccel's time as a multiple of PyTorch's (median of per-round ratios, "
                  "quartiles, spread)", "",
                  "| op | nbaccel | torch | " + ("numpy | " if has_np else "") + "nbaccel / torch |",
                  "|---|---|---|" + ("---|" if has_np else "") + "---|"]
        for name, row in block["ops"].items():
            unit = _ms if name == "chain100" else _us
            label = "100-op chain (ms" + (", fwd+bwd)" if key == "autograd" else ")") \
                if name == "chain100" else name
            lines.append(f"| {label} | {unit(row['nbaccel'])} | "
                         f"{unit(row['torch']) if 'torch' in row else '-'} | "
                         + (f"{unit(row['numpy'])} | " if has_np else "")
                         + f"{_ratio(row.get('ratio_vs_torch'))} |")
        g = block["geomean_vs_torch"]
        lines += ["", f"Geometric mean over the 10 ops: **{g:.2f}x** PyTorch's time"
                  if g is not None else "(PyTorch not installed)", ""]
    lines += ["Training steps (ms per step, median)", "",
              "| workload | nbaccel | torch | nbaccel / torch |", "|---|---|---|---|"]
    for kind, row in results["steps"].items():
        c = row["config"]
        if "error" in row:
            lines.append(f"| {kind} {c} | {row['error']} | | |")
            continue
        lines.append(f"| {kind} {c} | {_ms(row['nbaccel'])} | "
                     f"{_ms(row['torch']) if 'torch' in row else '-'} | "
                     f"{_ratio(row.get('ratio_vs_torch'))} |")
    nb11 = results.get("notebook11", {"skipped": "not run (--only)"})
    if "skipped" in nb11:
        lines.append(f"| notebook 11 epoch | skipped: {nb11['skipped']} | | |")
    else:
        lines.append(f"| notebook 11 epoch ({nb11['batches']} batches of 64) | "
                     f"{_ms(nb11['nbaccel'])} | {_ms(nb11['torch']) if 'torch' in nb11 else '-'} | "
                     f"{_ratio(nb11.get('ratio_vs_torch'))} |")
    if results.get("targets"):
        lines += ["", "| issue 36 target (nbaccel / torch time) | now | target | met |",
                  "|---|---|---|---|"]
        for k, t in results["targets"].items():
            lines.append(f"| {k} | {t['value']:.2f}x | <= {t['target']}x | "
                         f"{'yes' if t['met'] else 'no'} |")
    if results.get("profile"):
        lines += ["", "cProfile of one add with autograd (8x8), sorted by own time:", "", "```",
                  results["profile"].strip(), "```"]
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(prog="python -m bench.eager", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="few rounds and small models")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--profile", action="store_true", help="add cProfile's view of one small op")
    ap.add_argument("--one-thread", action="store_true",
                    help="both sides on one thread, timed in process CPU time (a loaded machine)")
    ap.add_argument("--only", default=",".join(PARTS),
                    help=f"comma-separated parts to run, of {','.join(PARTS)} (default: all)")
    a = ap.parse_args()
    only = tuple(a.only.split(","))
    if set(only) - set(PARTS):
        ap.error(f"--only takes parts of {','.join(PARTS)}")
    res = run(a.quick, a.profile, only, a.one_thread)
    print(markdown(res))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    raise SystemExit(1 if "error" in res else 0)
