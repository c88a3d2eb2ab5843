"""The compiler: capture → guards → decompose → (AOT autograd) → schedule → codegen → tiers.

See docs/compiler.md. Public entry points are re-exported by ``nbaccel``.

The entry points load on first use (PEP 562): the call path imports numba, which takes about
half a second, and ``import nbaccel`` must stay fast (docs/startup.md).
"""
# the settings dict (config.py). Bound here, before anything else: importing the submodule
# binds ``nbaccel.compiler.config`` to the module, and this rebinds it to the dict
from .config import config  # noqa: F401
from .capture.capture import GraphBreakError  # noqa: F401
from .report.report import CompileReport  # noqa: F401

_FROM_API = ("CompiledFunction", "compile", "explain", "mark_dynamic", "reset")
__all__ = ["GraphBreakError", "CompileReport", "config", *_FROM_API]


def __getattr__(name):
    if name in _FROM_API:
        from . import api  # lazy: the call path imports numba (~0.5 s); import nbaccel stays fast
        for n in _FROM_API:
            globals()[n] = getattr(api, n)
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_FROM_API))
