"""``nbaccel.export``: one full graph, saved without pickle, loaded without the original code.

``nb.export(fn_or_module, *example_args, dynamic_shapes=None)`` returns an
:class:`ExportedProgram`; ``ep.save(path)`` writes a directory and ``nb.load(path)`` reads it.
This package is itself callable (``nb.export(...)`` is ``nb.export.export(...)``), and holds
``Dim``, ``ExportError`` and ``ExportedProgram``. See docs/export.md.
"""
import sys as _sys
import types as _types

from .dims import Dim, ExportError
from .export import export
from .load import FORMAT_VERSION, load, save
from .program import ExportedProgram
from .. import serialization as _serialization

# nb.save(ep, path) writes the program's directory and nb.load(path) reads one back: the saver
# sits in the engine below this package and knows the type only through this entry
_serialization.register_directory(ExportedProgram, load)

__all__ = ["export", "Dim", "ExportError", "ExportedProgram", "load", "save", "FORMAT_VERSION"]


class _CallableModule(_types.ModuleType):
    def __call__(self, *args, **kwargs):
        return export(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallableModule
