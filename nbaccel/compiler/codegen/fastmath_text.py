"""The fastmath helpers as straight-line source text, for generated kernels to paste in.

Calling ``fexp``/``ftanh``/... from a kernel makes numba inline them at its IR level
(``inline="always"``, two levels deep: the public helper, then its type-dispatching
overload, then the float32 body). numba does that by deep-copying and re-typing the
helper's IR at every call site, which cost ~0.45 s per helper call in a kernel (0.9 s of
the 20-op benchmark's 2.3 s cold compile). Pasting the same statements into the kernel
source instead costs numba one more handful of scalar statements to type, and LLVM sees
the identical loop body, so it vectorises the same way. Conditional expressions become
``_select(test, a, b)`` calls (one LLVM ``select``; the helpers compute both sides anyway), so
numba has no extra blocks to build and type.

The text is derived from the helpers' own Python source in ``fastmath.py`` (one
definition, never two that could drift apart): each body is a list of single-name
assignments and a final ``return``; locals are renamed with a per-call prefix, calls of
other helper bodies are pasted recursively, and everything else (constants, the LLVM
intrinsics, ``np``, ``math``) is left as a name the kernel module imports.

Example::

    >>> lines, result, names = inline_call("fexp", "x0", "float32", "h0_")
    >>> result
    'h0_y'
"""
from __future__ import annotations

import ast
import functools
import pathlib

# public helper -> (float32 body, float64 body); integers and bools take the float64 body on
# np.float64(x), as the helpers' own type dispatch does
BODIES = {
    "fexp": ("_exp32", "_exp64"), "flog": ("_log32", "_log64"), "ftanh": ("_tanh32", "_tanh64"),
    "fsigmoid": ("_sigmoid32", "_sigmoid64"), "ferf": ("_erf32", "_erf64"),
    "flog1p": ("_log1p32", "_log1p64"), "fexpm1": ("_expm1_32", "_expm1_64"),
    "fgelu_tanh": ("_gelu_tanh32", "_gelu_tanh64"), "fsoftplus": ("_softplus32", "_softplus64"),
}
_INLINABLE = {n for pair in BODIES.values() for n in pair} | {"_log1p_core32"}
_MODULES = {"np", "math"}            # names the generated module imports itself


class NotInlinable(Exception):
    """A helper body that is not straight-line code (the kernel then calls the helper)."""


_SOURCE = pathlib.Path(__file__).with_name("fastmath.py")


@functools.lru_cache(maxsize=None)
def _fastmath_source():
    """({function name: its definition}, every module-level name) of fastmath.py, read as text.
    Not imported: fastmath.py defines numba functions, and importing it loads numba (0.2-0.4 s),
    which rendering a kernel's text does not need. A process's first compiled call renders its
    kernels while numba is imported on the warm-up thread, and importing fastmath.py made the
    call wait for that import (0.37 s of a warm start's 0.56 s first call); the kernel module
    imports fastmath itself when numba compiles or loads it, off the caller's thread."""
    tree = ast.parse(_SOURCE.read_text(encoding="utf-8"))
    defs, names = {}, set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            defs[node.name] = node
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return defs, frozenset(names)


@functools.lru_cache(maxsize=None)
def _parsed(name: str):
    """(parameter name, [(target, value expr)], return expr) of one helper body."""
    fdef = _fastmath_source()[0][name]
    params = [a.arg for a in fdef.args.args]
    if len(params) != 1:
        raise NotInlinable(f"{name} takes {len(params)} arguments")
    body = [s for s in fdef.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    stmts = []
    for s in body[:-1]:
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)):
            raise NotInlinable(f"{name}: line {s.lineno} is not a single-name assignment")
        stmts.append((s.targets[0].id, s.value))
    if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
        raise NotInlinable(f"{name} does not end in a return")
    return params[0], stmts, body[-1].value


class _Paster:
    def __init__(self, prefix: str):
        self.prefix = prefix
        self.count = 0
        self.lines: list[str] = []
        self.names: set[str] = set()     # module-level names of fastmath the text reads

    def paste(self, name: str, arg: str) -> str:
        """Emit the statements of body ``name`` applied to the expression ``arg``; return the
        expression of its result."""
        param, stmts, ret = _parsed(name)
        pre = f"{self.prefix}{self.count}_" if self.count else self.prefix
        self.count += 1
        local = {param} | {t for t, _ in stmts}
        if arg.isidentifier() and param not in {t for t, _ in stmts}:
            rename = {param: arg}
        else:
            rename = {param: pre + param}
            self.lines.append(f"{pre}{param} = {arg}")
        for target, value in stmts:
            code = self._expr(value, rename, local)
            rename[target] = pre + target
            self.lines.append(f"{pre}{target} = {code}")
        return self._expr(ret, rename, local)

    def _expr(self, node, rename, local) -> str:
        paster = self

        class Rewrite(ast.NodeTransformer):
            def visit_Call(self, call):
                self.generic_visit(call)
                f = call.func
                if isinstance(f, ast.Name) and f.id in _INLINABLE:
                    if len(call.args) != 1 or call.keywords:
                        raise NotInlinable(f"{f.id} called with {len(call.args)} arguments")
                    result = paster.paste(f.id, ast.unparse(call.args[0]))
                    return ast.parse(result, mode="eval").body
                return call

            def visit_IfExp(self, e):
                # both sides are computed anyway (the helpers are branch-free by design): one
                # select call instead of three numba blocks
                self.generic_visit(e)
                paster.names.add("_select")
                return ast.copy_location(ast.Call(ast.Name("_select", ast.Load()), [e.test, e.body, e.orelse], []), e)

            def visit_Name(self, n):
                if n.id in local:
                    return ast.copy_location(ast.Name(rename[n.id], ast.Load()), n)
                if n.id not in _MODULES and n.id not in _INLINABLE and n.id in _fastmath_source()[1]:
                    paster.names.add(n.id)
                return n

        tree = Rewrite().visit(ast.parse(ast.unparse(node), mode="eval"))
        return f"({ast.unparse(tree)})"


def inline_call(helper: str, arg: str, dtype_name: str, prefix: str):
    """(lines, result expression, fastmath names read) for ``helper(arg)`` with ``arg`` of
    dtype ``dtype_name``; raises :class:`NotInlinable` for anything the text cannot do (the
    kernel then calls the helper by name)."""
    if helper not in BODIES:
        raise NotInlinable(f"{helper} is not a fastmath helper")
    f32, f64 = BODIES[helper]
    if dtype_name == "float32":
        body = f32
    elif dtype_name == "float64":
        body = f64
    elif dtype_name in ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"):
        body, arg = f64, f"np.float64({arg})"
    else:
        raise NotInlinable(f"{helper} has no body for {dtype_name}")
    lines, result, names = _template(body, arg.isidentifier())
    arg_mark = _ARG_NAME if arg.isidentifier() else _ARG_TEXT

    def fill(text):
        return text.replace(_PREFIX, prefix).replace(arg_mark, arg)
    return [fill(line) for line in lines], fill(result), set(names)


# a body's text is pasted once per helper, dtype and kind of argument, with marks for the
# prefix and the argument: pasting parses and unparses the body's statements (1.5-6.5 ms a
# call), and a kernel made of a loop's unrolled steps pastes the same body hundreds of times
_PREFIX, _ARG_NAME, _ARG_TEXT = "__nbpfx__", "__nbarg__", "<arg>"


@functools.lru_cache(maxsize=None)
def _template(body: str, arg_is_name: bool):
    """(lines, result, names) of ``body`` pasted with the marks (an argument that is a name is
    used as it is; another is assigned to a temporary first, as text that is never parsed)."""
    p = _Paster(_PREFIX)
    result = p.paste(body, _ARG_NAME if arg_is_name else _ARG_TEXT)
    return tuple(p.lines), result, frozenset(p.names)


def import_line(names) -> str:
    """The import a kernel module needs for the pasted text's names ('' for none)."""
    if not names:
        return ""
    return f"from nbaccel.compiler.codegen.fastmath import {', '.join(sorted(names))}\n"
