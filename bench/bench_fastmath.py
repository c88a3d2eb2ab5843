"""fexp/ftanh against math.exp/math.tanh in a parallel numba loop (4096x4096 float32).

    python bench/bench_fastmath.py [--size N] [--repeat R]

Prints median wall times. Without SVML, math.exp/math.tanh stay scalar libm calls and the
loop does not vectorise; the helpers vectorise (see tests/test_fastmath.py::is_vectorised).
"""
from __future__ import annotations

import argparse
import math
import statistics
import time

import numpy as np
from numba import njit, prange

from nbaccel.compiler.codegen.fastmath import SAFE_FASTMATH, fexp, fgelu_tanh, ftanh


@njit(parallel=True, fastmath=SAFE_FASTMATH, cache=True)
def exp_fast(x, out):
    for i in prange(x.shape[0]):
        for j in range(x.shape[1]):
            out[i, j] = fexp(x[i, j])


@njit(parallel=True, fastmath=SAFE_FASTMATH, cache=True)
def exp_libm(x, out):
    for i in prange(x.shape[0]):
        for j in range(x.shape[1]):
            out[i, j] = math.exp(x[i, j])


@njit(parallel=True, fastmath=SAFE_FASTMATH, cache=True)
def tanh_fast(x, out):
    for i in prange(x.shape[0]):
        for j in range(x.shape[1]):
            out[i, j] = ftanh(x[i, j])


@njit(parallel=True, fastmath=SAFE_FASTMATH, cache=True)
def tanh_libm(x, out):
    for i in prange(x.shape[0]):
        for j in range(x.shape[1]):
            out[i, j] = math.tanh(x[i, j])


@njit(parallel=True, fastmath=SAFE_FASTMATH, cache=True)
def gelu_fast(x, out):
    for i in prange(x.shape[0]):
        for j in range(x.shape[1]):
            out[i, j] = fgelu_tanh(x[i, j])


@njit(parallel=True, fastmath=SAFE_FASTMATH, cache=True)
def gelu_libm(x, out):
    k = np.float32(math.sqrt(2.0 / math.pi))
    for i in prange(x.shape[0]):
        for j in range(x.shape[1]):
            v = x[i, j]
            out[i, j] = np.float32(0.5) * v * (np.float32(1.0) + math.tanh(
                k * (v + np.float32(0.044715) * v * v * v)))


def median_ms(fn, *args, repeat):
    fn(*args)  # compile / load from cache
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    x = np.random.default_rng(0).uniform(-5, 5, (args.size, args.size)).astype(np.float32)
    out = np.empty_like(x)
    print(f"{args.size}x{args.size} float32, parallel numba, median of {args.repeat}")
    for name, fast, libm, ref in [("exp", exp_fast, exp_libm, np.exp),
                                  ("tanh", tanh_fast, tanh_libm, np.tanh),
                                  ("gelu_tanh", gelu_fast, gelu_libm, None)]:
        t_fast = median_ms(fast, x, out, repeat=args.repeat)
        if ref is not None:
            err = np.max(np.abs(out - ref(x.astype(np.float64))) / np.abs(ref(x.astype(np.float64))))
        t_libm = median_ms(libm, x, out, repeat=args.repeat)
        t_np = median_ms(ref, x, repeat=args.repeat) if ref is not None else float("nan")
        extra = f"  max rel err {err:.1e}" if ref is not None else ""
        print(f"{name:10s} helper {t_fast:8.2f} ms   math.* {t_libm:8.2f} ms   "
              f"numpy {t_np:8.2f} ms   speedup {t_libm / t_fast:5.1f}x{extra}")


if __name__ == "__main__":
    main()
