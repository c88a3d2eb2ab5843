"""Where a numba kernel's JIT time went, from numba's own per-pass timers.

``jit`` in a report's ``compile_breakdown`` is the wall time of compiling (or loading) the
numba kernels. :func:`split` divides one kernel's share into

* ``numba typing``: bytecode → typed numba IR (every pass before lowering: SSA, type
  inference, rewrites);
* ``numba lowering``: typed IR → LLVM IR (the lowering pass without LLVM's own time);
* ``llvm``: LLVM optimising and emitting machine code (numba's ``llvm_lock`` timer);
* ``cache save``: writing the machine code to the disk cache (``numba_cache.py``);
* ``other``: the rest — importing the generated module, numba's first-use set-up in a
  process, locks, loading from the disk cache when nothing was compiled.

The parts add up to the kernel's ``jit`` seconds. Kernels loaded from disk have no timers:
all of their time is ``other``.
"""
from __future__ import annotations

KEYS = ("numba typing", "numba lowering", "llvm", "cache save", "other")
_LOWERING_PASSES = ("native_lowering", "native_parfor_lowering", "nopython_backend")


def empty() -> dict:
    return {k: 0.0 for k in KEYS}


def split(dispatcher, signature, seconds: float, compiled: bool) -> dict:
    """The parts of ``seconds`` spent on ``dispatcher``'s ``signature`` (see the module doc)."""
    out = empty()
    typing = lowering = llvm = 0.0
    if compiled:
        try:
            cres = dispatcher.overloads[tuple(signature)]
            md = cres.metadata or {}
            for passes in (md.get("pipeline_times") or {}).values():
                for name, t in passes.items():
                    dt = t.init + t.run + t.finalize
                    if any(name.endswith(p) for p in _LOWERING_PASSES):
                        lowering += dt
                    else:
                        typing += dt
            llvm = float((md.get("timers") or {}).get("llvm_lock", 0.0))
        except Exception:        # numba internals moved: everything is 'other'
            typing = lowering = llvm = 0.0
    save = float(getattr(getattr(dispatcher, "_cache", None), "save_seconds", 0.0) or 0.0)
    out["numba typing"] = typing
    out["numba lowering"] = max(0.0, lowering - llvm)
    out["llvm"] = llvm
    out["cache save"] = save
    out["other"] = max(0.0, seconds - typing - max(lowering, llvm) - save)
    return out


def total(parts) -> dict:
    """The sum of several kernels' splits."""
    out = empty()
    for p in parts:
        for k, v in (p or {}).items():
            out[k] = out.get(k, 0.0) + v
    return out
