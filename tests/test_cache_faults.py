"""The disk cache under attack: untrusted directories, races between threads and processes,
and every fault (full disk, read-only, deleted, damaged files, a file as the directory, a
path too long) degrading to a slower run, with one warning, and never an exception."""
import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest

import nbaccel as nb
from nbaccel import cache_fs
from nbaccel.compiler.cache import cache, housekeeping as hk, numba_cache
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


# ------------------------------------------------------------------------------------ baseline
def test_warm_entry_loads_machine_code_from_disk(root):
    src = kernel_source(1)
    assert build(src, 1) == ("new", 0)
    new_session()
    assert build(src, 1) == ("disk", 1)
    assert assert_cache_valid(root) == 2


# ---------------------------------------------------------------------------------------- trust
def _populate_then(root, mutate):
    src = kernel_source(2)
    build(src, 2)
    new_session()
    mutate()
    return src


@pytest.mark.skipif(not POSIX, reason="POSIX ownership and modes")
@pytest.mark.parametrize("which,mode", [("root", 0o770), ("root", 0o707), ("version", 0o777), ("numba", 0o722)])
def test_writable_by_others_is_refused(root, caught, which, mode):
    target = {"root": str(root), "version": vdir(root), "numba": os.path.join(vdir(root), "numba")}
    src = _populate_then(root, lambda: os.chmod(target[which], mode))
    how, hits = build(src, 2)
    assert (how, hits) == ("memory", 0)            # nothing loaded from it: compiled in memory
    msg = cache.problem()
    assert "not used" in msg and "chmod go-w" in msg and target[which] in msg
    build(kernel_source(3), 3)
    assert len(caught()) == 1                       # one warning per session
    os.chmod(target[which], 0o700)


@pytest.mark.skipif(not POSIX, reason="POSIX ownership")
def test_directory_of_another_user_is_refused(root, caught, monkeypatch):
    src = _populate_then(root, lambda: None)
    real = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: real + 4242)
    assert build(src, 2) == ("memory", 0)
    assert "belongs to uid" in cache.problem() and "not to you" in cache.problem()
    assert len(caught()) == 1


@pytest.mark.skipif(not IS_ROOT, reason="chown needs root")
def test_directory_really_owned_by_another_user_is_refused(root, caught):
    src = _populate_then(root, lambda: os.chown(str(root), 4242, -1))
    assert build(src, 2) == ("memory", 0)
    assert "uid 4242" in cache.problem()


def test_non_posix_checks_only_the_kind_of_file(root, monkeypatch, tmp_path):
    monkeypatch.setattr(cache_fs, "_IS_POSIX", False)
    d = tmp_path / "open"
    d.mkdir(mode=0o777)
    os.chmod(d, 0o777)
    cache_fs.check_dir(str(d), create=False)        # modes mean nothing there: accepted
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(cache_fs.Untrusted, match="is a file"):
        cache_fs.check_dir(str(f), create=False)


def test_untrusted_cache_in_report_and_status(root, caught, monkeypatch):
    root.mkdir(mode=0o700)
    os.chmod(root, 0o777)
    monkeypatch.setattr(runtime, "_NUMBA_KERNELS", {})
    f = nb.compile(lambda x: (x * 3.0 + 1.0) * 0.5, backend="numba")
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)
    np.testing.assert_allclose(f(x), (x * 3.0 + 1.0) * 0.5, rtol=1e-6, atol=1e-6)
    assert f.report.tier == "numba"                 # compiled, in memory
    assert "chmod" in f.report.cache_problem
    assert "chmod" in f.report.to_dict()["cache_problem"]
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython
    ip = start_ipython() or get_ipython()
    ip.run_line_magic("load_ext", "nbaccel")
    from nbaccel.magics import get_extension
    info = get_extension(ip).status_info()
    assert "chmod" in info["cache_problem"] and "chmod" in info["cache_dir"]
    assert len(caught()) == 1
    os.chmod(root, 0o700)


def test_module_that_fails_its_hash_is_never_imported(root, caught, tmp_path):
    src = kernel_source(4)
    path, _ = cache.module_file(src)
    new_session()
    with open(path, "w") as fh:          # same name, other content
        fh.write("raise SystemExit('garbage was imported')\n")
    assert build(src, 4) == ("rebuilt", 0)
    assert open(path).read() == src
    assert len(caught()) == 1
    # a path nbaccel did not write this session is verified before import
    bogus = tmp_path / f"nbk_{'0' * 32}.py"
    bogus.write_text("raise SystemExit('imported')\n")
    with pytest.raises(ImportError, match="content hash"):
        cache.load_module(str(bogus))


# ---------------------------------------------------------------------------------- concurrency
RACE = textwrap.dedent("""
    import json, os, sys, time
    import numpy as np
    import nbaccel as nb
    import numba
    ready, go = sys.argv[1], sys.argv[2]
    open(ready, "w").close()
    while not os.path.exists(go):
        time.sleep(0.002)
    x = np.linspace(-2, 2, 32 * 16, dtype=np.float32).reshape(32, 16)
    w = np.linspace(0, 1, 16, dtype=np.float32)
    f = nb.compile(lambda x, w: (x * w + 1.0) * 0.5, backend="numba")
    out = f(x, w)
    print(json.dumps({"ok": bool(np.allclose(out, (x * w + 1.0) * 0.5, rtol=1e-6, atol=1e-6)),
                      "cache": f.report.cache, "tier": f.report.tier, "problem": f.report.cache_problem}))
""")


def _start_together(tmp_path, script, argsets, env):
    """Start one process per argument list, wait until all have imported, then let them go."""
    go = tmp_path / "go"
    procs, readies = [], []
    for i, args in enumerate(argsets):
        ready = tmp_path / f"ready{i}"
        readies.append(ready)
        procs.append(subprocess.Popen([sys.executable, "-c", script, str(ready), str(go), *args], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    deadline = time.time() + 240
    while not all(r.exists() for r in readies):
        assert time.time() < deadline and all(p.poll() is None for p in procs), \
            [p.communicate() for p in procs if p.poll() is not None]
        time.sleep(0.01)
    go.touch()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def test_processes_compiling_the_same_graph_on_a_cold_cache(tmp_path):
    env = dict(ENV, NBACCEL_CACHE_DIR=str(tmp_path / "cache"), NBACCEL_CACHE_LOCK_TIMEOUT="120")
    results = _start_together(tmp_path, RACE, [[]] * 4, env)
    assert all(r["ok"] and r["tier"] == "numba" and r["problem"] is None for r in results), results
    # the lock file let one process compile while the others waited and loaded its code
    assert sorted(r["cache"] for r in results) == ["disk", "disk", "disk", "miss"], results
    assert assert_cache_valid(tmp_path / "cache") >= 2
    (tmp_path / "go").unlink()
    again = _start_together(tmp_path, RACE, [[]], env)
    assert again[0]["cache"] == "disk" and again[0]["ok"]


SIGNATURES = textwrap.dedent("""
    import json, os, sys, time
    import numpy as np
    from nbaccel.compiler.cache import cache
    ready, go, src, dtype = sys.argv[1:5]
    source = open(src).read()
    open(ready, "w").close()
    while not os.path.exists(go):
        time.sleep(0.002)
    path, how = cache.module_file(source)
    fn = cache.load_module(path).kernel
    ok = True
    for dt in dtype.split(","):
        a = np.arange(6, dtype=dt)
        o = np.empty_like(a)
        fn(a, o)
        ok = ok and bool((o == a * 2 + 7).all())
    print(json.dumps({"ok": ok, "hits": sum(fn.stats.cache_hits.values())}))
""")


def test_processes_saving_different_signatures_of_one_kernel_without_the_lock(tmp_path):
    """numba's own index is read-modify-written by every process; nbaccel's one-file-per-key
    layout keeps every signature even when the lock is skipped (timeout 0)."""
    src = tmp_path / "k.py"
    src.write_text(kernel_source(7))
    env = dict(ENV, NBACCEL_CACHE_DIR=str(tmp_path / "cache"), NBACCEL_CACHE_LOCK_TIMEOUT="0")
    dtypes = ["float64", "float32", "int64", "int32"]
    results = _start_together(tmp_path, SIGNATURES, [[str(src), d] for d in dtypes], env)
    assert all(r["ok"] for r in results), results
    assert assert_cache_valid(tmp_path / "cache") == 1 + len(dtypes)
    (tmp_path / "go").unlink()
    after = _start_together(tmp_path, SIGNATURES, [[str(src), ",".join(dtypes)]], env)
    assert after == [{"ok": True, "hits": len(dtypes)}]      # every signature loaded from disk


def test_threads_compiling_the_same_graph(root, monkeypatch):
    monkeypatch.setattr(runtime, "_NUMBA_KERNELS", {})
    x = np.linspace(-2, 2, 16 * 8, dtype=np.float32).reshape(16, 8)
    barrier = threading.Barrier(4)
    results, errors = [None] * 4, []

    def work(i):
        try:
            f = nb.compile(lambda x: (x - 0.25) * 4.0, backend="numba")
            barrier.wait()
            results[i] = (f(x), f.report.tier)
        except Exception as e:   # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    for out, tier in results:
        np.testing.assert_allclose(out, (x - 0.25) * 4.0, rtol=1e-6, atol=1e-6)
        assert tier == "numba"
    assert_cache_valid(root)


def test_threads_loading_one_module(root):
    src = kernel_source(5)
    barrier = threading.Barrier(6)
    mods, errors = [], []

    def work():
        try:
            barrier.wait()
            path, _ = cache.module_file(src)
            mods.append(cache.load_module(path))
        except Exception as e:   # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and len(mods) == 6 and all(m is mods[0] for m in mods)
    build(src, 5)
    assert assert_cache_valid(root) == 2


def test_stale_lock_of_a_dead_process_is_broken(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock = tmp_path / "k.lock"
    lock.write_text(f"{dead.pid} {__import__('socket').gethostname()} 0\n")
    t0 = time.monotonic()
    lk = cache_fs.FileLock(str(lock), timeout=30)
    assert lk.acquire() and time.monotonic() - t0 < 5
    assert lock.read_text().split()[0] == str(os.getpid())
    lk.release()
    assert not lock.exists()


def test_old_lock_is_broken_and_a_held_lock_times_out(tmp_path):
    lock = tmp_path / "k.lock"
    lock.write_text(f"{os.getpid()} {__import__('socket').gethostname()} 0\n")   # alive: ours
    lk = cache_fs.FileLock(str(lock), timeout=0.2)
    t0 = time.monotonic()
    assert not lk.acquire()                          # held by a live process: give up in time
    assert 0.15 < time.monotonic() - t0 < 5
    old = time.time() - 3600
    os.utime(lock, (old, old))
    lk = cache_fs.FileLock(str(lock), timeout=5, stale_after=600)
    assert lk.acquire()                              # an hour old: stale
    lk.release()


def test_kernel_compiles_when_its_lock_is_held(root, monkeypatch):
    monkeypatch.setitem(nb.config, "cache_lock_timeout", 0.2)
    src = kernel_source(6)
    name = f"nbk_{cache.source_hash(src)}"
    cache.module_file(src)
    lock = os.path.join(vdir(root), "locks", f"{name}.lock")
    with open(lock, "w") as fh:
        fh.write(f"{os.getpid()} {__import__('socket').gethostname()} 0\n")
    assert build(src, 6) == ("disk", 0)              # compiled anyway, correct
    os.unlink(lock)


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


# --------------------------------------------------------------------------------- housekeeping
def test_info_and_clear_one_version_or_all(root):
    build(kernel_source(24), 24)
    build(kernel_source(25), 25)
    other = os.path.join(str(root), "v0.0.0-old")
    os.makedirs(os.path.join(other, "kernels"))
    with open(os.path.join(other, "kernels", f"nbk_{'1' * 32}.py"), "w") as fh:
        fh.write("x = 1\n")
    info = cache.info()
    assert info["location"] == str(root) and info["entries"] == 2
    assert info["bytes"] == cache.size_bytes() > 0
    assert {v["name"]: v["entries"] for v in info["versions"]} == {cache.version_name(): 2, "v0.0.0-old": 1}
    assert cache.clear("v0.0.0-old") > 0 and not os.path.exists(other)
    assert os.path.isdir(vdir(root))
    with pytest.raises(ValueError):
        cache.clear("../etc")
    assert cache.clear("current") > 0 and not os.path.exists(vdir(root))
    build(kernel_source(24), 24)
    assert cache.clear() > 0 and cache.size_bytes() == 0


def test_size_limit_evicts_least_recently_used(root, monkeypatch):
    sources = [kernel_source(30 + i) for i in range(4)]
    for i, s in enumerate(sources):
        build(s, 30 + i)
    ages = {}
    for i, s in enumerate(sources):     # kernel 0 oldest ... 3 newest; then kernel 0 used again
        t = time.time() - 1000 + 100 * i
        p = os.path.join(vdir(root), "kernels", f"nbk_{cache.source_hash(s)}.py")
        os.utime(p, (t, t))
        ages[i] = p
    new_session()
    build(sources[0], 30)               # a disk hit touches the entry
    entry = max(e["bytes"] for e in hk.entries(vdir(root)))
    limit = int(entry * 3.2)
    removed = hk.evict(str(root), cache.version_name(), limit)
    assert removed > 0 and cache.size_bytes() <= limit
    left = {i for i, p in ages.items() if os.path.exists(p)}
    assert 0 in left and 1 not in left, left          # the least recently used went first
    assert not [f for f in os.listdir(os.path.join(vdir(root), "numba")) if f.startswith(os.path.basename(ages[1])[:-3])]


def test_size_limit_from_config_and_env(root, monkeypatch, caught):
    assert cache.size_limit() == 1 << 30
    from nbaccel.compiler.config import from_environment
    limit = from_environment({"NBACCEL_CACHE_SIZE_LIMIT": "500M"})["cache_size_limit"]
    monkeypatch.setitem(nb.compiler.config, "cache_size_limit", limit)
    assert cache.size_limit() == 500 << 20
    monkeypatch.setitem(nb.compiler.config, "cache_size_limit", 2048)
    assert cache.size_limit() == 2048
    monkeypatch.setitem(nb.compiler.config, "cache_size_limit", "lots")
    assert cache.size_limit() == 1 << 30 and len(caught()) == 1


def test_writing_past_the_limit_evicts(root, monkeypatch):
    monkeypatch.setitem(nb.compiler.config, "cache_size_limit", 6000)
    for i in range(6):
        build(kernel_source(40 + i), 40 + i)
    assert cache.size_bytes() <= 6000 + 4000       # within one entry of the limit
    assert len(hk.entries(vdir(root))) < 6


def test_old_versions_are_removed_after_the_grace_period(root):
    root.mkdir(mode=0o700)
    for name, days in (("v0.0.1-old", 8), ("v0.0.2-recent", 1)):
        d = root / name
        (d / "kernels").mkdir(parents=True)
        (d / ".last-used").touch()
        t = time.time() - days * 86400
        os.utime(d / ".last-used", (t, t))
    build(kernel_source(50), 50)                  # the session's first use cleans up
    assert not (root / "v0.0.1-old").exists() and (root / "v0.0.2-recent").exists()


def test_interrupted_write_leaves_no_file(root, monkeypatch):
    real = cache_fs._write_all

    def half_then_interrupt(fd, data):
        real(fd, data[: len(data) // 2])
        raise KeyboardInterrupt

    monkeypatch.setattr(cache_fs, "_write_all", half_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        cache_fs.atomic_write(str(root.parent / "f.py"), b"x = 1\n" * 100)
    assert sorted(os.listdir(root.parent)) == []


def test_temporaries_of_a_killed_writer_are_removed(root):
    build(kernel_source(51), 51)
    kdir = os.path.join(vdir(root), "kernels")
    old, fresh = os.path.join(kdir, "nbk_x.py.tmp-aaaa"), os.path.join(kdir, "nbk_y.py.tmp-bbbb")
    for p in (old, fresh):
        with open(p, "w") as fh:
            fh.write("half a mod")
    t = time.time() - 7200
    os.utime(old, (t, t))
    new_session()
    build(kernel_source(51), 51)              # the session's first use cleans up
    assert not os.path.exists(old) and os.path.exists(fresh)   # a live writer's file stays
    os.unlink(fresh)


def test_parse_size():
    assert hk.parse_size("1G") == 1 << 30 and hk.parse_size("1.5k") == 1536 and hk.parse_size(10) == 10
    for bad in ("-1", "x", "1Q", True, -5):
        with pytest.raises(ValueError):
            hk.parse_size(bad)


def test_user_locator_override_keeps_kernels_working(root, monkeypatch):
    import numba
    monkeypatch.setattr(numba.config, "CACHE_LOCATOR_CLASSES", "InTreeCacheLocator")
    src = kernel_source(52)
    assert build(src, 52) == ("new", 0)
    new_session()
    assert build(src, 52) == ("disk", 1)
    assert numba.config.CACHE_LOCATOR_CLASSES.startswith("nbaccel.compiler.cache.numba_cache._KernelLocator,")


# ------------------------------------------------------- trust, as an unprivileged user (CI root)
# Root ignores file modes and owns everything it creates, so under root the mode and owner
# rules above are only half exercised. These cases run them for real as a throwaway uid in a
# subprocess (setpriv), so they execute where CI runs as root.
THROWAWAY_UID = 54321
_UNPRIVILEGED_CASES = textwrap.dedent('''
    import json, os, sys, textwrap, warnings
    import numpy as np
    from nbaccel.compiler.cache import cache
    from nbaccel.compiler.cache.cache import NbaccelCacheWarning
    from nbaccel.compiler.config import config
    base = sys.argv[1]

    def source(salt):
        return textwrap.dedent(f"""\\
            from numba import njit


            @njit(cache=True, nogil=True)
            def kernel(a, o):
                for i in range(a.shape[0]):
                    o[i] = a[i] * 2 + {salt}
            """)

    def build(salt):
        path, how = cache.module_file(source(salt))
        fn = cache.load_module(path).kernel
        a = np.arange(6.0)
        o = np.empty_like(a)
        fn(a, o)
        assert (o == a * 2 + salt).all()
        return [how, sum(fn.stats.cache_hits.values())]

    def case(name, prepare, salts, root=None):
        root = root or os.path.join(base, name)
        config["cache_dir"] = root
        cache._reset_session_for_tests()
        if salts[0] is not None:
            build(salts[0])                 # populated by this user, then changed
            cache._reset_session_for_tests()
        prepare(root)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            got = [build(s) for s in salts[1:]]
        warned = [str(x.message) for x in w if issubclass(x.category, NbaccelCacheWarning)]
        return {"builds": got, "problem": cache.problem(), "warnings": len(warned)}

    def subdirs(root):
        v = os.path.join(root, cache.version_name())
        return [v] + [os.path.join(v, n) for n in ("kernels", "numba", "locks")]

    def read_only(root):
        for d in subdirs(root):
            os.chmod(d, 0o500)

    out = {"uid": os.getuid(),
           "read_only": case("ro", read_only, [1, 1, 2]),
           "group_writable": case("gw", lambda r: os.chmod(r, 0o770), [3, 3, 4]),
           "others_writable": case("ow", lambda r: os.chmod(subdirs(r)[2], 0o702), [5, 5]),
           "other_owner": case("root-owned", lambda r: None, [None, 6],
                               root=os.path.join(base, "root-owned"))}
    for d in subdirs(os.path.join(base, "ro")):
        os.chmod(d, 0o700)
    print(json.dumps(out))
''')


@pytest.mark.skipif(not IS_ROOT or shutil.which("setpriv") is None,
                    reason="runs only as root (which then drops to a throwaway uid); unprivileged runs "
                           "exercise these rules in the tests above")
def test_trust_rules_as_an_unprivileged_user(tmp_path):
    import tempfile
    base = tempfile.mkdtemp(prefix="nbaccel-trust-")      # under /tmp: reachable by the uid
    try:
        os.chmod(base, 0o755)
        os.chown(base, THROWAWAY_UID, THROWAWAY_UID)
        os.mkdir(os.path.join(base, "root-owned"), 0o755)     # another user's (root's) directory
        home = os.path.join(base, "home")
        os.mkdir(home, 0o700)
        os.chown(home, THROWAWAY_UID, THROWAWAY_UID)
        env = dict(ENV, HOME=home, NUMBA_CACHE_DIR=os.path.join(home, "numba"),
                   PYTHONDONTWRITEBYTECODE="1")
        p = subprocess.run(["setpriv", f"--reuid={THROWAWAY_UID}", f"--regid={THROWAWAY_UID}",
                            "--clear-groups", sys.executable, "-c", _UNPRIVILEGED_CASES, base],
                           capture_output=True, text=True, env=env, cwd=os.getcwd(), timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        got = json.loads(p.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert got["uid"] == THROWAWAY_UID
    ro = got["read_only"]       # a really read-only cache serves what it has, compiles the rest
    assert ro["builds"][0] == ["disk", 1] and ro["builds"][1][0] == "memory" and ro["warnings"] == 1
    for name in ("group_writable", "others_writable"):
        r = got[name]           # nothing is loaded from a directory others can write
        assert all(b == ["memory", 0] for b in r["builds"]) and r["warnings"] == 1, (name, r)
        assert "not used" in r["problem"] and "chmod go-w" in r["problem"]
    assert "writable by its group" in got["group_writable"]["problem"]
    assert "writable by others" in got["others_writable"]["problem"]
    owner = got["other_owner"]
    assert owner["builds"] == [["memory", 0]] and owner["warnings"] == 1
    assert "belongs to uid 0" in owner["problem"] and f"uid {THROWAWAY_UID}" in owner["problem"]
