"""``nb.mark_dynamic``: the dimensions a user marked dynamic before the first call, per array.

The compiler's call (``api.py``) asks :func:`marked_dims` of each argument when it traces; a
marked dimension is a symbol from the first trace on (``replay/entries.py``), as
``torch._dynamo.mark_dynamic`` makes it.
"""
from __future__ import annotations

import weakref

_marked: dict[int, tuple] = {}               # id(tensor or array) -> (weakref, dims marked dynamic)


def mark_dynamic(t, dim):
    """Compile ``t``'s dimension ``dim`` as a symbol from the first call (like torch._dynamo)."""
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    entry = _marked.get(id(t))
    if entry is None or entry[0]() is not t:
        entry = _marked[id(t)] = (weakref.ref(t), set())
    entry[1].update(d % max(t.ndim, 1) for d in dims)


def marked_dims(x):
    """The dims marked on ``x`` (the same object, still alive), or None."""
    entry = _marked.get(id(x))
    return entry[1] if entry is not None and entry[0]() is x else None
