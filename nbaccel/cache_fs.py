"""File-system primitives of the disk cache: the trust check, atomic writes, a lock file.

Every file the cache writes goes through :func:`atomic_write` (a private temporary file in
the same directory, then ``os.replace``), so a reader sees the old file, the new file or no
file, never half of one. :class:`FileLock` only keeps two processes from compiling the same
kernel twice; correctness never depends on it (a lock that times out is simply skipped).
"""
from __future__ import annotations

import errno
import os
import socket
import stat
import threading
import time
import uuid

_IS_POSIX = hasattr(os, "getuid")


class Untrusted(Exception):
    """A cache directory that must not be used; ``str(e)`` says why and how to fix it."""


def check_dir(path: str, create: bool) -> None:
    """Raise :class:`Untrusted` unless ``path`` is a directory the current user owns and only
    the current user can write to (the rule ssh and pip apply). ``create`` makes a missing
    directory with mode 0700 first (its parents with the default mode).

    On platforms without POSIX ownership (Windows) only the kind of file is checked (a real
    directory, not a file); access control there is the ACL of the user's profile, where the
    default cache directory lives.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if not create:
            raise
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
            st = os.stat(path)
        except FileExistsError:
            st = os.stat(path)
        except OSError as e:
            raise Untrusted(f"{path} cannot be created ({_os_reason(e)}); set NBACCEL_CACHE_DIR "
                            "to a directory you can write") from None
    except NotADirectoryError:
        raise Untrusted(f"a parent of {path} is a file, not a directory: remove it or set "
                        "NBACCEL_CACHE_DIR elsewhere") from None
    except OSError as e:
        raise Untrusted(f"{path} cannot be read ({_os_reason(e)}); set NBACCEL_CACHE_DIR elsewhere") from None
    if not stat.S_ISDIR(st.st_mode):
        raise Untrusted(f"{path} is a file, not a directory: remove it or set NBACCEL_CACHE_DIR elsewhere")
    if not _IS_POSIX:
        return
    uid = os.getuid()
    if st.st_uid != uid:
        raise Untrusted(f"{path} belongs to uid {st.st_uid}, not to you (uid {uid}): another user could "
                        "plant code in it. Use a directory of your own (unset NBACCEL_CACHE_DIR or point "
                        "it at one), or `chown` it")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        who = " and ".join(w for bit, w in ((stat.S_IWGRP, "its group"), (stat.S_IWOTH, "others"))
                           if st.st_mode & bit)
        raise Untrusted(f"{path} is writable by {who} (mode {stat.S_IMODE(st.st_mode):o}): another user could "
                        f"plant code in it. Fix it with `chmod go-w {path}` (or `chmod 700 {path}`)")


def _os_reason(e: OSError) -> str:
    name = errno.errorcode.get(e.errno or 0, "")
    return f"{name}: {e.strerror}" if name else str(e)


def describe(e: BaseException) -> str:
    """A one-line description of an OS error for a warning."""
    return _os_reason(e) if isinstance(e, OSError) else f"{type(e).__name__}: {e}"


def _write_all(fd: int, data: bytes) -> None:
    # the one place file content is written (tests inject ENOSPC here)
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _create(path: str) -> int:
    # the one place a cache file is created (tests inject EROFS / ENAMETOOLONG here)
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)


def atomic_write(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` through a private temporary file and a rename (mode 0600).
    Raises OSError (a full disk, a read-only directory...); nothing is left behind then."""
    tmp = f"{path}.tmp-{uuid.uuid4().hex[:12]}"
    fd = _create(tmp)
    try:
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_bytes(path: str) -> bytes | None:
    """The file's content, or None when it is missing or unreadable."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    if not _IS_POSIX:          # no cheap portable probe: rely on the age rule
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return True
    return True


class FileLock:
    """An advisory lock file (``O_CREAT | O_EXCL``) holding ``pid host time``.

    ``acquire`` waits up to ``timeout`` seconds and returns False when it could not get the
    lock (the caller then goes on without it). A lock is stale, and is broken, when its owner
    process on this host is gone or it is older than ``stale_after`` seconds. Threads of one
    process also exclude each other (a process-local lock per path).
    """

    _local: dict[str, threading.Lock] = {}
    _local_guard = threading.Lock()

    def __init__(self, path: str, timeout: float = 30.0, stale_after: float = 120.0, poll: float = 0.02):
        self.path = path
        self.timeout = timeout
        self.stale_after = stale_after
        self.poll = poll
        self.held = False
        with FileLock._local_guard:
            self._thread_lock = FileLock._local.setdefault(path, threading.Lock())

    def acquire(self) -> bool:
        deadline = time.monotonic() + self.timeout
        if not self._thread_lock.acquire(timeout=max(self.timeout, 0)):
            return False
        token = f"{os.getpid()} {socket.gethostname()} {time.time():.3f}\n".encode()
        while True:
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                self._break_if_stale()
            except OSError:          # a read-only or vanished directory: no lock, go on
                self._thread_lock.release()
                return False
            else:
                try:
                    os.write(fd, token)
                finally:
                    os.close(fd)
                self.held = True
                return True
            if time.monotonic() >= deadline:
                self._thread_lock.release()
                return False
            time.sleep(self.poll)

    def _break_if_stale(self):
        try:
            st = os.stat(self.path)
            with open(self.path, "rb") as f:
                fields = f.read(200).split()
        except OSError:
            return
        stale = time.time() - st.st_mtime > self.stale_after
        if not stale and len(fields) >= 2:
            try:
                pid, host = int(fields[0]), fields[1].decode(errors="replace")
            except ValueError:
                pid, host = -1, ""
            stale = host == socket.gethostname() and not _pid_alive(pid)
        elif not stale and time.time() - st.st_mtime > 5.0:
            stale = True             # an empty lock file: its writer died between open and write
        if stale:
            # move it aside first, so two breakers cannot both delete a fresh lock
            aside = f"{self.path}.stale-{uuid.uuid4().hex[:8]}"
            try:
                os.replace(self.path, aside)
                os.unlink(aside)
            except OSError:
                pass

    def release(self) -> None:
        if self.held:
            self.held = False
            remove(self.path)
            self._thread_lock.release()

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()
