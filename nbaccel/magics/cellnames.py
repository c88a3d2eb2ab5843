"""Cell inputs that functions defined in the cell also read (see ``cellfunc.build``).

Under their own names such inputs would be closure cells of the cell function: a lambda
defined in the cell would keep the tracer, or nbaccel.numpy, that it saw while the cell ran,
and return Tensors forever after. :func:`local_names` renames them at the cell's own scope
only (:class:`_Renamer`), so the cell reads its traced or swapped input while the nested
function reads the notebook's global at call time, as in the plain cell.
"""
from __future__ import annotations

import ast

LOCAL = "__nbaccel_in_"      # prefix of a cell input that functions defined in the cell also read
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def nested_free(node):
    """Names a nested def/lambda/class body may read from outside (loads that are not its own
    parameters or locals, nor those of a scope nested in it), and names it declares ``global``."""
    args = getattr(node, "args", None)
    params = set()
    if args is not None:
        params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
        params |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    loads, stores, declared = set(), set(), set()

    def visit(n):
        if isinstance(n, _SCOPES):
            if not isinstance(n, ast.Lambda):
                stores.add(n.name)
            for part in evaluated_at_definition(n):
                visit(part)
            inner_free, inner_declared = nested_free(n)
            loads.update(inner_free)
            declared.update(inner_declared)
            return
        if isinstance(n, ast.Name):
            (loads if isinstance(n.ctx, ast.Load) else stores).add(n.id)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            declared.update(n.names)
        for child in ast.iter_child_nodes(n):
            visit(child)

    for stmt in (node.body if isinstance(node.body, list) else [node.body]):
        visit(stmt)
    if isinstance(node, ast.ClassDef):     # a class body runs at once; its methods do not
        stores = set()
    free = loads - params - (stores - declared)
    return free | declared, declared


def evaluated_at_definition(node):
    """The parts of a def/lambda/class that run where it is defined (decorators, defaults,
    bases), not when it is called."""
    if isinstance(node, ast.ClassDef):
        return node.decorator_list + node.bases + [k.value for k in node.keywords]
    parts = [d for d in node.args.defaults + node.args.kw_defaults if d is not None]
    return parts + list(getattr(node, "decorator_list", []))


class _Renamer(ast.NodeTransformer):
    """Renames cell-scope uses of some names (nested def/lambda/class bodies are left as
    written: they read the names as globals, as in the plain cell)."""

    def __init__(self, names):
        self.names = names

    def visit_Name(self, node):
        if node.id in self.names:
            node.id = self.names[node.id]
        return node

    def visit_FunctionDef(self, node):
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.args = self.visit(node.args)
        if node.returns is not None:
            node.returns = self.visit(node.returns)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_arg(self, node):
        return node                  # (annotations of a nested def's parameters: left alone)

    def visit_ClassDef(self, node):
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.bases = [self.visit(b) for b in node.bases]
        node.keywords = [self.visit(k) for k in node.keywords]
        return node

    def visit_Lambda(self, node):
        node.args = self.visit(node.args)
        return node


def local_names(tree: ast.Module, inputs) -> dict:
    """Cell inputs (traced or boxed) that a function, lambda or class defined in the cell also
    reads -> the name the cell function uses for them. Under their own names they would be
    closure cells of the cell function: a lambda defined in the cell would keep the tracer or
    nbaccel.numpy it saw while the cell ran, and return Tensors forever after. Renamed, the cell
    reads its (traced, swapped) input while the function reads the notebook's global."""
    nested = set()
    for n in ast.walk(tree):
        if isinstance(n, _SCOPES):
            nested |= nested_free(n)[0]
    return {n: LOCAL + n for n in inputs if n in nested}
