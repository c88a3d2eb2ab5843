"""The disk cache trusts only what its user owns and nobody else can write: a directory or
file writable by others, or owned by another user, is refused with one warning and a run
without the cache; a module that fails its hash is never imported. The warm baseline first."""
import json
import os
import shutil
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import nbaccel as nb
from nbaccel import cache_fs
from nbaccel.compiler.cache import cache
from nbaccel.compiler.runtime import runtime
from nbaccel.compiler.cache.cache import NbaccelCacheWarning

from tests.cache_attack import (  # noqa: F401  (root and caught: fixtures)
    IS_ROOT, POSIX, ENV, assert_cache_valid, build, caught, kernel_source, new_session, root, vdir)


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
