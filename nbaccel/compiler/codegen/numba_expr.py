"""The numba tier's per-element expressions, kept apart from the loop-nest renderer (``numba.py``).

``NumbaExpressions`` is a mixin of ``numba._Renderer``: it turns one loop-IR expression into
numba statements, memoised by the expression's key so a shared subexpression is computed once.
A load reads its buffer at the renderer's flat index (a padded load reads its fill outside the
source); a constant becomes a typed module global, so float32 code never promotes; an op is
spelled from :data:`SCALAR` (``numba_syntax.py``) with its operands cast to the op's dtype
class; a fastmath helper (``fexp``, ``ftanh``, ...) is pasted in as straight-line statements
(``fastmath_text.py``).

The renderer provides ``lines``, ``consts``, ``recip``, ``pasted``, ``fm_names``, ``arg_of``,
``index`` and ``inside``.
"""
from __future__ import annotations

from ..schedule.loops import Expr
from . import fastmath_text
from .common import operand_dtype, weak_dtype
from .numba_syntax import (BOOL_SCALAR, COMPLEX_SCALAR, SCALAR, _casts_inputs, _float_lit, _is_cast, _np_type,
                           _product_power, float_to_int)


class NumbaExpressions:
    """Per-element expressions of the numba renderer (a mixin; see the module docstring)."""

    def const(self, value, dtype):
        name = f"K{len(self.consts)}"
        if isinstance(value, bool) or dtype.kind == "b":
            lit = "True" if value else "False"
        elif dtype.kind == "c":
            z = complex(value)
            lit = f"{_np_type(dtype)}(complex({_float_lit(z.real)}, {_float_lit(z.imag)}))"
        elif dtype.kind == "f":
            lit = f"{_np_type(dtype)}({float(value)!r})" if value == value and abs(value) != float("inf") \
                else f"{_np_type(dtype)}('{value}')"
        elif isinstance(value, float):
            lit = f"np.float64({value!r})"
        else:
            lit = f"{_np_type(dtype)}({int(value)})"
        self.consts.append(f"{name} = {lit}")
        return name

    # -- expressions ---------------------------------------------------------------------------
    def expr(self, e: Expr, var, memo, pad, accs):
        key = e.key()
        if key in memo:
            return memo[key]
        if e.kind == "load":
            code = f"x{len(memo)}"
            where = ("in", id(e.buf), e.layout.key())
            read = f"{self.arg_of[id(e.buf)]}[{self.index(where, var)}]"
            cond = self.inside(where, var)
            if cond:        # a conditional expression: a masked-out position reads no memory
                read = f"{read} if {cond} else {self.const(e.layout.fill, e.dtype)}"
            self.lines.append(f"{pad}{code} = {read}")
        elif e.kind == "acc":
            code = accs[id(e.red)]
        elif e.kind == "const":
            code = self.const(e.value, e.dtype)
        elif _product_power(e):
            base = self.expr(e.args[0], var, memo, pad, accs)
            name = f"e{len(memo)}"
            prod = " * ".join([base] * int(e.args[1].value))
            self.lines.append(f"{pad}{name} = {_np_type(e.dtype)}({prod})" if e.dtype.kind in "iuf"
                              and e.dtype.name != "float64" else f"{pad}{name} = {prod}")
            code = name
        elif e.op.name == "divide" and e.args[1].key() in self.recip:
            num = self.expr(e.args[0], var, memo, pad, accs)
            name = f"e{len(memo)}"
            self.lines.append(f"{pad}{name} = {_np_type(e.dtype)}({num} * {self.recip[e.args[1].key()]})")
            code = name
        else:
            args = []
            for a in e.args:
                if a.kind == "const" and a.dtype is None:
                    args.append(self.const(a.value, weak_dtype(e, a.value)))
                else:
                    args.append(self.expr(a, var, memo, pad, accs))
            name = f"e{len(memo)}"
            self.lines.append(f"{pad}{name} = {self.scalar(e, args, pad)}")
            code = name
        memo[key] = code
        return code

    def scalar(self, e: Expr, args, pad=None):
        name = e.op.name
        if _is_cast(e):
            if e.dtype.kind == "b":
                return f"({args[0]} != 0)"
            src = e.args[0].dtype
            x = f"({args[0]}).real" if e.dtype.kind != "c" and src is not None and src.kind == "c" else args[0]
            if e.dtype.kind in "iu" and src is not None and src.kind in "fc":   # (NumPy drops an
                return float_to_int(x, e.dtype.name)                      # imaginary part)
            return f"{_np_type(e.dtype)}({x})"
        if e.dtype.kind == "b" and name in BOOL_SCALAR:
            return BOOL_SCALAR[name].format(*args)
        if _casts_inputs(e):
            weak = [a.value for a in e.args if a.kind == "const" and a.dtype is None]
            want = (weak_dtype(e, weak[0]) if weak else operand_dtype(e)) if e.op.operands == "common" else e.dtype
            first = 1 if e.op.operands == "select" else 0
            args = list(args)
            for i, a in enumerate(e.args):
                if i >= first and a.dtype is not None and a.dtype is not want and want.kind != "b":
                    args[i] = f"{_np_type(want)}({args[i]})"
        complex_in = any(a.dtype is not None and a.dtype.kind == "c" for a in e.args)
        template = COMPLEX_SCALAR.get(name) if complex_in else None
        code = self.paste(e, args, pad) if template is None and pad is not None else None
        if code is None:
            code = (template or SCALAR[name]).format(*args)
        if e.dtype.kind in "iufc" and e.dtype.name not in ("float64", "complex128"):
            code = f"{_np_type(e.dtype)}({code})"
        return code

    def paste(self, e: Expr, args, pad):
        """A fastmath helper call (``fexp(x)``) as its statements pasted in before the current
        line, returning the result expression; None when the op calls no helper. numba would
        otherwise inline the helper at its IR level, which is most of a cold compile
        (``fastmath_text.py``)."""
        template = SCALAR[e.op.name]
        helper = template.split("(", 1)[0]
        if helper not in fastmath_text.BODIES or template != f"{helper}({{0}})" or e.args[0].dtype is None:
            return None
        try:
            lines, result, names = fastmath_text.inline_call(helper, args[0], e.args[0].dtype.name,
                                                             f"h{self.pasted}_")
        except fastmath_text.NotInlinable:
            return None
        self.pasted += 1
        self.fm_names |= names
        self.lines.extend(pad + line for line in lines)
        return result
