"""nb.distributed: checkpoint bandwidth against dd and np.save, resharded reads, data-parallel
steps on a LocalCluster of 2 worker processes against 1 process.

    python -m bench.distributed_ckpt [--quick]

(a) save and load of a 1 GiB state_dict (16 float32 tensors of 64 MiB; 64 MiB in all with
    --quick) against ``dd`` writing and reading a file of the same size (one writer,
    ``conv=fsync``; reads of files just written, so from the page cache for all three) and
    against ``np.save`` + fsync / ``np.load`` of the same arrays; interleaved rounds, medians.
(b) resharded load 4 -> 3 row shards: the bytes zarr's store really returns to each reader
    against the reader's own share.
(c) a data-parallel step of notebook 04's MLP widened to 512 (batch 4096) on 2 workers x 1
    thread against the same compiled step in this process: samples per second, and the share
    of a step spent communicating.
"""
from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time

import numpy as np


def _median_spread(xs):
    med = statistics.median(xs)
    return med, (max(xs) - min(xs)) / med if med else 0.0


def _fsync_file(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _dd(args):
    t = time.perf_counter()
    subprocess.run(["dd", *args, "status=none"], check=True)
    return time.perf_counter() - t


def bandwidth(quick: bool, rounds: int):
    import nbaccel as nb
    from nbaccel.distributed import checkpoint
    n_tensors, rows = (4, 1024) if quick else (16, 4096)
    arrays = [np.random.default_rng(i).standard_normal((rows, 4096), dtype=np.float32) for i in range(n_tensors)]
    nbytes = sum(a.nbytes for a in arrays)
    sd = {f"layer{i}.weight": nb.asarray(a) for i, a in enumerate(arrays)}
    target = {k: nb.zeros(*v.shape) for k, v in sd.items()}
    base = tempfile.mkdtemp(prefix="nbaccel-ckpt-bench-", dir=os.environ.get("NBACCEL_BENCH_DISK_DIR"))
    t = {k: [] for k in ("dd_write", "dd_read", "save", "load", "np_save", "np_load")}
    try:
        def run_dd():
            f = os.path.join(base, "dd.bin")
            t["dd_write"].append(_dd(["if=/dev/zero", f"of={f}", "bs=1M", f"count={nbytes >> 20}", "conv=fsync"]))
            t["dd_read"].append(_dd([f"if={f}", "of=/dev/null", "bs=1M"]))
            os.remove(f)

        def run_checkpoint():
            ck = os.path.join(base, "ck")
            s = time.perf_counter()
            checkpoint.save(sd, checkpoint_id=ck)
            t["save"].append(time.perf_counter() - s)
            s = time.perf_counter()
            checkpoint.load(target, checkpoint_id=ck)
            t["load"].append(time.perf_counter() - s)
            shutil.rmtree(ck)

        def run_numpy():
            npdir = os.path.join(base, "npy")
            os.makedirs(npdir)
            s = time.perf_counter()
            for i, a in enumerate(arrays):
                p = os.path.join(npdir, f"{i}.npy")
                np.save(p, a)
                _fsync_file(p)
            t["np_save"].append(time.perf_counter() - s)
            s = time.perf_counter()
            for i in range(n_tensors):
                np.load(os.path.join(npdir, f"{i}.npy"))
            t["np_load"].append(time.perf_counter() - s)
            shutil.rmtree(npdir)
        order = [run_dd, run_checkpoint, run_numpy]
        for r in range(rounds):                  # interleaved, the order rotated every round
            for fn in order[r % 3:] + order[:r % 3]:
                fn()
        ok = all((np.asarray(target[k]) == arrays[i]).all() for i, k in enumerate(sd))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    med = {k: _median_spread(v) for k, v in t.items()}
    gbs = {k: nbytes / m / 1e9 for k, (m, _) in med.items()}
    return {"bytes": nbytes, "rounds": rounds, "correct": bool(ok), "seconds": t,
            "GB_per_s": gbs, "spread": {k: s for k, (_, s) in med.items()},
            "save_vs_dd": gbs["save"] / gbs["dd_write"], "load_vs_dd": gbs["load"] / gbs["dd_read"],
            "save_vs_np": med["np_save"][0] / med["save"][0], "load_vs_np": med["np_load"][0] / med["load"][0]}


def resharded_reads(quick: bool):
    import zarr.storage
    import nbaccel as nb
    from nbaccel.distributed import ShardedTensor, checkpoint
    from nbaccel.distributed.checkpoint import rowchunks
    rows = 1024 if quick else 8192
    w = nb.asarray(np.random.default_rng(0).standard_normal((rows, 2048), dtype=np.float32))
    got = []
    real_get, real_open = zarr.storage.LocalStore.get, rowchunks.open_chunk

    async def counting_get(self, key, prototype=None, byte_range=None):     # reads through zarr
        buf = await real_get(self, key, prototype, byte_range)
        if buf is not None and not key.endswith("zarr.json"):
            got.append(len(buf))
        return buf

    def counting_open(path, mode):                                          # direct chunk reads
        if "r" in mode:
            got.append(os.path.getsize(path))
        return real_open(path, mode)
    base = tempfile.mkdtemp(prefix="nbaccel-reshard-bench-")
    try:
        checkpoint.save({"w": ShardedTensor.split(w, 4)}, checkpoint_id=base)
        zarr.storage.LocalStore.get, rowchunks.open_chunk = counting_get, counting_open
        per_reader = []
        for s in ShardedTensor.zeros(tuple(w.shape), 3).local_shards():
            got.clear()
            checkpoint.load({"w": ShardedTensor([s], tuple(w.shape))}, checkpoint_id=base)
            share = s.tensor.nbytes
            per_reader.append({"rows": s.sizes[0], "read_bytes": sum(got), "share_bytes": share,
                               "ratio": sum(got) / share})
    finally:
        zarr.storage.LocalStore.get, rowchunks.open_chunk = real_get, real_open
        shutil.rmtree(base, ignore_errors=True)
    return {"shape": list(w.shape), "readers": per_reader, "max_ratio": max(r["ratio"] for r in per_reader)}


def _mlp(hidden):
    import nbaccel as nb
    from nbaccel import nn
    nb.manual_seed(0)
    return nn.Sequential(nn.Linear(1, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                         nn.Linear(hidden, 1))


def data_parallel(quick: bool, rounds: int):
    import distributed
    import nbaccel as nb
    import nbaccel.nn.functional as F
    hidden, batch, steps = (128, 512, 5) if quick else (512, 4096, 10)
    x = np.linspace(-3, 3, batch, dtype=np.float32).reshape(-1, 1)
    y = np.sin(2 * x).astype(np.float32)

    model = _mlp(hidden)
    opt = nb.optim.AdamW(model.parameters(), lr=1e-3)

    @nb.compile
    def one_process_step(xb, yb):
        loss = F.mse_loss(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    X, Y = nb.asarray(x), nb.asarray(y)
    float(one_process_step(X, Y))                                   # compile

    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        dmodel = _mlp(hidden)
        dp = nb.distributed.DataParallel(dmodel, nb.optim.AdamW(dmodel.parameters(), lr=1e-3), client=client)
        dp.step(F.mse_loss, x, y)                                   # compile on the workers
        single, multi = [], []
        for _ in range(rounds):                                     # interleaved
            s = time.perf_counter()
            for _ in range(steps):
                float(one_process_step(X, Y))
            single.append((time.perf_counter() - s) / steps)
            s = time.perf_counter()
            for _ in range(steps):
                dp.step(F.mse_loss, x, y)
            multi.append((time.perf_counter() - s) / steps)
        report = dp.report()
        identical = dp.replicas_identical()
    finally:
        client.close()
        cluster.close()
    ratios = [a / b for a, b in zip(single, multi)]
    med, spread = _median_spread(ratios)
    return {"hidden": hidden, "batch": batch, "steps_per_round": steps, "rounds": rounds,
            "one_process_step_s": statistics.median(single), "two_workers_step_s": statistics.median(multi),
            "samples_per_s_ratio": med, "spread": spread, "communication_share": report["communication_share"],
            "replicas_identical": identical}


def run(quick: bool = False) -> dict:
    rounds = 2 if quick else 3
    return {"a": bandwidth(quick, rounds), "b": resharded_reads(quick),
            "c": data_parallel(quick, 3 if quick else 5)}


def markdown(r) -> str:
    a, b, c = r["a"], r["b"], r["c"]
    g, sp = a["GB_per_s"], a["spread"]

    def verdict(ok):
        return "met" if ok else "**not met**"
    lines = [f"(a) {a['bytes'] / 2**30:.2f} GiB state_dict, {a['rounds']} interleaved rounds (medians; "
             "spread = (max - min) / median):", "",
             "| | dd | nb.distributed.checkpoint | np.save / np.load |", "|---|---|---|---|",
             f"| write (fsync) | {g['dd_write']:.2f} GB/s ({sp['dd_write']:.0%}) | {g['save']:.2f} GB/s "
             f"({sp['save']:.0%}) | {g['np_save']:.2f} GB/s ({sp['np_save']:.0%}) |",
             f"| read | {g['dd_read']:.2f} GB/s ({sp['dd_read']:.0%}) | {g['load']:.2f} GB/s ({sp['load']:.0%}) "
             f"| {g['np_load']:.2f} GB/s ({sp['np_load']:.0%}) |", "",
             f"save = {a['save_vs_dd']:.0%} of dd (target ≥ 70%: {verdict(a['save_vs_dd'] >= 0.7)}), "
             f"{a['save_vs_np']:.2f}x np.save's speed (target ≥ 1: {verdict(a['save_vs_np'] >= 1)}); "
             f"load = {a['load_vs_dd']:.0%} of dd (target ≥ 70%: {verdict(a['load_vs_dd'] >= 0.7)}), "
             f"{a['load_vs_np']:.2f}x np.load's speed (target ≥ 1: {verdict(a['load_vs_np'] >= 1)}); "
             f"values correct: {a['correct']}.", "",
             f"(b) resharded load 4 → 3 row shards of a {b['shape'][0]}x{b['shape'][1]} float32 tensor: bytes "
             "read / own share per reader " + ", ".join(f"{x['ratio']:.2f}" for x in b["readers"]) +
             f" (target ≤ 1.5: {verdict(b['max_ratio'] <= 1.5 + 1e-9)}).", "",
             f"(c) data-parallel step, MLP 1-{c['hidden']}-{c['hidden']}-1, batch {c['batch']}: one process "
             f"{c['one_process_step_s'] * 1e3:.0f} ms/step, 2 workers x 1 thread {c['two_workers_step_s'] * 1e3:.0f} "
             f"ms/step: **{c['samples_per_s_ratio']:.2f}x** samples/s (spread {c['spread']:.0%}; target ≥ 1.5x: "
             f"{verdict(c['samples_per_s_ratio'] >= 1.5)}); communication {c['communication_share']:.0%} of a "
             f"step; replicas bit-identical: {c['replicas_identical']}."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import sys
    res = run("--quick" in sys.argv)
    print(markdown(res))
