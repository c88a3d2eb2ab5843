"""The disk cache's housekeeping: info and clear, the size limit evicting the least recently
used, old versions removed after a grace period, and no temporaries left by killed writers."""
import os
import time

import pytest

import nbaccel as nb
from nbaccel import cache_fs
from nbaccel.compiler.cache import cache, housekeeping as hk

from tests.cache_attack import (  # noqa: F401  (root and caught: fixtures)
    build, caught, kernel_source, new_session, root, vdir)


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
