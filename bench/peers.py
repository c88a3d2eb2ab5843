"""PyTorch as an optional peer: imported lazily, skipped (and reported) when missing."""
from __future__ import annotations

import time

_state: dict = {}


def torch_or_none():
    """The torch module, or None when it is not installed (or disabled with ``disable()``)."""
    if "torch" not in _state:
        t0 = time.perf_counter()
        try:
            import torch
        except ImportError:
            torch = None
        _state["torch"] = torch
        _state["import_seconds"] = time.perf_counter() - t0
    return _state["torch"]


def disable():
    """Behave as if PyTorch were not installed (``--no-torch``)."""
    _state["torch"] = None
    _state["import_seconds"] = None


def import_seconds():
    return _state.get("import_seconds")
