"""Matrix functions of ``nbaccel.linalg``: inv, det, slogdet, solve, cholesky, svd, eigh, qr,
pinv, matrix_rank, and the norms.

The factorizations are primitives the compiler calls as externs (LAPACK via ``xp.linalg``).
Singular or non-square input raises ``numpy.linalg.LinAlgError`` (NumPy's own error).
Multi-output factorizations are one op with a ``part`` parameter; each part is computed by
its own call. Gradients that are not implemented (singular/eigen vectors, Q/R, pinv) raise
when backward reaches them, never silently drop.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import dtypes as D, ops
from .batching import leading_dims_rule
from .fronts import apply, as_tensor
from .meta import broadcast_shapes, default_float, normalize_axis, reduced_shape
from .reduction import _expand_back
from .registry import defalias, defop

LinAlgError = np.linalg.LinAlgError
_INF = float("inf")


def _ops():
    return ops


def _float_dtype(x, args):
    return x.dtype if x.dtype.kind in "fc" else default_float(args)


def _lapack(x):
    """LAPACK has no half precision: compute float16/bfloat16 in float32 (the result is cast back)."""
    return x.astype(np.float32) if x.dtype.itemsize == 2 and x.dtype.kind != "i" else x


def _square(x, name):
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise LinAlgError(f"{name}: the last 2 dimensions must be square, got shape {tuple(x.shape)}")


def _square_infer(name, shape_fn=lambda s: s):
    def infer(args, p):
        x = args[0]
        _square(x, name)
        return shape_fn(tuple(x.shape)), _float_dtype(x, args)
    return infer


def _mat(g):
    """(...,) -> (..., 1, 1), to scale a stack of matrices by a stack of scalars."""
    return g.reshape(tuple(g.shape) + (1, 1))


def _no_grad_rule(what):
    def grad(g, out, *args, **params):
        raise RuntimeError(f"the gradient of {what} is not implemented")
    return grad


def _front1(op_ref):
    def front(x):
        return apply(op_ref(), (as_tensor(x),), {})
    return front


# ---- inv, det, slogdet ----------------------------------------------------------------------

inv = defop(
    "inv", kind="linalg", batch_rule=leading_dims_rule("inv"), infer=_square_infer("inv"),
    impl=lambda xp, x: xp.linalg.inv(_lapack(x)),
    grad=lambda g, out, x: (-(out.mT @ g @ out.mT),),
    front=_front1(lambda: inv), methods="inverse", numpy="linalg.inv")

det = defop(
    "det", kind="linalg", batch_rule=leading_dims_rule("det"), infer=_square_infer("det", lambda s: s[:-2]),
    impl=lambda xp, x: xp.linalg.det(_lapack(x)),
    grad=lambda g, out, x: (_mat(g * out) * inv.front(x).mT,),
    front=_front1(lambda: det), methods="det", numpy="linalg.det")


def _slogdet_grad(g, out, x, part):
    if part == "sign":
        return (None,)
    return (_mat(g) * inv.front(x).mT,)


SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])


def slogdet(x):
    """(sign, log|det|) of a stack of square matrices; log|det| is differentiable."""
    x = as_tensor(x)
    return SlogdetResult(apply(_slogdet, (x,), {"part": "sign"}),
                         apply(_slogdet, (x,), {"part": "logabsdet"}))


def _slogdet_infer(args, p):
    shape, dt = _square_infer("slogdet", lambda s: s[:-2])(args, p)
    return shape, D.real_of(dt) if p["part"] == "logabsdet" else dt   # log|det| is real


_slogdet = defop(
    "slogdet", kind="linalg", batch_rule=leading_dims_rule("slogdet"), infer=_slogdet_infer,
    impl=lambda xp, x, part: xp.linalg.slogdet(_lapack(x))[0 if part == "sign" else 1],
    grad=_slogdet_grad, front=slogdet, numpy="linalg.slogdet")


# ---- solve ------------------------------------------------------------------------------------

def _solve_infer(args, p):
    a, b = args
    _square(a, "solve")
    m = a.shape[-1]
    if b.ndim == 1:
        if b.shape[0] != m:
            raise ValueError(f"solve: shapes {tuple(a.shape)} and {tuple(b.shape)} are not aligned")
        shape = tuple(a.shape[:-1])
    else:
        if b.shape[-2] != m:
            raise ValueError(f"solve: shapes {tuple(a.shape)} and {tuple(b.shape)} are not aligned")
        shape = broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (m, b.shape[-1])
    dt = D.result_type(a, b)
    return shape, dt if dt.kind in "fc" else default_float(args)


def _solve_impl(xp, a, b):
    a, b = _lapack(a), _lapack(b)
    vec = b.ndim == 1
    if vec:
        b = b[:, None]
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    x = xp.linalg.solve(xp.broadcast_to(a, batch + a.shape[-2:]),
                        xp.broadcast_to(b, batch + b.shape[-2:]))
    return x[..., 0] if vec else x


def _solve_grad(g, out, a, b):
    if b.ndim == 1:  # a batch of vectors: solve with them as (..., m, 1) matrices
        g, out = g.reshape(tuple(g.shape) + (1,)), out.reshape(tuple(out.shape) + (1,))
    gb = solve(a.mT, g)
    ga = -(gb @ out.mT)
    return ga, (gb.reshape(tuple(gb.shape[:-1])) if b.ndim == 1 else gb)


def solve(a, b):
    """x with a @ x == b; b is a vector when 1-D, else a stack of matrices (NumPy 2)."""
    return apply(_solve, (as_tensor(a), as_tensor(b)), {})


_solve = defop("solve", kind="linalg", infer=_solve_infer, impl=_solve_impl, grad=_solve_grad,
               front=solve, numpy="linalg.solve")


# ---- cholesky -----------------------------------------------------------------------------------

def _cholesky_grad(g, out, x):
    # A = L L^T; gA = sym(L^-T Phi(L^T gL) L^-1), Phi = lower triangle with half the diagonal
    ops = _ops()
    n = x.shape[-1]
    eye = ops.eye(n, dtype=g.dtype, device=g.device)
    phi = ops.tril(ops.ones(n, n, dtype=g.dtype, device=g.device), -1) + 0.5 * eye
    linv = inv.front(out)
    s = linv.mT @ ((out.mT @ g) * phi) @ linv
    return ((s + s.mT) * 0.5,)


def _cholesky_front(x, upper=False):
    out = apply(_cholesky, (as_tensor(x),), {})
    return out.mT if upper else out


_cholesky = defop("cholesky", kind="linalg", batch_rule=leading_dims_rule("cholesky"), infer=_square_infer("cholesky"),
                  impl=lambda xp, x: xp.linalg.cholesky(_lapack(x)), grad=_cholesky_grad,
                  front=_cholesky_front, methods="cholesky", numpy="linalg.cholesky")


# ---- svd, eigh, qr -------------------------------------------------------------------------------

def _svd_infer(args, p):
    x = args[0]
    if x.ndim < 2:
        raise LinAlgError(f"svd needs at least 2 dimensions, got shape {tuple(x.shape)}")
    *batch, m, n = x.shape
    k = min(m, n)
    fm = p["full_matrices"]
    shape = {"U": (m, m if fm else k), "S": (k,), "Vh": (n if fm else k, n)}[p["part"]]
    dt = _float_dtype(x, args)
    return tuple(batch) + shape, D.real_of(dt) if p["part"] == "S" else dt   # S is real


def _svd_grad(g, out, x, part, full_matrices):
    if part != "S":
        raise RuntimeError("the gradient through the singular vectors of svd is not implemented; "
                           "differentiate the singular values (svdvals) instead")
    u = apply(_svd, (x,), {"part": "U", "full_matrices": False})
    vh = apply(_svd, (x,), {"part": "Vh", "full_matrices": False})
    return ((u * g.reshape(tuple(g.shape[:-1]) + (1, g.shape[-1]))) @ vh,)


def _svd_impl(xp, x, part, full_matrices):
    x = _lapack(x)
    if part == "S":
        return xp.linalg.svd(x, compute_uv=False)
    u, s, vh = xp.linalg.svd(x, full_matrices=full_matrices)
    return u if part == "U" else vh


SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])


def svd(x, full_matrices=True):
    """(U, S, Vh) with x == U @ diag(S) @ Vh; only S is differentiable."""
    x = as_tensor(x)
    return SVDResult(*(apply(_svd, (x,), {"part": p, "full_matrices": bool(full_matrices)})
                       for p in ("U", "S", "Vh")))


def svdvals(x):
    """Singular values, descending (differentiable)."""
    return apply(_svd, (as_tensor(x),), {"part": "S", "full_matrices": False})


_svd = defop("svd", kind="linalg", batch_rule=leading_dims_rule("svd"), infer=_svd_infer, impl=_svd_impl, grad=_svd_grad, front=svd,
             numpy="linalg.svd")
defalias("svdvals", svdvals, numpy="linalg.svdvals")


def _eigh_infer(args, p):
    x = args[0]
    _square(x, "eigh")
    shape = tuple(x.shape[:-1]) if p["part"] == "eigenvalues" else tuple(x.shape)
    dt = _float_dtype(x, args)
    return shape, D.real_of(dt) if p["part"] == "eigenvalues" else dt   # Hermitian: real values


def _eigh_grad(g, out, x, part):
    if part != "eigenvalues":
        raise RuntimeError("the gradient through the eigenvectors of eigh is not implemented; "
                           "differentiate the eigenvalues (eigvalsh) instead")
    v = apply(_eigh, (x,), {"part": "eigenvectors"})
    return ((v * g.reshape(tuple(g.shape[:-1]) + (1, g.shape[-1]))) @ v.mT,)


EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])


def eigh(x):
    """Eigen-decomposition of a stack of symmetric matrices (lower triangle read)."""
    x = as_tensor(x)
    return EighResult(apply(_eigh, (x,), {"part": "eigenvalues"}),
                      apply(_eigh, (x,), {"part": "eigenvectors"}))


def eigvalsh(x):
    """Eigenvalues of symmetric matrices, ascending (differentiable)."""
    return apply(_eigh, (as_tensor(x),), {"part": "eigenvalues"})


_eigh = defop("eigh", kind="linalg", batch_rule=leading_dims_rule("eigh"), infer=_eigh_infer, grad=_eigh_grad, front=eigh,
              impl=lambda xp, x, part: xp.linalg.eigh(_lapack(x))[0 if part == "eigenvalues" else 1],
              numpy="linalg.eigh")
defalias("eigvalsh", eigvalsh, numpy="linalg.eigvalsh")


def _qr_infer(args, p):
    x = args[0]
    if x.ndim < 2:
        raise LinAlgError(f"qr needs at least 2 dimensions, got shape {tuple(x.shape)}")
    *batch, m, n = x.shape
    k = min(m, n) if p["mode"] == "reduced" else m
    shape = (m, k) if p["part"] == "Q" else (k, n)
    return tuple(batch) + shape, _float_dtype(x, args)


QRResult = namedtuple("QRResult", ["Q", "R"])


def qr(x, mode="reduced"):
    """(Q, R) with x == Q @ R; mode 'reduced' or 'complete' (not differentiable)."""
    if mode not in ("reduced", "complete"):
        raise ValueError(f"qr: mode must be 'reduced' or 'complete', got {mode!r}")
    x = as_tensor(x)
    return QRResult(*(apply(_qr, (x,), {"part": p, "mode": mode}) for p in ("Q", "R")))


_qr = defop("qr", kind="linalg", batch_rule=leading_dims_rule("qr"), infer=_qr_infer, grad=_no_grad_rule("qr"), front=qr,
            impl=lambda xp, x, part, mode: xp.linalg.qr(_lapack(x), mode=mode)[part == "R"],
            numpy="linalg.qr")


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
        eye = _ops().eye(x.shape[-1], dtype=x.dtype, device=x.device)
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
    ops = _ops()
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
    ops = _ops()
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
    ops = _ops()
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
