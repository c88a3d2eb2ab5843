"""The compiler: capture → guards → decompose → (AOT autograd) → schedule → codegen → tiers.

See docs/compiler.md. Public entry points are re-exported by ``nbaccel``.
"""
from .api import CompiledFunction, compile, config, explain, mark_dynamic, reset  # noqa: F401
from .capture import GraphBreakError  # noqa: F401
from .report import CompileReport  # noqa: F401
