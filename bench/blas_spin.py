"""OpenBLAS's spin after a GEMM, measured in a plain child process (issue 39, item 3;
docs/threads.md): the CPU its workers burn after a float32 GEMM returns, and what the int8
and 2:4 GEMM64 lose when they run right after it.

    python -m bench.blas_spin [ROUNDS]
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np

from bench.plain import ROOT, _summary, plain_env

_SPIN_CHILD = """
import numpy as np                  # OpenBLAS starts here, with the plain environment
import json, sys
from bench.blas_spin import spin_child
print(json.dumps(spin_child(int(sys.argv[1]))))
"""


def _others_cpu_ms(window):
    """CPU time (ms) that this process's other threads use during ``window`` seconds of sleep
    (``/proc/self/task/*/schedstat``)."""
    import threading
    me = threading.get_native_id()

    def snap():
        out = {}
        for tid in os.listdir("/proc/self/task"):
            if int(tid) != me:
                try:
                    with open(f"/proc/self/task/{tid}/schedstat") as f:
                        out[tid] = int(f.read().split()[0])
                except OSError:
                    pass
        return out
    a = snap()
    time.sleep(window)
    b = snap()
    return sum(b[t] - a.get(t, 0) for t in b) / 1e6


def spin_child(rounds=7, dim=4096, batch=64):
    """In one plain process: (1) the CPU OpenBLAS's workers burn in the 50 ms after a float32
    GEMM returns (right after, inside ``threadpool_limits(1)``, after 0.3 s), and what numba's
    OpenMP workers burn after a ``prange`` kernel; (2) the int8-dynamic and 2:4 GEMM64 right
    after the float32 GEMM against the same call 0.3 s later, on the kernels' threads and on
    one thread. Medians over interleaved rounds."""
    from threadpoolctl import threadpool_limits
    import numba
    from nbaccel_kernels.quant import cpu as qcpu, packing
    from nbaccel_kernels.sparse import cpu as scpu, reference as sref
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, dim), dtype=np.float32)
    w = rng.standard_normal((dim, dim), dtype=np.float32) / np.float32(np.sqrt(dim))
    wq, ws = packing.quantize_int8(w)
    pruned = np.where(sref.prune_mask(w), w, np.float32(0))
    vals, meta = scpu.compress(pruned)         # a numba prange kernel (OpenMP)
    kernels = {"int8-dynamic": lambda: qcpu.int8_dynamic_matmul(x, wq, ws),
               "2:4": lambda: scpu.linear(x, vals, meta, dim)}

    def f32():
        return x @ w.T

    def timed(fn):
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    for k in kernels.values():
        k()
    f32()
    res = {}

    def add(key, v):
        res.setdefault(key, []).append(v)
    for _ in range(rounds):
        f32()
        add("cpu ms: 0-50 ms after the GEMM", _others_cpu_ms(0.05))
        f32()
        with threadpool_limits(1, user_api="blas"):
            add("cpu ms: 0-50 ms after, inside threadpool_limits(1)", _others_cpu_ms(0.05))
        f32()
        time.sleep(0.3)
        add("cpu ms: 300-350 ms after the GEMM", _others_cpu_ms(0.05))
        scpu.compress(pruned)
        add("cpu ms: 0-50 ms after an OpenMP prange kernel", _others_cpu_ms(0.05))
        for name, k in kernels.items():
            threads = numba.get_num_threads()
            for n in (threads, 1):
                numba.set_num_threads(n)
                f32()
                a = timed(k)
                time.sleep(0.3)
                b = timed(k)
                numba.set_num_threads(threads)
                tag = f"{n} thread{'s' if n > 1 else ''}"
                add(f"{name} ms right after the GEMM ({tag})", 1e3 * a)
                add(f"{name} ms 0.3 s later ({tag})", 1e3 * b)
                add(f"{name} ratio after/later ({tag})", a / b)
        add("float32 GEMM ms", 1e3 * timed(f32))
    out = {k: _summary(v) for k, v in res.items()}
    out["load"] = os.getloadavg()[0]
    return out


def bench_spin(rounds=7):
    """:func:`spin_child` in a plain child process (``bench.plain.plain_env``)."""
    r = subprocess.run([sys.executable, "-c", _SPIN_CHILD, str(rounds)], env=plain_env(),
                       capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def spin_markdown(res):
    lines = [f"Load average {res['load']:.1f}; medians (min–max) over {next(iter(v['rounds'] for v in res.values() if isinstance(v, dict)))} rounds.", "",
             "| measurement | median | min | max |", "|---|---|---|---|"]
    for k, v in res.items():
        if isinstance(v, dict):
            lines.append(f"| {k} | {v['median']:.2f} | {v['min']:.2f} | {v['max']:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(spin_markdown(bench_spin(int(sys.argv[1]) if len(sys.argv) > 1 else 7)))
