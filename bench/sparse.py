"""2:4 semi-structured sparse matmul against dense float32, through nbaccel's eager F.linear
(the sparse side runs the numba kernels of ``nbaccel_kernels.sparse.cpu``, the dense side BLAS).

Workloads (issue 12):

* ``gemv8``: one input vector through 8 layers of 4096 x 4096 (512 MB of dense float32
  weights, far beyond the last-level cache, so each layer streams its weight from memory);
* ``gemm64``: a batch of 64 inputs through one 4096 x 4096 layer.

Sparse and dense run interleaved, round by round; the speedup is the median of the per-round
ratios (dense time / sparse time), with its min and max. Weight bytes read per call are
reported for both (sparse: kept values plus metadata).

    python -m bench.sparse [--quick]
"""
from __future__ import annotations

import json
import statistics
import sys
import time

import numpy as np


_PAUSE = 1.0   # seconds before each timed call (OpenBLAS threads spin after a call; see docs/sparsity.md)


def _setup(layers, n, batch, seed=0):
    import nbaccel as nb
    rng = np.random.default_rng(seed)
    dense, sparse = [], []
    for _ in range(layers):
        w = rng.standard_normal((n, n), dtype=np.float32) / np.float32(np.sqrt(n / 2))
        s = nb.sparse.to_sparse_semi_structured(nb.sparse.prune_2_4(nb.from_numpy(w)))
        dense.append(s.to_dense())             # the same (pruned) weights, stored dense
        sparse.append(s)
    x = nb.from_numpy(rng.standard_normal((n,) if batch is None else (batch, n), dtype=np.float32))
    return dense, sparse, x


def _chain(weights, x):
    import nbaccel.nn.functional as F
    y = x
    for w in weights:
        y = F.linear(y, w)
    return y


def _case(name, layers, n, batch, rounds, pause=_PAUSE):
    dense, sparse, x = _setup(layers, n, batch)
    want = np.asarray(_chain(dense, x))
    got = np.asarray(_chain(sparse, x))
    scale = np.abs(want).max() + 1e-30
    if np.abs(got - want).max() > 1e-4 * scale:
        raise AssertionError(f"{name}: the sparse result differs from the dense one")
    times = {"dense": [], "sparse": []}
    for _ in range(rounds):
        for impl, ws in (("dense", dense), ("sparse", sparse)):
            # OpenBLAS's threads spin for a while after a call; a kernel started meanwhile
            # shares its cores with them. A pause lets them sleep, for both sides alike.
            time.sleep(pause)
            t0 = time.perf_counter()
            _chain(ws, x)
            times[impl].append(time.perf_counter() - t0)
    ratios = [d / s for d, s in zip(times["dense"], times["sparse"])]
    return {
        "name": name, "layers": layers, "shape": [n, n], "batch": batch or 1,
        "weight_bytes": {"dense": sum(w.nbytes for w in dense),
                         "sparse": sum(s.nbytes for s in sparse)},
        "seconds": {k: {"median": statistics.median(v), "min": min(v), "max": max(v),
                        "runs": len(v)} for k, v in times.items()},
        "speedup": {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)},
    }


def run(quick: bool = False) -> dict:
    """Both workloads; ``quick`` shrinks them (1024 x 1024, fewer rounds) to a few seconds."""
    n, rounds = (1024, 3) if quick else (4096, 7)
    _chain(*_setup(1, 64, None)[1:])           # JIT-compile (or load) the kernels first
    _chain(*_setup(1, 64, 4)[1:])
    cases = [_case("gemv8", 8, n, None, rounds), _case("gemm64", 1, n, 64, rounds)]
    from .timing import machine_info
    return {"quick": quick, "machine": machine_info(),
            "targets": {"gemv8": 1.5, "gemm64": 1.1}, "cases": cases}


def markdown(results) -> str:
    lines = ["| workload | dense f32 | 2:4 sparse | speedup (median, min–max) | target | "
             "weight bytes dense → sparse |", "|---|---|---|---|---|---|"]
    for c in results["cases"]:
        s, t = c["seconds"], results["targets"].get(c["name"])
        sp = c["speedup"]
        lines.append(
            f"| {c['name']}: {c['layers']} × {c['shape'][0]}×{c['shape'][1]}, batch {c['batch']} "
            f"| {s['dense']['median'] * 1e3:.2f} ms | {s['sparse']['median'] * 1e3:.2f} ms "
            f"| **{sp['median']:.2f}×** ({sp['min']:.2f}–{sp['max']:.2f}) | ≥ {t}× "
            f"| {c['weight_bytes']['dense'] / 2**20:.0f} MB → {c['weight_bytes']['sparse'] / 2**20:.0f} MB |")
    m = results.get("machine", {})
    load = m.get("load_average")
    lines.append(f"\nnumba threads {m.get('numba_threads')}, BLAS {m.get('numpy_blas')} "
                 f"(OPENBLAS_NUM_THREADS={m.get('env', {}).get('OPENBLAS_NUM_THREADS')})"
                 + (f", load average {load[0]:.1f}" if load else ""))
    if results["quick"]:
        lines.append("\n(quick run: 1024 × 1024 layers, which fit in cache; the targets are for 4096)")
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    res = run(quick="--quick" in argv)
    print(markdown(res))
    if "--json" in argv:
        print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
