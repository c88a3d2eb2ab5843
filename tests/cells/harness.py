"""Run a catalogue cell plainly and under ``%%compile`` in a real IPython shell and compare.

    shell = get_shell()
    plain = run(shell, cell, compiled=False)
    comp = run(shell, cell, compiled=True)
    assert not differences(plain, comp)

Every run starts from a fresh user namespace holding only what ``cell.setup`` made, so the two
runs see the same inputs. The shell's report output is switched off (``report=none``); tracebacks
are not printed (the exception's type and message are compared instead).
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import math
import re
import time
import types
import warnings
from dataclasses import dataclass

import numpy as np

_OUT_PROMPT = re.compile(r"Out\[\d+\]")


@dataclass
class Outcome:
    names: dict
    stdout: str
    error: tuple | None       # (type name, message)
    value: object
    seconds: float
    fallback: str | None = None   # why a %%compile run went plain (None: it ran compiled)
    warnings: tuple = ()          # ((category, message, file, line), ...) as the filters let them through


_CELL_FILE = re.compile(r"^<ipython-input-\d+-[0-9a-f]+>$")


def warning_rows(records) -> tuple:
    """The warnings a run issued, comparable between runs: IPython's file of a cell
    (``<ipython-input-3-ab12…>``, which has the run's number) reads ``<cell>``."""
    out = []
    for w in records:
        fn = "<cell>" if _CELL_FILE.match(str(w.filename)) else str(w.filename)
        out.append((w.category.__name__, str(w.message), fn, w.lineno))
    return tuple(out)


def get_shell(backend="numpy"):
    """The process's InteractiveShell with nbaccel loaded and reports off."""
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython   # (the one shell other tests use too)
    shell = start_ipython() or get_ipython()
    shell.run_line_magic("load_ext", "nbaccel")
    shell.run_line_magic("nbaccel", f"config report=none backend={backend}")
    return shell


def reset_shell(backend="numpy"):
    """:func:`get_shell` after ``%nbaccel reset`` (no cell entries, decisions or history kept
    from earlier tests), reports still off."""
    shell = get_shell(backend)
    shell.run_line_magic("nbaccel", "reset")
    shell.run_line_magic("nbaccel", "config report=none")
    return shell


def available(cell) -> bool:
    """False when the cell needs a module (or an engine feature) this environment lacks."""
    for need in cell.needs:
        if need in ("complex", "uint64"):       # engine dtypes (issue 9's dtype work)
            import nbaccel
            if not hasattr(nbaccel, "complex64" if need == "complex" else "uint64"):
                return False
        elif importlib.util.find_spec(need) is None:
            return False
    return True


def _fresh(shell, setup):
    # (not shell.reset(): its gc.collect costs ~0.4 s in a large test process)
    for k in list(_user_names(shell)):
        del shell.user_ns[k]
    shell.user_ns["__name__"] = "__main__"
    if setup:
        res = shell.run_cell(setup, store_history=False, silent=True)
        res.raise_error()


def _user_names(shell):
    hidden = shell.user_ns_hidden
    return {k: v for k, v in shell.user_ns.items()
            if not k.startswith("_") and k not in hidden and k not in ("In", "Out", "exit", "quit")}


def settle_background():
    """Wait for nbaccel's background numba work (queued compiles, numba's set-up, the eager
    kernels' loads), so that each comparison starts from a settled process: which tier a run
    takes, and so its time and its report, do not depend on how far the background got. (The
    warnings no longer do: a compile thread leaves the warnings state alone,
    nbaccel_kernels/_numba_warnings.py.)"""
    from nbaccel.compiler.cache import warmup as numba_warmup
    from nbaccel.compiler.runtime import runtime
    from nbaccel.ops import kernel_modules
    runtime._COMPILER.wait()
    numba_warmup.wait()
    for thread in list(kernel_modules._STARTED.values()):
        if thread is not None:              # (None: loaded on the calling thread)
            thread.join()


def run(shell, cell, compiled: bool, fresh: bool = True, verify: bool = False) -> Outcome:
    """Run ``cell`` once (plainly or with ``%%compile``, ``--verify`` too when asked) from a
    fresh namespace."""
    settle_background()
    if fresh:
        _fresh(shell, cell.setup)
    src = (("%%compile --verify\n" if verify else "%%compile\n") + cell.source) if compiled else cell.source
    buf = io.StringIO()
    show = shell.showtraceback
    shell.showtraceback = lambda *a, **k: None
    try:
        # (the filters as the caller set them; entering this empties the warning registries,
        # so each run shows its "default" warnings afresh)
        with contextlib.redirect_stdout(buf), warnings.catch_warnings(record=True) as caught:
            t0 = time.perf_counter()
            res = shell.run_cell(src, store_history=True)
            seconds = time.perf_counter() - t0
    finally:
        shell.showtraceback = show
    err = res.error_in_exec or res.error_before_exec
    error = None if err is None else (type(err).__name__, str(err))
    fallback = None
    if compiled:
        from nbaccel.magics import get_extension
        fallback = getattr(get_extension(shell), "last_fallback", None)
    return Outcome(dict(_user_names(shell)), _OUT_PROMPT.sub("Out[N]", buf.getvalue()), error,
                   res.result, seconds, fallback, warning_rows(caught))


# -- comparing ----------------------------------------------------------------------------------

def _array_diff(a, b, where):
    if type(a) is not type(b):
        return f"{where}: type {type(a).__name__} != {type(b).__name__}"
    if a.dtype != b.dtype:
        return f"{where}: dtype {a.dtype} != {b.dtype}"
    if a.shape != b.shape:
        return f"{where}: shape {a.shape} != {b.shape}"
    if isinstance(a, np.ma.MaskedArray):
        if not np.array_equal(np.ma.getmaskarray(a), np.ma.getmaskarray(b)):
            return f"{where}: masks differ"
        a, b = a.filled(0) if a.dtype.kind in "fciub" else a.data, b.filled(0) if b.dtype.kind in "fciub" else b.data
    if a.dtype.kind in "fc":
        tol = 2e-5 if a.dtype.itemsize <= 4 or a.dtype.kind == "c" and a.dtype.itemsize <= 8 else 1e-9
        if a.dtype.itemsize == 2:
            tol = 1e-3                       # float16: one unit in the last place
        ok = np.allclose(a, b, rtol=tol, atol=tol, equal_nan=True)
    elif a.dtype.kind in "biuMm":
        ok = np.array_equal(a, b)
    else:
        ok = a.tolist() == b.tolist()
    return None if ok else f"{where}: values differ"


def _same_type(a, b):
    ta, tb = type(a), type(b)
    if ta is tb:
        return True
    # classes defined in the cell are new objects on every run: the same name is the same class
    return ta.__module__ == tb.__module__ == "__main__" and ta.__qualname__ == tb.__qualname__


def value_diff(a, b, where="value", depth=0):
    """A description of how ``a`` (plain) and ``b`` (compiled) differ, or None."""
    if not _same_type(a, b):
        return f"{where}: type {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, np.ndarray):
        return _array_diff(a, b, where)
    if isinstance(a, np.generic):
        return _array_diff(np.asarray(a), np.asarray(b), where)
    if isinstance(a, float):
        same = (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
        return None if same else f"{where}: {a!r} != {b!r}"
    if isinstance(a, (int, str, bytes, bool, complex, type(None))):
        return None if a == b else f"{where}: {a!r} != {b!r}"
    if isinstance(a, types.ModuleType):
        return None if a is b else f"{where}: different modules"
    if isinstance(a, (types.FunctionType, type, types.BuiltinFunctionType)):
        return None if getattr(a, "__qualname__", None) == getattr(b, "__qualname__", None) else \
            f"{where}: {a!r} != {b!r}"
    if depth > 3:
        return None
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{where}: length {len(a)} != {len(b)}"
        for i, (u, v) in enumerate(zip(a, b)):
            d = value_diff(u, v, f"{where}[{i}]", depth + 1)
            if d:
                return d
        return None
    if isinstance(a, dict):
        if list(a) != list(b):
            return f"{where}: keys {list(a)} != {list(b)}"
        for k in a:
            d = value_diff(a[k], b[k], f"{where}[{k!r}]", depth + 1)
            if d:
                return d
        return None
    state = getattr(a, "__dict__", None)
    if isinstance(state, dict) and type(a).__module__ == "__main__":
        return value_diff(state, b.__dict__, f"{where}.__dict__", depth + 1)
    return None          # other objects (figures, axes, ...): the type is what can be compared


def differences(plain: Outcome, comp: Outcome) -> list[str]:
    """Every way the compiled run differs from the plain one (an empty list: the contract holds)."""
    out = []
    if plain.error != comp.error:
        out.append(f"exception: {plain.error} != {comp.error}")
    if plain.stdout != comp.stdout:
        out.append(f"stdout: {plain.stdout!r} != {comp.stdout!r}")
    if set(plain.names) != set(comp.names):
        out.append(f"names: missing {sorted(set(plain.names) - set(comp.names))}, "
                   f"extra {sorted(set(comp.names) - set(plain.names))}")
    for k in sorted(set(plain.names) & set(comp.names)):
        d = value_diff(plain.names[k], comp.names[k], k)
        if d:
            out.append(d)
    d = value_diff(plain.value, comp.value, "Out")
    if d:
        out.append(d)
    if plain.warnings != comp.warnings:
        out.append(f"warnings: the plain cell issued {list(plain.warnings)}, the compiled cell "
                   f"{list(comp.warnings)}")
    return out


def assert_same_or_plain_with_reason(shell, cell):
    """The surface tables' check: the cell runs plainly and compiled (warnings silenced, as
    a table of every name triggers NumPy's own), with no difference; a compiled run that fell
    back to plain says so."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = run(shell, cell, compiled=False)
        comp = run(shell, cell, compiled=True)
    assert differences(plain, comp) == []
    if comp.fallback is not None:
        assert "plainly" in comp.fallback, comp.fallback
