"""Whether a loop-IR kernel has a Triton rendering, and if not, why.

Checked before rendering (``triton.render_kernel``) so that a kernel Triton cannot spell fails
at once with a reason the report shows, and the compiler's safety net runs it eagerly. The
renderer reads the same spelling tables through :func:`spelling_table`.
"""
from __future__ import annotations

from ..schedule.loops import Kernel
from . import triton_syntax as S
from .common import is_cast as _is_cast, small_power, unrendered_params


class TritonUnsupported(NotImplementedError):
    """This kernel has no Triton rendering (the reason is the message)."""


def unsupported_reason(k: Kernel, interpret: bool) -> str | None:
    """Why this kernel cannot be rendered for Triton, or None."""
    for b in k.inputs + k.outputs:
        if b.dtype.name not in S.DTYPES:
            return f"triton has no {b.dtype.name}"
    for e in k.ops():
        name = e.op.name
        for d in [e.dtype] + [a.dtype for a in e.args if a.dtype is not None]:
            if d.name not in S.DTYPES:
                return f"triton has no {d.name}"
        if unrendered_params(e):
            return f"{name} with parameters has no triton rendering"
        if _is_cast(e) or small_power(e) is not None:
            continue
        if name in S.LIBDEVICE:
            if interpret:
                return f"{name} needs libdevice, which Triton's interpreter lacks"
            continue
        table = spelling_table(e.dtype if e.op.operands not in ("own", "common") else input_dtype(e))
        if name not in table:
            return f"{name} has no triton rendering for {e.dtype.name}"
    for r in k.reductions:
        for d in (r.dtype, r.src.dtype):
            if d.name not in S.DTYPES:
                return f"triton has no {d.name}"
    return None


def input_dtype(e):
    """The dtype of an op's first typed operand (its own dtype when it has none)."""
    ts = [a.dtype for a in e.args if a.dtype is not None]
    return ts[0] if ts else e.dtype


def spelling_table(dt):
    """The Triton spellings for operands of dtype ``dt``: the common ones and those of its kind."""
    t = dict(S.COMMON)
    if dt.kind == "f":
        t.update(S.FLOAT)
    elif dt.kind in "iu":
        t.update(S.INT)
        if dt.kind == "u":
            t.update(S.UNSIGNED)
    else:
        t.update(S.BOOL)
    return t
