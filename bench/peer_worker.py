"""The peers (PyTorch) in a process of their own, driven round by round over a pipe.

torch's OpenMP pool and numba's would otherwise live in one process and share (or fight over)
one libgomp; in a worker process each library keeps its own pool, pinned to the same thread
count, while the harness still interleaves the calls round by round.

Protocol: one JSON object per line. The worker first answers ``{"ready": true, ...}``
(its thread counts), then for each request one reply:

- ``{"op": "prepare", "workload": KEY, "impl": NAME, "config": {...}}`` builds and checks one
  implementation (against NumPy, in the worker) -> ``{"ok": true, "info": {...}}`` or
  ``{"ok": false, "status": "error: ..."|"WRONG RESULT: ...", "failed": true}``
- ``{"op": "call", "impl": NAME, "keep_last": bool}`` -> ``{"seconds": s}``, timed in the worker
- ``{"op": "alloc", "mode": "fresh"|"reused"}`` -> ``{"ok": bool}``
- ``{"op": "quit"}`` -> the worker exits

Implementations (``IMPLS``): "torch eager" and "torch.compile", and "numpy eager" (no torch
needed: what the harness's own tests drive).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMPLS = ("numpy eager", "torch eager", "torch.compile")
COMPILED_WARMUP = 3   # the same untimed calls as the in-process compiled variants


def _status(e) -> dict:
    from .timing import WrongResult
    if isinstance(e, WrongResult):
        return {"ok": False, "status": f"WRONG RESULT: {e}", "failed": True}
    return {"ok": False, "status": f"error: {type(e).__name__}: {e}".splitlines()[0][:300], "failed": True,
            "traceback": traceback.format_exc(limit=-3)}


# -- the worker side -------------------------------------------------------------------------------
def _torch():
    if os.environ.get("NBACCEL_BENCH_NO_TORCH"):
        raise ImportError("torch left out of this worker (NBACCEL_BENCH_NO_TORCH)")
    import torch
    return torch


def _build_array(impl, key, cfg):
    """(callable, info) for array workload ``key``, checked against NumPy."""
    from .timing import check, timed
    from .workloads import workload
    wl = workload(key)
    arrays = wl.make_inputs(cfg["rows"], cfg["cols"])
    ref = wl.numpy_fn(*arrays)
    if impl == "numpy eager":
        call = lambda: wl.numpy_fn(*arrays)   # noqa: E731
        check(impl, call(), ref, wl.rtol, wl.atol)
        return call, {}
    torch = _torch()
    targs = [torch.from_numpy(a) for a in arrays]
    fn = torch.compile(wl.torch_fn) if impl == "torch.compile" else wl.torch_fn

    def call():
        with torch.no_grad():
            return fn(*targs)
    out, first = timed(call)
    check(impl, out, ref, wl.rtol, wl.atol)
    for _ in range(COMPILED_WARMUP if impl == "torch.compile" else 1):
        call()
    return call, ({"first_call": first} if impl == "torch.compile" else {})


def _build_mlp(impl, cfg):
    """(callable, info) for the training step (d), checked after one and after the warm-up steps."""
    from .steady import check_mlp_later, check_step, mlp_reference
    from .timing import timed
    from .workloads import MLP
    mlp = MLP(**cfg["mlp"])
    ref = mlp_reference(mlp)
    if impl == "numpy eager":
        p = mlp.numpy_params()
        loss, first = timed(lambda: mlp.numpy_step(p, mlp.x, mlp.y))
        check_step(impl, loss, p, ref)
        return (lambda: mlp.numpy_step(p, mlp.x, mlp.y)), {}
    torch = _torch()
    tx, ty = torch.from_numpy(mlp.x), torch.from_numpy(mlp.y)
    step, params = mlp.torch_model(torch)
    fn = torch.compile(step) if impl == "torch.compile" else step
    loss, first = timed(lambda: fn(tx, ty))
    check_step(impl, loss, params, ref)
    warm = COMPILED_WARMUP if impl == "torch.compile" else 1
    for _ in range(warm):
        fn(tx, ty)
    check_mlp_later(impl, params, ref, 1 + warm)
    return (lambda: fn(tx, ty)), ({"first_call": first} if impl == "torch.compile" else {})


def build(impl: str, key: str, cfg: dict):
    if impl not in IMPLS:
        raise ValueError(f"the worker has no implementation {impl!r} (it has {IMPLS})")
    return _build_mlp(impl, cfg) if key == "d" else _build_array(impl, key, cfg)


def serve(inp, out, threads: int | None) -> None:
    """The worker's loop: read requests from ``inp``, write replies to ``out``. ``threads``:
    the count to pin the pools to (None: leave them, as the in-process tests do)."""
    from .rounds import Local
    from .threads import pin_runtime, read_back, set_alloc_mode
    torch = None
    t0 = time.perf_counter()
    try:
        torch = _torch()
    except ImportError:
        pass
    import_s = time.perf_counter() - t0
    pinned = pin_runtime(threads, torch) if threads is not None else None
    send = lambda msg: (out.write(json.dumps(msg) + "\n"), out.flush())   # noqa: E731
    send({"ready": True, "pid": os.getpid(), "torch": getattr(torch, "__version__", None),
          "torch_import_seconds": import_s, "threads": read_back(torch), "pinned": pinned})
    timers = {}
    for line in inp:
        req = json.loads(line)
        op = req.get("op")
        try:
            if op == "quit":
                send({"ok": True})
                return
            if op == "prepare":
                fn, info = build(req["impl"], req["workload"], req.get("config", {}))
                timers[req["impl"]] = Local(fn)
                send({"ok": True, "info": info})
            elif op == "call":
                send({"seconds": timers[req["impl"]](bool(req.get("keep_last")))})
            elif op == "release":
                timers.clear()
                send({"ok": True})
            elif op == "alloc":
                send({"ok": set_alloc_mode(req["mode"])})
            else:
                send({"ok": False, "status": f"error: unknown op {op!r}", "failed": True})
        except Exception as e:   # one failing implementation must not end the worker
            send(_status(e))


def main() -> None:
    threads = int(os.environ.get("NBACCEL_BENCH_THREADS", "1"))
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)   # anything torch prints goes to stderr, never into the protocol
    sys.stdout = sys.stderr
    serve(sys.stdin, proto, threads)


# -- the harness side ------------------------------------------------------------------------------
class WorkerError(RuntimeError):
    """The worker died or answered something that is not the protocol."""


class PeerWorker:
    """A running worker process. ``PeerWorker(threads, env)``; use as a context manager."""

    def __init__(self, threads: int, env: dict | None = None, stderr=None, torch: bool = True):
        from .threads import pin_env
        e = dict(os.environ if env is None else env)
        if not torch:   # a worker for NumPy-only implementations (the harness's tests)
            e["NBACCEL_BENCH_NO_TORCH"] = "1"
        pin_env(threads, e)
        e["NBACCEL_BENCH_THREADS"] = str(threads)
        e["PYTHONPATH"] = ROOT + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.peer_worker"], cwd=ROOT, env=e,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                     text=True, bufsize=1)
        self.hello = self._read()
        if not self.hello.get("ready"):
            raise WorkerError(f"worker did not start: {self.hello}")

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise WorkerError(f"worker exited (status {self.proc.poll()})")
        try:
            return json.loads(line)
        except json.JSONDecodeError as e:
            raise WorkerError(f"worker wrote a line outside the protocol: {line[:200]!r}") from e

    def request(self, **msg) -> dict:
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def prepare(self, impl: str, workload: str, config: dict) -> dict:
        return self.request(op="prepare", impl=impl, workload=workload, config=config)

    def call(self, impl: str, keep_last: bool) -> float:
        r = self.request(op="call", impl=impl, keep_last=keep_last)
        if "seconds" not in r:
            raise WorkerError(r.get("status", str(r)))
        return r["seconds"]

    def set_alloc_mode(self, mode: str) -> bool:
        return bool(self.request(op="alloc", mode=mode).get("ok"))

    def release(self):
        self.request(op="release")

    def remote(self, impl: str):
        """A timer (see bench.rounds) that runs ``impl`` in this worker."""
        return lambda keep_last: self.call(impl, keep_last)

    def close(self):
        if self.proc.poll() is None:
            try:
                self.request(op="quit")
            except (WorkerError, OSError, ValueError):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


if __name__ == "__main__":
    main()
