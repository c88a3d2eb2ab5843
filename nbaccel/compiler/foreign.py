"""Inputs the compiler does not trace itself: packages built on it register a handler here.

A package that sits above the compiler (the Dask bridge, ``daskbridge/``) registers a
predicate over a call's arguments and a handler that runs the whole call in the compiler's
place. ``CompiledFunction`` asks the predicates before it traces, so the compiler knows such
inputs without importing the packages that handle them (they import it: docs/architecture.md).

    >>> from nbaccel.compiler.foreign import handler_for
    >>> handler_for((1.0,), {}) is None
    True
"""
from __future__ import annotations

# (module, qualname) of the predicate -> (predicate, handler), in registration order: keyed by
# name so that a package imported again (importlib.reload) replaces its entry instead of adding one
_HANDLERS: dict = {}


def register_foreign(predicate, handler):
    """Run ``handler(compiled, args, kwargs)`` instead of tracing a call for which
    ``predicate(args, kwargs)`` is true. The predicate runs on every traced call: it must be
    cheap (the Dask bridge's looks in ``sys.modules`` first and imports nothing)."""
    key = (getattr(predicate, "__module__", None), getattr(predicate, "__qualname__", repr(predicate)))
    _HANDLERS[key] = (predicate, handler)


def handler_for(args, kwargs):
    """The handler registered for these arguments, or None: the compiler traces them itself."""
    for predicate, handler in _HANDLERS.values():
        if predicate(args, kwargs):
            return handler
    return None
