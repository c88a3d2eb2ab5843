"""Convolution benchmark (issue 24): Conv2d 3x3, 64 -> 64 channels, 56x56, batch 8, float32,
forward, against PyTorch eager on the CPU with the same thread count; and conv + BatchNorm
(eval) + ReLU compiled against nbaccel eager.

nbaccel and PyTorch each run in a worker process of their own (their thread pools would slow
each other down in one), interleaved round by round; each figure is the median over rounds
with min and max, and each ratio the median of per-round ratios with its spread.
``python -m bench.conv [--quick]``; ``run(quick)`` returns the JSON-serialisable results.
"""
from __future__ import annotations

import os

THREADS = os.environ.get("NUMBA_NUM_THREADS", "2")
os.environ.setdefault("OPENBLAS_NUM_THREADS", THREADS)
os.environ.setdefault("OMP_NUM_THREADS", THREADS)

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

TARGETS = {"conv2d vs torch eager": 0.8, "compiled conv+bn+relu vs nbaccel eager": 1.2}


def _inputs(p):
    rng = np.random.default_rng(0)
    n, c, hw = p["batch"], p["channels"], p["size"]
    x = rng.standard_normal((n, c, hw, hw), dtype=np.float32)
    w = (rng.standard_normal((c, c, 3, 3), dtype=np.float32) / np.sqrt(9 * c)).astype(np.float32)
    stats = [rng.standard_normal(c).astype(np.float32) * 0.1 for _ in range(3)]
    stats[1] = np.abs(stats[1]) + 1.0          # running_var
    return x, w, stats


def _build(kind, p):
    x, w, (mean, var, shift) = _inputs(p)
    if kind == "torch":
        import torch
        torch.set_num_threads(int(THREADS))
        F = torch.nn.functional
        tx, tw, tm, tv, tb = (torch.from_numpy(a) for a in (x, w, mean, var, shift))

        def conv():
            with torch.no_grad():
                return F.conv2d(tx, tw, padding=1)

        def block():
            with torch.no_grad():
                return F.relu(F.batch_norm(F.conv2d(tx, tw, padding=1), tm, tv, None, tb))
        return {"torch eager conv2d": conv, "torch eager conv+bn+relu": block}, \
            {"out": conv().numpy()[0, :2, :2, :2].tolist()}
    import nbaccel as nb
    F = nb.nn.functional
    nx, nw, nm, nv, nbias = (nb.tensor(a) for a in (x, w, mean, var, shift))

    def block_fn(x):
        return F.relu(F.batch_norm(F.conv2d(x, nw, padding=1), nm, nv, None, nbias))

    compiled = nb.compile(block_fn)

    def conv():
        with nb.no_grad():
            return F.conv2d(nx, nw, padding=1)

    def eager_block():
        with nb.no_grad():
            return block_fn(nx)

    def compiled_block():
        with nb.no_grad():
            return compiled(nx)
    for _ in range(4):       # the numba tier compiles in the background: let it take over
        compiled_block()
    compiled.wait() if hasattr(compiled, "wait") else None
    err = float(np.abs(compiled_block().numpy() - eager_block().numpy()).max())
    kernels = [(k["name"], k["backend"]) for k in compiled.report.kernels]
    return {"nbaccel eager conv2d": conv, "nbaccel eager conv+bn+relu": eager_block,
            "nbaccel compiled conv+bn+relu": compiled_block}, \
        {"out": conv().numpy()[0, :2, :2, :2].tolist(), "compiled_max_error": err, "kernels": kernels}


def _worker(conn, kind, p):
    try:
        impls, info = _build(kind, p)
    except ImportError as e:
        conn.send(([], {"skipped": str(e)}))
        return
    for fn in impls.values():
        fn()
    conn.send((list(impls), info))
    while True:
        msg = conn.recv()
        if msg is None:
            return
        name, calls = msg
        t0 = time.perf_counter()
        for _ in range(calls):
            impls[name]()
        conn.send((time.perf_counter() - t0) / calls)


def _summary(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "rounds": len(xs)}


def run(quick=False, use_torch=True):
    import multiprocessing as mp
    p = {"batch": 2 if quick else 8, "channels": 16 if quick else 64, "size": 14 if quick else 56}
    rounds, calls = (3, 2) if quick else (15, 3)
    ctx = mp.get_context("spawn")
    workers, order, info = [], [], {}
    try:
        for kind in (("torch", "nbaccel") if use_torch else ("nbaccel",)):
            here, there = ctx.Pipe()
            proc = ctx.Process(target=_worker, args=(there, kind, p), daemon=True)
            proc.start()
            names, got = here.recv()
            workers.append((proc, here))
            order += [(here, n) for n in names]
            info[kind] = got
        per = {n: [] for _, n in order}
        for _ in range(rounds):
            for conn, name in order:
                time.sleep(0.05)
                conn.send((name, calls))
                per[name].append(conn.recv())
    finally:
        for proc, conn in workers:
            try:
                conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            proc.join(5)
    seconds = {n: _summary(v) for n, v in per.items()}
    ratios = {}

    def ratio(label, slow, fast):
        if slow in per and fast in per:
            r = [a / b for a, b in zip(per[slow], per[fast])]
            ratios[label] = {**_summary(r), "target": TARGETS[label]}
    ratio("conv2d vs torch eager", "torch eager conv2d", "nbaccel eager conv2d")
    ratio("compiled conv+bn+relu vs nbaccel eager", "nbaccel eager conv+bn+relu",
          "nbaccel compiled conv+bn+relu")
    same = None
    if "torch" in info and "out" in info["torch"]:
        same = bool(np.allclose(info["torch"]["out"], info["nbaccel"]["out"], rtol=1e-4, atol=1e-4))
    return {"params": p, "threads": THREADS, "seconds": seconds, "ratios": ratios,
            "torch_matches": same, "info": {k: {kk: vv for kk, vv in v.items() if kk != "out"}
                                             for k, v in info.items()}}


def markdown(res) -> str:
    p = res["params"]
    lines = [f"Conv2d 3x3, {p['channels']}->{p['channels']}, {p['size']}x{p['size']}, batch "
             f"{p['batch']}, float32, forward, {res['threads']} threads.", "",
             "| implementation | median ms | min | max |", "|---|---|---|---|"]
    for name, s in res["seconds"].items():
        lines.append(f"| {name} | {s['median'] * 1e3:.2f} | {s['min'] * 1e3:.2f} | {s['max'] * 1e3:.2f} |")
    lines += ["", "| ratio (speedup) | median | min | max | target |", "|---|---|---|---|---|"]
    for name, r in res["ratios"].items():
        verdict = "met" if r["median"] >= r["target"] else "not met"
        lines.append(f"| {name} | {r['median']:.2f}x | {r['min']:.2f}x | {r['max']:.2f}x | "
                     f">= {r['target']}x ({verdict}) |")
    if res.get("torch_matches") is not None:
        lines.append(f"\nnbaccel's output matches PyTorch's: {res['torch_matches']}.")
    nbinfo = res["info"].get("nbaccel", {})
    if "kernels" in nbinfo:
        lines.append("Compiled kernels: " + ", ".join(f"{n} ({b})" for n, b in nbinfo["kernels"]) + ".")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.conv")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args(argv)
    res = run(args.quick, not args.no_torch)
    print(markdown(res))
    print(json.dumps(res["ratios"], indent=1))


if __name__ == "__main__":
    main()
