"""What ``nbaccel.compile`` returns, as types that sit below ``api``.

``Compiled`` is the base of both results (``api.CompiledFunction`` and ``CompiledModule``): the
compiler's own modules that ``api`` imports recognise an ``nb.compile`` result by it without
importing ``api`` back (readset walks into a compiled function that a traced function calls).
"""
from __future__ import annotations


class Compiled:
    """The base of every ``nb.compile`` result: ``_target_fn()`` is the function a trace runs."""

    __slots__ = ()

    def _target_fn(self):
        raise NotImplementedError


class CompiledModule(Compiled):
    """A module whose forward runs compiled; everything else is the original module."""

    def __init__(self, module, compiled):
        object.__setattr__(self, "_orig_mod", module)
        object.__setattr__(self, "_compiled", compiled)

    def _target_fn(self):
        return self._compiled.fn

    def __call__(self, *args, **kwargs):
        return self._compiled(*args, **kwargs)

    def __getattr__(self, k):
        if k in ("report", "stats", "wait", "reset"):
            return getattr(self._compiled, k)
        return getattr(self._orig_mod, k)

    def __setattr__(self, k, v):
        setattr(self._orig_mod, k, v)

    def __repr__(self):
        return f"Compiled({self._orig_mod!r})"
