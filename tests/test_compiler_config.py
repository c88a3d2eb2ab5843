"""compiler/config.py: one settings dict with one ``strict`` switch, and the only module of
nbaccel that reads the ``NBACCEL_*`` environment variables."""
import ast
import pathlib
import warnings

import numpy as np
import pytest

import nbaccel as nb
from nbaccel.compiler import api
from nbaccel.compiler.replay import cheap_path, entries
from nbaccel.compiler import config as config_module_attr
from nbaccel.compiler.config import config, from_environment

ROOT = pathlib.Path(__file__).resolve().parent.parent
# the modules that may still read an NBACCEL_ variable, and why (compiler/config.py says more)
ALLOWED = {
    "nbaccel/compiler/config.py": "reads them all, once, at import",
    "nbaccel/gpu/placement.py": "NBACCEL_AUTO_GPU_BYTES: gpu/ is a layer below compiler/config.py",
    "nbaccel/ops/kernel_modules.py": "NBACCEL_EAGER_KERNELS (0, sync): the op table is a layer below "
                                     "compiler/config.py",
}


def _boom(*args, **kwargs):
    raise RuntimeError("injected fault")


def _f(x):
    return np.tanh(x * 2.0).sum(axis=1) + 1.0


def test_one_dict_under_every_name():
    assert nb.config is config is api.config is config_module_attr
    assert isinstance(nb.compiler.config, dict) and nb.compiler.config is config


def test_strict_raises_an_injected_compiler_failure(monkeypatch):
    monkeypatch.setitem(nb.config, "strict", True)
    monkeypatch.setattr(entries, "decompose", _boom)
    with pytest.raises(RuntimeError, match="injected fault"):
        nb.compile(_f, backend="numpy")(np.ones((2, 3), np.float32))


def test_not_strict_falls_back_to_eager(monkeypatch):
    monkeypatch.setitem(nb.config, "strict", False)
    monkeypatch.setattr(entries, "decompose", _boom)
    x = np.random.default_rng(0).random((3, 4)).astype(np.float32)
    cf = nb.compile(_f, backend="numpy")
    np.testing.assert_allclose(cf(x), _f(x), rtol=1e-6)
    notes = [k.get("note") or "" for k in cf.report.kernels]
    assert any("compiler error → ran eagerly" in n and "injected fault" in n for n in notes)


def test_the_environment_gives_the_defaults():
    assert from_environment({}) == {"strict": False, "cache_dir": None, "cache_size_limit": None,
                                    "cache_grace_days": 7.0, "cache_lock_timeout": 30.0,
                                    "numba_warmup": True, "triton_interpret": False}
    got = from_environment({"NBACCEL_STRICT": "1", "NBACCEL_CACHE_DIR": "/c", "NBACCEL_CACHE_SIZE_LIMIT": "500M",
                            "NBACCEL_CACHE_GRACE_DAYS": "2", "NBACCEL_CACHE_LOCK_TIMEOUT": "lots",
                            "NBACCEL_NUMBA_WARMUP": "0", "NBACCEL_TRITON_INTERPRET": "1"})
    assert got == {"strict": True, "cache_dir": "/c", "cache_size_limit": "500M", "cache_grace_days": 2.0,
                   "cache_lock_timeout": 30.0, "numba_warmup": False, "triton_interpret": True}
    assert from_environment({"NBACCEL_RAISE_COMPILER_ERRORS": "1"})["strict"] is True     # the old name
    assert from_environment({"NBACCEL_RAISE_COMPILER_ERRORS": "1", "NBACCEL_STRICT": "0"})["strict"] is False


def test_the_old_spellings_are_deprecated_aliases(monkeypatch):
    monkeypatch.setitem(nb.config, "strict", False)
    with pytest.warns(DeprecationWarning, match="'strict'"):
        nb.config["raise_compiler_errors"] = True
    assert nb.config["strict"] is True and "raise_compiler_errors" not in dict(nb.config)
    with pytest.warns(DeprecationWarning):
        assert nb.config["test_mode"] is True
    monkeypatch.setitem(nb.config, "cheap_graph_seconds", 100e-6)
    with pytest.warns(DeprecationWarning, match="cheap_graph_seconds"):
        cheap_path.SETTINGS["graph_seconds"] = 3e-6
    assert nb.config["cheap_graph_seconds"] == 3e-6
    assert set(cheap_path.SETTINGS) == {"enabled", "functions", "graph_seconds"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert nb.config["strict"] is True                  # the new key warns about nothing


def _reads_nbaccel_env(tree):
    """(line, text) of each os.environ / os.getenv use whose key is an "NBACCEL_..." string."""
    def is_environ(node):
        return isinstance(node, ast.Attribute) and node.attr == "environ"

    def names_nbaccel(node):
        return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("NBACCEL_")

    found = []
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Subscript) and is_environ(node.value):            # os.environ["X"]
            key = node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            if (f.attr in ("get", "setdefault", "pop") and is_environ(f.value)) or f.attr == "getenv":
                key = node.args[0] if node.args else None
        elif isinstance(node, ast.Compare) and any(is_environ(c) for c in node.comparators):   # "X" in os.environ
            key = node.left
        if key is not None and names_nbaccel(key):
            found.append((node.lineno, key.value))
    return found


def test_only_config_reads_nbaccel_environment_variables():
    offenders = []
    for path in sorted((ROOT / "nbaccel").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in ALLOWED:
            continue
        for line, name in _reads_nbaccel_env(ast.parse(path.read_text(), rel)):
            offenders.append(f"{rel}:{line} reads {name}")
    assert not offenders, "read it in nbaccel/compiler/config.py instead:\n" + "\n".join(offenders)


def test_the_check_sees_each_spelling():
    src = ("import os\nos.environ.get('NBACCEL_A')\nos.environ['NBACCEL_B']\nos.getenv('NBACCEL_C')\n"
           "'NBACCEL_D' in os.environ\nos.environ.get('OMP_NUM_THREADS')\n")
    assert [n for _, n in _reads_nbaccel_env(ast.parse(src))] == ["NBACCEL_A", "NBACCEL_B", "NBACCEL_C", "NBACCEL_D"]


def test_config_imports_nothing_from_nbaccel():
    tree = ast.parse((ROOT / "nbaccel" / "compiler" / "config.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0 and not (node.module or "").startswith("nbaccel"), ast.dump(node)
        elif isinstance(node, ast.Import):
            assert not any(a.name.startswith("nbaccel") for a in node.names)
