"""Whether a value or a call's arguments hold a Dask array, without importing Dask.

Dask is only looked up in ``sys.modules``: while nobody has imported it, nothing can be a Dask
array, and the answer costs a dictionary lookup. The compiler asks ``holds_dask`` on every
traced call (the bridge registers it: ``daskbridge/__init__.py``), and the magics ask
``is_dask_array`` of a cell's values.
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
