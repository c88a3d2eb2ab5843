"""What the disk cache's fault tests share (tests/test_cache_trust.py, _concurrency.py,
_faults.py, _housekeeping.py): a test kernel to write, load and check, a fresh cache directory
per test with the background compiles of earlier tests drained, the cache's warnings caught,
and a check that every file left in the cache is whole."""
import hashlib
import os
import textwrap
import warnings

import numpy as np
import pytest

import nbaccel as nb
from nbaccel.compiler.cache import cache, numba_cache
from nbaccel.compiler.runtime import runtime
from nbaccel.compiler.cache.cache import NbaccelCacheWarning

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
POSIX = hasattr(os, "getuid")
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in [os.getcwd(), os.environ.get("PYTHONPATH", "")] if p),
           NUMBA_NUM_THREADS="1")


def kernel_source(salt):
    return textwrap.dedent(f"""\
        # a test kernel ({salt})
        from numba import njit


        @njit(cache=True, nogil=True)
        def kernel(a, o):
            for i in range(a.shape[0]):
                o[i] = a[i] * 2 + {salt}
        """)


def build(source, salt, dtype=np.float64):
    """Write/load/compile one kernel and check its values; (how, disk hits)."""
    path, how = cache.module_file(source)
    fn = cache.load_module(path).kernel
    a = np.arange(6, dtype=dtype)
    o = np.empty_like(a)
    fn(a, o)
    np.testing.assert_array_equal(o, a * 2 + salt)
    return how, sum(fn.stats.cache_hits.values())


def new_session():
    """What a restarted kernel sees: nothing learned, nothing loaded."""
    cache._reset_session_for_tests()


@pytest.fixture
def root(tmp_path, monkeypatch):
    r = tmp_path / "cache"
    drain_background_compiles()
    monkeypatch.setitem(nb.config, "cache_dir", str(r))
    monkeypatch.setitem(nb.config, "cache_size_limit", None)
    monkeypatch.setitem(nb.config, "cache_lock_timeout", 30.0)
    new_session()
    yield r
    drain_background_compiles()
    new_session()


def drain_background_compiles():
    """Background numba compiles (of earlier tests) write wherever the environment points."""
    runtime._COMPILER.submit(lambda: None).result(120)


@pytest.fixture
def caught():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        yield lambda: [x for x in w if issubclass(x.category, NbaccelCacheWarning)]


def vdir(root):
    return os.path.join(str(root), cache.version_name())


def nbc_files(root):
    d = os.path.join(vdir(root), "numba")
    return [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".nbc")] if os.path.isdir(d) else []


def assert_cache_valid(root):
    """Every file left is whole: modules hash to their names, numba files pass their digest,
    and no temporary or lock file remains."""
    n = 0
    for dirpath, _, files in os.walk(str(root)):
        for f in files:
            p = os.path.join(dirpath, f)
            assert ".tmp-" not in f and not f.endswith(".lock"), p
            data = open(p, "rb").read()
            if f.endswith(".py"):
                assert hashlib.sha256(data).hexdigest()[:32] == f[4:-3], p
                n += 1
            elif f.endswith(".nbc"):
                head = len(numba_cache.MAGIC) + len(numba_cache.VERSIONS)
                assert data.startswith(numba_cache.MAGIC + numba_cache.VERSIONS), p
                assert hashlib.sha256(data[head + 32:]).digest() == data[head:head + 32], p
                n += 1
    return n
