"""The compiler's call path, as exporting and running an exported program need it: loaded on
first use, not with ``import nbaccel`` (which loads ``export``): the call path costs about
0.1 s of imports and loads numba when a kernel is built. One lazy import here, rather than one
in each module of ``export``."""
from __future__ import annotations


def compiler():
    """``(api, entries, runtime)`` of :mod:`nbaccel.compiler`."""
    # lazy: see the module docstring (one statement, so one lazy import, for modules of three rooms)
    import nbaccel.compiler.api, nbaccel.compiler.replay.entries, nbaccel.compiler.runtime.runtime
    c = nbaccel.compiler
    return c.api, c.replay.entries, c.runtime.runtime
