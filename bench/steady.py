"""Steady-state timings of (a)-(d): every implementation, checked against NumPy first.

Each implementation is prepared (compiled, checked, warmed up), then each is timed in its
own block of runs, one implementation after the other. (Interleaving them round by round
was tried: with 2 cores, the thread pools of NumPy's BLAS, numba and PyTorch's OpenMP
spinning after each call slowed whichever library ran next by milliseconds, so every
block starts with an untimed call.) Each variant ends as a dict:
median/min/max/runs seconds, or ``status`` saying why there is no time ("not installed",
"error: ...", "WRONG RESULT: ..."). Compiled variants also record their first call (which
includes the compile) and the compile report.
"""
from __future__ import annotations

import traceback

import numpy as np

from . import peers
from .timing import WrongResult, check, measure, timed, to_numpy
from .workloads import MLP

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


def _time_all(prepared: dict, repeat: int) -> dict:
    """prepared: name -> (callable, info) or a status dict. Times each callable in turn."""
    res = {}
    for name, p in prepared.items():
        if not isinstance(p, tuple):
            res[name] = p
            continue
        fn, info = p
        res[name] = _guard(lambda: dict(measure(fn, repeat, warmup=1), **info))
    return res


def _nb_compiled(nb, fn, backend, call, checker):
    """Compile ``fn`` on ``backend``; time and check the first call; warm it up."""
    cf = nb.compile(fn, backend=backend)
    out, first = timed(lambda: call(cf))
    info = _compile_info(cf)
    checker(f"nbaccel {backend} tier", out)
    _warm(lambda: call(cf), COMPILED_WARMUP)
    info.update(first_call=first, steady_tier=cf.report.tier)
    if cf.report.tier != backend:
        info["note"] = f"ran on the {cf.report.tier} tier"
    return (lambda: call(cf)), info


# -- (a)-(c) -------------------------------------------------------------------------------------------
def run_array(wl, rows, cols, repeat) -> dict:
    """Time workload ``wl`` on (rows, cols) float32 inputs with every implementation."""
    import nbaccel as nb
    arrays = wl.make_inputs(rows, cols)
    ref = wl.numpy_fn(*arrays)

    def checker(name, out):
        check(name, out, ref, wl.rtol, wl.atol)

    prep = {"numpy eager": (_warm(lambda: wl.numpy_fn(*arrays), 1), {})}

    def nb_eager():
        ts = [nb.asarray(a) for a in arrays]
        checker("nbaccel eager", wl.nbaccel_fn(*ts))
        return _warm(lambda: wl.nbaccel_fn(*ts), 1), {}
    prep["nbaccel eager"] = _guard(nb_eager)
    for backend in ("numpy", "numba"):
        prep[f"nbaccel {backend} tier"] = _guard(
            lambda b=backend: _nb_compiled(nb, wl.nbaccel_fn, b, lambda cf: cf(*arrays), checker))

    torch = peers.torch_or_none()
    if torch is None:
        prep["torch eager"] = prep["torch.compile"] = {"status": "not installed"}
        return _time_all(prep, repeat)
    targs = [torch.from_numpy(a) for a in arrays]

    def no_grad_call(fn):
        def call():
            with torch.no_grad():
                return fn(*targs)
        return call

    def t_eager():
        call = no_grad_call(wl.torch_fn)
        checker("torch eager", call())
        return _warm(call, 1), {}

    def t_compile():
        call = no_grad_call(torch.compile(wl.torch_fn))
        out, first = timed(call)
        checker("torch.compile", out)
        return _warm(call, COMPILED_WARMUP), {"first_call": first}
    prep["torch eager"] = _guard(t_eager)
    prep["torch.compile"] = _guard(t_compile)
    return _time_all(prep, repeat)


# -- (d) ------------------------------------------------------------------------------------------------
STEP_RTOL, STEP_ATOL = 1e-3, 1e-5


def _check_step(name, loss, params, ref_loss, ref_params):
    check(f"{name} loss", to_numpy(loss).astype(np.float32).reshape(()),
          np.asarray(ref_loss, dtype=np.float32), STEP_RTOL, STEP_ATOL)
    for k, v in ref_params.items():
        check(f"{name} {k} after one step", params[k], v, STEP_RTOL, STEP_ATOL)


def run_mlp(repeat, **sizes) -> dict:
    """Time one training step (forward, MSE, backward, SGD) of the 2-layer MLP."""
    import nbaccel as nb
    mlp = MLP(**sizes)
    ref_params = mlp.numpy_params()
    ref_loss = mlp.numpy_step(ref_params, mlp.x, mlp.y)
    refs = [ref_params]   # refs[n-1]: NumPy weights after n steps

    def ref_after(n):
        while len(refs) < n:
            q = {k: v.copy() for k, v in refs[-1].items()}
            mlp.numpy_step(q, mlp.x, mlp.y)
            refs.append(q)
        return refs[n - 1]

    def check_later(name, params, steps):
        """The warm-up steps (cache hits) must keep matching NumPy too, not only the first."""
        for k, v in ref_after(steps).items():
            check(f"{name} {k} after {steps} steps", params[k], v, STEP_RTOL, STEP_ATOL)

    p = mlp.numpy_params()
    prep = {"numpy eager": (_warm(lambda: mlp.numpy_step(p, mlp.x, mlp.y), 1), {})}
    xt, yt = nb.asarray(mlp.x), nb.asarray(mlp.y)

    def nb_eager():
        step, params = mlp.nbaccel_model()
        _check_step("nbaccel eager", step(xt, yt), params, ref_loss, ref_params)
        _warm(lambda: step(xt, yt), 1)
        check_later("nbaccel eager", params, 2)
        return (lambda: step(xt, yt)), {}
    prep["nbaccel eager"] = _guard(nb_eager)

    def nb_tier(backend):
        step, params = mlp.nbaccel_model()

        def checker(name, loss):
            _check_step(name, loss, params, ref_loss, ref_params)
        out = _nb_compiled(nb, step, backend, lambda cf: cf(xt, yt), checker)
        check_later(f"nbaccel {backend} tier", params, 1 + COMPILED_WARMUP)
        return out
    for backend in ("numpy", "numba"):
        prep[f"nbaccel {backend} tier"] = _guard(lambda b=backend: nb_tier(b))

    torch = peers.torch_or_none()
    if torch is None:
        prep["torch eager"] = prep["torch.compile"] = {"status": "not installed"}
        return _time_all(prep, repeat)
    tx, ty = torch.from_numpy(mlp.x), torch.from_numpy(mlp.y)

    def t_run(compiled):
        step, params = mlp.torch_model(torch)
        fn = torch.compile(step) if compiled else step
        loss, first = timed(lambda: fn(tx, ty))
        _check_step("torch.compile" if compiled else "torch eager", loss, params, ref_loss, ref_params)
        warm = COMPILED_WARMUP if compiled else 1
        _warm(lambda: fn(tx, ty), warm)
        check_later("torch.compile" if compiled else "torch eager", params, 1 + warm)
        return (lambda: fn(tx, ty)), ({"first_call": first} if compiled else {})
    prep["torch eager"] = _guard(lambda: t_run(False))
    prep["torch.compile"] = _guard(lambda: t_run(True))
    return _time_all(prep, repeat)
