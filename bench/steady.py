"""Steady-state timings of (a)-(d): every implementation, checked against NumPy first.

Each variant is a dict: median/min/max/runs seconds, or ``status`` saying why there is no
time ("not installed", "error: ...", "WRONG RESULT: ..."). Compiled variants also record
their first call (which includes the compile) and the compile report.
"""
from __future__ import annotations

import traceback

import numpy as np

from . import peers
from .timing import WrongResult, check, measure, timed
from .workloads import MLP

# torch.compile of a training step recompiles on its 2nd call (grads now exist) and settles
# after a few calls; give every compiled variant the same untimed calls after the first
COMPILED_WARMUP = 3

VARIANTS = ("numpy eager", "nbaccel eager", "nbaccel numpy tier", "nbaccel numba tier",
            "torch eager", "torch.compile")


def _guard(fn):
    """Run one variant; turn a failure into a recorded status instead of stopping the others."""
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


# -- (a)-(c) -------------------------------------------------------------------------------------------
def run_array(wl, rows, cols, repeat) -> dict:
    """Time workload ``wl`` on (rows, cols) float32 inputs with every implementation."""
    import nbaccel as nb
    arrays = wl.make_inputs(rows, cols)
    ref = wl.numpy_fn(*arrays)
    res = {}
    res["numpy eager"] = _guard(lambda: measure(lambda: wl.numpy_fn(*arrays), repeat))

    def nb_eager():
        ts = [nb.asarray(a) for a in arrays]
        check("nbaccel eager", wl.nbaccel_fn(*ts), ref, wl.rtol, wl.atol)
        return measure(lambda: wl.nbaccel_fn(*ts), repeat)
    res["nbaccel eager"] = _guard(nb_eager)

    def nb_tier(backend):
        def run():
            cf = nb.compile(wl.nbaccel_fn, backend=backend)
            out, first = timed(lambda: cf(*arrays))
            info = _compile_info(cf)
            check(f"nbaccel {backend} tier", out, ref, wl.rtol, wl.atol)
            check(f"nbaccel {backend} tier (2nd call)", cf(*arrays), ref, wl.rtol, wl.atol)
            r = measure(lambda: cf(*arrays), repeat, warmup=COMPILED_WARMUP)
            r.update(first_call=first, **info, steady_tier=cf.report.tier)
            if cf.report.tier != backend:
                r["note"] = f"ran on the {cf.report.tier} tier"
            return r
        return run
    res["nbaccel numpy tier"] = _guard(nb_tier("numpy"))
    res["nbaccel numba tier"] = _guard(nb_tier("numba"))

    torch = peers.torch_or_none()
    if torch is None:
        res["torch eager"] = res["torch.compile"] = {"status": "not installed"}
        return res
    targs = [torch.from_numpy(a) for a in arrays]

    def t_eager():
        with torch.no_grad():
            check("torch eager", wl.torch_fn(*targs), ref, wl.rtol, wl.atol)
            return measure(lambda: wl.torch_fn(*targs), repeat)

    def t_compile():
        cfn = torch.compile(wl.torch_fn)
        with torch.no_grad():
            out, first = timed(lambda: cfn(*targs))
            check("torch.compile", out, ref, wl.rtol, wl.atol)
            r = measure(lambda: cfn(*targs), repeat, warmup=COMPILED_WARMUP)
        r["first_call"] = first
        return r
    res["torch eager"] = _guard(t_eager)
    res["torch.compile"] = _guard(t_compile)
    return res


# -- (d) ------------------------------------------------------------------------------------------------
STEP_RTOL, STEP_ATOL = 1e-3, 1e-5


def _check_step(name, loss, params, ref_loss, ref_params):
    check(f"{name} loss", np.asarray(loss, dtype=np.float32).reshape(()),
          np.asarray(ref_loss, dtype=np.float32), STEP_RTOL, STEP_ATOL)
    for k, v in ref_params.items():
        check(f"{name} {k} after one step", params[k], v, STEP_RTOL, STEP_ATOL)


def _loss_value(loss):
    from .timing import to_numpy
    return to_numpy(loss).reshape(())


def run_mlp(repeat, **sizes) -> dict:
    """Time one training step (forward, MSE, backward, SGD) of the 2-layer MLP."""
    import nbaccel as nb
    mlp = MLP(**sizes)
    ref_params = mlp.numpy_params()
    ref_loss = mlp.numpy_step(ref_params, mlp.x, mlp.y)
    res = {}

    def np_run():
        p = mlp.numpy_params()
        return measure(lambda: mlp.numpy_step(p, mlp.x, mlp.y), repeat)
    res["numpy eager"] = _guard(np_run)

    xt, yt = nb.asarray(mlp.x), nb.asarray(mlp.y)

    def nb_eager():
        step, params = mlp.nbaccel_model()
        loss = step(xt, yt)
        _check_step("nbaccel eager", _loss_value(loss), params, ref_loss, ref_params)
        return measure(lambda: step(xt, yt), repeat)
    res["nbaccel eager"] = _guard(nb_eager)

    def nb_tier(backend):
        def run():
            step, params = mlp.nbaccel_model()
            cf = nb.compile(step, backend=backend)
            loss, first = timed(lambda: cf(xt, yt))
            info = _compile_info(cf)
            _check_step(f"nbaccel {backend} tier", _loss_value(loss), params, ref_loss, ref_params)
            r = measure(lambda: cf(xt, yt), repeat, warmup=COMPILED_WARMUP)
            r.update(first_call=first, **info, steady_tier=cf.report.tier)
            if cf.report.tier != backend:
                r["note"] = f"ran on the {cf.report.tier} tier"
            return r
        return run
    res["nbaccel numpy tier"] = _guard(nb_tier("numpy"))
    res["nbaccel numba tier"] = _guard(nb_tier("numba"))

    torch = peers.torch_or_none()
    if torch is None:
        res["torch eager"] = res["torch.compile"] = {"status": "not installed"}
        return res
    tx, ty = torch.from_numpy(mlp.x), torch.from_numpy(mlp.y)

    def t_run(compiled):
        def run():
            step, params = mlp.torch_model(torch)
            fn = torch.compile(step) if compiled else step
            loss, first = timed(lambda: fn(tx, ty))
            name = "torch.compile" if compiled else "torch eager"
            _check_step(name, _loss_value(loss), params, ref_loss, ref_params)
            r = measure(lambda: fn(tx, ty), repeat, warmup=COMPILED_WARMUP if compiled else 1)
            if compiled:
                r["first_call"] = first
            return r
        return run
    res["torch eager"] = _guard(t_run(False))
    res["torch.compile"] = _guard(t_run(True))
    return res
