"""The compiler's call path, as exporting and running an exported program need it: loaded on
first use, not with ``import nbaccel`` (which loads ``export``): the call path costs about
0.1 s of imports and loads numba when a kernel is built. One lazy import here, rather than one
in each module of ``export``."""
from __future__ import annotations


def compiler():
    """``(api, entries, runtime)`` of :mod:`nbaccel.compiler`."""
    from ..compiler import api, entries, runtime  # lazy: see the module docstring
    return api, entries, runtime
