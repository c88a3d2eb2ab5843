"""LSTM workload: nbaccel's ``nn.LSTM`` against PyTorch's, forward + backward.

2 layers, hidden 256, input 256, sequence 64, batch 32, float32 (the issue's target: nbaccel
at least 0.7x PyTorch eager, i.e. torch time / nbaccel time >= 0.7). The two run interleaved,
round by round, with the same weights (copied through state_dict); the speedup is the median
of per-round ratios torch / nbaccel, with its spread (min-max of the ratios).

    python -m bench.rnn [--quick] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np


def _threads():
    n = os.environ.get("NUMBA_NUM_THREADS", "")
    return int(n) if n.isdigit() and int(n) > 0 else (os.cpu_count() or 1)


def _calls(nb, torch, cfg):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((cfg["seq"], cfg["batch"], cfg["input"])).astype(np.float32)
    w = rng.standard_normal((cfg["seq"], cfg["batch"], cfg["hidden"])).astype(np.float32)
    nb.manual_seed(0)
    lstm = nb.nn.LSTM(cfg["input"], cfg["hidden"], num_layers=cfg["layers"])
    nx, nw = nb.tensor(x, requires_grad=True), nb.tensor(w)

    def nbaccel_call():
        out, _ = lstm(nx)
        (out * nw).sum().backward()
        g = nx.grad.numpy()
        nx.grad = None
        lstm.zero_grad()
        return g

    calls = {"nbaccel": nbaccel_call}
    if torch is not None:
        t = torch.nn.LSTM(cfg["input"], cfg["hidden"], num_layers=cfg["layers"])
        t.load_state_dict({k: torch.tensor(v.numpy()) for k, v in lstm.state_dict().items()})
        tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w)

        def torch_call():
            out, _ = t(tx)
            (out * tw).sum().backward()
            g = tx.grad.numpy().copy()
            tx.grad = None
            t.zero_grad()
            return g
        calls["torch"] = torch_call
    return calls


def run(quick: bool = False) -> dict:
    import nbaccel as nb
    try:
        import torch
        torch.set_num_threads(_threads())
    except ImportError:
        torch = None
    cfg = dict(layers=2, hidden=256, input=256, seq=64, batch=32)
    rounds = 3 if quick else 15
    if quick:
        cfg.update(hidden=32, input=32, seq=8, batch=4)
    calls = _calls(nb, torch, cfg)
    outs = {name: call() for name, call in calls.items()}               # warm-up
    result = {"config": cfg, "threads": _threads(), "rounds": rounds,
              "torch": None if torch is None else torch.__version__, "impls": {}}
    if "torch" in outs and not np.allclose(outs["nbaccel"], outs["torch"], rtol=1e-3, atol=1e-4):
        result["error"] = f"WRONG RESULT: max abs err {np.abs(outs['nbaccel'] - outs['torch']).max():.3g}"
        return result
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            t0 = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - t0)
    for name, ts in times.items():
        result["impls"][name] = {"median": statistics.median(ts), "min": min(ts), "max": max(ts)}
    if "torch" in times:
        ratios = [t / n for t, n in zip(times["torch"], times["nbaccel"])]
        med = statistics.median(ratios)
        result["speedup_vs_torch"] = {"median": med, "min": min(ratios), "max": max(ratios),
                                      "spread": (max(ratios) - min(ratios)) / med}
        result["targets"] = {"LSTM fwd+bwd: torch time / nbaccel time >= 0.7": med}
    return result


def markdown(results) -> str:
    c = results["config"]
    lines = [f"### LSTM forward + backward: {c['layers']} layers, hidden {c['hidden']}, input "
             f"{c['input']}, seq {c['seq']}, batch {c['batch']}, float32, {results['threads']} threads",
             ""]
    if "error" in results:
        return "\n".join(lines + [results["error"]])
    lines += ["| impl | median | min | max |", "|---|---|---|---|"]
    for name, st in results["impls"].items():
        lines.append(f"| {name} | {st['median'] * 1e3:.1f} ms | {st['min'] * 1e3:.1f} ms | "
                     f"{st['max'] * 1e3:.1f} ms |")
    s = results.get("speedup_vs_torch")
    if s:
        lines += ["", f"torch / nbaccel, median of per-round ratios: **{s['median']:.2f}x** "
                      f"(spread {s['min']:.2f}-{s['max']:.2f}; target >= 0.7x)"]
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    res = run(a.quick)
    print(markdown(res))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
