"""The Dask bridge on a LocalCluster of 2 worker processes: compiled against plain Dask.

    python -m bench.dask_cluster [--quick]

(a) gelu_tanh(x*w+b), a row softmax and a column sum of an n x n float32 array in row chunks of
    64 MiB (n = 16384: 1 GiB, persisted on the workers); (b) column standardisation
    (x - x.mean(0)) / x.std(0) of the same array, persisted and released; ratios of plain to
    compiled, interleaved round by round (median of the per-round ratios, with the spread),
    and both graphs' task counts after Dask's own optimisation.
(c) scaling: (a) with x drawn inside the graph, on 1 worker against 2.
(d) out of core: sum(exp(x) * y) of two random arrays totalling ``NBACCEL_BENCH_DASK_OOC_GB``
    (default twice the machine's memory) on a fresh cluster; peak resident memory of every
    worker process and of this one, against the machine's memory.
Sizes: ``NBACCEL_BENCH_DASK_N`` (16384; 2048 with --quick).
"""
from __future__ import annotations

import os
import resource
import statistics
import sys
import time

import numpy as np


def gelu_tanh(z):
    return 0.5 * z * (1 + np.tanh(0.7978845608 * (z + 0.044715 * z * z * z)))


def workload_a(x, w, b):
    h = gelu_tanh(x * w + b)
    e = np.exp(h - h.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).sum(axis=0)


def workload_b(x):
    return (x - x.mean(0)) / x.std(0)


def out_of_core(x, y):
    return (np.exp(x) * y).sum()


def _peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _ram_bytes():
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _ratio_stats(plain, compiled):
    ratios = sorted(p / c for p, c in zip(plain, compiled))
    med = statistics.median(ratios)
    q = statistics.quantiles(ratios, n=4) if len(ratios) >= 4 else [ratios[0], med, ratios[-1]]
    return {"ratio": med, "spread": (q[-1] - q[0]) / med, "plain_median_s": statistics.median(plain),
            "compiled_median_s": statistics.median(compiled), "plain_s": plain, "compiled_s": compiled}


def _interleaved(rounds, plain, compiled):
    ps, cs = [], []
    for r in range(rounds):
        order = (plain, compiled) if r % 2 == 0 else (compiled, plain)
        for fn in order:
            t0 = time.perf_counter()
            fn()
            (ps if fn is plain else cs).append(time.perf_counter() - t0)
    return _ratio_stats(ps, cs)


def run(quick: bool = False) -> dict:
    try:
        import dask.array as da
        import distributed
    except ImportError:
        return {"skipped": "Dask is not installed (pip install 'nbaccel[dask]')"}

    import nbaccel as nb
    from nbaccel.daskbridge.report import task_count

    n = int(os.environ.get("NBACCEL_BENCH_DASK_N", 2048 if quick else 16384))
    rows = max(1, (64 << 20) // (4 * n))
    rounds = 3 if quick else 5
    out = {"n": n, "chunk_rows": rows, "rounds": rounds}
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, memory_limit=0)
    client = distributed.Client(cluster)
    try:
        x = da.random.random((n, n), chunks=(rows, n)).astype(np.float32).persist()
        w = np.linspace(0.5, 1.5, n, dtype=np.float32)
        b = np.linspace(-0.1, 0.1, n, dtype=np.float32)
        distributed.wait(x)
        fa = nb.compile(workload_a, backend="numba")
        fb = nb.compile(workload_b, backend="numba")
        ya, pa = fa(x, w, b), workload_a(x, w, b)
        np.testing.assert_allclose(ya.compute(), pa.compute(), rtol=1e-3)     # also warms the kernels
        yb, pb = fb(x), workload_b(x)
        np.testing.assert_allclose(yb[:64].compute(), pb[:64].compute(), rtol=1e-3, atol=1e-4)
        distributed.wait(yb.persist())
        out["a"] = _interleaved(rounds, lambda: pa.compute(), lambda: ya.compute())
        out["a"].update(tasks=task_count([ya]), plain_tasks=task_count([pa]))

        def persist_release(arr):
            p = arr.persist()
            distributed.wait(p)
            del p

        out["b"] = _interleaved(rounds, lambda: persist_release(pb), lambda: persist_release(yb))
        out["b"].update(tasks=task_count([yb]), plain_tasks=task_count([pb]))
        del x
        # (c) scaling: x drawn inside the graph, compiled, 2 workers then 1
        xg = da.random.random((n, n), chunks=(rows, n)).astype(np.float32)
        yg = fa(xg, w, b)
        yg.compute()
        two = [_timed(yg.compute) for _ in range(rounds)]
        cluster.scale(1)
        client.wait_for_workers(1)
        while len(client.scheduler_info()["workers"]) > 1:
            time.sleep(0.1)
        yg.compute()
        one = [_timed(yg.compute) for _ in range(rounds)]
        out["c"] = {"one_worker_s": statistics.median(one), "two_workers_s": statistics.median(two),
                    "speedup": statistics.median(one) / statistics.median(two), "one": one, "two": two}
    finally:
        client.close()
        cluster.close()
    out["d"] = _out_of_core(quick, nb)
    return out


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _out_of_core(quick, nb):
    import dask.array as da
    import distributed
    ram = _ram_bytes()
    total = float(os.environ.get("NBACCEL_BENCH_DASK_OOC_GB", 1 if quick else 2 * ram / 2**30)) * 2**30
    side = int((total / 2 / 8) ** 0.5)                 # two float64 arrays of side x side
    rows = max(1, (64 << 20) // (8 * side))
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, memory_limit=0)
    client = distributed.Client(cluster)
    try:
        x = da.random.random((side, side), chunks=(rows, side))
        y = da.random.random((side, side), chunks=(rows, side))
        f = nb.compile(out_of_core, backend="numba")
        t0 = time.perf_counter()
        value = float(f(x, y).compute())
        seconds = time.perf_counter() - t0
        peaks = client.run(_peak_rss_bytes)
    finally:
        client.close()
        cluster.close()
    mine = _peak_rss_bytes()
    return {"total_bytes": 2 * side * side * 8, "ram_bytes": ram, "seconds": seconds, "value": value,
            "worker_peak_rss": sorted(peaks.values()), "client_peak_rss": mine,
            "max_peak_fraction_of_ram": max(list(peaks.values()) + [mine]) / ram}


def markdown(r) -> str:
    def row(label, d, target):
        verdict = "met" if d["ratio"] >= target else "not met"
        return (f"| {label} | {d['plain_median_s']:.3f} s | {d['compiled_median_s']:.3f} s | "
                f"**{d['ratio']:.2f}x** (spread {d['spread']:.0%}) | {d['plain_tasks']} → {d['tasks']} | "
                f"≥ {target}x: {verdict} |")
    lines = [f"{r['n']}x{r['n']} float32, row chunks of {r['chunk_rows']} rows (64 MiB), LocalCluster of "
             f"2 worker processes x 1 thread, {r['rounds']} interleaved rounds; ratio = plain Dask / compiled "
             "(median of per-round ratios); tasks after Dask's optimisation.", "",
             "| workload | plain Dask | compiled | ratio | tasks plain → compiled | target |",
             "|---|---|---|---|---|---|",
             row("(a) gelu_tanh(x*w+b), row softmax, column sum", r["a"], 3),
             row("(b) (x - x.mean(0)) / x.std(0)", r["b"], 2)]
    c = r["c"]
    lines += ["", f"(c) scaling of (a), x drawn in the graph: 1 worker {c['one_worker_s']:.3f} s, 2 workers "
              f"{c['two_workers_s']:.3f} s: **{c['speedup']:.2f}x** (target ≥ 1.6x: "
              f"{'met' if c['speedup'] >= 1.6 else 'not met'})."]
    d = r["d"]
    gib = 2**30
    lines += ["", f"(d) out of core: sum(exp(x) * y) over {d['total_bytes'] / gib:.1f} GiB of random data "
              f"(machine memory {d['ram_bytes'] / gib:.1f} GiB) in {d['seconds']:.1f} s; peak resident memory "
              f"per worker {', '.join(f'{p / gib:.2f}' for p in d['worker_peak_rss'])} GiB, client "
              f"{d['client_peak_rss'] / gib:.2f} GiB: at most {d['max_peak_fraction_of_ram']:.1%} of memory "
              f"(target ≤ 25%: {'met' if d['max_peak_fraction_of_ram'] <= 0.25 else 'not met'})."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    res = run(quick="--quick" in sys.argv)
    print(markdown(res))
