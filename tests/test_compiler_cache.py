"""The disk cache: warm starts in a new process, corrupt entries rebuilt, safe permissions."""
import os
import stat
import subprocess
import sys
import textwrap

import pytest

import numpy as np

import nbaccel as nb
from nbaccel.compiler.cache import cache

SCRIPT = textwrap.dedent("""
    import json, sys, numpy as np, nbaccel as nb
    def f(x, w):
        y = np.tanh(x * w + 1.0) * 0.5
        return y - y.max(axis=-1, keepdims=True)
    x = np.linspace(-2, 2, 64 * 32, dtype=np.float32).reshape(64, 32)
    w = np.linspace(0, 1, 32, dtype=np.float32)
    cf = nb.compile(f, backend="numba")
    out = cf(x, w)
    assert np.allclose(out, f(x, w), rtol=1e-5, atol=1e-6)
    r = cf.report
    print(json.dumps({"cache": r.cache, "tier": r.tier, "jit": r.compile_breakdown["jit"],
                      "kernels": [k["backend"] for k in r.kernels]}))
""")


def _run(cache_dir):
    env = dict(os.environ, NBACCEL_CACHE_DIR=str(cache_dir))
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    import json
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_second_process_reuses_disk_cache(tmp_path):
    first = _run(tmp_path)
    assert first["cache"] == "miss" and first["tier"] == "numba"
    second = _run(tmp_path)
    assert second["cache"] == "disk", second      # numba loaded machine code, compiled nothing
    assert second["tier"] == "numba"


def test_cache_dir_is_private(tmp_path, monkeypatch):
    monkeypatch.setitem(nb.config, "cache_dir", str(tmp_path / "c"))
    d = cache.cache_dir()
    for p in (tmp_path / "c", d):
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o700


def test_truncated_module_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setitem(nb.config, "cache_dir", str(tmp_path))
    src = "def kernel():\n    return 42\n"
    path, how = cache.module_file(src)
    assert how == "new"
    assert cache.module_file(src) == (path, "disk")
    with open(path, "w") as f:
        f.write(src[:10])          # truncated by a crash or a full disk
    path2, how = cache.module_file(src)
    assert how == "rebuilt" and path2 == path
    assert open(path).read() == src


def test_truncated_kernel_in_use_is_rebuilt_and_correct(tmp_path, monkeypatch):
    monkeypatch.setitem(nb.config, "cache_dir", str(tmp_path))
    first = _run(tmp_path)
    kdir = os.path.join(cache.cache_dir(), "kernels")
    for f in os.listdir(kdir):
        if f.endswith(".py"):
            p = os.path.join(kdir, f)
            with open(p, "r+") as fh:
                fh.truncate(100)
    again = _run(tmp_path)     # asserts correctness inside; the module is rewritten
    assert again["cache"] == "miss" and again["tier"] == "numba", (first, again)


def test_other_versions_are_not_read(tmp_path, monkeypatch):
    monkeypatch.setitem(nb.config, "cache_dir", str(tmp_path))
    d = cache.cache_dir()
    assert os.path.basename(d).startswith("v" + nb.__version__)
    assert "numba" in os.path.basename(d) and np.__version__ in os.path.basename(d)


def test_clear(tmp_path, monkeypatch):
    monkeypatch.setitem(nb.config, "cache_dir", str(tmp_path / "c"))
    cache.module_file("x = 1\n")
    assert cache.size_bytes() > 0
    cache.clear()
    assert cache.size_bytes() == 0


AUTO_WARM = textwrap.dedent("""
    import json, sys, numpy as np, nbaccel as nb
    from nbaccel.compiler.cache import warmup as numba_warmup
    def f(x, w):
        y = np.tanh(x * w + 1.0) * 0.5
        return y - y.max(axis=-1, keepdims=True)
    x = np.linspace(-2, 2, 64 * 32, dtype=np.float32).reshape(64, 32)
    w = np.linspace(0, 1, 32, dtype=np.float32)
    if sys.argv[1] == "set-up":
        numba_warmup.ensure()            # numba already set up (a notebook after %load_ext)
    cf = nb.compile(f, backend="auto")
    out = cf(x, w)
    first = cf.report.tier
    cf.wait()
    out2 = cf(x, w)
    assert np.allclose(out, f(x, w), rtol=1e-5, atol=1e-6) and np.allclose(out2, out, rtol=1e-5, atol=1e-6)
    print(json.dumps({"first": first, "then": cf.report.tier, "cache": cf.report.cache}))
""")


@pytest.mark.parametrize("numba_state", ["set-up", "not-loaded"])
def test_auto_backend_loads_warm_kernels_without_waiting_for_numba(tmp_path, numba_state):
    """Machine code on disk: with numba set up it loads at once (milliseconds); in a process
    where numba is not loaded yet (a script's first call), loading it first costs numba's set-up
    (~0.5 s), so the first call runs the NumPy tier and numba's version arrives in the
    background (an exiting process does not wait for it: it fills no cache)."""
    _run(tmp_path)                      # populates the disk cache (numba backend)
    env = dict(os.environ, NBACCEL_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", AUTO_WARM, numba_state], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    import json
    rep = json.loads(out.stdout.strip().splitlines()[-1])
    assert rep["first"] == ("numba" if numba_state == "set-up" else "numpy"), rep
    assert rep["then"] == "numba", rep
