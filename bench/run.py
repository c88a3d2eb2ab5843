"""``python -m bench.run``: every benchmark in one run; writes bench/results.json and results.md.

    python -m bench.run                 # the full run (a few minutes; what `make bench` does)
    python -m bench.run --only a,e      # some workloads
    python -m bench.run --quick         # small shapes, to check the harness (writes to a temp dir)
    python -m bench.run --no-torch      # skip the PyTorch peers even when installed
    python -m bench.run --rounds 25 --threads 2 --settle 0.008

Every workload's implementations run interleaved, round by round, in two allocator modes
(fresh and reused outputs); speedups are medians of per-round ratios with their spread, and
a target with a spread of 20% or more is reported as too wide to judge. Every library runs
with one thread count; PyTorch runs in a worker process (bench/peer_worker.py).

Letters a-i are the compiler workloads; the kernel and contract benchmarks have names:
attention, quant, sparse, cells, cache_reliability, and step, small_cells, export, func,
gpu_check, plain (the plain-process column), first_run and headline (a notebook under
%%compile against plain; cell headlines against run_cell), eager (op dispatch and small training
steps against PyTorch eager) once their modules exist (each also runs
alone as ``python -m bench.<name>``).

A compiled result that differs from NumPy, or a crash, is reported in the table and makes
the command exit with status 1 (after writing the results).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# Suites: bench/<name>.py with run(quick) -> dict and markdown(results) -> str. A suite whose
# module is absent (another branch not merged yet) is skipped and said so; adding one is one
# name here.
SUITES = ("attention", "quant", "sparse", "cells", "cache_reliability",
          "step", "small_cells", "export", "func", "gpu_check", "plain", "conv", "sweep", "dask_cluster",
          "distributed_ckpt", "rnn", "eager", "first_run", "headline")
DEFAULT_ONLY = "abcdefghi," + ",".join(SUITES)


def suite_available(name: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(f"bench.{name}") is not None


def render(results: dict) -> str:
    """results.md from results.json's dict: the tables, then each suite's own markdown."""
    import importlib
    from .report import markdown
    md = markdown(results)
    for name, res in results.get("suites", {}).items():
        if "skipped" in res:
            md += f"\n\n## {name}\n\nskipped: {res['skipped']}\n"
            continue
        mod = importlib.import_module(f"bench.{name}")
        md += f"\n\n## {name}\n\n" + (f"error: {res['error']}" if "error" in res else mod.markdown(res))
    return md


def _parse(argv):
    ap = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=DEFAULT_ONLY, help="workload letters and suite names, e.g. 'a,b,e,cells'")
    ap.add_argument("--rounds", "--repeat", dest="repeat", type=int, default=None,
                    help="interleaved rounds per allocator mode (default 15; --quick 3)")
    ap.add_argument("--threads", type=int, default=None,
                    help="thread count of every library (default: the cores this process may use)")
    ap.add_argument("--settle", type=float, default=None,
                    help="seconds to idle after each timed call, so that a pool's spinning threads "
                         "stop before the next implementation runs (default 0.008: GOMP_SPINCOUNT's "
                         "spin is ~6 ms here)")
    ap.add_argument("--quick", action="store_true", help="small shapes and few runs")
    ap.add_argument("--no-torch", action="store_true", help="leave the PyTorch peers out")
    ap.add_argument("--out", default=None, help="directory for results.json/results.md")
    ap.add_argument("--keep-cache", action="store_true", help="keep the temporary nbaccel cache")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = _parse(argv)
    words = [w for w in args.only.split(",") if w]
    only = {c for w in words if w not in SUITES for c in w} | {w for w in words if w in SUITES}
    from .threads import default_threads, pin_env
    threads = args.threads or default_threads()
    # before NumPy, numba or torch is imported: their pools read these at import
    preimported = pin_env(threads)
    tmp = tempfile.mkdtemp(prefix="nbaccel-bench-")
    # an isolated cache: nothing from the user's cache helps, nothing of ours stays behind
    os.environ["NBACCEL_CACHE_DIR"] = os.path.join(tmp, "cache-main")
    # One OpenMP wait policy for every library in the run (numba's and torch's pools). With
    # sleeping threads (nbaccel's notebook default, PASSIVE) the same numba kernel took 11 ms or
    # 85 ms from call to call on this VM; spinning threads (torch's default) gave 11 ms every
    # time. Set before nbaccel or torch is imported; recorded in results.json.
    os.environ.setdefault("OMP_WAIT_POLICY", "ACTIVE")
    # ...but ACTIVE threads spin forever between parallel regions, and PyTorch now runs in a
    # separate process: its spinning pool would take a core from every nbaccel call and the
    # other way round. A bounded spin (300000 libgomp iterations: about 6 ms of CPU here;
    # 3000000 spun 70 ms) keeps back-to-back launches fast and lets an idle pool go to sleep.
    os.environ.setdefault("GOMP_SPINCOUNT", "300000")
    if args.settle is None:
        args.settle = 0.008
    out_dir = args.out or (tmp if args.quick else HERE)
    if args.quick:
        rows = cols = 512
        mlp = dict(batch=64, d_in=128, hidden=128, d_out=128)
        lat_shape = (128, 128)
        repeat = args.repeat or 3
    else:
        rows = cols = 4096
        mlp = dict(batch=512, d_in=1024, hidden=1024, d_out=1024)
        lat_shape = (1024, 1024)
        repeat = args.repeat or 15

    from .latency import run_compile_latency, run_schedule_time, run_tracing_overhead
    from .report import add_ratios, targets
    from .steady import run_array, run_mlp
    from .peer_worker import PeerWorker
    from .threads import pin_runtime, read_back
    from .timing import WrongResult, machine_info
    from .workloads import ARRAY_WORKLOADS

    import numba   # noqa: F401  (loaded here so that its pool is pinned and read back below)
    pinned = pin_runtime(threads)
    worker = None
    if not args.no_torch and ({"a", "b", "c", "d", "g", "h", "i"} & only):
        worker = PeerWorker(threads)
    hello = worker.hello if worker else {}
    machine = machine_info(None)
    machine["torch"] = hello.get("torch") or ("left out (--no-torch)" if args.no_torch else "not installed")
    machine["threads"] = dict(read_back(), torch=(hello.get("threads") or {}).get("torch"),
                              torch_interop=(hello.get("threads") or {}).get("torch_interop"),
                              pinned=pinned, imported_before_pinning=preimported)
    machine["torch_threads"] = machine["threads"]["torch"]
    machine["peer_worker_pid"] = hello.get("pid")
    results = {"machine": dict(machine, omp_wait_policy=os.environ.get("OMP_WAIT_POLICY")),
               "config": {"repeat": repeat, "rounds": repeat, "threads": threads, "settle": args.settle,
                          "alloc_modes": ["fresh", "reused"], "shape": [rows, cols], "mlp": mlp,
                          "latency_shape": list(lat_shape), "quick": args.quick,
                          "shape_note": f"(a)-(c) {rows}x{cols} float32; (d) MLP {mlp}; "
                                        f"(e) {lat_shape[0]}x{lat_shape[1]}"},
               "torch_import_seconds": hello.get("torch_import_seconds"),
               "workloads": {}, "suites": {}, "failures": []}
    t_start = time.perf_counter()

    def note_failures(key, variants):
        for name, v in variants.items():
            if v.get("failed"):
                results["failures"].append(f"({key}) {name}: {v['status']}")

    for wl in ARRAY_WORKLOADS:
        if wl.key not in only:
            continue
        print(f"[bench] ({wl.key}) {wl.title} ...", flush=True)
        variants = run_array(wl, rows, cols, repeat, worker, args.settle)
        add_ratios(variants)
        note_failures(wl.key, variants)
        results["workloads"][wl.key] = {"title": wl.title, "shape": [rows, cols], "variants": variants,
                                        "max_kernels": wl.max_kernels}
    if "d" in only:
        print("[bench] (d) MLP training step ...", flush=True)
        variants = run_mlp(repeat, worker, args.settle, **mlp)
        add_ratios(variants)
        note_failures("d", variants)
        results["workloads"]["d"] = {"title": "MLP training step", "shape": mlp, "variants": variants}
    if worker is not None:   # the suites below bring their own peers
        worker.close()
    for key, label, fn in (("e", "compile_latency", lambda: run_compile_latency(tmp, *lat_shape)),
                           ("f", "tracing_overhead", lambda: run_tracing_overhead(repeat=max(30, repeat))),
                           ("f", "schedule_200", run_schedule_time)):
        if key not in only:
            continue
        print(f"[bench] ({key}) {label} ...", flush=True)
        try:
            results[label] = fn()
        except WrongResult as e:
            results[label] = {"error": f"WRONG RESULT: {e}"}
            results["failures"].append(f"({key}) WRONG RESULT: {e}")
        except Exception as e:
            results[label] = {"error": f"error: {type(e).__name__}: {e}"}
            results["failures"].append(f"({key}) error: {type(e).__name__}: {e}")

    import importlib
    for name in SUITES:
        if name not in only:
            continue
        if not suite_available(name):
            results["suites"][name] = {"skipped": f"bench/{name}.py is not in this checkout"}
            continue
        print(f"[bench] {name} ...", flush=True)
        mod = importlib.import_module(f"bench.{name}")
        try:
            results["suites"][name] = mod.run(quick=args.quick)
        except Exception as e:
            results["suites"][name] = {"error": f"{type(e).__name__}: {e}"}
            results["failures"].append(f"({name}) error: {type(e).__name__}: {e}")

    results["targets"] = targets(results)
    results["total_seconds"] = time.perf_counter() - t_start
    try:
        results["machine"]["load_average_end"] = os.getloadavg()
    except OSError:
        pass
    try:   # known only once a parallel kernel has run: 'omp' launches cost ms on a busy box
        import numba
        results["machine"]["numba_threading_layer"] = numba.threading_layer()
    except Exception:
        pass
    md = render(results)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write(md)
    print()
    print(md)
    print(f"[bench] wrote {out_dir}/results.json and results.md in {results['total_seconds']:.0f} s")
    if not args.keep_cache:
        shutil.rmtree(tmp if out_dir != tmp else os.path.join(tmp, "cache-main"), ignore_errors=True)
        for d in ("cache-cold", "cache-auto"):
            shutil.rmtree(os.path.join(tmp, d), ignore_errors=True)
    if results["failures"]:
        print("[bench] FAILED:\n  " + "\n  ".join(results["failures"]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
