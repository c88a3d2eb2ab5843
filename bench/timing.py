"""Timing, correctness checks and a description of the machine, shared by every workload."""
from __future__ import annotations

import os
import platform
import statistics
import sys
import time

import numpy as np


class WrongResult(AssertionError):
    """A compiled or peer result that does not match NumPy: the benchmark must not go on quietly."""


def measure(fn, repeat: int, warmup: int = 1) -> dict:
    """Run ``fn`` ``warmup`` times untimed, then ``repeat`` times; seconds as median/min/max."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return {"median": statistics.median(times), "min": min(times), "max": max(times),
            "runs": repeat}


SPREAD_LIMIT = 0.20   # a ratio whose spread (IQR / median of the rounds) reaches this is not judged


def quantile(xs, q: float) -> float:
    """The ``q`` quantile of ``xs`` with linear interpolation between order statistics."""
    s = sorted(xs)
    if not s:
        raise ValueError("quantile of no values")
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def time_stats(times) -> dict:
    """Seconds of one implementation over the rounds: median, quartiles, min, max."""
    return {"median": quantile(times, 0.5), "q1": quantile(times, 0.25), "q3": quantile(times, 0.75),
            "min": min(times), "max": max(times), "runs": len(times)}


def ratio_stats(base_times, times) -> dict | None:
    """Per-round speedups ``base / this`` (round r of one against round r of the other, so that
    drift during the run hits both alike): their median, quartiles, min, max and the spread,
    (q3 - q1) / median. None when either has no times or a round took no time."""
    if not base_times or not times or len(base_times) != len(times) or min(times) <= 0:
        return None
    r = [b / t for b, t in zip(base_times, times)]
    med = quantile(r, 0.5)
    q1, q3 = quantile(r, 0.25), quantile(r, 0.75)
    return {"median": med, "q1": q1, "q3": q3, "min": min(r), "max": max(r),
            "spread": (q3 - q1) / med if med > 0 else float("inf"), "rounds": len(r)}


def verdict(stats: dict | None, need: float, spread_limit: float = SPREAD_LIMIT) -> dict:
    """Judge a target ``ratio >= need`` on the median of the per-round ratios.

    state: "met", "short" (median below the target), "too wide" (the spread reaches
    ``spread_limit``: the rounds disagree too much to say either) or "not measured"."""
    if stats is None:
        return {"met": None, "state": "not measured", "spread": None}
    met = stats["median"] >= need
    wide = not stats["spread"] < spread_limit
    return {"met": met, "state": "too wide" if wide else "met" if met else "short",
            "spread": stats["spread"]}


def timed(fn):
    """(result, seconds) of one call."""
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def to_numpy(x):
    """A NumPy array from an nbaccel Tensor, a torch tensor, a NumPy array or a scalar."""
    if isinstance(x, np.ndarray):
        return x
    if "torch" in type(x).__module__:
        return x.detach().cpu().numpy()
    if hasattr(x, "detach"):
        x = x.detach()
    if hasattr(x, "numpy"):
        return np.asarray(x.numpy())
    return np.asarray(x)


def check(name: str, got, want, rtol=1e-4, atol=1e-5):
    """Raise WrongResult unless ``got`` matches the NumPy reference ``want`` (shape and values)."""
    got, want = to_numpy(got), to_numpy(want)
    if got.shape != want.shape:
        raise WrongResult(f"{name}: shape {got.shape} != reference {want.shape}")
    if not np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=False):
        err = np.abs(got.astype(np.float64) - want.astype(np.float64))
        i = np.unravel_index(np.nanargmax(err), err.shape) if err.size else ()
        raise WrongResult(f"{name}: result differs from NumPy (max abs err {np.nanmax(err):.3g} at "
                          f"{i}: got {got[i]!r}, want {want[i]!r}; rtol={rtol}, atol={atol})")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(mod):
    try:
        return __import__(mod).__version__
    except Exception:
        return None


def machine_info(torch_mod=None) -> dict:
    """CPU, cores, library versions and the environment variables that change the numbers."""
    import numba
    info = {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "numba": numba.__version__,
        "llvmlite": _version("llvmlite"),
        "nbaccel": _version("nbaccel"),
        "torch": torch_mod.__version__ if torch_mod is not None else "not installed",
        "numba_threads": numba.get_num_threads(),
        "torch_threads": torch_mod.get_num_threads() if torch_mod is not None else None,
        "env": {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
                                               "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                               "NUMBA_NUM_THREADS", "MKL_NUM_THREADS",
                                               "NUMBA_THREADING_LAYER", "OMP_WAIT_POLICY")},
    }
    try:
        info["load_average"] = os.getloadavg()
    except OSError:
        pass
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        info["numpy_blas"] = f"{blas.get('name')} {blas.get('version')}"
    except Exception:
        pass
    try:   # which kernel OpenBLAS picked at run time (OPENBLAS_CORETYPE changes it)
        from threadpoolctl import threadpool_info
        info["blas_runtime"] = [{k: d.get(k) for k in ("internal_api", "version", "num_threads",
                                                        "architecture")} for d in threadpool_info()]
    except Exception:
        pass
    return info
