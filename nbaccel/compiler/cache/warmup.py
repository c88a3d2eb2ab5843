"""numba's first-use set-up, done early in the background, and made cheaper.

The first numba compile (or disk-cache load) in a process first imports numba and loads its
typing and lowering registries (``target_context.refresh()``: numba's built-in implementations,
``scipy.linalg`` for its BLAS check, cffi and pycparser, third-party extensions). In a plain
``python -c "import nbaccel as nb; f = nb.compile(g); f(x)"`` that is most of a warm start
(docs/benchmarks.md, "Start-up counted from the process's first line"). Here:

* :func:`start` runs the set-up on a daemon thread. ``%load_ext nbaccel`` calls it, so in a
  notebook it happens while the user types; the first use of ``nb.compile`` calls it too, so a
  script overlaps it with whatever of its own work releases the GIL (NumPy, file reads, the
  llvmlite calls inside numba's set-up). It holds numba's compiler lock, so a compile that
  starts meanwhile waits for it; nothing is compiled and nothing is written.
* :func:`ensure` is what the compiler calls before it first needs numba: it waits for a started
  set-up, or does it on the calling thread. Either way it runs once, the same way.
* The set-up runs with Python's cyclic garbage collector paused. Importing numba and its
  registries makes ~100k long-lived objects and, unpaused, some 270 collections that scan the
  growing heap (0.15-0.2 s measured here). The collector is switched back on after (unless the
  user had switched it off); garbage the process made meanwhile, on any thread, is collected
  then.

Not done: an exiting process spends 0.2-0.5 s in its final garbage collections over numba's
objects, and ``gc.freeze()`` at exit saves it, but it also skips finalising the user's own
objects in reference cycles (a buffered file held in one loses its unwritten data) and makes
nanobind extensions (Triton) print leak reports.

``NBACCEL_NUMBA_WARMUP=0`` (``config["numba_warmup"] = False``) switches all of it off: numba
then loads on the compiler's first use as numba itself does it.
"""
from __future__ import annotations

import gc
import sys
import threading

from nbaccel_kernels import _numba_warnings

from ..config import config

_started = threading.Event()
_done = threading.Event()
_lock = threading.Lock()        # start() and ensure() decide once who runs the set-up


def _setup():
    """Import numba and load its registries, the collector paused."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        from numba.core.compiler_lock import global_compiler_lock
        from numba.core.registry import cpu_target
        # the contexts are cached properties whose first computation takes the compiler lock
        # itself: made outside it, as a compile thread's first @njit does (taken inside, the
        # two threads took the property's lock and the compiler lock in opposite orders)
        typing, target = cpu_target.typing_context, cpu_target.target_context
        with global_compiler_lock:
            typing.refresh()
            target.refresh()
    finally:
        if was_enabled:
            gc.enable()


def _warm():
    try:
        _setup()
    except Exception:        # pragma: no cover - a warm-up never fails anything
        pass
    finally:
        _done.set()


def _warm_on_thread():
    _numba_warnings.quiet_this_thread()      # numba's typing must not swap the warnings state
    _warm()


def _claim() -> bool:
    """True for the one caller that runs the set-up (off, or already claimed: False)."""
    if not config.get("numba_warmup", True):
        return False
    with _lock:
        if _started.is_set():
            return False
        _started.set()
        return True


def start() -> bool:
    """Start the set-up on a daemon thread once per process; False when it was already
    started or is off."""
    if not _claim():
        return False
    threading.Thread(target=_warm_on_thread, name="nbaccel-numba-warmup", daemon=True).start()
    return True


def ensure() -> None:
    """numba is set up when this returns (unless the warm-up is off): the compiler calls it
    before its first use of numba, on whatever thread that is."""
    if _claim():
        _warm()
    elif _started.is_set():
        _done.wait()


def ready() -> bool:
    """Whether numba is set up in this process (a kernel's machine code on disk then loads in
    milliseconds; before, loading it first costs numba's import and registries, ~0.5 s)."""
    if _started.is_set():
        return _done.is_set()
    return "numba.core.registry" in sys.modules


def wait(timeout=None) -> bool:
    """Wait for a started set-up to finish (tests)."""
    return _done.wait(timeout) if _started.is_set() else True
