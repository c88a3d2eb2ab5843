"""numba's first-use set-up, done early in the background when a notebook loads nbaccel.

The first numba compile (or disk-cache load) in a process first loads numba's typing and
lowering registries (``target_context.refresh()``: it imports numba's built-in implementations,
cffi and pycparser, and third-party extensions): 0.15-0.3 s, paid by the first ``%%compile``
cell's first kernel even when its machine code is on disk. ``%load_ext nbaccel`` starts it on a
daemon thread instead (:func:`start`), so it happens while the user types the next cell. It
holds numba's compiler lock, so a compile that starts meanwhile simply waits for it; nothing
is compiled and nothing is written. ``NBACCEL_NUMBA_WARMUP=0`` (``config["numba_warmup"] =
False``) switches it off.
"""
from __future__ import annotations

import threading

from .config import config

_started = threading.Event()
_done = threading.Event()


def _warm():
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
    except Exception:        # pragma: no cover - a warm-up never fails anything
        pass
    finally:
        _done.set()


def start() -> bool:
    """Start the warm-up once per process; False when it was already started or is off."""
    if not config.get("numba_warmup", True) or _started.is_set():
        return False
    _started.set()
    threading.Thread(target=_warm, name="nbaccel-numba-warmup", daemon=True).start()
    return True


def wait(timeout=None) -> bool:
    """Wait for a started warm-up to finish (tests)."""
    return _done.wait(timeout) if _started.is_set() else True
