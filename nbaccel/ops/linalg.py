"""Products: matmul (a primitive the compiler calls as an extern, BLAS), and the composites
over it: tensordot, einsum, outer, inner, dot, vecdot, cross, diagonal, trace,
matrix_transpose. The matrix functions of ``nbaccel.linalg`` (inv, det, solve, norms, ...)
live in matrix.py.
"""
from __future__ import annotations

import math

from .. import dtypes as D, ops
from . import einsum_rules, fronts as _fronts
from .batching import logical_ndim, pad_batched, reshape
from .fronts import apply, as_tensor, override
from .meta import ShapeError, broadcast_shapes, np_shape, shape_error, torch_broadcast_message
from .registry import defalias, defop
from ..autograd import needs_input_grad as need


_GUFUNC = "(n?,k),(k,m?)->(n?,m?)"


def _matmul_mismatch(a, b, sa, sb, ka, kb):
    def torch_msg():
        if len(sa) == 1 and len(sb) == 1:
            return (f"inconsistent tensor size, expected tensor [{ka}] and src [{kb}] to have the "
                    f"same number of elements, but got {ka} and {kb} elements respectively")
        if len(sb) == 1:
            return f"size mismatch, got input ({sa[-2]}), mat ({sa[-2]}x{ka}), vec ({kb})"
        if len(sa) <= 2 and len(sb) <= 2 or len(sb) == 2:
            rows = math.prod(sa[:-1]) if len(sa) > 1 else 1
            return f"mat1 and mat2 shapes cannot be multiplied ({rows}x{ka} and {kb}x{sb[-1]})"
        return (f"Expected size for first two dimensions of batch2 tensor to be: "
                f"[{math.prod(sb[:-2])}, {ka}] but got: [{math.prod(sb[:-2])}, {kb}].")
    return shape_error((a, b), f"matmul: Input operand 1 has a mismatch in its core dimension 0, "
                       f"with gufunc signature {_GUFUNC} (size {kb} is different from {ka})",
                       torch_msg)


def _matmul_infer(args, p):
    a, b = args
    sa, sb = tuple(a.shape), tuple(b.shape)
    if not sa or not sb:
        raise shape_error(args, f"matmul: Input operand {0 if not sa else 1} does not have enough "
                          f"dimensions (has 0, gufunc core with signature {_GUFUNC} requires 1)",
                          f"both arguments to matmul need to be at least 1D, but they are "
                          f"{len(sa)}D and {len(sb)}D")
    ka = sa[-1]
    kb = sb[-2] if len(sb) >= 2 else sb[0]
    if ka != kb:
        raise _matmul_mismatch(a, b, sa, sb, ka, kb)
    try:
        batch = broadcast_shapes(sa[:-2], sb[:-2])
    except ValueError:
        raise shape_error(args, lambda: (
            "operands could not be broadcast together with remapped shapes [original->remapped]: "
            + " ".join(f"{np_shape(s)}->{np_shape(s[:-2] + ('newaxis', 'newaxis'))}"
                       for s in (sa, sb)) + f"  and requested shape ({sa[-2]},{sb[-1]})"),
            lambda: torch_broadcast_message(sa[:-2], sb[:-2])) from None
    shape = batch + ((sa[-2],) if len(sa) >= 2 else ()) + ((sb[-1],) if len(sb) >= 2 else ())
    dt = D.result_type(a, b)
    if dt.kind == "b" and not any(getattr(x, "_np", False) for x in (a, b)):
        raise TypeError("matmul is not defined for bool tensors")   # (NumPy data: NumPy's bool matmul)
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
    ga = g2 @ b2.swapaxes(-1, -2) if need(0) else None   # (no matmul for an unneeded grad)
    gb = a2.swapaxes(-1, -2) @ g2 if need(1) else None
    if ga is None or gb is None:
        return (ga if ga is None or a.ndim != 1 else ga.reshape(tuple(ga.shape[:-2]) + (ga.shape[-1],)),
                gb if gb is None or b.ndim != 1 else gb.reshape(tuple(gb.shape[:-1])))
    if a.ndim == 1:
        ga = ga.reshape(tuple(ga.shape[:-2]) + (ga.shape[-1],))
    if b.ndim == 1:
        gb = gb.reshape(tuple(gb.shape[:-1]))
    return ga, gb


def _matmul_front(a, b):
    plain = _fronts.ENGINE.Tensor
    if type(a) is plain and type(b) is plain:
        return apply(matmul, (a, b), {})   # (two plain Tensors: nothing to override or convert)
    res = override(matmul.front, (a, b))
    if res is not NotImplemented:
        return res
    return apply(matmul, (as_tensor(a), as_tensor(b)), {})


def _matmul_batch(args, batched, params, size):
    """Vectors become matrices (a row, b a column), batched operands get as many matrix-batch
    dims as the other so broadcasting lines them up, and the vector dims go again after."""
    (a, b), (ba, bb) = args, batched
    la, lb = logical_ndim(a, ba), logical_ndim(b, bb)
    if la == 1:
        a = reshape(a, tuple(a.shape[:-1]) + (1, a.shape[-1]))
    if lb == 1:
        b = reshape(b, tuple(b.shape) + (1,))
    n = max(la, lb, 2)
    a = pad_batched(a, n) if ba else a
    b = pad_batched(b, n) if bb else b
    out = apply(matmul, (a, b), {})
    keep = tuple(out.shape)
    if lb == 1:
        keep = keep[:-1]
    if la == 1:
        keep = keep[:-2] + keep[-1:] if lb != 1 else keep[:-1]
    return reshape(out, keep)


def matmul_rows(xp, a, b):
    """``xp.matmul(a, b)``; a C-contiguous a of more than 2 dimensions times a matrix as one
    GEMM over a's rows: NumPy's matmul runs one GEMM per leading index instead (a linear
    layer on a GPT's (16, 64, 128) activations: 1.35 ms against 0.99 ms on one core)."""
    if a.ndim > 2 and b.ndim == 2 and a.flags.c_contiguous:
        rows = math.prod(a.shape[:-1])
        return xp.matmul(a.reshape(rows, a.shape[-1]), b).reshape(a.shape[:-1] + b.shape[1:])
    return xp.matmul(a, b)


matmul = defop("matmul", kind="linalg", impl=matmul_rows,
               batch_rule=_matmul_batch,
               infer=_matmul_infer, grad=_matmul_grad, front=_matmul_front,
               methods=("matmul", "__matmul__", "__rmatmul__"), numpy=("matmul", "linalg.matmul"),
               inplace=True)


def _mm(input, mat2):
    """PyTorch's ``mm``: a product of two matrices (2-D only), over matmul."""
    a, b = as_tensor(input), as_tensor(mat2)
    for t, what in ((a, "self"), (b, "mat2")):
        if t.ndim != 2:
            raise ShapeError(f"{what} must be a matrix")
    return _matmul_front(a, b)


def _bmm(input, mat2):
    """PyTorch's ``bmm``: a batch of matrix products (3-D only, same batch), over matmul."""
    a, b = as_tensor(input), as_tensor(mat2)
    for t, what in ((a, "batch1"), (b, "batch2")):
        if t.ndim != 3:
            raise ShapeError(f"{what} must be a 3D tensor")
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise ShapeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                         f"[{a.shape[0]}, {a.shape[2]}] but got: [{b.shape[0]}, {b.shape[1]}].")
    return _matmul_front(a, b)


defalias("mm", _mm, methods="mm")
defalias("bmm", _bmm, methods="bmm")


# ---- tensordot: permute + reshape + matmul ------------------------------------------------

def _axes_tuple(ax, ndim, which):
    ax = (ax,) if isinstance(ax, int) else tuple(int(a) for a in ax)
    for a in ax:
        if not -ndim <= a < ndim:
            raise IndexError(f"tensordot: axis {a} is out of bounds for {which} of dimension {ndim}")
    return tuple(a % ndim for a in ax)


def _tensordot_axes(a, b, axes):
    if isinstance(axes, int):
        if axes < 0 or axes > a.ndim or axes > b.ndim:
            raise ValueError(f"tensordot: axes={axes} is invalid for shapes {tuple(a.shape)} and "
                             f"{tuple(b.shape)}")
        return tuple(range(a.ndim - axes, a.ndim)), tuple(range(axes))
    try:
        ax_a, ax_b = axes
    except (TypeError, ValueError):
        raise ValueError(f"tensordot: axes must be an int or a pair of sequences, got {axes!r}") from None
    ax_a, ax_b = _axes_tuple(ax_a, a.ndim, "a"), _axes_tuple(ax_b, b.ndim, "b")
    if len(ax_a) != len(ax_b) or len(set(ax_a)) != len(ax_a) or len(set(ax_b)) != len(ax_b):
        raise ValueError(f"tensordot: axes {axes!r} must name the same number of distinct axes")
    return ax_a, ax_b


def _tensordot_infer(args, p):
    a, b = args
    ax_a, ax_b = p["axes"]
    for i, j in zip(ax_a, ax_b):
        if a.shape[i] != b.shape[j]:
            raise ValueError(f"tensordot: shape mismatch for sum: {tuple(a.shape)} axis {i} and "
                             f"{tuple(b.shape)} axis {j}")
    dt = D.result_type(a, b)
    if dt.kind == "b":
        raise TypeError("tensordot is not defined for bool tensors")
    shape = tuple(s for i, s in enumerate(a.shape) if i not in ax_a) + \
        tuple(s for i, s in enumerate(b.shape) if i not in ax_b)
    return shape, dt


def _tensordot_decomp(a, b, axes):
    ax_a, ax_b = axes
    free_a = [i for i in range(a.ndim) if i not in ax_a]
    free_b = [i for i in range(b.ndim) if i not in ax_b]
    k = math.prod(a.shape[i] for i in ax_a)
    sa = tuple(a.shape[i] for i in free_a)
    sb = tuple(b.shape[i] for i in free_b)
    am = a.permute(tuple(free_a) + ax_a).reshape((math.prod(sa), k))
    bm = b.permute(ax_b + tuple(free_b)).reshape((k, math.prod(sb)))
    return (am @ bm).reshape(sa + sb)


def _tensordot_front(a, b, axes=2, *, dims=None):
    a, b = as_tensor(a), as_tensor(b)
    axes = _tensordot_axes(a, b, dims if dims is not None else axes)
    return apply(tensordot, (a, b), {"axes": axes})


tensordot = defop(
    "tensordot", kind="linalg", decomp=_tensordot_decomp, infer=_tensordot_infer,
    impl=lambda xp, a, b, axes: xp.tensordot(a, b, axes=(list(axes[0]), list(axes[1]))),
    front=_tensordot_front, numpy=("tensordot", "linalg.tensordot"))


# ---- einsum ---------------------------------------------------------------------------------

def _einsum_front(subscripts, *operands, optimize=None, dtype=None):
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])       # torch.einsum(eq, [a, b])
    xs = [as_tensor(x) for x in operands]
    if not xs:
        raise ValueError("einsum: no operands")
    canon, sizes = einsum_rules.canonicalize(subscripts, [x.shape for x in xs])
    terms, _ = einsum_rules.split(canon)
    # broadcast size-1 dimensions up front, so the op (and its gradient) sees one size per letter
    xs = [x if tuple(x.shape) == tuple(sizes[c] for c in t) else
          x.broadcast_to(tuple(sizes[c] for c in t)) for x, t in zip(xs, terms)]
    out = apply(einsum, tuple(xs), {"subscripts": canon})
    return out.astype(dtype) if dtype is not None else out


def _einsum_infer(args, p):
    dt = D.result_type(*args)
    return einsum_rules.out_shape(p["subscripts"], [a.shape for a in args]), dt


einsum = defop(
    "einsum", kind="linalg", infer=_einsum_infer, grad=einsum_rules.grad,
    decomp=einsum_rules.decompose, front=_einsum_front, numpy="einsum",
    impl=lambda xp, *xs, subscripts: xp.einsum(subscripts, *xs, optimize=len(xs) > 1))


# ---- small products (aliases: no op of their own) ------------------------------------------

def _outer(a, b):
    """Outer product of the flattened inputs."""
    a, b = as_tensor(a), as_tensor(b)
    return a.reshape((-1, 1)) * b.reshape((1, -1))


def _inner(a, b):
    """Sum product over the last axes (NumPy's inner)."""
    a, b = as_tensor(a), as_tensor(b)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    return tensordot.front(a, b, axes=((a.ndim - 1,), (b.ndim - 1,)))


def _dot(a, b):
    """NumPy's dot: matmul for 1-D/2-D, a sum over a's last and b's second-to-last axis in N-D."""
    a, b = as_tensor(a), as_tensor(b)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    if a.ndim <= 2 and b.ndim <= 2:
        return a @ b
    return tensordot.front(a, b, axes=((a.ndim - 1,), (b.ndim - 2 if b.ndim >= 2 else 0,)))


def _vecdot(x1, x2, axis=-1, *, dim=None):
    """Array API vecdot: sum of conj(x1) * x2 over ``axis`` (of the broadcast shape)."""
    x1, x2 = as_tensor(x1), as_tensor(x2)
    axis = dim if dim is not None else axis
    nd = max(x1.ndim, x2.ndim)
    if not -nd <= axis < nd or nd == 0:
        raise IndexError(f"vecdot: axis {axis} is out of bounds for shapes {tuple(x1.shape)} and "
                         f"{tuple(x2.shape)}")
    ax = axis - nd if axis >= 0 else axis
    n1 = x1.shape[ax] if -ax <= x1.ndim else 1
    n2 = x2.shape[ax] if -ax <= x2.ndim else 1
    if n1 != n2:
        raise ValueError(f"vecdot: shapes {tuple(x1.shape)} and {tuple(x2.shape)} differ along "
                         f"axis {axis} ({n1} != {n2})")
    if x1.dtype.kind == "c":   # the standard (and NumPy 2): sum of conj(x1) * x2
        x1 = x1.conj()
    prod = x1 * x2
    # the standard: the promoted input dtype (a plain sum would widen small integers to int64)
    return prod.sum(axis=ax + nd, dtype=prod.dtype if prod.dtype.kind in "iu" else None)


def _matrix_transpose(x):
    """Swap the last two axes."""
    x = as_tensor(x)
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose needs at least 2 dimensions, got shape {tuple(x.shape)}")
    return x.swapaxes(-1, -2)


defalias("outer", _outer, numpy=("outer", "linalg.outer"), methods="outer")
defalias("inner", _inner, numpy="inner", methods="inner")
defalias("dot", _dot, numpy="dot", methods="dot")
defalias("vecdot", _vecdot, numpy=("vecdot", "linalg.vecdot"))
defalias("matrix_transpose", _matrix_transpose,
         numpy=("matrix_transpose", "linalg.matrix_transpose"))


# ---- cross --------------------------------------------------------------------------------

def _cross_infer(args, p):
    a, b = args
    shape = broadcast_shapes(a.shape, b.shape)
    if not shape or shape[p["axis"]] != 3 or a.shape[p["axis"]] != 3 or b.shape[p["axis"]] != 3:
        raise ValueError(f"cross: shapes {tuple(a.shape)} and {tuple(b.shape)} need size 3 along "
                         f"axis {p['axis']}")
    dt = D.result_type(a, b)
    if dt.kind == "b":
        raise TypeError("cross is not defined for bool tensors")
    return shape, dt


def _cross_front(a, b, axis=-1, *, dim=None, axisa=None, axisb=None, axisc=None):
    a, b = as_tensor(a), as_tensor(b)
    if axisa is not None or axisb is not None or axisc is not None:
        raise TypeError("cross: axisa/axisb/axisc are not supported; use axis")
    axis = dim if dim is not None else axis
    nd = max(a.ndim, b.ndim, 1)
    if not -nd <= axis < 0 and not 0 <= axis < nd:
        raise IndexError(f"cross: axis {axis} is out of bounds for dimension {nd}")
    axis = axis - nd if axis >= 0 else axis
    if a.ndim < -axis or b.ndim < -axis:
        raise ValueError(f"cross: shapes {tuple(a.shape)} and {tuple(b.shape)} need size 3 "
                         f"along axis {axis}")
    return apply(cross, (a, b), {"axis": axis})


def _cross_batch(args, batched, params, size):
    n = max(logical_ndim(a, b) for a, b in zip(args, batched))
    args = tuple(pad_batched(a, n) if b else a for a, b in zip(args, batched))
    return apply(cross, args, {"axis": params["axis"] % n - n})   # from the end: past the batch dim


cross = defop(
    "cross", kind="linalg", infer=_cross_infer, front=_cross_front, batch_rule=_cross_batch,
    impl=lambda xp, a, b, axis: xp.cross(a, b, axis=axis),
    grad=lambda g, out, a, b, axis: (cross.front(b, g, axis=axis), cross.front(g, a, axis=axis)),
    numpy=("cross", "linalg.cross"), methods="cross")


# ---- diagonal and trace ---------------------------------------------------------------------

def _diag_len(n1, n2, offset):
    return max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))


def _diagonal_infer(args, p):
    x = args[0]
    a1, a2 = p["axis1"], p["axis2"]
    rest = tuple(s for i, s in enumerate(x.shape) if i not in (a1, a2))
    return rest + (_diag_len(x.shape[a1], x.shape[a2], p["offset"]),), x.dtype


def _diagonal_grad(g, out, x, offset, axis1, axis2):
    # scatter g onto the diagonal with two 0/1 selection matrices (eye ops, so it traces): A @ (g * B)
    n1, n2, k = x.shape[axis1], x.shape[axis2], g.shape[-1]
    r0, c0 = (0, offset) if offset >= 0 else (-offset, 0)
    a = ops.eye(n1, k, k=-r0, dtype=g.dtype, device=g.device)
    b = ops.eye(k, n2, k=c0, dtype=g.dtype, device=g.device)
    full = a @ (g.reshape(tuple(g.shape) + (1,)) * b)
    order = [i for i in range(x.ndim) if i not in (axis1, axis2)] + [axis1, axis2]
    inv = [0] * x.ndim
    for i, o in enumerate(order):
        inv[o] = i
    return (full.permute(tuple(inv)),)


def _diagonal_front(x, offset=0, axis1=0, axis2=1, *, dim1=None, dim2=None):
    x = as_tensor(x)
    axis1 = dim1 if dim1 is not None else axis1
    axis2 = dim2 if dim2 is not None else axis2
    if x.ndim < 2:
        raise ValueError(f"diagonal needs at least 2 dimensions, got shape {tuple(x.shape)}")
    for a in (axis1, axis2):
        if not -x.ndim <= a < x.ndim:
            raise IndexError(f"diagonal: axis {a} is out of bounds for dimension {x.ndim}")
    a1, a2 = axis1 % x.ndim, axis2 % x.ndim
    if a1 == a2:
        raise ValueError("diagonal: axis1 and axis2 cannot be the same")
    return apply(diagonal, (x,), {"offset": int(offset), "axis1": a1, "axis2": a2})


diagonal = defop(
    "diagonal", kind="linalg", infer=_diagonal_infer, grad=_diagonal_grad,
    batch_rule=lambda args, batched, p, size: apply(
        diagonal, args, dict(p, axis1=p["axis1"] + 1, axis2=p["axis2"] + 1)),
    impl=lambda xp, x, offset, axis1, axis2: xp.diagonal(x, offset, axis1, axis2).copy(),
    front=_diagonal_front, numpy="diagonal", methods="diagonal")


def _trace(x, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """Sum along a diagonal (NumPy's trace: axes 0 and 1 by default)."""
    if out is not None:
        raise TypeError("trace: out= is not supported")
    return diagonal.front(x, offset, axis1, axis2).sum(axis=-1, dtype=dtype)


defalias("trace", _trace, numpy="trace", methods="trace")
