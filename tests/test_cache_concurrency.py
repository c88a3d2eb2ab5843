"""The disk cache under races: processes and threads compiling, saving and loading the same
kernels at once, and locks left by dead or slow holders, with every file left whole."""
import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np

import nbaccel as nb
from nbaccel import cache_fs
from nbaccel.compiler.cache import cache
from nbaccel.compiler.runtime import runtime

from tests.cache_attack import (  # noqa: F401  (root and caught: fixtures)
    ENV, assert_cache_valid, build, kernel_source, root, vdir)


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
