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
* **shared names** (:func:`shared_names`) are cell names that functions, lambdas or classes
  defined in the cell refer to, and names declared ``global``: the cell function declares them
  ``global``, so they live in the user namespace as they would in the plain cell (a function
  defined in the cell reads them at call time, not a closure of the cell's run).
* Calls at the cell's own scope go through ``__nbaccel_call__`` (see ``boundary.py``): a traced
  value handed to code outside NumPy's namespace arrives as a real NumPy value. Boolean-mask
  writes ``a[m] = v``, ``a[m] op= v`` and ``a[m] = b[m]`` go through ``__nbaccel_setmask__``,
  which lowers them to ``where`` when ``m`` is a boolean array of ``a``'s shape.
"""
from __future__ import annotations

import ast
import hashlib
import io
import tokenize

from .cellnames import _Renamer, evaluated_at_definition, local_names, nested_free

ENV = "__nbaccel_env__"
NP = "__nbaccel_np__"
VALUE = "__nbaccel_value__"
CALL = "__nbaccel_call__"
SYNC = "__nbaccel_sync__"
SETMASK = "__nbaccel_setmask__"
IPY = "__nbaccel_ipython__"
# calls that need the caller's own frame (wrapping them would change what they see)
_FRAME_CALLS = {"super", "locals", "vars", "dir", "eval", "exec", "globals", "breakpoint"}
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
                    continue            # the cell runs plainly (needs_plain)
                stores.add(a.asname or a.name.split(".")[0])
        elif isinstance(n, ast.ExceptHandler) and n.name:
            stores.add(n.name)          # Python unbinds it when the handler ends: a delete too
            dels.add(n.name)
        elif isinstance(n, ast.Global):
            stores.update(n.names)
        elif isinstance(n, ast.Nonlocal):
            raise CellError("%%compile cells can't use `nonlocal` at the top level")
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
            # what the definition evaluates now (decorators, defaults, bases), then the names its
            # body may read from outside when it runs: never its own parameters or locals (a
            # `def f(Z)` does not read the notebook's Z)
            for part in evaluated_at_definition(node):
                visit(part)
            for name in sorted(nested_free(node)[0]):
                use(name, True)
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


def read_names(entry) -> tuple:
    """Every name a compiled cell (an extension.CellEntry) reads from the namespace: its inputs
    and the globals it reads (the cell's analysis read them first: ``entry.reads``; cached on
    the entry)."""
    found = getattr(entry, "_read_names", None)
    if found is None:
        found = tuple(sorted(set(entry.reads) | set(entry.traced) | set(entry.boxed)))
        entry._read_names = found
    return found


def shared_names(tree: ast.Module, stores: set) -> set:
    """Cell names that must live in the user namespace while the cell runs: the ones declared
    ``global`` anywhere in the cell, and cell-bound names that a function, lambda or class
    defined in the cell refers to (the plain cell's functions read them as globals)."""
    shared = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Global):
            shared.update(n.names)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            free, declared = nested_free(n)
            shared |= declared | (free & stores)
    return shared


def needs_plain(tree: ast.Module) -> str | None:
    """Why the cell should run plainly from the start (None: trace it). np.vectorize,
    np.frompyfunc and np.apply_along_axis call a Python function per element or row: tracing
    each call costs far more than the plain cell."""
    per_element = None
    for n in ast.walk(tree):                    # (one walk: this runs on every new cell)
        if isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names):
            return (f"`from {n.module} import *` (line {n.lineno}) needs module scope: "
                    "the cell runs plainly")
        name = n.attr if isinstance(n, ast.Attribute) else n.id if isinstance(n, ast.Name) else None
        if per_element is None and name in ("vectorize", "frompyfunc", "apply_along_axis",
                                            "apply_over_axes", "piecewise"):
            per_element = (f"np.{name} calls a Python function per element (line {n.lineno}): "
                           "the cell runs plainly")
    return per_element


class _BoundaryRewriter(ast.NodeTransformer):
    """Calls at the cell's scope -> ``__nbaccel_call__(f, *args)``; boolean-mask writes ->
    ``__nbaccel_setmask__``. Nested function and class bodies are left as written."""

    def visit_FunctionDef(self, node):
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.args = self.visit(node.args)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.bases = [self.visit(b) for b in node.bases]
        return node

    def visit_Lambda(self, node):
        return node

    def visit_Try(self, node):
        # errors of the try body must raise inside it: its values are computed before it ends
        self.generic_visit(node)
        body = []
        for stmt in node.body:
            if isinstance(stmt, ast.Expr):
                stmt = ast.copy_location(ast.Expr(ast.Call(ast.Name(SYNC, ast.Load()), [stmt.value], [])), stmt)
            body.append(stmt)
        last = body[-1]
        body.append(ast.copy_location(ast.Expr(ast.Call(ast.Name(SYNC, ast.Load()), [], [])), last))
        node.body = body
        return node

    visit_TryStar = visit_Try

    def visit_FormattedValue(self, node):
        # f"{t}", f"{t!r}", f"{t:.3f}": formatted as the plain cell's NumPy value would be
        self.generic_visit(node)
        node.value = ast.copy_location(ast.Call(ast.Name(SYNC, ast.Load()), [node.value],
                                                [ast.keyword("numpy", ast.Constant(True))]), node.value)
        return node

    def visit_Call(self, node):
        if _is_ipython_call(node):
            # get_ipython().run_line_magic('timeit', ...), .system('ls'): IPython reads the
            # caller's frame, so the call runs in a frame holding the cell's current locals
            node.args = [self.visit(a) for a in node.args]
            node.keywords = [self.visit(k) for k in node.keywords]
            locs = ast.Call(ast.Name("locals", ast.Load()), [], [])
            return ast.copy_location(ast.Call(ast.Name(IPY, ast.Load()),
                                              [locs, ast.Constant(node.func.attr)] + node.args,
                                              node.keywords), node)
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in _FRAME_CALLS:
            return node
        return ast.copy_location(ast.Call(ast.Name(CALL, ast.Load()), [node.func] + node.args,
                                          node.keywords), node)

    def visit_Assign(self, node):
        self.generic_visit(node)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
            t = node.targets[0]
            v = node.value
            if isinstance(v, ast.Subscript) and ast.dump(v.slice) == ast.dump(t.slice):
                # a[m] = b[m]: the source array whole, selected by the mask (where(m, b, a))
                later = ast.Lambda(ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                                                 kw_defaults=[], kwarg=None, defaults=[]), v)
                args = [t.value, t.slice, v.value, ast.Constant("copy"), later]
            else:
                args = [t.value, t.slice, v, ast.Constant("=")]
            return ast.copy_location(ast.Expr(ast.Call(ast.Name(SETMASK, ast.Load()),
                                                       _loads(args), [])), node)
        return node

    def visit_AugAssign(self, node):
        self.generic_visit(node)
        if isinstance(node.target, ast.Subscript):
            t = node.target
            op = ast.Constant(type(node.op).__name__)
            return ast.copy_location(ast.Expr(ast.Call(ast.Name(SETMASK, ast.Load()),
                                                       _loads([t.value, t.slice, node.value, op]), [])), node)
        return node


def _is_ipython_call(node):
    """``get_ipython().<method>(...)`` (what IPython makes of ``%magic`` and ``!cmd`` lines)."""
    f = node.func
    return (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Call)
            and isinstance(f.value.func, ast.Name) and f.value.func.id == "get_ipython"
            and not f.value.args)


def _loads(nodes):
    """Expressions as loads (a Subscript target's parts are loads already; the value too)."""
    out = []
    for n in nodes:
        if isinstance(n, ast.Slice):
            n = ast.Call(ast.Name("slice", ast.Load()), [n.lower or ast.Constant(None),
                                                         n.upper or ast.Constant(None),
                                                         n.step or ast.Constant(None)], [])
        elif isinstance(n, ast.Tuple) and any(isinstance(e, ast.Slice) for e in n.elts):
            n = ast.Tuple(_loads(n.elts), ast.Load())
        out.append(n)
    return out


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

    def visit_Global(self, node):
        # the cell function declares every shared name global at its top (see build)
        return ast.copy_location(ast.Pass(), node)

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


def cell_label(count: int, source: str) -> str:
    """How reports name a cell: ``In[n]`` where the shell counts executions (a notebook, a
    terminal IPython); elsewhere (``run_cell`` without history, count 0) a name that stays the
    same for the same source, never a misleading ``In[0]``."""
    if count > 0:
        return f"In[{count}]"
    return "cell " + hashlib.sha1(source.encode()).hexdigest()[:6]


def ends_quiet(source: str) -> bool:
    """True when the cell's last statement ends with ';' (IPython then shows no Out[])."""
    if ";" not in source:           # (most cells: tokenizing in Python costs milliseconds)
        return False
    try:
        toks = [t for t in tokenize.generate_tokens(io.StringIO(source).readline)
                if t.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT,
                                  tokenize.ENDMARKER, tokenize.INDENT, tokenize.DEDENT)]
    except (tokenize.TokenError, SyntaxError):
        return False
    return bool(toks) and toks[-1].string == ";"


def build(tree: ast.Module, name: str, traced: list[str], boxed: list[str],
          shared: set = frozenset(), boundary: bool = True, maybe=(), renamed=None) -> ast.Module:
    """The module that defines ``__nbaccel_make__(__nbaccel_np__, __nbaccel_call__,
    __nbaccel_setmask__, __nbaccel_sync__, __nbaccel_ipython__)`` returning the cell function. ``traced`` become parameters; ``boxed``
    are read from ``__nbaccel_env__.values``; ``maybe`` too when it has them (else they start
    unbound, as in the plain cell); ``shared`` are declared global. ``renamed`` (default:
    :func:`local_names`) maps inputs to the names the function uses for them: the caller's
    ``collect`` must map them back."""
    if renamed is None:
        renamed = local_names(tree, list(traced) + list(boxed))
    body = [_ImportRewriter().visit(s) for s in tree.body]
    if renamed:
        body = [_Renamer(renamed).visit(s) if not isinstance(s, list) else
                [_Renamer(renamed).visit(x) for x in s] for s in body]
    if boundary:
        body = [_BoundaryRewriter().visit(s) if not isinstance(s, list) else
                [_BoundaryRewriter().visit(x) for x in s] for s in body]
    flat = []
    for s in body:
        flat.extend(s if isinstance(s, list) else [s])
    first = flat[0] if flat else ast.Pass(lineno=1, col_offset=0)
    last = flat[-1] if flat else first
    value = ast.Constant(None)
    if flat and isinstance(last, ast.Expr):
        value = ast.Name(VALUE, ast.Load())
        flat[-1] = ast.copy_location(ast.Assign([ast.Name(VALUE, ast.Store())], last.value), last)
    prologue = [ast.Assign([ast.Name(renamed.get(n, n), ast.Store())],
                           ast.Subscript(ast.Attribute(ast.Name(ENV, ast.Load()), "values", ast.Load()),
                                         ast.Constant(n), ast.Load())) for n in boxed]
    env_values = ast.Attribute(ast.Name(ENV, ast.Load()), "values", ast.Load())
    prologue += [ast.If(ast.Compare(ast.Constant(n), [ast.In()], [env_values]),
                        [ast.Assign([ast.Name(n, ast.Store())],
                                    ast.Subscript(env_values, ast.Constant(n), ast.Load()))], [])
                 for n in maybe]
    collect = ast.Call(ast.Attribute(ast.Name(ENV, ast.Load()), "collect", ast.Load()),
                       [ast.Call(ast.Name("locals", ast.Load()), [], [])], [])
    ret = ast.Return(ast.Tuple([collect, value], ast.Load()))
    for s in prologue:
        ast.copy_location(s, first)
    ast.copy_location(ret, last)
    args = ast.arguments(posonlyargs=[], args=[ast.arg(renamed.get(n, n)) for n in traced + [ENV]], vararg=None,
                         kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    decl = [ast.copy_location(ast.Global(sorted(shared)), first)] if shared else []
    fn = ast.FunctionDef(name=name, args=args, body=decl + prologue + (flat or [ast.Pass()]) + [ret],
                         decorator_list=[], returns=None, type_comment=None, **_TP)
    ast.copy_location(fn, first)
    maker_args = ast.arguments(posonlyargs=[], args=[ast.arg(NP), ast.arg(CALL), ast.arg(SETMASK), ast.arg(SYNC),
                                                     ast.arg(IPY)],
                               vararg=None, kwonlyargs=[],
                               kw_defaults=[], kwarg=None, defaults=[])
    maker = ast.FunctionDef(name="__nbaccel_make__", args=maker_args,
                            body=[fn, ast.Return(ast.Name(name, ast.Load()))],
                            decorator_list=[], returns=None, type_comment=None, **_TP)
    ast.copy_location(maker, first)
    mod = ast.Module(body=[maker], type_ignores=[])
    return ast.fix_missing_locations(mod)
