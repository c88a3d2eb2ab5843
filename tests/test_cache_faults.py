"""The disk cache's faults (full disk, read-only, deleted, damaged files, a file as the directory,
a path too long) each degrade to a slower run, with one warning, and never an exception."""
import errno
import os
import shutil
import warnings

import numpy as np
import pytest

import nbaccel as nb
from nbaccel import cache_fs
from nbaccel.compiler.cache import cache, numba_cache
from nbaccel.compiler.runtime import runtime

from tests.cache_attack import (  # noqa: F401  (root and caught: fixtures)
    IS_ROOT, POSIX, assert_cache_valid, build, caught, kernel_source, nbc_files, new_session, root, vdir)


# --------------------------------------------------------------------------------------- faults
def _enospc(*a, **k):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_full_disk_runs_uncached_with_one_warning(root, caught, monkeypatch):
    monkeypatch.setattr(cache_fs, "_write_all", _enospc)
    assert build(kernel_source(8), 8) == ("memory", 0)
    assert build(kernel_source(9), 9) == ("memory", 0)
    assert "ENOSPC" in cache.problem() and "Free space" in cache.problem()
    assert len(caught()) == 1
    assert [f for _, _, fs in os.walk(root) for f in fs] == [".last-used"]   # no temporary file left


def test_full_disk_while_numba_saves(root, caught, monkeypatch):
    real = cache_fs._write_all

    def fill_on_machine_code(fd, data):
        if data.startswith(numba_cache.MAGIC):
            _enospc()
        real(fd, data)

    monkeypatch.setattr(cache_fs, "_write_all", fill_on_machine_code)
    assert build(kernel_source(10), 10) == ("new", 0)   # the module was written, the code was not
    assert nbc_files(root) == [] and "ENOSPC" in cache.problem()
    assert len(caught()) == 1
    assert_cache_valid(root)


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES])
def test_read_only_cache_serves_what_it_has(root, caught, monkeypatch, code):
    old = kernel_source(11)
    build(old, 11)
    new_session()

    def refuse(path):
        raise OSError(code, os.strerror(code), path)

    monkeypatch.setattr(cache_fs, "_create", refuse)
    assert build(old, 11) == ("disk", 1)                 # what is there still loads
    assert build(kernel_source(12), 12) == ("memory", 0)  # what is new compiles in memory
    assert errno.errorcode[code] in cache.problem()
    assert len(caught()) == 1


@pytest.mark.skipif(IS_ROOT or not POSIX, reason="root ignores file modes")
def test_really_read_only_directory(root, caught):
    build(kernel_source(13), 13)
    new_session()
    for d in [vdir(root)] + [os.path.join(vdir(root), n) for n in ("kernels", "numba", "locks")]:
        os.chmod(d, 0o500)
    try:
        assert build(kernel_source(13), 13) == ("disk", 1)
        assert build(kernel_source(14), 14)[0] == "memory"
        assert len(caught()) == 1
    finally:
        for d in [vdir(root)] + [os.path.join(vdir(root), n) for n in ("kernels", "numba", "locks")]:
            os.chmod(d, 0o700)


def test_cache_deleted_while_running(root, caught):
    build(kernel_source(15), 15)
    shutil.rmtree(root)
    assert build(kernel_source(16), 16) == ("new", 0)      # recreated
    new_session()
    shutil.rmtree(root)
    assert build(kernel_source(15), 15) == ("new", 0)      # gone: compiled again
    assert caught() == []
    assert_cache_valid(root)


@pytest.mark.parametrize("damage", ["truncated", "zeroed", "other-version", "garbage", "other-key"])
def test_damaged_numba_file_is_recompiled(root, caught, damage):
    src = kernel_source(17)
    build(src, 17)
    new_session()
    (path,) = nbc_files(root)
    data = open(path, "rb").read()
    if damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "zeroed":
        data = b"\0" * len(data)
    elif damage == "other-version":
        data = data.replace(numba_cache.VERSIONS, b"0.59.0 0.42.0\n", 1)
    elif damage == "garbage":
        data = os.urandom(len(data))
    else:   # a whole, valid file of another kernel under this name
        other = kernel_source(18)
        build(other, 18)
        data = open([p for p in nbc_files(root) if p != path][0], "rb").read()
        new_session()
    with open(path, "wb") as fh:
        fh.write(data)
    assert build(src, 17) == ("disk", 0)                   # recompiled, correct, no exception
    assert len(caught()) == 1 and "recompiled" in str(caught()[0].message)
    new_session()
    assert build(src, 17) == ("disk", 1)                   # and rewritten whole
    assert_cache_valid(root)


def test_cache_dir_that_is_a_file(root, caught, tmp_path, monkeypatch):
    f = tmp_path / "afile"
    f.write_text("not a directory")
    monkeypatch.setitem(nb.config, "cache_dir", str(f))
    assert build(kernel_source(19), 19) == ("memory", 0)
    assert "is a file" in cache.problem()
    monkeypatch.setitem(nb.config, "cache_dir", str(f / "below"))
    assert build(kernel_source(20), 20) == ("memory", 0)
    assert "is a file" in cache.problem()
    assert len(caught()) == 1


def test_path_too_long(root, caught, tmp_path, monkeypatch):
    monkeypatch.setitem(nb.config, "cache_dir", str(tmp_path / ("x" * 300)))
    assert build(kernel_source(21), 21) == ("memory", 0)
    assert "ENAMETOOLONG" in cache.problem()
    assert len(caught()) == 1


def test_file_name_too_long_when_writing(root, caught, monkeypatch):
    def too_long(path):
        raise OSError(errno.ENAMETOOLONG, "File name too long", path)

    monkeypatch.setattr(cache_fs, "_create", too_long)
    assert build(kernel_source(22), 22) == ("memory", 0)
    assert "ENAMETOOLONG" in cache.problem() and len(caught()) == 1


def test_warnings_as_errors_still_never_fail(root, monkeypatch):
    monkeypatch.setattr(cache_fs, "_write_all", _enospc)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert build(kernel_source(23), 23) == ("memory", 0)


def test_faulty_cache_in_a_compiled_cell(root, tmp_path, monkeypatch, caught):
    """The user's view: the cell runs, its values are right, one warning, no traceback."""
    pytest.importorskip("IPython")
    from IPython.testing.globalipapp import start_ipython
    f = tmp_path / "afile"
    f.write_text("")
    monkeypatch.setitem(nb.config, "cache_dir", str(f))
    monkeypatch.setattr(runtime, "_NUMBA_KERNELS", {})
    from IPython import get_ipython
    ip = start_ipython() or get_ipython()
    ip.run_line_magic("load_ext", "nbaccel")
    ip.user_ns.update(np=np, x=np.arange(12, dtype=np.float32).reshape(3, 4))
    for _ in range(2):
        res = ip.run_cell("%%compile --backend numba --report none\ny = x * 2.0 - 1.0\n")
        assert res.success, res.error_in_exec
        np.testing.assert_allclose(ip.user_ns["y"], ip.user_ns["x"] * 2.0 - 1.0, atol=1e-6)
    assert len(caught()) == 1
