"""Disk cache housekeeping: sizes, entries, least-recently-used eviction, old versions.

An *entry* is one generated kernel: ``kernels/nbk_<h>.py`` plus its numba files
``numba/nbk_<h>.*.nbc``. Loading an entry touches its module file, so the module's mtime is
its last use (atime is unreliable: most file systems mount with relatime or noatime). The
module file's mtime is free to change: numba's files are keyed on its content hash.
"""
from __future__ import annotations

import os
import re
import shutil
import time

DEFAULT_LIMIT = 1 << 30
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "M": 1 << 20, "MB": 1 << 20,
          "G": 1 << 30, "GB": 1 << 30, "T": 1 << 40, "TB": 1 << 40}
_EVICT_TO = 0.8      # evict down to this fraction of the limit, so eviction is not every write


def parse_size(val) -> int:
    """Bytes from an int or a string like '1G', '500M', '2048' (ValueError otherwise)."""
    if isinstance(val, bool):
        raise ValueError(val)
    if isinstance(val, (int, float)):
        if val < 0:
            raise ValueError(val)
        return int(val)
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?B?)\s*", str(val).upper())
    if not m:
        raise ValueError(val)
    return int(float(m.group(1)) * _UNITS[m.group(2)])


def dir_bytes(path: str) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def touch(path: str) -> None:
    """Mark an entry used (read-only caches simply keep their old order)."""
    try:
        os.utime(path)
    except OSError:
        pass


def mark_used(vdir: str) -> None:
    stamp = os.path.join(vdir, ".last-used")
    try:
        with open(stamp, "a"):
            pass
        os.utime(stamp)
    except OSError:
        pass


def _last_used(vdir: str) -> float:
    for p in (os.path.join(vdir, ".last-used"), vdir):
        try:
            return os.stat(p).st_mtime
        except OSError:
            continue
    return 0.0


def _version_dirs(root: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(root) if n.startswith("v") and os.path.isdir(os.path.join(root, n)))
    except OSError:
        return []


def entries(vdir: str) -> list[dict]:
    """The entries of one version directory: hash, bytes, last use (oldest first)."""
    out: dict[str, dict] = {}
    kdir, ndir = os.path.join(vdir, "kernels"), os.path.join(vdir, "numba")
    for d, is_module in ((kdir, True), (ndir, False)):
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for n in names:
            if not n.startswith("nbk_") or ".tmp-" in n:
                continue
            h = n[4:].split(".", 1)[0]
            p = os.path.join(d, n)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            e = out.setdefault(h, {"hash": h, "bytes": 0, "last_used": 0.0, "files": [], "module": False})
            e["bytes"] += st.st_size
            e["files"].append(p)
            if is_module and n.endswith(".py"):
                e["module"] = True
                e["last_used"] = st.st_mtime
            elif not e["module"]:
                e["last_used"] = max(e["last_used"], st.st_mtime)
    return sorted(out.values(), key=lambda e: e["last_used"])


def versions(root: str, current: str) -> list[dict]:
    """One row per version directory: name, bytes, entries, last use, is it this install's."""
    rows = []
    for n in _version_dirs(root):
        vdir = os.path.join(root, n)
        rows.append({"name": n, "bytes": dir_bytes(vdir), "entries": sum(e["module"] for e in entries(vdir)),
                     "last_used": _last_used(vdir), "current": n == current})
    return rows


def remove_stale_temporaries(vdir: str, age: float = 3600.0) -> int:
    """Remove temporary files a killed writer left behind (a live writer renames its own
    within milliseconds; an hour is far beyond that). Returns how many went."""
    gone = 0
    now = time.time()
    for sub in ("kernels", "numba", "locks"):
        d = os.path.join(vdir, sub)
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for n in names:
            if ".tmp-" not in n and ".stale-" not in n:
                continue
            p = os.path.join(d, n)
            try:
                if now - os.lstat(p).st_mtime > age:
                    os.unlink(p)
                    gone += 1
            except OSError:
                pass
    return gone


def remove_old_versions(root: str, current: str, grace_seconds: float) -> list[str]:
    """Remove version directories (other than ``current``) unused for ``grace_seconds``."""
    gone = []
    now = time.time()
    for n in _version_dirs(root):
        if n == current:
            continue
        vdir = os.path.join(root, n)
        if now - _last_used(vdir) > grace_seconds:
            shutil.rmtree(vdir, ignore_errors=True)
            gone.append(n)
    return gone


def evict(root: str, current: str, limit: int) -> int:
    """Keep the root under ``limit`` bytes: whole other-version directories go first (least
    recently used first), then entries of the current version, least recently used first.
    Returns the bytes removed. Removing an entry another process is loading is safe: it
    read the files whole, or finds them gone and recompiles."""
    total = dir_bytes(root)
    if total <= limit:
        return 0
    target = int(limit * _EVICT_TO)
    removed = 0
    others = [n for n in _version_dirs(root) if n != current]
    for n in sorted(others, key=lambda n: _last_used(os.path.join(root, n))):
        if total - removed <= target:
            return removed
        vdir = os.path.join(root, n)
        size = dir_bytes(vdir)
        shutil.rmtree(vdir, ignore_errors=True)
        removed += size - (dir_bytes(vdir) if os.path.exists(vdir) else 0)
    for e in entries(os.path.join(root, current)):
        if total - removed <= target:
            break
        for p in e["files"]:
            try:
                size = os.lstat(p).st_size
                os.unlink(p)
                removed += size
            except OSError:
                pass
    return removed
