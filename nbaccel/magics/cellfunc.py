"""A notebook cell becomes a function (an AST transformation that keeps line numbers).

    cell:                              function:
        y = np.tanh(x * w)                 def In_3(x, w, __nbaccel_env__):
        z = y.sum()                            np = __nbaccel_env__.values['np']
        z                                      y = np.tanh(x * w)
                                               z = y.sum()
                                               __nbaccel_value__ = z
                                               return __nbaccel_env__.collect(locals()), __nbaccel_value__

* **inputs** are the names the cell reads (at its own scope) that exist in the user namespace.
  Arrays and Tensors become named parameters (the compiler traces them); every other input
  (the NumPy module, scalars, lists, ...) arrives through one opaque ``__nbaccel_env__``
  object, so the compiler neither traces nor copies it. Names the cell only reads and that
  need no special treatment are simply globals (the function's globals are the user namespace).
* **outputs** are the names the cell binds at its own scope (assignments, augmented
  assignments, for/with targets, imports, walrus, def/class) and the names it deletes.
* ``import numpy as np`` / ``from numpy import exp`` inside the cell bind nbaccel.numpy.
"""
from __future__ import annotations

import ast
import io
import tokenize

ENV = "__nbaccel_env__"
NP = "__nbaccel_np__"
VALUE = "__nbaccel_value__"
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_TP = {"type_params": []} if "type_params" in ast.FunctionDef._fields else {}
_COMPS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class CellError(SyntaxError):
    """The cell uses a construct that cannot live inside a function."""


def _scope_nodes(node):
    """Nodes evaluated in the cell's own scope (nested def/class/lambda bodies excluded; their
    decorators, defaults and bases are included)."""
    for child in ast.iter_child_nodes(node):
        yield child
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for sub in child.decorator_list + child.args.defaults + \
                    [d for d in child.args.kw_defaults if d is not None]:
                yield from _walk_all(sub)
        elif isinstance(child, ast.ClassDef):
            for sub in child.decorator_list + child.bases + [k.value for k in child.keywords]:
                yield from _walk_all(sub)
        elif isinstance(child, ast.Lambda):
            for sub in child.args.defaults:
                yield from _walk_all(sub)
        else:
            yield from _scope_nodes(child)


def _walk_all(node):
    yield node
    yield from _scope_nodes(node)


def _comp_targets(tree):
    """Names bound by comprehension loops (their own scope: never outputs)."""
    out = set()
    for n in _scope_nodes(tree):
        if isinstance(n, _COMPS):
            for g in n.generators:
                out |= {t.id for t in ast.walk(g.target) if isinstance(t, ast.Name)}
    return out


def analyse(tree: ast.Module):
    """(loads, stores, deletes): names the cell reads, binds and deletes at its own scope."""
    loads, stores, dels = set(), set(), set()
    for n in _scope_nodes(tree):
        if isinstance(n, ast.Name):
            if isinstance(n.ctx, ast.Load):
                loads.add(n.id)
            elif isinstance(n.ctx, ast.Store):
                stores.add(n.id)
            else:
                dels.add(n.id)
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            loads.add(n.target.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stores.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                if a.name == "*":
                    raise CellError("%%compile cells can't use `from module import *` "
                                    "(it needs module scope); import the names you use")
                stores.add(a.asname or a.name.split(".")[0])
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            raise CellError(f"%%compile cells can't use `{type(n).__name__.lower()}` statements")
        elif isinstance(n, (ast.Return, ast.Yield, ast.YieldFrom)):
            raise CellError("%%compile cells can't use `return` or `yield` at the top level")
        elif isinstance(n, ast.Await):
            raise CellError("%%compile cells can't use top-level `await`")
        elif isinstance(n, ast.MatchAs) and n.name:
            stores.add(n.name)
        elif isinstance(n, ast.MatchStar) and n.name:
            stores.add(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            stores.add(n.rest)
    # a comprehension variable is only a cell name if the cell also binds it outside
    stores -= _comp_targets(tree) - _bound_outside_comprehensions(tree)
    return loads, stores, dels


def read_first(tree: ast.Module) -> set:
    """Names whose first use, in evaluation order, is a read: the cell's inputs (a name the
    cell assigns before reading it is the cell's own, even if the namespace has one)."""
    seen, first_read = set(), set()

    def use(name, load):
        if name not in seen:
            seen.add(name)
            if load:
                first_read.add(name)

    def visit(node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for sub in _walk_all(node):
                if sub is not node and isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                    use(sub.id, True)
            use(node.name, False)
            return
        if isinstance(node, ast.Lambda):
            for d in node.args.defaults:
                visit(d)
            return
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
            if node.value is not None:
                visit(node.value)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(node, ast.AugAssign) and isinstance(t, ast.Name):
                    use(t.id, True)
                visit(t)
            return
        if isinstance(node, (ast.For, ast.AsyncFor)):
            visit(node.iter)
            visit(node.target)
            for s in node.body + node.orelse:
                visit(s)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                use(a.asname or a.name.split(".")[0], False)
            return
        if isinstance(node, ast.Name):
            use(node.id, isinstance(node.ctx, ast.Load))
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return first_read


def _bound_outside_comprehensions(tree):
    names = set()

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _COMPS) or isinstance(child, _SCOPES):
                continue
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                names.add(child.id)
            visit(child)
    visit(tree)
    return names


class _ImportRewriter(ast.NodeTransformer):
    """``import numpy as np`` -> ``np = __nbaccel_np__`` (also numpy.linalg/fft; numpy.random
    and other submodules stay NumPy's own). Nested defs are left alone."""

    def visit_FunctionDef(self, node):
        return node

    visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = visit_FunctionDef

    def _target(self, dotted):
        parts = dotted.split(".")
        if parts[0] != "numpy":
            return None
        expr = ast.Name(NP, ast.Load())
        if len(parts) == 1:
            return expr
        if len(parts) == 2 and parts[1] in ("linalg", "fft"):
            return ast.Attribute(expr, parts[1], ast.Load())
        return None

    def visit_Import(self, node):
        keep, out = [], []
        for a in node.names:
            if a.asname is None and a.name.split(".")[0] == "numpy":
                value = ast.Name(NP, ast.Load())       # `import numpy.x` binds `numpy`
                out.append(ast.Assign([ast.Name("numpy", ast.Store())], value))
                if a.name != "numpy":
                    keep.append(a)                    # still import the submodule itself
                continue
            target = self._target(a.name) if a.asname else None
            if target is not None:
                out.append(ast.Assign([ast.Name(a.asname, ast.Store())], target))
            else:
                keep.append(a)
        return self._emit(node, keep, out, ast.Import)

    def visit_ImportFrom(self, node):
        base = self._target(node.module or "") if node.level == 0 else None
        if base is None:
            return node
        out = [ast.Assign([ast.Name(a.asname or a.name, ast.Store())],
                          ast.Attribute(base, a.name, ast.Load())) for a in node.names]
        return self._emit(node, [], out, None)

    @staticmethod
    def _emit(node, keep, out, cls):
        stmts = []
        if keep:
            if cls is ast.Import:
                imp = ast.Import(keep)
                # `import numpy.random` must not rebind `numpy` after our assignment
                stmts.append(imp)
            else:
                stmts.append(node)
        stmts += out
        for s in stmts:
            ast.copy_location(s, node)
        return stmts if stmts else ast.copy_location(ast.Pass(), node)


def ends_quiet(source: str) -> bool:
    """True when the cell's last statement ends with ';' (IPython then shows no Out[])."""
    try:
        toks = [t for t in tokenize.generate_tokens(io.StringIO(source).readline)
                if t.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT,
                                  tokenize.ENDMARKER, tokenize.INDENT, tokenize.DEDENT)]
    except (tokenize.TokenError, SyntaxError):
        return False
    return bool(toks) and toks[-1].string == ";"


def build(tree: ast.Module, name: str, traced: list[str], boxed: list[str]) -> ast.Module:
    """The module that defines ``__nbaccel_make__(__nbaccel_np__)`` returning the cell function.
    ``traced`` become parameters; ``boxed`` are read from ``__nbaccel_env__.values``."""
    body = [_ImportRewriter().visit(s) for s in tree.body]
    flat = []
    for s in body:
        flat.extend(s if isinstance(s, list) else [s])
    first = flat[0] if flat else ast.Pass(lineno=1, col_offset=0)
    last = flat[-1] if flat else first
    value = ast.Constant(None)
    if flat and isinstance(last, ast.Expr):
        value = ast.Name(VALUE, ast.Load())
        flat[-1] = ast.copy_location(ast.Assign([ast.Name(VALUE, ast.Store())], last.value), last)
    prologue = [ast.Assign([ast.Name(n, ast.Store())],
                           ast.Subscript(ast.Attribute(ast.Name(ENV, ast.Load()), "values", ast.Load()),
                                         ast.Constant(n), ast.Load())) for n in boxed]
    collect = ast.Call(ast.Attribute(ast.Name(ENV, ast.Load()), "collect", ast.Load()),
                       [ast.Call(ast.Name("locals", ast.Load()), [], [])], [])
    ret = ast.Return(ast.Tuple([collect, value], ast.Load()))
    for s in prologue:
        ast.copy_location(s, first)
    ast.copy_location(ret, last)
    args = ast.arguments(posonlyargs=[], args=[ast.arg(n) for n in traced + [ENV]], vararg=None,
                         kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    fn = ast.FunctionDef(name=name, args=args, body=prologue + (flat or [ast.Pass()]) + [ret],
                         decorator_list=[], returns=None, type_comment=None, **_TP)
    ast.copy_location(fn, first)
    maker_args = ast.arguments(posonlyargs=[], args=[ast.arg(NP)], vararg=None, kwonlyargs=[],
                               kw_defaults=[], kwarg=None, defaults=[])
    maker = ast.FunctionDef(name="__nbaccel_make__", args=maker_args,
                            body=[fn, ast.Return(ast.Name(name, ast.Load()))],
                            decorator_list=[], returns=None, type_comment=None, **_TP)
    ast.copy_location(maker, first)
    mod = ast.Module(body=[maker], type_ignores=[])
    return ast.fix_missing_locations(mod)
