"""Steady-state timings of (a)-(d): every implementation, checked against NumPy first.

Each implementation is prepared (compiled, checked, warmed up); then all of them run
interleaved, round by round (``bench.rounds``), once with fresh outputs and once with reused
ones (``bench.threads``: allocator modes). NumPy and nbaccel run in this process, PyTorch in the
peer worker process (``bench.peer_worker``). Each variant ends as a dict: ``modes`` (mode ->
median/q1/q3/min/max and the per-round times), the judged mode's median/min/max, or
``status`` saying why there is no time ("not installed", "error: ...", "WRONG RESULT: ...").
Compiled variants also record their first call (which includes the compile) and the compile
report.
"""
from __future__ import annotations

import traceback

import numpy as np

from .rounds import Local, run_modes
from .timing import WrongResult, check, time_stats, timed, to_numpy
from .workloads import MLP

# the allocator mode the targets are judged in: outputs first-touched on every call, as
# ``y = f(x)`` in a notebook loop sees them (see bench/threads.py)
JUDGED_MODE = "fresh"

# torch.compile of a training step recompiles on its 2nd call (grads now exist) and settles
# after a few calls; give every compiled variant the same untimed calls after the first
COMPILED_WARMUP = 3

VARIANTS = ("numpy eager", "nbaccel eager", "nbaccel numpy tier", "nbaccel numba tier",
            "torch eager", "torch.compile")


def _guard(fn):
    """Prepare one variant; turn a failure into a recorded status instead of stopping the others."""
    try:
        return fn()
    except WrongResult as e:
        return {"status": f"WRONG RESULT: {e}", "failed": True}
    except Exception as e:   # a crash of one implementation must not hide the rest
        tb = traceback.format_exc(limit=-3)
        return {"status": f"error: {type(e).__name__}: {e}".splitlines()[0][:300], "failed": True,
                "traceback": tb}


def _compile_info(cf):
    rep = cf.report
    if rep is None:
        return {}
    return {"tier": rep.tier, "cache": rep.cache, "compile_seconds": rep.compile_seconds,
            "compile_breakdown": dict(rep.compile_breakdown), "kernels": len(rep.kernels),
            "graphs": rep.graphs, "graph_breaks": len(rep.graph_breaks)}


def _warm(fn, n):
    for _ in range(n):
        fn()
    return fn


def _measure(prep: dict, rounds: int, worker, settle: float) -> dict:
    """prep: name -> (timer, info) or a status dict. Runs the timers interleaved, round by
    round, in each allocator mode; every variant ends with ``modes``: mode -> time stats
    (with the per-round ``times``, which the ratios pair round by round)."""
    timers = {n: p[0] for n, p in prep.items() if isinstance(p, tuple)}
    res = {n: (dict(p[1]) if isinstance(p, tuple) else p) for n, p in prep.items()}
    if not timers:
        return res
    try:
        m = run_modes(timers, rounds, workers=[worker] if worker is not None else [], settle=settle)
    except Exception as e:   # a crash while timing (a worker died): record it on every variant
        st = {"status": f"error while timing: {type(e).__name__}: {e}"[:300], "failed": True}
        return {n: (st if n in timers else v) for n, v in res.items()}
    finally:
        if worker is not None:
            worker.release()
    for name in timers:
        res[name]["modes"] = {mode: dict(time_stats(t[name]), times=t[name]) for mode, t in m["times"].items()}
        res[name].update({k: res[name]["modes"][JUDGED_MODE][k] for k in ("median", "min", "max", "runs")})
    return res


def _peer(worker, impl, key, config):
    """(timer, info) of an implementation in the peer worker, or its status."""
    if worker is None:
        return {"status": "not installed"}
    if worker.hello.get("torch") is None and impl.startswith("torch"):
        return {"status": "not installed"}
    r = worker.prepare(impl, key, config)
    if not r.get("ok"):
        return {k: v for k, v in r.items() if k != "ok"}
    return worker.remote(impl), r.get("info", {})


def _nb_compiled(nb, fn, backend, call, checker, mode="default"):
    """Compile ``fn`` on ``backend``; time and check the first call; warm it up."""
    cf = nb.compile(fn, backend=backend, mode=mode)
    out, first = timed(lambda: call(cf))
    info = _compile_info(cf)
    checker(f"nbaccel {backend} tier", out)
    _warm(lambda: call(cf), COMPILED_WARMUP)
    info.update(first_call=first, steady_tier=cf.report.tier)
    if cf.report.tier != backend:
        info["note"] = f"ran on the {cf.report.tier} tier"
    return (lambda: call(cf)), info


# -- (a)-(c), (g)-(i) -------------------------------------------------------------------------------
def run_array(wl, rows, cols, rounds, worker=None, settle=0.0) -> dict:
    """Time workload ``wl`` on (rows, cols) float32 inputs with every implementation."""
    import nbaccel as nb
    arrays = wl.make_inputs(rows, cols)
    ref = wl.numpy_fn(*arrays)

    def checker(name, out):
        check(name, out, ref, wl.rtol, wl.atol)

    np_call = _warm(lambda: wl.numpy_fn(*arrays), 1)
    prep = {"numpy eager": (Local(np_call), {})}

    def nb_eager():
        ts = [nb.asarray(a) for a in arrays]
        checker("nbaccel eager", wl.nbaccel_fn(*ts))
        return Local(_warm(lambda: wl.nbaccel_fn(*ts), 1)), {}
    prep["nbaccel eager"] = _guard(nb_eager)
    for backend in ("numpy", "numba"):
        def tier(b=backend):
            fn, info = _nb_compiled(nb, wl.nbaccel_fn, b, lambda cf: cf(*arrays), checker)
            return Local(fn), info
        prep[f"nbaccel {backend} tier"] = _guard(tier)
    cfg = {"rows": rows, "cols": cols}
    for impl in ("torch eager", "torch.compile"):
        prep[impl] = _guard(lambda i=impl: _peer(worker, i, wl.key, cfg))
    return _measure(prep, rounds, worker, settle)


# -- (d) ------------------------------------------------------------------------------------------------
STEP_RTOL, STEP_ATOL = 1e-3, 1e-5


def mlp_reference(mlp) -> dict:
    """The NumPy loss after one step and a function ``after(n)``: the weights after n steps."""
    p = mlp.numpy_params()
    loss = mlp.numpy_step(p, mlp.x, mlp.y)
    refs = [p]

    def after(n):
        while len(refs) < n:
            q = {k: v.copy() for k, v in refs[-1].items()}
            mlp.numpy_step(q, mlp.x, mlp.y)
            refs.append(q)
        return refs[n - 1]
    return {"loss": loss, "after": after}


def check_step(name, loss, params, ref):
    """The loss of the first step and the weights after it match NumPy's."""
    check(f"{name} loss", to_numpy(loss).astype(np.float32).reshape(()),
          np.asarray(ref["loss"], dtype=np.float32), STEP_RTOL, STEP_ATOL)
    for k, v in ref["after"](1).items():
        check(f"{name} {k} after one step", params[k], v, STEP_RTOL, STEP_ATOL)


def check_mlp_later(name, params, ref, steps):
    """The warm-up steps (cache hits) must keep matching NumPy too, not only the first."""
    for k, v in ref["after"](steps).items():
        check(f"{name} {k} after {steps} steps", params[k], v, STEP_RTOL, STEP_ATOL)


def run_mlp(rounds, worker=None, settle=0.0, **sizes) -> dict:
    """Time one training step (forward, MSE, backward, SGD) of the 2-layer MLP."""
    import nbaccel as nb
    mlp = MLP(**sizes)
    ref = mlp_reference(mlp)
    p = mlp.numpy_params()
    prep = {"numpy eager": (Local(_warm(lambda: mlp.numpy_step(p, mlp.x, mlp.y), 1)), {})}
    xt, yt = nb.asarray(mlp.x), nb.asarray(mlp.y)

    def nb_eager():
        step, params = mlp.nbaccel_model()
        check_step("nbaccel eager", step(xt, yt), params, ref)
        _warm(lambda: step(xt, yt), 1)
        check_mlp_later("nbaccel eager", params, ref, 2)
        return Local(lambda: step(xt, yt)), {}
    prep["nbaccel eager"] = _guard(nb_eager)

    def nb_tier(backend):
        step, params = mlp.nbaccel_model()
        # reduce-overhead: the step replays its compiled program (compiler/replay/train_step.py)
        fn, info = _nb_compiled(nb, step, backend, lambda cf: cf(xt, yt),
                                lambda name, loss: check_step(name, loss, params, ref),
                                mode="reduce-overhead")
        check_mlp_later(f"nbaccel {backend} tier", params, ref, 1 + COMPILED_WARMUP)
        return Local(fn), info
    for backend in ("numpy", "numba"):
        prep[f"nbaccel {backend} tier"] = _guard(lambda b=backend: nb_tier(b))
    for impl in ("torch eager", "torch.compile"):
        prep[impl] = _guard(lambda i=impl: _peer(worker, i, "d", {"mlp": sizes}))
    return _measure(prep, rounds, worker, settle)
