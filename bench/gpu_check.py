"""One unattended GPU check: ``python -m bench.gpu_check --out DIR`` on a machine with an
NVIDIA GPU after ``pip install -e '.[gpu,test]'``; at most ~5 minutes.

Stages, each guarded (a failing stage is recorded with its traceback and the rest still run):

1. ``environment``: versions, the GPU, its architecture and memory.
2. ``tests``: the GPU test subset (``pytest -m gpu`` over tests/), in a subprocess.
3. ``copy``: the device-to-device copy bandwidth CuPy reaches (``cupy.copyto``), the floor
   every elementwise and reduction kernel is measured against.
4. ``workloads``: (a) gelu_tanh(x*w+b), (b) row softmax, (c) layer_norm at 8192×8192 float32
   (bench/workloads.py): ``nb.compile(fn, backend="triton")`` (default and max-autotune) on
   CUDA tensors, nbaccel eager on CuPy, CuPy's own ops, and torch eager / ``torch.compile``
   where PyTorch with CUDA is installed; every result checked against NumPy on the host;
   implementations interleaved round by round, GPU time from CUDA events; each one also as a
   fraction of the copy bandwidth (both move the same bytes: read once, write once).
5. ``attention``: nbaccel's Triton flash attention (``nb.nn.functional.
   scaled_dot_product_attention`` on CUDA tensors) against a CuPy math reference, timed.

Writes ``DIR/gpu_check.json`` and ``DIR/gpu_check.md``. Exit status: 0 all right, 1 a wrong
result or a failed stage, 3 no GPU (CuPy missing or no device; the files say which), 2 bad
command-line arguments. PyTorch is imported only by the stages that time it, and only when
it is installed.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback

import numpy as np

from bench.gpu_check_md import TARGETS, markdown, problems  # noqa: F401  (the report half)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_GPU = 0, 1, 2, 3
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUDGET_SECONDS = 290.0
PIPELINE = 10           # calls queued between two events for the "time" columns
# what bench.gpu_check assumes of the Triton backend (the triton engineer's part of issue 13)
TRITON_API = ('nb.compile(fn, backend="triton", mode=...)(*cuda_tensors) returns CUDA tensors; '
              'its .report.kernels list each kernel with "backend": "triton" and "device": "cuda:N"')


class Deadline:
    def __init__(self, seconds):
        self.end = time.perf_counter() + seconds

    def left(self) -> float:
        return self.end - time.perf_counter()


def guarded(results: dict, name: str, fn, *args, **kw):
    """Run one stage: its result, or its error and traceback, go into ``results["stages"]``."""
    t0 = time.perf_counter()
    rec = {"name": name}
    try:
        rec["result"] = fn(*args, **kw)
        rec["ok"] = True
    except Exception as e:
        rec["ok"] = False
        rec["error"] = f"{type(e).__name__}: {e}"
        rec["traceback"] = traceback.format_exc()[-4000:]
    rec["seconds"] = round(time.perf_counter() - t0, 3)
    results["stages"].append(rec)
    print(f"[gpu_check] {name}: {'ok' if rec['ok'] else 'FAILED ' + rec['error']} ({rec['seconds']} s)",
          flush=True)
    return rec.get("result")


def gpu_presence() -> tuple[bool, str]:
    """(True, "") when CuPy imports and finds a device; else (False, why)."""
    try:
        import cupy
    except ImportError as e:
        return False, f"CuPy is not installed ({e}): pip install -e '.[gpu,test]'"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:
        return False, f"CuPy found no usable GPU ({type(e).__name__}: {e})"
    if n < 1:
        return False, "CuPy found no GPU"
    return True, ""


def prepare_environment() -> list[str]:
    """Make a bare checkout runnable without ``pip install`` (a lent GPU machine cannot reach a
    package index): a private kernel cache when none is set (the default location needs
    platformdirs), and the ``nbaccel_kernels`` name for ``kernels/`` (an editable install maps
    it; a developer's checkout has a symlink). Returns what it did, for the report."""
    notes = []
    if not os.environ.get("NBACCEL_CACHE_DIR"):
        import tempfile
        os.environ["NBACCEL_CACHE_DIR"] = tempfile.mkdtemp(prefix="nbaccel-gpu-check-")
        notes.append(f"NBACCEL_CACHE_DIR={os.environ['NBACCEL_CACHE_DIR']} (a fresh cache for this run)")
    import importlib
    import importlib.util
    if importlib.util.find_spec("nbaccel_kernels") is None and os.path.isdir(os.path.join(ROOT, "kernels")):
        link = os.path.join(ROOT, "nbaccel_kernels")
        try:
            os.symlink("kernels", link)          # gitignored, as in a developer's checkout
            importlib.invalidate_caches()
            notes.append("linked nbaccel_kernels -> kernels (no editable install found)")
        except OSError as e:
            notes.append(f"nbaccel_kernels is not importable and could not be linked ({e})")
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    return notes


# -- stages ---------------------------------------------------------------------------------------
def stage_environment():
    import cupy as cp
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.runtime.getDevice())
    name = props.get("name", b"?")
    env = {"python": platform.python_version(), "numpy": np.__version__, "cupy": cp.__version__,
           "gpu": name.decode() if isinstance(name, bytes) else str(name),
           "compute_capability": cp.cuda.Device().compute_capability,
           "memory_gib": round(cp.cuda.Device().mem_info[1] / 2 ** 30, 1),
           "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(), "cuda_driver": cp.cuda.runtime.driverGetVersion(),
           "python_executable": sys.executable}
    from importlib import metadata
    for dist in ("triton", "torch", "nbaccel", "numba", "ipython"):   # without importing (torch: 1 s)
        try:
            env[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            env[dist] = None
    from nbaccel.gpu import triton_driver
    env["arch"] = triton_driver.arch()
    return env


def _installed(mod) -> bool:
    import importlib.util
    return importlib.util.find_spec(mod) is not None


def gpu_test_files() -> list[str]:
    """The test files that mark tests ``gpu`` (only these are collected: a module elsewhere that
    fails to import on this machine must not fail the GPU subset)."""
    tdir = os.path.join(ROOT, "tests")
    out = []
    for name in sorted(os.listdir(tdir)):
        if name.startswith("test_") and name.endswith(".py"):
            with open(os.path.join(tdir, name), encoding="utf-8") as f:
                if "mark.gpu" in f.read():
                    out.append(os.path.join("tests", name))
    return out


def stage_tests(out_dir, timeout):
    """``pytest -m gpu`` over the files with GPU tests, in a subprocess."""
    xml = os.path.join(out_dir, "gpu_tests.xml")
    files = gpu_test_files()
    cmd = [sys.executable, "-m", "pytest", "-m", "gpu", *files, "-q", "-p", "no:randomly",
           "-p", "no:cacheprovider", f"--junitxml={xml}", "-rfE"]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        tail = (e.stdout or b"")[-3000:] if isinstance(e.stdout, bytes) else (e.stdout or "")[-3000:]
        return {"returncode": None, "timed_out": True, "ok": False, "tail": str(tail)}
    counts = _junit_counts(xml)
    # pytest exit 5: nothing collected (no gpu tests at all): not a wrong result, but say so
    return {"returncode": r.returncode, "ok": r.returncode in (0, 5), "counts": counts, "files": files,
            "tail": (r.stdout + r.stderr)[-3000:]}


def _junit_counts(path):
    try:
        import xml.etree.ElementTree as ET
        root = ET.parse(path).getroot()
        suite = root if root.tag == "testsuite" else root.find("testsuite")
        return {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    except Exception:
        return None


def _gpu_seconds(fn, repeat: int = 1):
    """GPU seconds per call between two CUDA events on the current stream. ``repeat`` > 1
    queues that many calls between the events: when the host issues calls faster than the GPU
    runs them this is the kernels' own time; when it cannot, it is the host's time per call
    (both are facts worth knowing; one call between events always includes the host's)."""
    import cupy as cp
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(repeat):
        fn()
    end.record()
    end.synchronize()
    return cp.cuda.get_elapsed_time(start, end) / 1e3 / repeat


def _summary(ts):
    return {"median": statistics.median(ts), "min": min(ts), "max": max(ts), "rounds": len(ts)}


def stage_copy(size, rounds):
    import cupy as cp
    src = cp.ones((size, size), dtype=cp.float32)
    dst = cp.empty_like(src)
    for _ in range(3):
        cp.copyto(dst, src)
    ts = [_gpu_seconds(lambda: cp.copyto(dst, src), PIPELINE) for _ in range(rounds)]
    moved = 2 * src.nbytes
    s = _summary(ts)
    return dict(s, bytes=moved, gb_per_s=moved / s["median"] / 1e9)


def _cupy_impls():
    import cupy as cp
    from bench.workloads import GELU_K0, GELU_K1, LN_EPS

    def gelu(x, w, b):
        z = x * w + b
        return 0.5 * z * (1.0 + cp.tanh(GELU_K0 * (z + GELU_K1 * (z * z * z))))

    def softmax(x):
        e = cp.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def layer_norm(x, w, b):
        mu = x.mean(axis=-1, keepdims=True)
        xc = x - mu
        return xc / cp.sqrt((xc * xc).mean(axis=-1, keepdims=True) + LN_EPS) * w + b
    return {"a": gelu, "b": softmax, "c": layer_norm}


def _torch_cuda():
    if not _installed("torch"):
        return None
    import torch
    return torch if torch.cuda.is_available() else None


def _impls_for(w, dev_inputs, deadline, notes):
    """name -> (fn returning a device result, its conversion to NumPy, the CompiledFunction or
    None), for one workload."""
    import cupy as cp
    import nbaccel as nb
    tensors = [nb.asarray(a) for a in dev_inputs]              # zero-copy CUDA tensors
    tensor_np = lambda t: t.cpu().numpy()                       # noqa: E731
    cupy_fn = _cupy_impls()[w.key]
    impls = {"cupy": (lambda: cupy_fn(*dev_inputs), cp.asnumpy, None),
             "nbaccel eager (CuPy)": (lambda: w.nbaccel_fn(*tensors), tensor_np, None)}
    for mode in ("default", "max-autotune"):
        try:
            cf = nb.compile(w.nbaccel_fn, backend="triton", mode=mode)
        except Exception as e:
            notes.append(f"nb.compile(backend='triton', mode={mode!r}) failed: {type(e).__name__}: {e}")
            continue
        impls[f"nbaccel triton ({mode})"] = ((lambda cf=cf: cf(*tensors)), tensor_np, cf)
    torch = _torch_cuda()
    if torch is not None:
        tt = [torch.from_dlpack(a) for a in dev_inputs]
        torch_np = lambda t: t.detach().cpu().numpy()           # noqa: E731
        impls["torch eager"] = (lambda: w.torch_fn(*tt), torch_np, None)
        if deadline.left() > 150:          # a cold inductor compile can take a minute
            tc = torch.compile(w.torch_fn)
            impls["torch.compile"] = (lambda: tc(*tt), torch_np, None)
        else:
            notes.append("torch.compile skipped: too little of the time budget left")
    else:
        notes.append("PyTorch with CUDA is not installed: no torch eager / torch.compile columns")
    return impls


def stage_workloads(size, rounds, copy, deadline):
    import cupy as cp
    from bench.workloads import ARRAY_WORKLOADS
    out = {}
    for w in [w for w in ARRAY_WORKLOADS if w.key in ("a", "b", "c")]:
        if deadline.left() < 30:
            out[w.key] = {"title": w.title, "skipped": "time budget spent"}
            continue
        host = w.make_inputs(size, size)
        ref = w.numpy_fn(*host)
        dev = [cp.asarray(a) for a in host]
        notes = []
        impls = _impls_for(w, dev, deadline, notes)
        rec = {"title": w.title, "shape": [size, size], "notes": notes, "impls": {},
               "triton_ran": any(n.startswith("nbaccel triton") for n in impls)}
        live = {}
        for name, entry in impls.items():        # first call: compile, autotune, check
            fn, to_np, cf = entry
            r = {}
            try:
                t0 = time.perf_counter()
                got = fn()
                cp.cuda.runtime.deviceSynchronize()
                r["first_call_seconds"] = time.perf_counter() - t0
                got = np.asarray(to_np(got))
                err = float(np.max(np.abs(got.astype(np.float64) - ref)) if got.shape == ref.shape else np.inf)
                r["max_abs_error"] = err
                # atol scaled to the data: softmax rows of 8192 hold values near 1e-4
                atol = min(w.atol * 10, 1e-3 * float(np.max(np.abs(ref))))
                r["correct"] = bool(got.shape == ref.shape and np.allclose(got, ref, rtol=1e-3, atol=atol))
                if cf is not None:
                    r["kernels"] = _kernel_labels(cf)
                    if not any(k.get("backend") == "triton" for k in r["kernels"] or []):
                        r["correct"] = False      # right numbers, but not from Triton kernels
                        r["error"] = f"no kernel ran on the triton backend: {r['kernels']}"
                live[name] = fn
            except Exception as e:
                r["correct"] = False
                r["error"] = f"{type(e).__name__}: {e}"
                r["traceback"] = traceback.format_exc()[-2000:]
            rec["impls"][name] = r
        for fn in live.values():                 # warm (a second call may still settle caches)
            fn()
        times = {n: [] for n in live}
        calls = {n: [] for n in live}
        for _ in range(rounds):                  # interleaved, round by round
            for name, fn in live.items():
                times[name].append(_gpu_seconds(fn, PIPELINE))
                calls[name].append(_gpu_seconds(fn))
        for name, ts in times.items():
            s = _summary(ts)
            s["copy_fraction"] = copy["median"] / s["median"] if copy else None
            rec["impls"][name]["time"] = s
            rec["impls"][name]["call_time"] = _summary(calls[name])
        tc = rec["impls"].get("torch.compile", {}).get("time")
        for name, r in rec["impls"].items():
            if tc and "time" in r:
                r["vs_torch_compile"] = tc["median"] / r["time"]["median"]
        out[w.key] = rec
        del dev, host, ref
        cp.get_default_memory_pool().free_all_blocks()
    return out


def _kernel_labels(cf):
    rep = getattr(cf, "_report", None)       # (not .report: that also times an eager baseline)
    if rep is None:
        return None
    return [{"name": k.get("name"), "device": k.get("device"), "backend": k.get("backend")}
            for k in rep.kernels]


def stage_attention(rounds, shape=(4, 8, 2048, 64)):
    import cupy as cp
    import nbaccel as nb
    import nbaccel.nn.functional as F
    from nbaccel.nn.attention import SDPBackend, sdpa_kernel
    b, h, n, d = shape
    rng = np.random.default_rng(0)
    res = {"shape": list(shape)}
    # float32: tl.dot may use TF32 on Ampere and later (errors ~1e-4 here); a wrong kernel is off by ~0.1
    for dtype, tol in (("float16", 2e-2), ("float32", 5e-3)):
        q, k, v = (cp.asarray(rng.standard_normal((b, h, n, d)).astype(dtype)) for _ in range(3))
        tq, tk, tv = (nb.asarray(a) for a in (q, k, v))
        for causal in (False, True):
            key = f"{dtype}{' causal' if causal else ''}"
            r = {}
            try:
                # only the fused (Triton, on CUDA) kernel: the math path must not stand in for it
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    got = F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)
                ref = _attention_reference(cp, q, k, v, causal)
                err = float(cp.max(cp.abs(got._data.astype(cp.float32) - ref)))
                r["max_abs_error"], r["correct"] = err, err <= tol
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    ts = [_gpu_seconds(lambda: F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal), 3)
                          for _ in range(rounds)]
                r["time"] = _summary(ts)
                flops = 4 * b * h * n * n * d * (0.5 if causal else 1.0)
                r["tflops"] = flops / r["time"]["median"] / 1e12
            except Exception as e:
                r["correct"] = False
                r["error"] = f"{type(e).__name__}: {e}"
                r["traceback"] = traceback.format_exc()[-2000:]
            res[key] = r
    return res


def _attention_reference(cp, q, k, v, causal):
    q, k, v = (a.astype(cp.float32) for a in (q, k, v))
    s = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        s = cp.where(cp.tril(cp.ones((n, n), dtype=bool)), s, -cp.inf)
    s = cp.exp(s - s.max(-1, keepdims=True))
    return (s / s.sum(-1, keepdims=True)) @ v


# -- the run, the verdict, the files ----------------------------------------------------------------
def run(quick: bool = False, out_dir: str | None = None, size: int | None = None, tests: bool = True,
        budget: float = BUDGET_SECONDS, attention_shape: tuple | None = None) -> dict:
    """Every stage; a JSON-serialisable dict (see :func:`markdown`). Without a GPU only the
    environment is recorded and ``results["gpu"]`` is False with the reason."""
    size = size or (2048 if quick else 8192)
    rounds = 5 if quick else 20
    deadline = Deadline(budget)
    ok, why = gpu_presence()
    results = {"tool": "bench.gpu_check", "when": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
               "host": platform.node(), "gpu": ok, "no_gpu_reason": why or None, "size": size,
               "rounds": rounds, "quick": quick, "targets": TARGETS, "triton_api": TRITON_API, "stages": []}
    if not ok:
        return results
    out_dir = out_dir or os.path.join(ROOT, "bench", "gpu_check_out")
    os.makedirs(out_dir, exist_ok=True)
    results["setup"] = prepare_environment()
    guarded(results, "environment", stage_environment)
    if tests:
        guarded(results, "tests", stage_tests, out_dir, max(30.0, min(120.0, deadline.left() - 150)))
    copy = guarded(results, "copy", stage_copy, size, rounds)
    guarded(results, "workloads", stage_workloads, size, rounds, copy, deadline)
    if deadline.left() > 15:
        shape = attention_shape or ((2, 4, 512, 64) if quick else (4, 8, 2048, 64))
        guarded(results, "attention", stage_attention, rounds, shape)
    else:
        results["stages"].append({"name": "attention", "ok": False, "error": "time budget spent"})
    return results


def write(results: dict, out_dir: str) -> tuple[str, str]:
    os.makedirs(out_dir, exist_ok=True)
    jp, mp = os.path.join(out_dir, "gpu_check.json"), os.path.join(out_dir, "gpu_check.md")
    with open(jp, "w") as f:
        json.dump(results, f, indent=1, default=str)
    with open(mp, "w") as f:
        f.write(markdown(results))
    return jp, mp


def exit_code(results: dict) -> int:
    if not results.get("gpu"):
        return EXIT_NO_GPU
    return EXIT_FAILED if problems(results) else EXIT_OK


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.gpu_check", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, metavar="DIR", help="where gpu_check.json and gpu_check.md go")
    p.add_argument("--quick", action="store_true", help="2048x2048, 5 rounds (a smoke run)")
    p.add_argument("--size", type=int, default=None, help="rows = cols of (a)-(c) (default 8192)")
    p.add_argument("--no-tests", action="store_true", help="skip the pytest -m gpu stage")
    p.add_argument("--budget", type=float, default=BUDGET_SECONDS, help="seconds (default %(default)s)")
    args = p.parse_args(argv)
    if args.size is not None and args.size < 1:
        p.error("--size must be a positive number")
    results = run(quick=args.quick, out_dir=args.out, size=args.size, tests=not args.no_tests, budget=args.budget)
    jp, mp = write(results, args.out)
    code = exit_code(results)
    if code == EXIT_NO_GPU:
        print(f"[gpu_check] no GPU: {results['no_gpu_reason']} (wrote {jp}, {mp}); exit {code}")
    else:
        for line in problems(results):
            print(f"[gpu_check] PROBLEM {line}")
        print(f"[gpu_check] {'all right' if code == EXIT_OK else 'problems found'}: wrote {jp}, {mp}; exit {code}")
    return code


if __name__ == "__main__":
    sys.exit(main())
