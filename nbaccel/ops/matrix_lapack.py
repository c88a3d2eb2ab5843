"""The matrix primitives LAPACK computes, for ``nbaccel.linalg``: inv, det, slogdet, solve,
cholesky, svd, eigh, qr (with svdvals and eigvalsh over them).

They are primitives the compiler calls as externs (LAPACK via ``xp.linalg``). Singular or
non-square input raises ``numpy.linalg.LinAlgError`` (NumPy's own error). Multi-output
factorizations are one op with a ``part`` parameter; each part is computed by its own call.
Gradients that are not implemented (singular/eigen vectors, Q/R) raise when backward reaches
them, never silently drop. The functions built on these (pinv, matrix_rank, matrix_power, the
norms) are in matrix.py.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import dtypes as D, ops
from .batching import leading_dims_rule
from .fronts import apply, as_tensor
from .meta import broadcast_shapes, default_float
from .registry import defalias, defop

LinAlgError = np.linalg.LinAlgError
_INF = float("inf")


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
