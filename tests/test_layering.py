"""The layers of nbaccel, guarded: arrows point down and no module is part of an import circle.

The imports are read with ``ast`` from every module of ``nbaccel/`` and ``kernels/`` (shipped as
``nbaccel_kernels``), at module level and inside functions alike (a function-level import is
an arrow too: it only moves the cost to the first call). The checks:

* every arrow goes to the same layer or a lower one (``LAYERS`` below; docs/architecture.md
  draws them);
* with the arrows listed in ``tests/layering_exceptions.txt`` taken out, the graph has no
  circle;
* the imports inside functions only get fewer, and each says why it is not at module level.

Each listed arrow has a reason; a listed arrow that no longer exists fails the test too, so
the list only shrinks. No imports are executed (no mocks, nothing to install).
"""
from __future__ import annotations

import ast
import functools
import io
import pathlib
import tokenize

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXCEPTIONS = pathlib.Path(__file__).with_name("layering_exceptions.txt")

# (module prefix, layer): the longest matching prefix decides; higher layers may import lower
LAYERS = [
    ("nbaccel_kernels", 0),              # hand-written kernels on raw arrays
    ("nbaccel.dtypes", 1), ("nbaccel.devices", 1),
    ("nbaccel", 2),                      # the engine: tensor, ops, autograd, dispatch, NumPy API
    ("nbaccel.nn", 3), ("nbaccel.optim", 3),
    ("nbaccel.func", 3), ("nbaccel.quant", 3), ("nbaccel.sparse", 3), ("nbaccel.amp", 3),
    ("nbaccel.torch_compat", 3), ("nbaccel.utils", 3),
    ("nbaccel.gpu", 3),                  # the GPU runtime pieces the compiler launches through
    ("nbaccel.compiler.config", 4), ("nbaccel.compiler", 5),
    ("nbaccel.export", 6), ("nbaccel.daskbridge", 6), ("nbaccel.distributed", 6),
    ("nbaccel.magics", 7), ("nbaccel_ext", 7),
    ("nbaccel.demo", 8), ("nbaccel.docgen", 8), ("nbaccel.quant.tutorial", 8),   # user code, tools
]
# the package itself is the public API: it re-exports from every layer
TOP = {"nbaccel": 9, "nbaccel.compiler.__init__": 5}


def layer(module: str) -> int:
    if module in TOP:
        return TOP[module]
    best, rank = "", None
    for prefix, r in LAYERS:
        if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
            best, rank = prefix, r
    return rank


def modules():
    """{module name: path} of every module (a package is ``name`` for its ``__init__``)."""
    out = {}
    for base, package in ((ROOT / "nbaccel", "nbaccel"), (ROOT / "kernels", "nbaccel_kernels")):
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package] + parts)] = path
    return out


def _is_package(path):
    return path.name == "__init__.py"


@functools.lru_cache(maxsize=1)
def _graph():
    return imports(modules())


def imports(mods):
    """{(importer, imported): 'module' | 'function'}: every import of nbaccel's own modules."""
    edges = {}
    for name, path in mods.items():
        package = name if _is_package(path) else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(), str(path))
        for node, level in _walk_imports(tree):
            for target in _targets(node, package, mods):
                if target != name:
                    key = (name, target)
                    if edges.get(key) != "module":
                        edges[key] = level
    return edges


def _walk_imports(tree):
    """(import node, 'module' | 'function') for every import, however deeply nested."""
    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, "function" if in_function else "module"
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            yield from visit(child, inner)
    yield from visit(tree, False)


def _resolve(module, level, package):
    if level == 0:
        return module
    base = package.split(".")
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _own(name, mods):
    """The module of ours that importing ``name`` runs (the longest known prefix), or None."""
    while name:
        if name in mods:
            return name
        name = name.rpartition(".")[0]
    return None


def _targets(node, package, mods):
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
        return {t for t in (_own(n, mods) for n in names) if t}
    base = _resolve(node.module, node.level, package)
    out = set()
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        t = sub if sub in mods else _own(base, mods)
        if t:
            out.add(t)
    return out


def exceptions():
    """{(importer, imported): reason} from tests/layering_exceptions.txt."""
    out = {}
    reason = ""
    for raw in EXCEPTIONS.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("##"):
            continue
        if line.startswith("#"):
            reason = line.lstrip("# ")
            continue
        a, _, b = line.partition("->")
        assert b, f"layering_exceptions.txt: not 'a -> b': {raw!r}"
        out[(a.strip(), b.strip())] = reason
    return out


def circles(edges):
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    graph = {}
    for a, b in edges:
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_every_module_has_a_layer():
    missing = [m for m in modules() if layer(m) is None]
    assert not missing, missing


def test_kernels_import_nothing_from_nbaccel():
    edges = _graph()
    bad = [f"{a} -> {b}" for a, b in edges if a.startswith("nbaccel_kernels") and not b.startswith("nbaccel_kernels")]
    assert not bad, bad


def test_arrows_point_down():
    allowed = exceptions()
    edges = _graph()
    up = [f"{a} -> {b}   ({edges[a, b]} level: layer {layer(a)} imports layer {layer(b)})"
          for a, b in sorted(edges) if layer(b) > layer(a) and (a, b) not in allowed]
    assert not up, ("imports that point up (fix them, or list them with a reason in "
                    "tests/layering_exceptions.txt):\n" + "\n".join(up))


def test_no_import_circles_outside_the_listed_arrows():
    allowed = exceptions()
    edges = _graph()
    rest = [e for e in edges if e not in allowed]
    found = circles(rest)
    assert not found, ("import circles (break them, or list the arrow that closes each with a "
                       "reason in tests/layering_exceptions.txt):\n" +
                       "\n".join(" <-> ".join(c) for c in found))


def test_the_exception_list_holds_only_arrows_that_exist():
    edges = _graph()
    stale = [f"{a} -> {b}" for a, b in exceptions() if (a, b) not in edges]
    assert not stale, ("these listed arrows are gone: delete them from "
                       "tests/layering_exceptions.txt:\n" + "\n".join(stale))


def test_the_walker_sees_module_and_function_level_imports():
    """The reader itself: relative imports, imports inside functions, and a name imported from
    a package that is a module of its own."""
    edges = _graph()
    assert edges.get(("nbaccel.compiler.schedule.schedule", "nbaccel.compiler.schedule.loops")) == "module"
    assert ("nbaccel.compiler.codegen.kernel_passes", "nbaccel.compiler.codegen.common") in edges
    assert any(level == "function" for level in edges.values())
    assert circles([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]) == [["a", "b", "c"]]


# ---- imports inside functions ------------------------------------------------------------------
# An import of nbaccel's own modules inside a function is an arrow that shows only at the first
# call. The ones left are there for a reason: an import circle the module level cannot close
# (the engine core, the magics' mixins), or start-up time (``import nbaccel`` and ``%load_ext``
# must not load numba, Triton, IPython or the compiler's call path: tests/test_startup.py), and
# each says which on its line or the line above. Both numbers only go down: lower them when an
# import moves to module level.
MAX_FUNCTION_LEVEL_IMPORTS = 18
MAX_UNEXPLAINED_FUNCTION_LEVEL_IMPORTS = 0


def _is_own_import(node):
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] in ("nbaccel", "nbaccel_kernels")
    return any(a.name.split(".")[0] in ("nbaccel", "nbaccel_kernels") for a in node.names)


def _function_level_imports_in(text, filename="<text>"):
    """[(line, source line, explained)] of the imports of nbaccel's own modules inside functions
    in ``text``; explained: a comment on one of the import's lines or alone on the line above."""
    lines = text.splitlines()
    comments = {tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(text).readline)
                if tok.type == tokenize.COMMENT}
    out = []
    for node, level in _walk_imports(ast.parse(text, filename)):
        if level != "function" or not _is_own_import(node):
            continue
        above = node.lineno - 1
        explained = (any(n in comments for n in range(node.lineno, node.end_lineno + 1))
                     or (above in comments and lines[above - 1].lstrip().startswith("#")))
        out.append((node.lineno, lines[node.lineno - 1].strip(), explained))
    return out


def function_level_imports():
    """[(path, line, source line, explained)] over every module of nbaccel and its kernels."""
    return [(str(path.relative_to(ROOT)), *row)
            for path in modules().values()
            for row in _function_level_imports_in(path.read_text(), str(path))]

def _listing(rows):
    return "\n".join(f"  {path}:{line}: {text}" for path, line, text, _ in rows)


def test_function_level_imports_only_go_down():
    rows = function_level_imports()
    assert len(rows) <= MAX_FUNCTION_LEVEL_IMPORTS, (
        f"{len(rows)} imports of nbaccel's own modules inside functions (at most "
        f"{MAX_FUNCTION_LEVEL_IMPORTS}): move the new one to module level, or, where a circle or "
        "start-up time forces it, make room by moving another:\n" + _listing(rows))
    if len(rows) < MAX_FUNCTION_LEVEL_IMPORTS:
        print(f"fewer function-level imports: lower MAX_FUNCTION_LEVEL_IMPORTS to {len(rows)}")


def test_each_function_level_import_says_why():
    bare = [r for r in function_level_imports() if not r[3]]
    assert len(bare) <= MAX_UNEXPLAINED_FUNCTION_LEVEL_IMPORTS, (
        f"{len(bare)} function-level imports of nbaccel's own modules without a comment saying why "
        f"they are not at module level (at most {MAX_UNEXPLAINED_FUNCTION_LEVEL_IMPORTS}; a comment "
        "on the import's line or the line above: the circle, or what it keeps out of start-up):\n"
        + _listing(bare))


def test_the_import_reader_sees_comments():
    text = ("from . import top\n\n\ndef f():\n    # why\n    from . import a\n"
            "    from . import b  # why\n    x = 1\n    from nbaccel import c\n    import numpy\n")
    assert [(line, explained) for line, _, explained in _function_level_imports_in(text)] == [
        (6, True), (7, True), (9, False)]


# ---- the compiler's rooms (issue 38, item 3) ---------------------------------------------------
# The compiler is one layer made of rooms: each subpackage of nbaccel/compiler/ is a room whose
# __init__ docstring says its job and, on one "May import:" line, the other rooms its modules may
# import (the layers below the compiler are open to all of them). ``config`` is the settings
# module (layer 4); the rest of the compiler's top level (``api``, ``call_values``, ``foreign``,
# the package itself) is the api room, which may import every room. docs/architecture.md draws it.

COMPILER = ROOT / "nbaccel" / "compiler"
NO_ROOM = "nothing of the compiler"


def declared_rooms():
    """{room: the rooms it may import}, read from each room's ``May import:`` line."""
    out = {}
    for init in sorted(COMPILER.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        said = [line for line in doc.splitlines() if line.startswith("May import:")]
        assert len(said) == 1, (f"{init.relative_to(ROOT)}: the docstring names what the room may "
                                "import on one 'May import:' line")
        names = said[0].partition(":")[2].strip()
        out[init.parent.name] = set() if names == NO_ROOM else {n.strip() for n in names.split(",")}
    return out


def room_of(module):
    """The compiler room ``module`` is in ('config', 'api', a subpackage), None outside it."""
    parts = module.split(".")
    if parts[:2] != ["nbaccel", "compiler"]:
        return None
    if len(parts) > 2 and parts[2] == "config":
        return "config"
    if len(parts) > 2 and (COMPILER / parts[2]).is_dir():
        return parts[2]
    return "api"


def _room_arrows():
    """{(room, room): an import that makes the arrow} between different rooms of the compiler."""
    out = {}
    for a, b in sorted(_graph()):
        ra, rb = room_of(a), room_of(b)
        if ra is not None and rb is not None and ra != rb:
            out.setdefault((ra, rb), f"{a} -> {b}")
    return out


def test_each_room_imports_only_the_rooms_it_declares():
    declared = declared_rooms()
    bad = [f"{example}   (room {a} may import: {', '.join(sorted(declared[a])) or NO_ROOM})"
           for (a, b), example in _room_arrows().items() if a in declared and b not in declared[a]]
    assert not bad, ("imports between the compiler's rooms that the importing room's docstring "
                     "does not allow (move the module, or say why on the 'May import:' line):\n"
                     + "\n".join(bad))


def test_the_rooms_declare_what_they_use_and_no_circle():
    declared = declared_rooms()
    unknown = {a: sorted(d - set(declared) - {"config"}) for a, d in declared.items()
               if d - set(declared) - {"config"}}
    assert not unknown, f"'May import:' names rooms that do not exist: {unknown}"
    used = set(_room_arrows())
    unused = sorted(f"{a} -> {b}" for a, d in declared.items() for b in d if (a, b) not in used)
    assert not unused, ("declared arrows between rooms that no import makes (take them off the "
                        "'May import:' line):\n" + "\n".join(unused))
    assert not circles([(a, b) for a, d in declared.items() for b in d])
    assert {"api", "config"}.isdisjoint(declared), "api and config are not subpackages"


def _probes(tree):
    """The `hasattr(x, "_node")` calls and the `_ops()` helpers in a module's syntax tree."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "hasattr"
                and len(node.args) == 2 and isinstance(node.args[1], ast.Constant)
                and node.args[1].value == "_node"):
            yield f"line {node.lineno}: hasattr(..., '_node')"
        if isinstance(node, ast.FunctionDef) and node.name == "_ops":
            yield f"line {node.lineno}: def _ops()"


def test_a_tensor_is_known_by_its_type_not_probed():
    # (issue 38: a module below Tensor asks tensor_meta.is_tensor / is_traced; one above it
    # imports Tensor; none probes for the tracer's field or hides the ops package in a helper)
    found = [f"{name} {where}" for name, path in modules().items()
             for where in _probes(ast.parse(path.read_text()))]
    assert not found, "type tests by attribute probe:\n" + "\n".join(found)


def test_the_probe_finder_sees_both_shapes():
    tree = ast.parse("def _ops():\n    return 1\nok = hasattr(x, '_node')\nfine = hasattr(x, 'shape')\n")
    assert [w.split(":")[1].strip() for w in _probes(tree)] == ["def _ops()", "hasattr(..., '_node')"]
