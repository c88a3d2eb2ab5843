"""CPython's garbage collector while a call is traced and compiled.

A trace allocates a few hundred objects per recorded op (tracers, graph nodes, tuples), so the
collector runs often, and each full collection walks every object the process tracks: in a
notebook that is IPython, the modules and the user's data, 200,000 objects and more, 0.1-0.2 s
a pass. A trace that unrolls a Python loop into 12,000 ops spent a quarter of its time there.
:func:`freeze` moves the objects that existed before the trace into the collector's permanent
generation for the trace's duration (``gc.freeze``), and back afterwards (``gc.unfreeze``): the
collections during the trace walk only what the trace made, and find the same garbage among it.
Garbage that existed before the trace is collected after it. A process that froze objects
itself is left alone.
"""
from __future__ import annotations

import gc
import threading

_lock = threading.Lock()
_state = {"depth": 0, "ours": False}      # traces running now (threads), and whether we froze


def freeze():
    """Before a trace (pair it with :func:`thaw` in a ``finally``)."""
    with _lock:
        if _state["depth"] == 0:
            # (whether the collector is on now does not matter: numba's set-up pauses it on
            # another thread for a moment, and it runs again before the trace ends)
            _state["ours"] = gc.get_freeze_count() == 0
            if _state["ours"]:
                gc.freeze()
        _state["depth"] += 1


def thaw():
    """After a trace, however it ended."""
    with _lock:
        _state["depth"] -= 1
        if _state["depth"] == 0 and _state["ours"]:
            _state["ours"] = False
            gc.unfreeze()
