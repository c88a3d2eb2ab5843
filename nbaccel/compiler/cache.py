"""The disk cache: generated kernel modules, content-addressed.

Layout: ``$NBACCEL_CACHE_DIR`` (default: the user cache directory) / ``v<versions>`` /
``kernels/nbk_<sha256 of source>.py``. The version directory names the versions of nbaccel,
numba and NumPy, so entries written by another version are never read. A module is written
once, atomically (temporary file + rename); on load its content is hashed again and a
mismatch (a truncated or edited file) is rewritten, never trusted. numba keeps its compiled
machine code beside the module (its own ``cache=True``), keyed on the file path and mtime,
which stay stable because the file is never rewritten while valid. Nothing here is pickled.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile

import numpy as np

_loaded: dict[str, object] = {}


@functools.lru_cache(maxsize=None)
def _versions():
    from .. import __version__
    try:
        import numba
        nb = numba.__version__
    except Exception:   # pragma: no cover
        nb = "none"
    # generated kernels inline the fastmath helpers, and numba's cache would not notice a change
    with open(os.path.join(os.path.dirname(__file__), "codegen", "fastmath.py"), "rb") as f:
        helpers = hashlib.sha256(f.read()).hexdigest()[:8]
    return f"v{__version__}-numba{nb}-np{np.__version__}-py{sys.version_info[0]}{sys.version_info[1]}-fm{helpers}"


def root_dir() -> str:
    d = os.environ.get("NBACCEL_CACHE_DIR")
    if not d:
        import platformdirs
        d = platformdirs.user_cache_dir("nbaccel")
    return d


def cache_dir() -> str:
    d = os.path.join(root_dir(), _versions())
    os.makedirs(root_dir(), mode=0o700, exist_ok=True)
    os.makedirs(d, mode=0o700, exist_ok=True)
    os.makedirs(os.path.join(d, "kernels"), mode=0o700, exist_ok=True)
    return d


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:32]


def _atomic_write(path: str, text: str):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def module_file(source: str) -> tuple[str, str]:
    """Path of the module holding ``source`` and how it was found: 'disk', 'new' or 'rebuilt'."""
    h = source_hash(source)
    path = os.path.join(cache_dir(), "kernels", f"nbk_{h}.py")
    if os.path.exists(path):
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            text = None
        if text is not None and source_hash(text) == h:
            return path, "disk"
        # corrupt: drop the module and numba's cache for it, then rebuild
        _remove_numba_cache(path)
        _atomic_write(path, source)
        return path, "rebuilt"
    _atomic_write(path, source)
    return path, "new"


def is_warm(source: str) -> bool:
    """Is this kernel's machine code already on disk (its module and numba's index)?"""
    h = source_hash(source)
    d = os.path.join(cache_dir(), "kernels")
    if not os.path.exists(os.path.join(d, f"nbk_{h}.py")):
        return False
    pyc = os.path.join(d, "__pycache__")
    return os.path.isdir(pyc) and any(f.startswith(f"nbk_{h}") and f.endswith(".nbi") for f in os.listdir(pyc))


def _remove_numba_cache(path):
    pyc = os.path.join(os.path.dirname(path), "__pycache__")
    stem = os.path.splitext(os.path.basename(path))[0]
    if os.path.isdir(pyc):
        for f in os.listdir(pyc):
            if f.startswith(stem):
                try:
                    os.unlink(os.path.join(pyc, f))
                except OSError:
                    pass


def load_module(path: str):
    """Import a generated module (once per process)."""
    mod = _loaded.get(path)
    if mod is None:
        name = os.path.splitext(os.path.basename(path))[0]   # nbk_<hash>: unique by content
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod          # numba's cache locator looks the module up by name
        spec.loader.exec_module(mod)
        _loaded[path] = mod
    return mod


def size_bytes() -> int:
    total = 0
    for dirpath, _, files in os.walk(root_dir()):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(dirpath, f))
            except OSError:
                pass
    return total


def clear():
    """Remove every cached kernel (all versions)."""
    d = root_dir()
    if os.path.isdir(d):
        shutil.rmtree(d, ignore_errors=True)
    _loaded.clear()
