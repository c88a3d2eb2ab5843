"""The disk cache: generated kernel modules and their machine code, content-addressed.

Layout under the root (``$NBACCEL_CACHE_DIR``, default the user cache directory)::

    <root>/v<nbaccel>-numba<>-llvmlite<>-np<>-py<>-src<source hash>-c2/   one directory per versions
        kernels/nbk_<sha256 of source>.py    generated module (verified by hash on load)
        numba/nbk_<hash>.kernel.<key>.nbc    machine code, see numba_cache.py
        locks/nbk_<hash>.lock                 "compiling now" (advisory, see cache_fs.FileLock)
        .last-used                            touched once per session (old versions expire)

Rules (docs/compiler.md, "Disk cache"):

* **Trust.** Before anything is read, the root and the version directories must be owned by
  the current user and not writable by group or others (``cache_fs.check_dir``). Otherwise
  the disk cache is off for the session: kernels compile in memory, one warning says why
  and how to fix it, and ``problem()`` (shown by reports and ``%nbaccel status``) keeps it.
* **Integrity.** A module whose content does not hash to its name is never imported: it is
  rewritten. What is imported is the source nbaccel generated, compiled from memory.
* **Faults degrade.** Any OS error while writing (a full disk, a read-only or deleted
  directory, a path too long) turns writing off for the session with one warning; what is
  already on disk stays usable. A damaged file is deleted and recompiled. Nothing raises.
* **Housekeeping.** A size limit (default 1 GB: ``nbaccel.compiler.config["cache_size_limit"]``,
  from ``$NBACCEL_CACHE_SIZE_LIMIT``) with least-recently-used eviction, and version
  directories unused for a grace period (7 days: ``config["cache_grace_days"]``, from
  ``$NBACCEL_CACHE_GRACE_DAYS``) removed.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import linecache
import os
import shutil
import sys
import threading
import types
import warnings

import numpy as np

from ... import cache_fs
from . import housekeeping as hk
from ..config import config
from ...version import __version__

_MEMORY_DIR = "<nbaccel memory>"
_loaded: dict[str, object] = {}         # path -> module (once per process)
_sources: dict[str, str] = {}           # path -> the verified source to import for it
_load_lock = threading.RLock()
_state_lock = threading.Lock()
_sessions: dict[str, "_Session"] = {}   # root -> what this process learned about it
_warned: set[str] = set()


class NbaccelCacheWarning(UserWarning):
    """The disk cache could not be used as usual; kernels still run (slower to start)."""


class _Session:
    def __init__(self, root):
        self.root = root
        self.untrusted: str | None = None     # why nothing may be read
        self.no_write: str | None = None      # why nothing more is written
        self.faults: list[str] = []
        self.written = 0                      # bytes written since the last size check
        self.started = False


def _installed_version(name: str) -> str:
    """``name``'s version, without importing it where its installation says: the version in
    the name of its ``.dist-info`` folder beside the package (imported only when there is none).
    A process's first compiled call asks for numba's version while the warm-up thread imports
    numba, and an ``import numba`` here waited for that import: 0.45 s of a warm start's first
    call, for a string."""
    # (a module another thread is still importing, numba on the warm-up thread, has no
    # __version__ yet: the dist-info's answer then, never "none" for a race)
    version = getattr(sys.modules.get(name), "__version__", None)
    if version is not None:
        return version
    spec = importlib.util.find_spec(name)
    if spec is not None and spec.origin:
        site = os.path.dirname(os.path.dirname(spec.origin))
        for entry in os.listdir(site):
            if entry.startswith(name + "-") and entry.endswith(".dist-info"):
                return entry[len(name) + 1:-len(".dist-info")]
    return importlib.import_module(name).__version__


@functools.lru_cache(maxsize=None)
def _versions():
    try:
        nb = f"{_installed_version('numba')}-llvmlite{_installed_version('llvmlite')}"
    except Exception:   # pragma: no cover
        nb = "none"
    py = f"{sys.version_info[0]}{sys.version_info[1]}"
    return f"v{__version__}-numba{nb}-np{np.__version__}-py{py}-src{_source_digest()}-c2"


def _source_digest() -> str:
    """A hash of the compiler's and the kernels' source. The cache holds what they generated and
    what numba built from it (generated kernels inline the fastmath helpers and call the
    kernels' launchers, which numba's own cache does not track), so a changed renderer or
    kernel, an upgrade from git without a version bump included, starts a new version. About a
    millisecond: 105 files, read once per process."""
    h = hashlib.sha256()
    spec = importlib.util.find_spec("nbaccel_kernels")
    compiler = os.path.dirname(os.path.dirname(__file__))     # every room, not only this one
    roots = [compiler] + list(spec.submodule_search_locations if spec else [])
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith(".py"):
                    with open(os.path.join(dirpath, name), "rb") as f:
                        h.update(name.encode() + b"\0" + f.read())
    return h.hexdigest()[:10]


def autotune_dir() -> str | None:
    """Where the GPU autotuner keeps its choices: ``autotune/`` in this version's directory
    (None when the disk cache is unusable or untrusted: the choices then stay in memory)."""
    try:
        return os.path.join(cache_dir(), "autotune")
    except Exception:      # noqa: BLE001 - an unusable cache is not the tuner's error
        return None


def version_name() -> str:
    """The name of this installation's version directory."""
    return _versions()


@functools.lru_cache(maxsize=None)
def _default_root():
    import platformdirs
    return platformdirs.user_cache_dir("nbaccel")


@functools.lru_cache(maxsize=16)
def _absolute(d):
    return os.path.abspath(os.path.expanduser(d))


def root_dir() -> str:
    """The cache root: ``config["cache_dir"]`` ($NBACCEL_CACHE_DIR), else the user cache directory."""
    return _absolute(config.get("cache_dir") or _default_root())


def _session() -> _Session:
    root = root_dir()
    with _state_lock:
        s = _sessions.get(root)
        if s is None:
            s = _sessions[root] = _Session(root)
    return s


def _subdirs(vdir):
    return [os.path.join(vdir, n) for n in ("kernels", "numba", "locks")]


def _check(s: _Session) -> str | None:
    """The version directory when it is trusted (creating what is missing), else None."""
    if s.untrusted:
        return None
    vdir = os.path.join(s.root, _versions())
    try:
        for d in [s.root, vdir] + _subdirs(vdir):
            cache_fs.check_dir(d, create=not s.no_write)
    except cache_fs.Untrusted as e:
        s.untrusted = f"the disk cache is not used: {e}. Kernels compile in memory this session"
        _warn("untrusted", s.untrusted)
        return None
    except FileNotFoundError:     # deleted while writing is off: nothing to read either
        return None
    if not s.started:
        s.started = True
        _housekeeping(s, vdir)
    return vdir


def _housekeeping(s, vdir):
    try:
        hk.mark_used(vdir)
        hk.remove_stale_temporaries(vdir)
        hk.remove_old_versions(s.root, _versions(), grace_seconds())
        hk.evict(s.root, _versions(), size_limit())
    except Exception as e:       # housekeeping never blocks a kernel
        note_fault("housekeeping", f"cache housekeeping failed ({cache_fs.describe(e)})")


def cache_dir() -> str:
    """The version directory, created (mode 0700) if missing. Raises OSError when unusable."""
    s = _session()
    vdir = _check(s)
    if vdir is None:
        raise OSError(problem() or f"the disk cache at {s.root} is not usable")
    return vdir


def numba_dir(for_write: bool) -> str | None:
    """Where numba's machine code for kernels lives, or None when it must not be read
    (untrusted) or written (writing is off)."""
    s = _session()
    vdir = _check(s)
    if vdir is None or (for_write and s.no_write):
        return None
    return os.path.join(vdir, "numba")


def problem() -> str | None:
    """Why the disk cache is not (fully) used this session, with how to fix it; None if fine."""
    s = _session()
    return s.untrusted or s.no_write


def faults() -> list[str]:
    """Every cache fault seen this session (each was warned about once)."""
    return list(_session().faults)


def _warn(kind, message):
    s = _session()
    if message not in s.faults:
        s.faults.append(message)
    if kind in _warned:
        return
    _warned.add(kind)
    try:
        warnings.warn(f"nbaccel: {message}", NbaccelCacheWarning, stacklevel=3)
    except Exception:     # warnings turned into errors must still not fail a cell
        pass


def note_fault(kind: str, message: str):
    """A damaged entry was dropped (it is rebuilt): warn once per kind and session."""
    _warn(kind, message)


def note_write_failure(e: BaseException):
    """Writing failed: turn writing off for the session (what is on disk stays usable)."""
    s = _session()
    if s.no_write is None:
        s.no_write = (f"the disk cache at {s.root} cannot be written ({cache_fs.describe(e)}); new kernels "
                      "compile in memory this session. Free space, fix the directory's permissions or set "
                      "NBACCEL_CACHE_DIR elsewhere")
    _warn("write", s.no_write)


def note_written(nbytes: int):
    """Count bytes written; past a twentieth of the size limit, check the limit."""
    s = _session()
    s.written += nbytes
    limit = size_limit()
    if s.written > limit // 20:
        s.written = 0
        try:
            hk.evict(s.root, _versions(), limit)
        except Exception as e:
            note_fault("housekeeping", f"cache eviction failed ({cache_fs.describe(e)})")


def size_limit() -> int:
    """The cache size limit in bytes (``config["cache_size_limit"]``, from
    $NBACCEL_CACHE_SIZE_LIMIT, else 1 GB)."""
    val = config.get("cache_size_limit")
    if val is None:
        return hk.DEFAULT_LIMIT
    try:
        return hk.parse_size(val)
    except ValueError:
        note_fault("config", f"cache size limit {val!r} is not a size (like 1G or 500M); using 1G")
        return hk.DEFAULT_LIMIT


def grace_seconds() -> float:
    try:
        return float(config.get("cache_grace_days", 7)) * 86400
    except (TypeError, ValueError):
        return 7 * 86400.0


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:32]


def _memory(source, h):
    path = os.path.join(_MEMORY_DIR, f"nbk_{h}.py")
    _sources[path] = source
    return path, "memory"


def module_file(source: str) -> tuple[str, str]:
    """Where the module holding ``source`` is and how it was found: 'disk' (verified),
    'new' or 'rebuilt' (written now) or 'memory' (the disk cache is off: never written)."""
    h = source_hash(source)
    s = _session()
    vdir = _check(s)
    if vdir is None:
        return _memory(source, h)
    path = os.path.join(vdir, "kernels", f"nbk_{h}.py")
    data = cache_fs.read_bytes(path)
    how = "new"
    if data is not None:
        if hashlib.sha256(data).hexdigest()[:32] == h:
            _sources[path] = source
            hk.touch(path)
            return path, "disk"
        # damaged or replaced: never imported; its machine code goes too, then it is rebuilt
        note_fault("module", f"a cached kernel module did not match its hash ({os.path.basename(path)}); "
                             "it was rebuilt")
        for f in _numba_files(vdir, h):
            cache_fs.remove(f)
        how = "rebuilt"
    if s.no_write:
        return _memory(source, h)
    try:
        cache_fs.atomic_write(path, source.encode())
    except OSError as e:
        if isinstance(e, FileNotFoundError):     # the directory was deleted: recreate it once
            try:
                for d in [s.root, vdir] + _subdirs(vdir):
                    cache_fs.check_dir(d, create=True)
                cache_fs.atomic_write(path, source.encode())
            except (OSError, cache_fs.Untrusted) as e2:
                note_write_failure(e2)
                return _memory(source, h)
        else:
            note_write_failure(e)
            return _memory(source, h)
    except Exception as e:                       # pragma: no cover - belt and braces
        note_write_failure(e)
        return _memory(source, h)
    note_written(len(source))
    _sources[path] = source
    return path, how


def kernel_files(directory: str, module_name: str) -> list[str]:
    """The numba cache files of one generated module (``<module>.<function>.<key>.nbc``)."""
    try:
        return [os.path.join(directory, f) for f in os.listdir(directory) if f.startswith(module_name + ".")]
    except OSError:
        return []


def _numba_files(vdir, h):
    return kernel_files(os.path.join(vdir, "numba"), f"nbk_{h}")


def is_warm(source: str) -> bool:
    """Is this kernel's machine code already on disk (its module and a numba file)?"""
    h = source_hash(source)
    s = _session()
    if s.untrusted:
        return False
    vdir = os.path.join(s.root, _versions())
    if not os.path.exists(os.path.join(vdir, "kernels", f"nbk_{h}.py")):
        return False
    try:
        return any(f.startswith(f"nbk_{h}.") and f.endswith(".nbc") for f in os.listdir(os.path.join(vdir, "numba")))
    except OSError:
        return False


def load_module(path: str):
    """Import a generated module (once per process). What runs is the source nbaccel
    generated, held in memory, never a file that failed its hash. Its numba dispatchers get
    the safe machine-code cache (numba_cache.py), which reads and counts through this module
    (handed to it as its store: it imports nothing of this one)."""
    with _load_lock:
        mod = _loaded.get(path)
        if mod is not None:
            return mod
        name = os.path.splitext(os.path.basename(path))[0]   # nbk_<hash>: unique by content
        h = name[len("nbk_"):]
        text = _sources.get(path)
        if text is None:                 # a path found some other way: verify it first
            data = cache_fs.read_bytes(path)
            if data is None or hashlib.sha256(data).hexdigest()[:32] != h:
                raise ImportError(f"nbaccel: {path} does not match its content hash; not imported")
            text = data.decode()
        in_memory = path.startswith(_MEMORY_DIR)
        from . import numba_cache  # it imports numba: on the first kernel's load, not at %load_ext
        numba_cache.expect(path, h)
        try:
            mod = types.ModuleType(name)
            mod.__file__ = path
            if in_memory:   # tracebacks and numba's error messages can still show the source
                linecache.cache[path] = (len(text), None, text.splitlines(True), path)
            code = compile(text, path, "exec")
            sys.modules[name] = mod          # numba's cache pickles name the module
            exec(code, mod.__dict__)         # noqa: S102 - our own generated, verified code
            lock = None if in_memory else os.path.join(os.path.dirname(os.path.dirname(path)), "locks",
                                                       f"{name}.lock")
            numba_cache.guard_module(mod, path, h, lock, store=sys.modules[__name__])
        finally:
            numba_cache.forget(path)
        _loaded[path] = mod
        return mod


def size_bytes() -> int:
    """Bytes used under the root (all versions)."""
    return hk.dir_bytes(root_dir())


def info() -> dict:
    """What `%nbaccel cache` shows: location, size, entries, versions, limit and problems."""
    root = root_dir()
    versions = hk.versions(root, _versions())
    return {"location": root, "current_version": _versions(), "bytes": sum(v["bytes"] for v in versions),
            "entries": sum(v["entries"] for v in versions if v["current"]), "versions": versions,
            "size_limit": size_limit(), "problem": problem(), "faults": faults()}


def clear(version: str | None = None) -> int:
    """Remove every cached kernel (all versions), or one version directory by name
    ('current' for this installation's). Returns the bytes removed."""
    root = root_dir()
    if version == "current":
        version = _versions()
    if version is not None and (os.sep in version or version in ("", ".", "..") or not version.startswith("v")):
        raise ValueError(f"not a cache version: {version!r}")
    target = root if version is None else os.path.join(root, version)
    if not os.path.isdir(target):
        return 0
    cache_fs.check_dir(root, create=False)       # never delete in a directory we do not own
    before = hk.dir_bytes(target)
    shutil.rmtree(target, ignore_errors=True)
    with _load_lock:
        _loaded.clear()
    s = _session()
    s.started = False
    return before - hk.dir_bytes(target) if os.path.exists(target) else before


def _reset_session_for_tests():
    """Forget what this process learned about cache directories (tests only)."""
    with _state_lock:
        _sessions.clear()
    _warned.clear()
    with _load_lock:
        _loaded.clear()
