"""``ParameterHolder``: what the compiler knows of an ``nn.Module``, as a type below both.

``nn`` sits below the compiler, and ``nn.Module.compile()`` calls the compiler; the compiler in
turn must recognise a module a compiled function reaches (its parameters and buffers are the
state a replayed training step reads and writes, its flags part of the guard). It does so by
``isinstance(x, ParameterHolder)`` and the members listed here, never by importing ``nn``, so
the arrows stay one way: nn -> parameter_holder <- compiler (docs/architecture.md).

``nn.Module`` is the implementation; this class only says what the compiler reads:

* ``modules()``: the holder and every holder inside it, depth first;
* ``parameters()``, ``named_parameters()``, ``buffers()``: its tensors, recursively;
* ``_parameters``, ``_buffers`` (each holder's own ``name -> Tensor or None``, PyTorch's
  layout) and ``training``: a training step's guard key reads these per holder on every call,
  so they are plain attributes, not methods;
* ``forward``: what ``nb.compile(holder)`` compiles.

    >>> import nbaccel as nb
    >>> from nbaccel.parameter_holder import ParameterHolder
    >>> isinstance(nb.nn.Linear(2, 2), ParameterHolder)
    True
"""
from __future__ import annotations


class ParameterHolder:
    """The base class of ``nn.Module``: an object whose parameters and buffers the compiler follows."""

    __slots__ = ()

    training: bool
    _parameters: dict
    _buffers: dict

    def modules(self):
        """The holder itself and every holder inside it, depth first."""
        raise NotImplementedError

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        """(qualified name, parameter) pairs; a shared parameter appears once."""
        raise NotImplementedError

    def parameters(self, recurse: bool = True):
        raise NotImplementedError

    def buffers(self, recurse: bool = True):
        raise NotImplementedError

    def forward(self, *args, **kwargs):
        raise NotImplementedError
