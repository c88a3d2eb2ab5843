"""numba's machine-code cache for nbaccel's generated kernels, made safe to share.

numba's own cache keeps, per function, an index pickle that every process reads, updates
and rewrites, plus numbered data files the index points at. Two processes saving different
signatures at once can lose an index entry or, worse, leave an index entry pointing at a
data file that the other process overwrote with another signature's code. For nbaccel's
kernels (and only those) this module replaces that with one self-contained file per
(kernel, signature, CPU)::

    <version dir>/numba/<module>.<function>.<hash of numba's key>.nbc
        b"NBACCEL-NUMBA-1\\n" + b"<numba version> <llvmlite version>\\n" + sha256(body) + body
        body = pickle(((module content hash, numba's key), numba's reduced CompileResult))

A file is written once through a temporary file and a rename, so there is no
read-modify-write to race on. On load its versions, digest and key are checked before
anything is unpickled; a file that fails a check is deleted and the kernel recompiled.
Nothing is read unless :mod:`.cache` says the directory is trusted, and every error in
loading or saving turns into a recompile or an uncached kernel, never an exception.

How it plugs in: :class:`_KernelLocator` goes first in numba's locator list and claims only
source files nbaccel announced (``expect``), so decorating a kernel never touches the disk;
after the module ran, :func:`guard_module` gives each dispatcher a :class:`KernelDiskCache`
(or numba's ``NullCache`` when the disk cache is off) and wraps its ``compile`` in a lock
file, so N processes on a cold cache compile a kernel once and the others load it.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import time

import llvmlite
import numba
from numba.core import caching, serialize
from numba.core.dispatcher import Dispatcher

from ... import cache_fs
from ..config import config

MAGIC = b"NBACCEL-NUMBA-1\n"
VERSIONS = f"{numba.__version__} {llvmlite.__version__}\n".encode()
_DIGEST = 32

_CacheImpl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl")
_CacheLocator = getattr(caching, "_CacheLocator")

_expected: dict[str, str] = {}        # source file name -> source stamp (the content hash)


class Corrupt(Exception):
    """A cache file that failed a check (it is deleted and the kernel recompiled)."""


class _KernelLocator(_CacheLocator):
    """Claims the kernels nbaccel is loading (their files are content-addressed, so the
    content hash is the source stamp) and nothing else."""

    def __init__(self, py_file, stamp):
        self._py_file = py_file
        self._stamp = stamp

    def ensure_cache_path(self):     # KernelDiskCache makes its directory when it writes
        pass

    def get_cache_path(self):
        return os.path.dirname(self._py_file)

    def get_source_stamp(self):
        return self._stamp

    def get_disambiguator(self):
        return ""

    @classmethod
    def from_function(cls, py_func, py_file):
        stamp = _expected.get(py_file)
        return None if stamp is None else cls(py_file, stamp)


def install():
    """Put the kernel locator first in numba's list (idempotent; other functions fall through),
    and first in ``$NUMBA_CACHE_LOCATOR_CLASSES`` when a user set that override."""
    if _KernelLocator not in _CacheImpl._locator_classes:
        _CacheImpl._locator_classes.insert(0, _KernelLocator)
    override = getattr(numba.config, "CACHE_LOCATOR_CLASSES", None)
    ours = f"{__name__}._KernelLocator"
    if override and ours not in override:
        numba.config.CACHE_LOCATOR_CLASSES = f"{ours},{override}"


def expect(filename: str, stamp: str):
    """Announce a generated module about to run from ``filename``."""
    install()
    _expected[filename] = stamp


def encode(key, payload) -> bytes:
    body = serialize.dumps((key, payload))
    return MAGIC + VERSIONS + hashlib.sha256(body).digest() + body


def decode(data: bytes, key):
    """The payload stored for ``key``; raises Corrupt for anything else."""
    if not data.startswith(MAGIC):
        raise Corrupt("not an nbaccel numba cache file")
    rest = data[len(MAGIC):]
    if not rest.startswith(VERSIONS):
        raise Corrupt("written by another numba/llvmlite version")
    rest = rest[len(VERSIONS):]
    digest, body = rest[:_DIGEST], rest[_DIGEST:]
    if len(digest) < _DIGEST or hashlib.sha256(body).digest() != digest:
        raise Corrupt("truncated or damaged (digest mismatch)")
    stored_key, payload = pickle.loads(body)   # noqa: S301 - our own verified file in a trusted dir
    if stored_key != key:
        raise Corrupt("holds another signature")
    return payload


class KernelDiskCache(caching.FunctionCache):
    """numba's per-function cache, one verified file per key, never raising."""

    def __init__(self, py_func, base: str, stamp: str, store):
        self._store = store                        # the disk cache (see guard_module)
        self._name = repr(py_func)
        self._py_func = py_func
        self._impl = self._impl_class(py_func)     # reduce / rebuild / check_cachable
        # numba's key hashes the bytecode, not the constants: the module's content hash
        # is what tells two kernels apart
        self._stamp = stamp
        self._cache_path = ""
        self._base = base
        self.enable()

    @property
    def cache_path(self):
        return self._store.numba_dir(for_write=False) or ""

    def flush(self):
        pass

    def _file(self, directory, key):
        return os.path.join(directory, f"{self._base}.{hashlib.sha256(repr(key).encode()).hexdigest()[:20]}.nbc")

    def load_overload(self, sig, target_context):
        if not self._enabled:
            return None
        directory = self._store.numba_dir(for_write=False)
        if directory is None:
            return None
        path = None
        try:
            target_context.refresh()
            key = (self._stamp, self._index_key(sig, target_context.codegen()))
            path = self._file(directory, key)
            data = cache_fs.read_bytes(path)
            if data is None:
                return None
            return self._impl.rebuild(target_context, decode(data, key))
        except Exception as e:          # a damaged or foreign file: recompile, never fail
            if path is not None:
                cache_fs.remove(path)
            self._store.note_fault("numba-file", f"a numba cache file was unusable ({cache_fs.describe(e)}); "
                                           "it was deleted and the kernel recompiled")
            return None

    save_seconds = 0.0      # the last save's wall time (the report's 'cache save', jit_split.py)

    def save_overload(self, sig, data):
        t0 = time.perf_counter()
        try:
            self._save(sig, data)
        finally:
            self.save_seconds = time.perf_counter() - t0

    def _save(self, sig, data):
        if not self._enabled:
            return
        directory = self._store.numba_dir(for_write=True)
        if directory is None:
            return
        try:
            if not self._impl.check_cachable(data):
                return
            key = (self._stamp, self._index_key(sig, data.codegen))
            blob = encode(key, self._impl.reduce(data))
            cache_fs.atomic_write(self._file(directory, key), blob)
            self._store.note_written(len(blob))
        except Exception as e:          # a full or read-only disk: the kernel stays uncached
            self._store.note_write_failure(e)


def _locked_compile(disp, compile_fn, lock_path):
    def compile(sig):
        lock = cache_fs.FileLock(lock_path, timeout=_lock_timeout())
        lock.acquire()                  # a timeout just means we compile too (writes are atomic)
        try:
            return compile_fn(sig)
        finally:
            lock.release()
    compile.__doc__ = compile_fn.__doc__
    return compile


def _lock_timeout():
    try:
        return float(config.get("cache_lock_timeout", 30))
    except (TypeError, ValueError):
        return 30.0


def forget(filename: str):
    """The announced module did not load (or has its cache now): drop the announcement."""
    _expected.pop(filename, None)


def guard_module(mod, filename: str, stamp: str, lock_path: str | None, store):
    """Give every numba dispatcher of a generated module the safe disk cache (``lock_path``
    given) or no disk cache at all (None), and forget the announcement. ``store`` is the disk
    cache (cache.py): where the machine code lives (``numba_dir``) and its counters
    (``note_written``, ``note_write_failure``, ``note_fault``); handed in, not imported, since
    it imports this module."""
    try:
        for name, obj in list(vars(mod).items()):
            if isinstance(obj, Dispatcher) and getattr(obj.py_func, "__module__", None) == mod.__name__:
                if lock_path is None:
                    obj._cache = caching.NullCache()
                else:
                    try:
                        obj._cache = KernelDiskCache(obj.py_func, f"{mod.__name__}.{name}", stamp, store)
                    except Exception:   # numba internals moved: run uncached rather than fail
                        obj._cache = caching.NullCache()
                        continue
                    obj.compile = _locked_compile(obj, obj.compile, lock_path)
    finally:
        _expected.pop(filename, None)
