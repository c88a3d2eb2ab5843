"""Linear algebra against NumPy: products, einsum, tensordot, nbaccel.linalg, gradients."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nbaccel as nb
from oracle import assert_close, check, gradcheck, random_array

RNG = np.random.default_rng(5)


def spd(n, batch=()):
    """A well-conditioned symmetric positive definite matrix (stack)."""
    a = RNG.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def wellcond(shape):
    return RNG.standard_normal(shape) + shape[-1] * np.eye(shape[-1])


# ---- matmul ---------------------------------------------------------------------------------

MATMUL_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
                 ((5, 2, 3), (3, 4)), ((3,), (5, 3, 4)), ((5, 2, 3), (3,)),
                 ((2, 1, 2, 3), (5, 3, 4)), ((0, 3), (3, 2)), ((2, 0), (0, 3))]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_matmul(sa, sb, dtype):
    check(lambda a, b: a @ b, np.matmul, random_array(sa, dtype), random_array(sb, dtype),
          rtol=1e-4 if dtype == "float32" else None)


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES[:8])
def test_matmul_grad(sa, sb):
    gradcheck(lambda a, b: nb.matmul(a, b), random_array(sa, "float64"), random_array(sb, "float64"))


def test_matmul_mixed_dtypes_and_numpy_dispatch():
    a, b = random_array((2, 3), "float32"), random_array((3, 2), "float64")
    out = np.matmul(nb.asarray(a), nb.asarray(b))
    assert isinstance(out, nb.Tensor) and out.dtype == nb.float64


# ---- tensordot, einsum, small products ------------------------------------------------------

@pytest.mark.parametrize("sa,sb,axes", [
    ((3, 4), (4, 5), 1), ((2, 3, 4), (3, 4, 5), 2), ((2, 3), (2, 3), 0),
    ((2, 3, 4), (4, 3, 2), ([1, 2], [1, 0])), ((3, 4, 5), (5, 3), ((0, 2), (1, 0))),
    ((2, 3), (3, 2), ((-1,), (0,)))])
def test_tensordot(sa, sb, axes):
    a, b = random_array(sa, "float64"), random_array(sb, "float64")
    check(lambda x, y: nb.tensordot(x, y, axes=axes), lambda x, y: np.tensordot(x, y, axes=axes), a, b)
    gradcheck(lambda x, y: nb.tensordot(x, y, axes=axes), a, b)
    # the decomposition the compiler sees gives the same values
    op = nb.ops.OPS["tensordot"]
    x, y = nb.asarray(a), nb.asarray(b)
    assert_close(op.decomp(x, y, nb.ops.linalg._tensordot_axes(x, y, axes)), np.tensordot(a, b, axes))
    assert isinstance(np.tensordot(x, y, axes=axes), nb.Tensor)


def test_tensordot_errors():
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(5, 2\)"):
        nb.tensordot(nb.ones(3, 4), nb.ones(5, 2), axes=1)
    with pytest.raises(ValueError):
        nb.tensordot(nb.ones(3), nb.ones(3), axes=2)


EINSUMS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]), ("ij->", [(2, 3)]), ("ij->ji", [(2, 3)]), ("i,i->", [(4,), (4,)]),
    ("i,j->ij", [(3,), (4,)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]), ("...i,...i", [(2, 3), (3,)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]), ("iij->j", [(2, 2, 3)]),
    ("ijk,ikl->jl", [(2, 3, 4), (2, 4, 1)]), ("i,i,i->i", [(3,), (3,), (3,)]),
    ("ab,cd->", [(2, 2), (3, 1)]), ("ij,jk->ik", [(2, 1), (4, 5)]), ("Bab", [(2, 3, 2)]),
]


@pytest.mark.parametrize("subs,shapes", EINSUMS)
def test_einsum_values_grads_and_decomposition(subs, shapes):
    arrays = [random_array(s, "float64") for s in shapes]
    check(lambda *xs: nb.einsum(subs, *xs), lambda *xs: np.einsum(subs, *xs), *arrays)
    gradcheck(lambda *xs: nb.einsum(subs, *xs), *arrays)
    from nbaccel.ops import einsum_rules
    xs = [nb.asarray(a) for a in arrays]
    canon, sizes = einsum_rules.canonicalize(subs, [a.shape for a in arrays])
    terms, _ = einsum_rules.split(canon)
    xs = [x.broadcast_to(tuple(sizes[c] for c in t)) for x, t in zip(xs, terms)]
    assert_close(einsum_rules.decompose(*xs, subscripts=canon), np.einsum(subs, *arrays))


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_einsum_dtypes(dtype):
    a, b = random_array((2, 3), dtype), random_array((3, 2), dtype)
    check(lambda x, y: nb.einsum("ij,jk->ik", x, y), lambda x, y: np.einsum("ij,jk->ik", x, y), a, b,
          rtol=1e-5)


def test_einsum_second_order_and_errors():
    x = nb.asarray(random_array((3, 3), "float64")).requires_grad_()
    y = nb.einsum("ij,jk->", x, x)
    (gx,) = nb.autograd.grad(y, x, create_graph=True)
    gx.sum().backward()
    assert x.grad is not None
    with pytest.raises(ValueError, match="operand"):
        nb.einsum("ij,jk", nb.ones(2, 3))
    with pytest.raises(ValueError, match="size"):
        nb.einsum("ij,jk", nb.ones(2, 3), nb.ones(4, 5))
    with pytest.raises(ValueError):
        nb.einsum("ij->k", nb.ones(2, 3))
    assert isinstance(np.einsum("ij->j", nb.ones(2, 3)), nb.Tensor)


@pytest.mark.parametrize("name,npf,shapes", [
    ("outer", np.outer, [(3,), (4,)]), ("inner", np.inner, [(2, 3), (4, 3)]),
    ("inner", np.inner, [(3,), (3,)]), ("dot", np.dot, [(2, 3), (3,)]),
    ("dot", np.dot, [(2, 3, 4), (5, 4, 2)]), ("vecdot", np.vecdot, [(2, 3), (3,)]),
    ("cross", np.cross, [(4, 3), (3,)]), ("matrix_transpose", np.matrix_transpose, [(2, 3, 4)]),
    ("trace", np.trace, [(3, 4)]), ("trace", np.trace, [(3, 4, 2)]),
    ("diagonal", np.diagonal, [(3, 4)]), ("diagonal", np.diagonal, [(2, 3, 4)])])
def test_products(name, npf, shapes):
    arrays = [random_array(s, "float64") for s in shapes]
    fn = getattr(nb, name)
    check(fn, npf, *arrays)
    gradcheck(fn, *arrays)
    assert isinstance(npf(*(nb.asarray(a) for a in arrays)), nb.Tensor)


@pytest.mark.parametrize("offset", [-2, -1, 0, 1, 3])
def test_diagonal_offsets_and_axes(offset):
    a = random_array((3, 4, 5), "float64")
    for ax1, ax2 in [(0, 1), (2, 0), (-1, -2)]:
        check(lambda x: nb.diagonal(x, offset, ax1, ax2), lambda x: np.diagonal(x, offset, ax1, ax2), a)
        gradcheck(lambda x: nb.diagonal(x, offset, ax1, ax2), a)
    check(lambda x: nb.linalg.diagonal(x, offset=offset), lambda x: np.linalg.diagonal(x, offset=offset), a)
    check(lambda x: nb.linalg.trace(x, offset=offset), lambda x: np.linalg.trace(x, offset=offset), a)


def test_vecdot_axis_and_cross_errors():
    a, b = random_array((3, 4), "float64"), random_array((3, 4), "float64")
    check(lambda x, y: nb.vecdot(x, y, axis=0), lambda x, y: np.vecdot(x, y, axis=0), a, b)
    with pytest.raises(ValueError, match="differ"):
        nb.vecdot(nb.ones(3), nb.ones(4))
    with pytest.raises(ValueError, match="size 3"):
        nb.cross(nb.ones(4), nb.ones(4))


# ---- nbaccel.linalg -------------------------------------------------------------------------

@pytest.mark.parametrize("batch", [(), (2,), (2, 3)])
def test_inv_det_slogdet_solve(batch):
    a = wellcond(batch + (3, 3))
    b_vec, b_mat = RNG.standard_normal((3,)), RNG.standard_normal(batch + (3, 2))
    check(nb.linalg.inv, np.linalg.inv, a)
    check(nb.linalg.det, np.linalg.det, a)
    check(lambda x: nb.linalg.slogdet(x).logabsdet, lambda x: np.linalg.slogdet(x).logabsdet, a)
    check(lambda x: nb.linalg.slogdet(x).sign, lambda x: np.linalg.slogdet(x).sign, a)
    check(nb.linalg.solve, np.linalg.solve, a, b_vec)
    check(nb.linalg.solve, np.linalg.solve, a, b_mat)
    gradcheck(nb.linalg.inv, a)
    gradcheck(nb.linalg.det, a)
    gradcheck(lambda x: nb.linalg.slogdet(x).logabsdet, a)
    gradcheck(nb.linalg.solve, a, b_vec)
    gradcheck(nb.linalg.solve, a, b_mat)


def test_solve_broadcasts_batches():
    a, b = wellcond((2, 1, 3, 3)), RNG.standard_normal((4, 3, 2))
    check(nb.linalg.solve, np.linalg.solve, a, b)
    gradcheck(nb.linalg.solve, a, b)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64"])
def test_linalg_dtypes(dtype):
    a = (wellcond((3, 3)) * 2).astype(dtype)
    got = nb.linalg.inv(nb.asarray(a))
    want = np.linalg.inv(a.astype(np.float64))
    assert got.dtype == (nb.dtypes.dtype(dtype) if dtype != "int64" else nb.float64)
    assert_close(np.asarray(got).astype(np.float64), want, rtol=1e-2, atol=1e-3, check_dtype=False)


def test_singular_matrix_raises_linalgerror():
    assert nb.linalg.LinAlgError is np.linalg.LinAlgError
    z = nb.zeros(3, 3, dtype=nb.float64)
    with pytest.raises(np.linalg.LinAlgError):
        nb.linalg.inv(z)
    with pytest.raises(nb.linalg.LinAlgError):
        nb.linalg.solve(z, nb.ones(3, dtype=nb.float64))
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.inv(z)
    with pytest.raises(np.linalg.LinAlgError, match="square"):
        nb.linalg.inv(nb.ones(2, 3))
    with pytest.raises(np.linalg.LinAlgError):
        nb.linalg.cholesky(-nb.eye(3))
    assert float(nb.linalg.det(z)) == 0.0


def test_cholesky_eigh_svd_qr():
    a = spd(4, (2,))
    check(nb.linalg.cholesky, np.linalg.cholesky, a)
    check(lambda x: nb.linalg.cholesky(x, upper=True),
          lambda x: np.swapaxes(np.linalg.cholesky(x), -1, -2), a, all_layouts=False)
    check(nb.linalg.eigvalsh, np.linalg.eigvalsh, a)
    m = RNG.standard_normal((2, 4, 3))
    check(nb.linalg.svdvals, np.linalg.svdvals, m)
    u, s, vh = nb.linalg.svd(nb.asarray(m), full_matrices=False)
    assert_close((u * s.reshape(2, 1, 3)) @ vh, m)
    q, r = nb.linalg.qr(nb.asarray(m))
    assert_close(q @ r, m)
    w, v = nb.linalg.eigh(nb.asarray(a))
    assert_close(v @ (w.reshape(2, 4, 1) * v.mT), a)
    # gradients: symmetrise the input so the finite differences see what LAPACK reads
    sym = lambda f: (lambda x: f(x @ x.mT + 4 * nb.eye(4, dtype=nb.float64)))  # noqa: E731
    x0 = RNG.standard_normal((4, 4))
    gradcheck(sym(nb.linalg.cholesky), x0)
    gradcheck(sym(nb.linalg.eigvalsh), x0)
    gradcheck(nb.linalg.svdvals, RNG.standard_normal((3, 4)))


def test_unimplemented_gradients_raise():
    x = nb.asarray(RNG.standard_normal((3, 3))).requires_grad_()
    u, s, vh = nb.linalg.svd(x)
    with pytest.raises(RuntimeError, match="singular vectors"):
        u.sum().backward()
    q, r = nb.linalg.qr(x)
    with pytest.raises(RuntimeError, match="qr"):
        q.sum().backward()


def test_pinv_rank_power():
    m = RNG.standard_normal((4, 3))
    check(nb.linalg.pinv, np.linalg.pinv, m)
    low = m[:, :2] @ RNG.standard_normal((2, 3))
    assert int(nb.linalg.matrix_rank(nb.asarray(low))) == np.linalg.matrix_rank(low) == 2
    a = wellcond((2, 3, 3))
    for n in (0, 1, 2, 5, -1, -2):
        check(lambda x: nb.linalg.matrix_power(x, n), lambda x: np.linalg.matrix_power(x, n), a,
              all_layouts=False, rtol=1e-9)
    gradcheck(lambda x: nb.linalg.matrix_power(x, 3), a)


ORDS = [2, 1, np.inf, -np.inf, 0, 3, 0.5]


@pytest.mark.parametrize("ord", ORDS)
@pytest.mark.parametrize("axis,keepdims", [(None, False), (1, True), ((0, 2), False), (-1, False)])
def test_vector_norm(ord, axis, keepdims):
    a = random_array((2, 3, 4), "float64")
    f_nb = lambda x: nb.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)  # noqa: E731
    f_np = lambda x: np.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)  # noqa: E731
    check(f_nb, f_np, a)
    if ord != 0:
        gradcheck(f_nb, a)
    # the decomposition the compiler lowers agrees with the eager impl
    x = nb.asarray(a)
    axes = nb.ops.meta.normalize_axis(axis, x.ndim)
    assert_close(nb.ops.OPS["vector_norm"].decomp(x, axis=axes, keepdims=keepdims, ord=float(ord)),
                 f_np(a))
    assert isinstance(np.linalg.vector_norm(nb.asarray(a), axis=axis, keepdims=keepdims, ord=ord),
                      nb.Tensor)


def test_vector_norm_zero_gradient_and_dtypes():
    x = nb.zeros(3, dtype=nb.float64, requires_grad=True)
    nb.linalg.vector_norm(x).backward()
    assert np.all(np.asarray(x.grad) == 0)
    assert nb.linalg.vector_norm(nb.tensor([3, 4])).dtype == nb.float32
    assert float(nb.linalg.vector_norm(nb.tensor([3, 4]))) == 5.0
    assert nb.linalg.vector_norm(nb.ones(3, dtype=nb.float16)).dtype == nb.float16


@pytest.mark.parametrize("ord", ["fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf])
@pytest.mark.parametrize("keepdims", [False, True])
def test_matrix_norm(ord, keepdims):
    a = random_array((2, 3, 4), "float64")
    check(lambda x: nb.linalg.matrix_norm(x, keepdims=keepdims, ord=ord),
          lambda x: np.linalg.matrix_norm(x, keepdims=keepdims, ord=ord), a)
    gradcheck(lambda x: nb.linalg.matrix_norm(x, ord=ord), a)


@pytest.mark.parametrize("args", [dict(), dict(ord=1), dict(axis=0), dict(axis=(0, 1)),
                                  dict(ord="fro", axis=(1, 0), keepdims=True), dict(ord=np.inf)])
def test_numpy_norm(args):
    a = random_array((3, 4), "float64")
    check(lambda x: np.linalg.norm(x, **args), lambda x: np.linalg.norm(x, **args), a)
    check(lambda x: nb.linalg.norm(x, **args), lambda x: np.linalg.norm(x, **args), a)


@pytest.mark.parametrize("fn", ["inv", "det", "solve", "cholesky", "svd", "eigh", "qr", "pinv",
                                "matrix_rank", "slogdet", "norm", "matrix_power"])
def test_numpy_linalg_dispatch(fn):
    a = nb.asarray(spd(3))
    args = {"solve": (a, nb.asarray(np.ones(3))), "matrix_power": (a, 2)}.get(fn, (a,))
    res = getattr(np.linalg, fn)(*args)
    leaves = res if isinstance(res, tuple) else (res,)
    assert all(isinstance(t, nb.Tensor) for t in leaves)
    want = getattr(np.linalg, fn)(*(np.asarray(x) if isinstance(x, nb.Tensor) else x for x in args))
    want = want if isinstance(want, tuple) else (want,)
    if fn not in ("svd", "eigh", "qr"):   # factors are unique only up to signs
        for g, w in zip(leaves, want):
            assert_close(np.asarray(g), np.asarray(w), rtol=1e-8, check_dtype=False)


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 4), k=st.integers(0, 4), n=st.integers(1, 4), b=st.integers(1, 3))
def test_matmul_hypothesis(m, k, n, b):
    a, c = random_array((b, m, k), "float64"), random_array((k, n), "float64")
    assert_close(nb.asarray(a) @ nb.asarray(c), a @ c)
    assert_close(nb.einsum("bmk,kn->bmn", nb.asarray(a), nb.asarray(c)), a @ c)
