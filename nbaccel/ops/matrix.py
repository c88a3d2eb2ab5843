"""Matrix functions of ``nbaccel.linalg`` built over the LAPACK primitives: pinv, matrix_rank,
matrix_power, and the norms.

The primitives themselves (inv, det, slogdet, solve, cholesky, svd, eigh, qr) are in
matrix_lapack.py, imported first so they register before these; their names are importable
from here too. Singular or non-square input raises ``numpy.linalg.LinAlgError`` (NumPy's own
error); the gradient of pinv raises when backward reaches it, never silently drops.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as D, ops
from .batching import leading_dims_rule
from .fronts import apply, as_tensor
from .meta import default_float, normalize_axis, reduced_shape
from .reduction import _expand_back
from .registry import defalias, defop
# the primitives first (they register before the functions below); the names are public here too
from .matrix_lapack import (  # noqa: F401
    _INF, EighResult, LinAlgError, QRResult, SlogdetResult, SVDResult, _cholesky_front, _float_dtype,
    _lapack, _no_grad_rule, _square, det, eigh, eigvalsh, inv, qr, slogdet, solve, svd, svdvals,
)


# ---- pinv, matrix_rank, matrix_power -----------------------------------------------------------

def _pinv_infer(args, p):
    x = args[0]
    if x.ndim < 2:
        raise LinAlgError(f"pinv needs at least 2 dimensions, got shape {tuple(x.shape)}")
    return tuple(x.shape[:-2]) + (x.shape[-1], x.shape[-2]), _float_dtype(x, args)


def _pinv_front(x, rtol=None, *, rcond=None):
    rtol = rcond if rcond is not None else rtol
    return apply(pinv, (as_tensor(x),), {"rtol": None if rtol is None else float(rtol)})


def _pinv_impl(xp, x, rtol):
    x = _lapack(x) if x.dtype.kind in "fc" else x.astype(np.float64)   # (integers: via float64)
    if rtol is None:
        rtol = max(x.shape[-2:]) * float(np.finfo(x.dtype).eps)
    return xp.linalg.pinv(x, rcond=rtol)


pinv = defop("pinv", kind="linalg", batch_rule=leading_dims_rule("pinv"), infer=_pinv_infer, impl=_pinv_impl,
             grad=_no_grad_rule("pinv"), front=_pinv_front, numpy="linalg.pinv")


def _rank_impl(xp, x, rtol):
    s = xp.linalg.svd(_lapack(x), compute_uv=False)
    tol = (max(x.shape[-2:]) * float(np.finfo(s.dtype).eps)) if rtol is None else rtol
    smax = s.max(axis=-1, keepdims=True) if s.shape[-1] else xp.zeros(s.shape[:-1] + (1,), s.dtype)
    return (s > tol * smax).sum(axis=-1)


def _rank_front(x, rtol=None, *, tol=None, hermitian=False):
    x = as_tensor(x)
    if tol is not None:
        raise TypeError("matrix_rank: use rtol (relative tolerance); absolute tol is not supported")
    return apply(matrix_rank, (x,), {"rtol": None if rtol is None else float(rtol)})


def _rank_infer(args, p):
    x = args[0]
    if x.ndim < 2:
        raise LinAlgError(f"matrix_rank needs at least 2 dimensions, got shape {tuple(x.shape)}")
    return tuple(x.shape[:-2]), D.int64


matrix_rank = defop("matrix_rank", kind="linalg", batch_rule=leading_dims_rule("matrix_rank"), differentiable=False, infer=_rank_infer,
                    impl=_rank_impl, front=_rank_front, numpy="linalg.matrix_rank")


def _matrix_power(x, n):
    """x @ x @ ... (n times); n == 0 gives identities, n < 0 powers of inv(x)."""
    x = as_tensor(x)
    _square(x, "matrix_power")
    n = int(n)
    if n < 0:
        x, n = inv.front(x), -n
    if n == 0:
        eye = ops.eye(x.shape[-1], dtype=x.dtype, device=x.device)
        return eye.broadcast_to(tuple(x.shape)) * 1
    result, base = None, x
    while n:                              # square-and-multiply
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return result


defalias("matrix_power", _matrix_power, numpy="linalg.matrix_power")


# ---- norms ------------------------------------------------------------------------------------

def _vnorm_impl(xp, x, axis, keepdims, ord):
    if x.dtype.kind not in "fc" or x.dtype.itemsize == 2:
        x = x.astype(np.float64 if x.dtype.kind not in "fc" else np.float32)
    a = xp.abs(x)
    if ord == _INF:
        return xp.max(a, axis=axis, keepdims=keepdims)
    if ord == -_INF:
        return xp.min(a, axis=axis, keepdims=keepdims)
    if ord == 0:
        return xp.sum(a != 0, axis=axis, keepdims=keepdims).astype(a.dtype)
    if ord == 1:
        return xp.sum(a, axis=axis, keepdims=keepdims)
    if ord == 2:
        return xp.sqrt(xp.sum(a * a, axis=axis, keepdims=keepdims))
    return xp.sum(a ** ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)


def _vnorm_decomp(x, axis, keepdims, ord):
    if x.dtype.kind not in "fc":
        x = x.astype(default_float([x]))
    a = ops.abs(x)
    if ord == _INF:
        return a.amax(axis=axis, keepdims=keepdims)
    if ord == -_INF:
        return a.amin(axis=axis, keepdims=keepdims)
    if ord == 0:
        return (a != 0).astype(a.dtype).sum(axis=axis, keepdims=keepdims)
    if ord == 1:
        return a.sum(axis=axis, keepdims=keepdims)
    if ord == 2:
        return ops.sqrt((a * a).sum(axis=axis, keepdims=keepdims))
    return ops.power((a ** ord).sum(axis=axis, keepdims=keepdims), 1.0 / ord)


def _vnorm_grad(g, out, x, axis, keepdims, ord):
    ge = _expand_back(g, x, axis, keepdims)
    oe = _expand_back(out, x, axis, keepdims)
    if ord == 0:
        return (ops.zeros_like(x),)
    if ord == 1:
        return (ge * ops.sign(x),)
    if ord in (_INF, -_INF):
        mask = ops.equal(ops.abs(x), oe).astype(g.dtype)
        count = mask.sum(axis=axis, keepdims=True) if axis is not None else \
            mask.sum().reshape((1,) * x.ndim)
        return (ge * ops.sign(x) * mask / count,)
    safe_o = ops.where(oe == 0, 1, oe)
    if ord == 2:
        return (ge * x / safe_o,)   # 0 at a zero norm, as PyTorch
    ax = ops.abs(x)
    safe_x = ops.where(ax == 0, 1, ax)
    res = ge * ops.sign(x) * (safe_x / safe_o) ** (ord - 1)
    return (ops.where(oe == 0, 0, res),)


def _vnorm_infer(args, p):
    x = args[0]
    return reduced_shape(x.shape, p["axis"], p["keepdims"]), D.real_of(_float_dtype(x, args))


def _vnorm_front(x, axis=None, keepdims=False, ord=2, *, dim=None, keepdim=None, dtype=None):
    x = as_tensor(x)
    axis = dim if dim is not None else axis
    keepdims = keepdim if keepdim is not None else keepdims
    if isinstance(ord, str) or ord is None:
        raise ValueError(f"vector_norm: ord must be a number, got {ord!r}")
    out = apply(vector_norm, (x,), {"axis": normalize_axis(axis, x.ndim),
                                    "keepdims": bool(keepdims), "ord": float(ord)})
    return out.astype(dtype) if dtype is not None else out


vector_norm = defop("vector_norm", kind="reduce", infer=_vnorm_infer, impl=_vnorm_impl,
                    decomp=_vnorm_decomp, grad=_vnorm_grad, front=_vnorm_front,
                    numpy="linalg.vector_norm")


def _matrix_norm(x, keepdims=False, ord="fro", *, dim=None, keepdim=None):
    """Array API matrix_norm over the last two axes: 'fro', 'nuc', 1, -1, 2, -2, inf, -inf."""
    x = as_tensor(x)
    if dim is not None and tuple(dim) not in ((-2, -1), (x.ndim - 2, x.ndim - 1)):
        x = x.permute(tuple(i for i in range(x.ndim) if i not in {d % x.ndim for d in dim})
                      + tuple(d % x.ndim for d in dim))
    keepdims = keepdim if keepdim is not None else keepdims
    if x.ndim < 2:
        raise ValueError(f"matrix_norm needs at least 2 dimensions, got shape {tuple(x.shape)}")
    if x.dtype.kind not in "fc":
        x = x.astype(default_float([x]))
    if ord == "fro":
        r = vector_norm.front(x, axis=(-2, -1))
    elif ord == "nuc":
        r = svdvals(x).sum(axis=-1)
    elif ord in (1, -1, _INF, -_INF):
        s = ops.abs(x).sum(axis=-2 if ord in (1, -1) else -1)
        r = s.amax(axis=-1) if ord > 0 else s.amin(axis=-1)
    elif ord in (2, -2):
        s = svdvals(x)
        r = s.amax(axis=-1) if ord > 0 else s.amin(axis=-1)
    else:
        raise ValueError(f"matrix_norm: invalid ord {ord!r}")
    return r.reshape(tuple(r.shape) + (1, 1)) if keepdims else r


defalias("matrix_norm", _matrix_norm, numpy="linalg.matrix_norm")


def _norm(x, ord=None, axis=None, keepdims=False, *, p=None, dim=None, keepdim=None):
    """NumPy's linalg.norm (also PyTorch's Tensor.norm spellings p/dim/keepdim)."""
    x = as_tensor(x)
    ord = p if p is not None else ord
    axis = dim if dim is not None else axis
    keepdims = keepdim if keepdim is not None else keepdims
    if isinstance(axis, int):
        axis = (axis,)
    if axis is None:
        if ord is None or ord == "fro" or ord == 2 and x.ndim == 1:
            return vector_norm.front(x, axis=None, keepdims=keepdims)
        axis = tuple(range(x.ndim))
    axis = tuple(axis)
    if len(axis) == 1:
        if isinstance(ord, str):
            raise ValueError(f"norm: invalid ord {ord!r} for a vector norm")
        return vector_norm.front(x, axis=axis, keepdims=keepdims, ord=2 if ord is None else ord)
    if len(axis) == 2:
        a1, a2 = (a % x.ndim for a in axis)
        if a1 == a2:
            raise ValueError("norm: duplicate axes")
        rest = tuple(i for i in range(x.ndim) if i not in (a1, a2))
        r = _matrix_norm(x.permute(rest + (a1, a2)), ord="fro" if ord is None else ord)
        if keepdims:
            shape = list(x.shape)
            shape[a1] = shape[a2] = 1
            r = r.reshape(tuple(shape))
        return r
    raise ValueError(f"norm: improper number of axes {axis}")


defalias("norm", _norm, numpy="linalg.norm", methods="norm")
