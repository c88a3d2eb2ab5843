"""The Dask bridge: Dask arrays as inputs of ``nb.compile`` functions and ``%%compile`` cells.

A call with a ``dask.array.Array`` argument is traced once on stand-ins of the full shapes (no
data is read), split at the reductions whose axes span several chunks, and lowered to a Dask
graph whose per-chunk work is nbaccel-compiled functions (``blockwise`` for elementwise work,
``reduction`` with a combine and an aggregate step). The result is lazy, as the plain call's.
Whatever cannot be chunk work runs plainly on Dask, with the reason in the report.

The bridge sits above the compiler, which does not import it: importing this package registers
``holds_dask`` and ``call`` with the compiler (``compiler/foreign.py``), and ``import nbaccel``
imports it, so the registration is there before any call can see a Dask array. That import is
cheap: the bridge itself (``bridge.py``, which imports the compiler's call path and the export
capture) loads with the first Dask call, and nothing here imports Dask until a Dask array or a
cluster command appears. See docs/dask.md.
"""
from __future__ import annotations

from ..compiler.foreign import register_foreign
from .detect import holds_dask, is_dask_array  # noqa: F401  (the magics read both here)


def call(compiled, args, kwargs):
    """Run ``compiled`` (a CompiledFunction) on arguments holding Dask arrays: a lazy result."""
    from . import bridge  # lazy: it imports the compiler's call path (numba); import nbaccel registers this package without it
    return bridge.call(compiled, args, kwargs)


register_foreign(holds_dask, call)
