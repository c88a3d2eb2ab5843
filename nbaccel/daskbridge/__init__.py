"""The Dask bridge: Dask arrays as inputs of ``nb.compile`` functions and ``%%compile`` cells.

A call with a ``dask.array.Array`` argument is traced once on stand-ins of the full shapes (no
data is read), split at the reductions whose axes span several chunks, and lowered to a Dask
graph whose per-chunk work is nbaccel-compiled functions (``blockwise`` for elementwise work,
``reduction`` with a combine and an aggregate step). The result is lazy, as the plain call's.
Whatever cannot be chunk work runs plainly on Dask, with the reason in the report.

Nothing here imports Dask until a Dask array or a cluster command appears. See docs/dask.md.
"""
from __future__ import annotations

import sys


def is_dask_array(value) -> bool:
    """True for a ``dask.array.Array`` (False, and no import, while Dask is not loaded)."""
    mod = sys.modules.get("dask.array")
    return mod is not None and isinstance(value, mod.Array)


def holds_dask(args, kwargs) -> bool:
    """Whether a call's arguments hold a Dask array (at the top level or one container deep)."""
    if sys.modules.get("dask.array") is None:
        return False
    for v in (*args, *kwargs.values()):
        if is_dask_array(v):
            return True
        if type(v) in (list, tuple) and any(is_dask_array(x) for x in v):
            return True
        if type(v) is dict and any(is_dask_array(x) for x in v.values()):
            return True
    return False


def call(compiled, args, kwargs):
    """Run ``compiled`` (a CompiledFunction) on arguments holding Dask arrays: a lazy result."""
    return _bridge.call(compiled, args, kwargs)
from . import bridge as _bridge  # noqa: E402  (the bridge reads the helpers above)
