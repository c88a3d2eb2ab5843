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


def nested_reads(tree: ast.Module) -> set:
    """Every name that appears inside the body of a function, lambda or class defined in the
    cell (at any depth)."""
    names = set()
    for n in ast.walk(tree):
        if isinstance(n, _SCOPES):
            body = n.body if isinstance(n.body, list) else [n.body]
            for stmt in body:
                names |= {m.id for m in ast.walk(stmt) if isinstance(m, ast.Name)}
    return names


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
    nested = nested_reads(tree)
    return {n: LOCAL + n for n in inputs if n in nested}
