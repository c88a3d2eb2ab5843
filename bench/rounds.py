"""Interleaved rounds: each implementation of a workload runs once per round, in turn.

Drift on a shared machine (another job starting, the CPU clock, the page cache) then hits
every implementation of the round alike, and the per-round ratios (``timing.ratio_stats``)
cancel most of it. The order rotates from round to round so that no implementation always
runs right after the same other one (a thread pool still spinning after its call slows
whoever comes next).

An implementation is a *timer*: ``timer(keep_last) -> seconds``. ``Local`` wraps a callable in
this process; ``peer_worker.Remote`` runs one in the PyTorch worker process (the worker times
its own call, so the pipe is not in the time). ``keep_last`` is the allocator mode's second
half: in "fresh" mode the previous result stays alive during the next call, as ``y = f(x)`` in
a loop keeps it, so no pool or heap can hand its pages back warm; in "reused" mode it is
dropped before the next call.
"""
from __future__ import annotations

import gc
import time

from .threads import ALLOC_MODES, set_alloc_mode

# each mode: does the previous output stay alive during the next call (see the module doc)
KEEP_LAST = {"fresh": True, "reused": False}


class Local:
    """A callable of this process as a timer."""

    def __init__(self, fn):
        self.fn = fn
        self.last = None

    def __call__(self, keep_last: bool) -> float:
        if not keep_last:
            self.last = None
        t0 = time.perf_counter()
        out = self.fn()
        dt = time.perf_counter() - t0
        self.last = out if keep_last else None
        return dt

    def release(self):
        self.last = None


def run_rounds(timers: dict, rounds: int, keep_last: bool, warmup: int = 1, settle: float = 0.0) -> dict:
    """name -> list of ``rounds`` seconds; round r starts with the (r mod n)-th implementation.

    ``warmup`` untimed rounds come first; ``settle`` seconds of idling follow each call, so
    that a pool's spinning threads stop before the next implementation starts."""
    names = list(timers)
    times = {n: [] for n in names}
    if not names:
        return times
    for r in range(warmup + rounds):
        gc.collect()
        k = r % len(names)
        for name in names[k:] + names[:k]:
            dt = timers[name](keep_last)
            if r >= warmup:
                times[name].append(dt)
            if settle:
                time.sleep(settle)
    for t in timers.values():
        getattr(t, "release", lambda: None)()
    return times


def run_modes(timers: dict, rounds: int, workers=(), modes=ALLOC_MODES, warmup: int = 1,
              settle: float = 0.0) -> dict:
    """mode -> name -> seconds per round, for each allocator mode in turn (this process and
    every worker switched together). Returns also ``alloc_supported``: mode -> bool."""
    out, supported = {}, {}
    for mode in modes:
        ok = set_alloc_mode(mode)
        for w in workers:
            ok = w.set_alloc_mode(mode) and ok
        supported[mode] = ok
        out[mode] = run_rounds(timers, rounds, KEEP_LAST[mode], warmup, settle)
    set_alloc_mode("fresh")
    for w in workers:
        w.set_alloc_mode("fresh")
    return {"times": out, "alloc_supported": supported}
