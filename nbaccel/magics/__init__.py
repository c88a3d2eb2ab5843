"""The IPython extension: ``%load_ext nbaccel`` registers ``%%compile`` and ``%nbaccel``.

See docs/magics.md. ``cellfunc`` turns a cell into a function; ``boundary`` realises traced
values that leave for other code; ``cellrun`` writes results back and runs cells plainly when
that is better or nbaccel fails; ``extension`` holds the magics.
"""
from __future__ import annotations

_EXT_ATTR = "_nbaccel_magics"


def load_ipython_extension(ip):
    """Register ``%%compile`` and ``%nbaccel`` (loading twice is harmless)."""
    from .extension import NbaccelMagics  # lazy: IPython loads with %load_ext, not import nbaccel
    if getattr(ip, _EXT_ATTR, None) is not None:
        return
    magics = NbaccelMagics(ip)
    ip.register_magics(magics)
    setattr(ip, _EXT_ATTR, magics)
    from ..compiler.cache import warmup as numba_warmup  # lazy: the compiler's call path stays out of import nbaccel
    numba_warmup.start()      # numba's first-use set-up while the user types (compiler/cache/warmup.py)


def unload_ipython_extension(ip):
    """Remove the magics (``%unload_ext nbaccel``)."""
    magics = getattr(ip, _EXT_ATTR, None)
    if magics is None:
        return
    magics.clock.unregister(ip)
    for kind, names in (("cell", ("compile",)), ("line", ("nbaccel",))):
        table = ip.magics_manager.magics[kind]
        for n in names:
            if getattr(table.get(n), "__self__", None) is magics:
                del table[n]
    ip.magics_manager.registry.pop(type(magics).__name__, None)
    setattr(ip, _EXT_ATTR, None)


def get_extension(ip):
    """The loaded NbaccelMagics instance of shell ``ip`` (None if not loaded)."""
    return getattr(ip, _EXT_ATTR, None)
