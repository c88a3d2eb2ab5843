"""Run one generated program plainly and compiled, and say how they differ.

The contract checked is the one a ``%%compile`` cell promises: the same result structure,
types, shapes, dtypes and values (tolerance by dtype, NaN and infinity positions equal), and
where NumPy raises, an exception of the same type (or a subclass). Inputs must come back
as NumPy leaves them: unchanged, or written through a view exactly as NumPy writes them.

``BACKENDS`` lists the backends every program runs on (the fuzz test skips a backend that
``nb.compile`` does not accept, and says so). "triton" runs on a GPU with CuPy, else through
Triton's interpreter on NumPy arrays (``NBACCEL_TRITON_INTERPRET=1`` is set for it here).
"""
from __future__ import annotations

import importlib.util
import os
import re
import warnings
from dataclasses import dataclass

import numpy as np

BACKENDS = os.environ.get("NBACCEL_FUZZ_BACKENDS", "numpy,numba,triton").split(",")
if "triton" in BACKENDS and importlib.util.find_spec("cupy") is None:
    # no GPU: Triton's interpreter (set before any generated kernel is decorated)
    os.environ.setdefault("NBACCEL_TRITON_INTERPRET", "1")   # read when nbaccel is imported
# relative tolerance by result dtype; the absolute one is that times the largest |value|
# (a fused kernel may add in another order, with fastmath's reassociation). A program that
# computes in float32 anywhere gets float32's tolerance for a float64 result too: NumPy's own
# float32 sums round by the layout (np.var of a float32 array and of its F-ordered copy differ in
# the last bit), and a float64 result made from them carries that difference.
RTOL = {np.dtype("float32"): 2e-4, np.dtype("float64"): 1e-9}


@dataclass(frozen=True)
class Outcome:
    """How one run went: ok, or a failure with a class (for grouping) and details."""
    ok: bool
    klass: str = ""        # normalised: the same bug in two programs gives the same class
    detail: str = ""       # the full message, with shapes and values

    def __str__(self):
        return "ok" if self.ok else f"{self.klass}\n{self.detail}"


OK = Outcome(True)


def backend_supported(backend: str) -> bool:
    from nbaccel.compiler.api import BACKENDS as accepted
    if backend == "triton":
        if importlib.util.find_spec("triton") is None:
            return False
        try:
            from nbaccel.compiler.runtime.triton_runtime import run_mode
            run_mode()
        except RuntimeError:
            return False
    return backend in accepted


def _call(fn, arrays):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(*arrays), None
        except Exception as e:      # noqa: BLE001 - the exception is what we compare
            return None, e


def check(program, backend: str, calls: int = 2) -> Outcome:
    """Run program with NumPy and under nb.compile(backend=backend); compare. The compiled
    function is called ``calls`` times on fresh inputs: the first call compiles, the next
    ones take the cached entry."""
    import nbaccel as nb

    fn = program.function()
    plain = program.arrays()
    want, want_exc = _call(fn, plain)
    try:
        compiled = nb.compile(fn, backend=backend)
    except Exception as e:          # noqa: BLE001
        return _failure(f"nb.compile raised {type(e).__name__}", str(e))
    for call in range(calls):
        outcome = _check_call(program, compiled, want, want_exc, plain)
        if not outcome.ok:
            if call:
                return _failure(f"call {call + 1} (cached): {outcome.klass}", outcome.detail)
            return outcome
    outcome = check_guards(program, backend)
    return outcome if not outcome.ok else check_layouts(program, backend)


def check_guards(program, backend: str) -> Outcome:
    """Guarded replay: the program reads a global; calls after a change that keeps its guard
    (an equal value, a new object) and after one that breaks it must match the plain run."""
    import nbaccel as nb
    if program.single:
        return OK
    fn = program.function(order_global=True)
    compiled = nb.compile(fn, backend=backend)
    for step, value in enumerate((1, 1, int("1"), 0, 0)):
        fn.__globals__["ORDER"] = value
        plain = program.arrays()
        want, want_exc = _call(fn, plain)
        outcome = _check_call(program, compiled, want, want_exc, plain)
        if not outcome.ok:
            what = ("first call", "replay", "equal global (guard holds)", "changed global (guard fails)",
                    "replay after the change")[step]
            return _failure(f"{what}: {outcome.klass}", outcome.detail)
    return OK


# the layouts of check_layouts' calls, in order: a C trace replayed for F inputs (a transposed
# array's layout), an F trace replayed, a strided call, then C inputs after the F trace
LAYOUTS = ("C", "F", "F", "strided", "C")
# the statements whose result is a view or a copy by the strides: programs without one skip
# check_layouts (a third of them; the phase's ten calls would double the fuzzer's time)
_RESHAPES = re.compile(r"reshape|ravel|flatten")


def relaid(a, how: str):
    """``a``'s values with the same shape and dtype in another layout: "F" (as a transposed C
    array lies), "strided" (every other element of a buffer, along the last axis). A 1-D
    array's F layout is its C one: it gets the strided one."""
    if how == "C" or a.ndim == 0:
        return a
    if how == "F" and a.ndim >= 2:
        return np.asfortranarray(a)
    out = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)[..., ::2]
    out[...] = a
    return out


def check_layouts(program, backend: str) -> Outcome:
    """The same program called again with inputs of the same shapes and dtypes laid out
    otherwise (LAYOUTS), under the default mode and ``mode="reduce-overhead"`` (whose key holds
    no strides): a reshape is a view or a copy by its operand's strides, so a program traced
    for one layout must not be replayed for another where NumPy decides otherwise, and a ufunc
    of a transposed input is laid out transposed (its ravel copies). Every call runs compiled
    (no plain runs chosen by timing, which would hide a wrong replay)."""
    import nbaccel as nb
    from nbaccel.compiler.config import config
    if not any(i.shape for i in program.inputs) or not _RESHAPES.search(program.source()):
        return OK       # 0-d inputs only (one layout), or no view-or-copy decision to get wrong
    fn = program.function()
    saved = config["decide_functions"]
    config["decide_functions"] = False
    try:
        for mode in ("default", "reduce-overhead"):
            compiled = nb.compile(fn, backend=backend, mode=mode)
            for step, how in enumerate(LAYOUTS):
                def fresh(how=how):
                    return [relaid(a, how) for a in program.arrays()]
                plain = fresh()
                want, want_exc = _call(fn, plain)
                outcome = _check_call(program, compiled, want, want_exc, plain, fresh)
                if not outcome.ok:
                    seq = "/".join(LAYOUTS[:step + 1])
                    return _failure(f"{how} inputs after {seq} ({mode}): {outcome.klass}", outcome.detail)
    finally:
        config["decide_functions"] = saved
    return OK


def _check_call(program, compiled, want, want_exc, plain, fresh=None) -> Outcome:
    """``plain``: the inputs as NumPy's run left them. A program may write into an input
    through a view (``np.ravel`` of an array whose layout allows a view, an in-place update
    of it): NumPy's writes are the contract, not unchanged inputs. ``fresh``: makes the
    compiled call's inputs (``program.arrays``, or another layout of them)."""
    fresh = fresh or program.arrays
    arrays = fresh()
    got, got_exc = _call(compiled, arrays)
    for inp, before, want_after, after in zip(program.inputs, fresh(), plain, arrays):
        if not _same_array(want_after, after):
            how = "changed" if _same_array(before, want_after) else "written otherwise than by NumPy"
            return _failure("mutated an input", f"{inp.name} {how}")
    if want_exc is not None:
        if got_exc is None:
            return _failure(f"returned where NumPy raised {type(want_exc).__name__}",
                            f"NumPy: {type(want_exc).__name__}: {want_exc}")
        if not isinstance(got_exc, type(want_exc)):
            return _failure(f"raised {type(got_exc).__name__} where NumPy raised "
                            f"{type(want_exc).__name__}: {normalise(got_exc)}",
                            f"compiled: {type(got_exc).__name__}: {got_exc}\n"
                            f"NumPy: {type(want_exc).__name__}: {want_exc}")
        if _worded_by_numpy(want_exc) and str(got_exc) != str(want_exc):
            return _failure(f"worded otherwise than NumPy: {normalise(got_exc)}",
                            f"compiled: {got_exc}\nNumPy: {want_exc}")
        return OK
    if got_exc is not None:
        return _failure(f"{type(got_exc).__name__}: {normalise(got_exc)}",
                        f"{type(got_exc).__name__}: {got_exc}")
    return compare(got, want, floor=_float32_floor(program))


def _worded_by_numpy(exc) -> bool:
    """Whether the compiled call must give this exception's very message: a write into a
    read-only (broadcast) view, whose wording NumPy fixes by what writes (item assignment,
    an in-place operator, out=); other messages may name nbaccel's own spelling."""
    return isinstance(exc, ValueError) and "read-only" in str(exc)


def _float32_floor(program) -> float:
    """The least relative tolerance of any float result: float32's where the program computes
    in float32 (a float32 input, or float32 in its text: an astype, a NumPy scalar)."""
    f32 = any(i.dtype == "float32" for i in program.inputs) or "float32" in program.source()
    return RTOL[np.dtype("float32")] if f32 else 0.0


def compare(got, want, where="result", floor=0.0) -> Outcome:
    """Compare a compiled result with NumPy's, recursively through tuples and lists."""
    both_scalars = isinstance(got, np.generic) and isinstance(want, np.generic)
    if type(got) is not type(want) and not both_scalars:   # two NumPy scalars: compare dtypes
        return _failure(f"wrong type: {_tname(got)} where NumPy gives {_tname(want)}",
                        f"{where}: {type(got)} vs {type(want)}")
    if isinstance(want, (tuple, list)):
        if len(got) != len(want):
            return _failure("wrong number of results", f"{where}: {len(got)} vs {len(want)}")
        for i, (g, w) in enumerate(zip(got, want)):
            out = compare(g, w, f"{where}[{i}]", floor)
            if not out.ok:
                return out
        return OK
    if isinstance(want, (np.ndarray, np.generic)):
        g, w = np.asarray(got), np.asarray(want)
        if g.dtype != w.dtype:
            return _failure(f"wrong dtype: {g.dtype} where NumPy gives {w.dtype}",
                            f"{where}: compiled {g.dtype} {g.shape}, NumPy {w.dtype} {w.shape}")
        if g.shape != w.shape:
            return _failure("wrong shape", f"{where}: {g.shape} vs {w.shape}")
        if not _close(g, w, floor):
            return _failure(f"wrong value ({w.dtype})", f"{where}: {_diff(g, w)}")
        return OK
    if got != want and not (got != got and want != want):
        return _failure("wrong value (Python scalar)", f"{where}: {got!r} vs {want!r}")
    return OK


def _close(g, w, floor=0.0) -> bool:
    if w.dtype.kind not in "fc":
        return bool(np.array_equal(g, w))
    if not np.array_equal(np.isnan(g), np.isnan(w)):
        return False
    inf = np.isinf(w) | np.isinf(g)
    if not np.array_equal(g[inf], w[inf]):
        return False
    finite = ~(np.isnan(w) | inf)
    if not finite.any():
        return True
    gf, wf = g[finite].astype(np.float64), w[finite].astype(np.float64)
    rtol = max(RTOL.get(w.dtype, 1e-6), floor)
    return bool(np.all(np.abs(gf - wf) <= rtol * np.abs(wf) + rtol * max(1.0, np.abs(wf).max())))


def _diff(g, w) -> str:
    """Where two same-shaped arrays differ: how many elements, the first few, and both whole
    when small."""
    bad = ~((g == w) | ((g != g) & (w != w)))
    idx = np.argwhere(bad)[:3]
    first = "; ".join(f"at {tuple(int(i) for i in ix)}: compiled {g[tuple(ix)]!r}, NumPy {w[tuple(ix)]!r}"
                      for ix in idx)
    text = f"{int(bad.sum())} of {w.size} elements differ; {first}"
    if w.size <= 24:
        text += f"\ncompiled {g.tolist()!r}\nNumPy    {w.tolist()!r}"
    return text


def _same_array(a, b) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


def _tname(x) -> str:
    t = type(x)
    if isinstance(x, np.generic):
        return "a NumPy scalar"
    return f"{t.__module__.split('.')[0]}.{t.__name__}" if t.__module__ != "builtins" else t.__name__


def _failure(klass, detail) -> Outcome:
    return Outcome(False, klass, detail)


# Messages name nodes, shapes, sizes and generated variables: strip those so one bug is one
# class however many programs hit it.
_NORMALISE = [
    (re.compile(r"<Node [^>]*>"), "<node>"),
    (re.compile(r"`[^`]*`"), "`...`"),
    (re.compile(r"<fuzz program \d+>:\d+:?"), "<program>:"),
    (re.compile(r"%\d+"), "NAME"),
    (re.compile(r"\b(?:u?int|float|complex)\d+\b|\bbool\b"), "<dtype>"),
    (re.compile(r"\b[fiub]\d+\[[^\]]*\]"), "T[...]"),
    (re.compile(r"\((?:-?\d+,\s*)*-?\d*,?\)"), "(...)"),
    (re.compile(r"\[(?:-?\d+,\s*)*-?\d+\]"), "[...]"),
    (re.compile(r"'[a-z]\d+'"), "'NAME'"),
    (re.compile(r"\b[a-z]\d+\b"), "NAME"),
    (re.compile(r"-?\d+"), "N"),
]


def normalise(exc) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    for pattern, repl in _NORMALISE:
        text = pattern.sub(repl, text)
    return text[:160]
