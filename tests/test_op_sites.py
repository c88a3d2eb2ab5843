"""Names a reader can find: every Tensor method and ``nbaccel.*`` function that the op table
installs at import time says, at the end of its docstring, the file and line of the statement
that defines it (``op table: nbaccel/ops/sorting.py:<line>``), and that statement names it.

How the docstrings are made: ``ops/registry.py`` (``defop`` records the site,
``document_sites`` writes it) and ``dispatch.install_methods``.
"""
from __future__ import annotations

import ast
import functools
import pathlib
import re

import nbaccel as nb
from nbaccel.ops import registry

ROOT = pathlib.Path(__file__).resolve().parent.parent
SITE = re.compile(r"^op table[^:\n]*: (\S+\.py):(\d+)$", re.M)


@functools.lru_cache(maxsize=None)
def _module(path: str):
    text = (ROOT / path).read_text()
    return text.splitlines(), ast.parse(text)


def _statement(path: str, line: int) -> str:
    """The source of the module-level statement that holds ``line`` (a loop that registers
    several names is one statement)."""
    lines, tree = _module(path)
    for node in tree.body:
        if node.lineno <= line <= node.end_lineno:
            return "\n".join(lines[node.lineno - 1:node.end_lineno])
    raise AssertionError(f"{path}:{line} is not inside a module-level statement")


def _sites(fn) -> list[tuple[str, int]]:
    """The ``op table: file:line`` entries at the end of ``fn``'s docstring (a function
    registered under two names lists both)."""
    doc = fn.__doc__ or ""
    found = [(path, int(line)) for path, line in SITE.findall(doc)]
    assert found, f"{fn.__name__}: no 'op table: file:line' at the end of its docstring:\n{doc[-300:]}"
    for path, _ in found:
        assert (ROOT / path).is_file(), f"{fn.__name__}: {path} does not exist"
    return found


def _installed():
    """(where it is reachable, the function, the name its defining statement must hold)."""
    out = []
    for op in registry.OPS.values():
        for m in op.methods:
            fn = nb.Tensor.__dict__.get(m)
            if fn is not None:
                out.append((f"Tensor.{m}", fn, op.name))
            inplace = "__i" + m[2:] if m.startswith("__") else m + "_"    # add_, __iadd__
            if op.inplace and inplace in nb.Tensor.__dict__:
                out.append((f"Tensor.{inplace}", nb.Tensor.__dict__[inplace], op.name))
        for name in (op.name,) + op.numpy:
            if getattr(nb, name, None) is op.front:
                out.append((f"nbaccel.{name}", op.front, op.name))
    for name, front in registry.ALIASES.items():
        if getattr(nb, name, None) is front:
            out.append((f"nbaccel.{name}", front, name))
    for name in registry.ALIAS_METHODS:
        fn = nb.Tensor.__dict__.get(name)
        if fn is not None:
            defined = getattr(fn, "__name__", name)
            out.append((f"Tensor.{name}", fn, defined))
    return out


INSTALLED = _installed()


def test_there_are_installed_names_to_check():
    names = {where for where, _, _ in INSTALLED}
    assert len(names) > 500
    assert {"Tensor.sort", "Tensor.exp", "Tensor.add_", "Tensor.__radd__", "Tensor.__iadd__",
            "nbaccel.exp", "nbaccel.clip", "Tensor.contiguous"} <= names


def test_each_docstring_names_the_line_that_defines_it():
    wrong = []
    for where, fn, name in INSTALLED:
        texts = {f"{path}:{line}": _statement(path, line) for path, line in _sites(fn)}
        if not any(f'"{name}"' in t or f"'{name}'" in t for t in texts.values()):
            wrong.append(f"{where}: no statement at {', '.join(texts)} names {name!r}")
    assert not wrong, "\n".join(wrong)


def test_help_shows_the_site():
    import pydoc
    text = pydoc.render_doc(nb.Tensor.sort, renderer=pydoc.plaintext)
    assert re.search(r"op table[^:\n]*: nbaccel/ops/sorting\.py:\d+", text)


def test_a_toy_op_is_sited_where_it_is_defined():
    op = registry.defop("toy_site_probe", kind="unary", impl=lambda xp, x: x)   # this line
    try:
        here = __file__, test_a_toy_op_is_sited_where_it_is_defined.__code__.co_firstlineno + 1
        assert op.site == here
    finally:
        registry.remove_op("toy_site_probe")
