"""Linear algebra ops. matmul is a primitive the compiler calls as an extern (BLAS)."""
from __future__ import annotations

from .. import dtypes as D
from .fronts import apply, as_tensor
from .meta import broadcast_shapes
from .registry import defop


def _matmul_infer(args, p):
    a, b = args
    sa, sb = tuple(a.shape), tuple(b.shape)
    if not sa or not sb:
        raise ValueError(f"matmul: both operands need at least 1 dimension, got shapes {sa} and {sb}")
    ka = sa[-1]
    kb = sb[-2] if len(sb) >= 2 else sb[0]
    if ka != kb:
        raise ValueError(f"matmul: shapes {sa} and {sb} are not aligned ({ka} != {kb})")
    batch = broadcast_shapes(sa[:-2], sb[:-2])
    shape = batch + ((sa[-2],) if len(sa) >= 2 else ()) + ((sb[-1],) if len(sb) >= 2 else ())
    dt = D.result_type(a, b)
    if dt.kind == "b":
        raise TypeError("matmul is not defined for bool tensors")
    return shape, dt


def _matmul_grad(g, out, a, b):
    # promote 1-D operands to matrices so one rule covers every case
    a2 = a.reshape((1,) + tuple(a.shape)) if a.ndim == 1 else a
    b2 = b.reshape(tuple(b.shape) + (1,)) if b.ndim == 1 else b
    g2 = g
    if a.ndim == 1:
        g2 = g2.reshape(tuple(g2.shape[:-1]) + (1, g2.shape[-1])) if b.ndim > 1 else g2.reshape((1,) + tuple(g2.shape))
    if b.ndim == 1:
        g2 = g2.reshape(tuple(g2.shape) + (1,))
    ga = g2 @ b2.swapaxes(-1, -2)
    gb = a2.swapaxes(-1, -2) @ g2
    if a.ndim == 1:
        ga = ga.reshape(tuple(ga.shape[:-2]) + (ga.shape[-1],))
    if b.ndim == 1:
        gb = gb.reshape(tuple(gb.shape[:-1]))
    return ga, gb


def _matmul_front(a, b):
    return apply(matmul, (as_tensor(a), as_tensor(b)), {})


matmul = defop("matmul", kind="linalg", impl=lambda xp, a, b: xp.matmul(a, b),
               infer=_matmul_infer, grad=_matmul_grad, front=_matmul_front,
               methods=("matmul", "__matmul__", "__rmatmul__"), numpy=("matmul", "linalg.matmul"))
