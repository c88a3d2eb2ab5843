"""What ``%nbaccel status`` says about the Triton tier: available, interpreter only, or missing,
with the reason. A probe only: it imports neither Triton nor CuPy unless they are installed,
and never compiles anything."""
from __future__ import annotations

import importlib.metadata
import importlib.util

from ..runtime.triton_runtime import gpu_present, interpret_requested


def _version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def triton_status() -> tuple[str, str]:
    """(state, reason): state is 'available', 'interpreter only' or 'missing'."""
    if importlib.util.find_spec("triton") is None:
        return "missing", "Triton is not installed (pip install 'nbaccel[gpu]' on a machine with an NVIDIA GPU)"
    ok, why = gpu_present()
    version = f"triton {_version('triton')}"
    if ok:
        return "available", f"{version} on {why} via CuPy {_version('cupy') if _version('cupy') != '?' else ''}".strip()
    hint = "NBACCEL_TRITON_INTERPRET=1 is set: backend='triton' runs" if interpret_requested() else \
        "set NBACCEL_TRITON_INTERPRET=1 to run backend='triton'"
    return "interpreter only", f"{version}, but {why}; {hint} through Triton's CPU interpreter (slow; for tests)"
