"""Reductions and scans against NumPy: dtypes, axes, keepdims, 0-d, empty and non-contiguous
inputs; max/min's NumPy vs PyTorch semantics; var/std corrections; gradients."""
import warnings

import numpy as np
import pytest

import nbaccel as nb
from nbaccel.ops.registry import OPS
from oracle import ALL, assert_close, check, gradcheck, random_array

AXES = [None, 0, 1, -1, (0, 1)]
# unsigned sums and products accumulate in uint64, as in NumPy (none differ any more)
INT64_SUM = set()


def _np_logsumexp(a, axis=None, keepdims=False):
    a = a.astype(np.float64) if a.dtype.kind != "f" else a
    m = np.max(a, axis=axis, keepdims=True) if a.size else 0
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis) if axis is not None else out.reshape(())


REDUCTIONS = {
    "sum": np.sum, "prod": np.prod, "amax": np.max, "amin": np.min, "mean": np.mean,
    "var": np.var, "std": np.std, "any": np.any, "all": np.all, "count_nonzero": np.count_nonzero,
}


def _run(name, np_fn, a, axis, keepdims, dtype):
    def nb_fn(t):
        return getattr(nb, name)(t, axis=axis, keepdims=keepdims)

    def want_fn(x):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            r = np_fn(x, axis=axis, keepdims=keepdims)
        r = np.asarray(r)
        if dtype in INT64_SUM and name in ("sum", "prod"):
            r = r.astype(np.int64)
        return r

    if dtype == "bfloat16":
        want = want_fn(a.astype(np.float32))
        got = nb_fn(nb.asarray(a))
        np_dt = np.asarray(np_fn(a, axis=axis, keepdims=keepdims)).dtype
        assert got.dtype == nb.dtypes.dtype(np_dt)
        assert_close(np.asarray(got).astype(np.float32) if got.dtype == nb.bfloat16 else np.asarray(got),
                     want, check_dtype=False, rtol=3e-2, atol=3e-2)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        check(nb_fn, want_fn, a)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_vs_numpy(name, dtype):
    a = random_array((3, 4), dtype, -3, 3)
    if name == "prod":
        a = random_array((3, 4), dtype, 1, 2)
    for axis in AXES:
        for keepdims in (False, True):
            _run(name, REDUCTIONS[name], a, axis, keepdims, dtype)
    _run(name, REDUCTIONS[name], random_array((), dtype, 1, 3), None, False, dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "int8", "bool"])
def test_logsumexp(dtype):
    a = random_array((3, 4), dtype, -3, 3)
    for axis in AXES:
        for keepdims in (False, True):
            got = nb.logsumexp(nb.asarray(a), axis=axis, keepdims=keepdims)
            want = _np_logsumexp(a.astype(np.float64), axis, keepdims)
            assert got.dtype.kind == "f"
            assert_close(np.asarray(got).astype(np.float64), want, check_dtype=False,
                         dtype=dtype if dtype in ("float16", "bfloat16", "float32") else None)
    big = np.array([1000.0, 1000.0, -np.inf])
    assert_close(np.asarray(nb.logsumexp(nb.asarray(big))), 1000 + np.log(2))
    assert np.asarray(nb.logsumexp(nb.asarray(np.array([-np.inf, -np.inf])))) == -np.inf
    x = nb.asarray(a.astype(np.float64)) if dtype == "float64" else None
    if x is not None:   # the decomposition agrees with the fast impl
        assert_close(np.asarray(OPS["logsumexp"].decomp(x, axis=(1,), keepdims=False)),
                     np.asarray(nb.logsumexp(x, 1)))


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin(name, dtype):
    a = random_array((3, 4), dtype, -3, 3)
    for axis in (None, 0, 1, -1):
        for keepdims in (False, True):
            check(lambda t: getattr(nb, name)(t, axis=axis, keepdims=keepdims),
                  lambda x: getattr(np, name)(x, axis=axis, keepdims=keepdims), a)
    t = nb.tensor(a.astype(np.float32)) if dtype != "bool" else nb.tensor(a)
    assert getattr(t, name)(dim=1, keepdim=True).shape == (3, 1)
    assert getattr(t, name)(1, True).shape == (3, 1)       # PyTorch's positional keepdim
    with pytest.raises(TypeError):
        getattr(nb, name)(t, axis=(0, 1))


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
def test_scans(name, dtype):
    a = random_array((3, 4), dtype, -2, 2)
    for axis in (None, 0, 1, -1):
        def want(x):
            r = getattr(np, name)(x, axis=axis)
            return r.astype(np.int64) if dtype in INT64_SUM else r
        if dtype == "bfloat16":
            got = getattr(nb, name)(nb.asarray(a), axis=axis)
            assert got.dtype == nb.bfloat16
            assert_close(np.asarray(got).astype(np.float32), want(a.astype(np.float32)),
                         check_dtype=False, rtol=3e-2, atol=3e-2)
        else:
            check(lambda t: getattr(nb, name)(t, axis=axis), want, a)
    t = nb.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert getattr(t, name)(dim=1).shape == (2, 2) and getattr(t, name)(0).shape == (2, 2)
    assert getattr(nb, name)(nb.tensor(3.0), dim=0).shape == ()
    assert getattr(nb, name)(t, dtype="float64").dtype == nb.float64


def test_empty_reductions_follow_numpy():
    e = nb.asarray(np.zeros((0, 3)))
    assert np.asarray(nb.sum(e, 0)).tolist() == [0, 0, 0]
    assert np.asarray(nb.prod(e, 0)).tolist() == [1, 1, 1]
    assert nb.any(e).item() is False and nb.all(e).item() is True
    assert nb.count_nonzero(e).item() == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert np.isnan(np.asarray(nb.mean(e, 0))).all()
        assert np.isnan(np.asarray(nb.var(e, 0))).all()
    assert (np.asarray(nb.logsumexp(e, 0)) == -np.inf).all()
    assert nb.sum(e, 1).shape == (0,) and nb.amax(e, 1).shape == (0,)
    for f in (lambda: nb.max(e), lambda: nb.amin(e, 0), lambda: nb.argmax(e), lambda: e.max(dim=0)):
        with pytest.raises(ValueError):
            f()


def test_max_min_semantics():
    a = np.array([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]])
    t, tn = nb.tensor(a.tolist(), dtype="float64"), nb.asarray(a)
    assert t.max().item() == 6 and nb.min(t).item() == 1
    r = t.max(dim=1)
    assert r.values.tolist() == [5, 6] and r.indices.tolist() == [1, 2]
    v, i = nb.min(t, 0)                                    # positional dim on a torch-style tensor
    assert v.tolist() == [1, 2, 3] and i.tolist() == [0, 1, 0]
    assert t.max(1, keepdim=True).values.shape == (2, 1)
    assert t.max(axis=1).tolist() == [5, 6]                 # axis= keyword: NumPy semantics
    assert tn.max(1).tolist() == [5, 6]                     # NumPy-flavoured tensor: values
    assert np.max(tn, axis=0).tolist() == [4, 5, 6] and np.min(tn).item() == 1
    assert np.max(tn, 1, None, True).shape == (2, 1)        # NumPy positional (axis, out, keepdims)
    assert nb.max(t, nb.tensor([3.0, 3.0, 3.0])).tolist() == [[3, 5, 3], [4, 3, 6]]
    assert t.max(axis=(0, 1)).item() == 6
    with pytest.raises(TypeError):
        t.max(dim=(0, 1))
    with pytest.raises(TypeError):
        np.max(tn, initial=0)


def test_sum_dim_keepdim_and_dtype():
    t = nb.tensor([[1, 2], [3, 4]], dtype="int8")
    assert t.sum(dim=1, keepdim=True).tolist() == [[3], [7]]
    assert t.sum().dtype == nb.int64 and t.prod(dtype="float32").dtype == nb.float32
    assert nb.asarray(np.ones(3, np.bool_)).sum().dtype == nb.int64


def test_var_std_corrections():
    a = random_array((4, 5), "float64")
    t, tn = nb.tensor(a.tolist(), dtype="float64"), nb.asarray(a)
    assert_close(np.asarray(tn.var()), np.var(a))                      # NumPy default ddof=0
    assert_close(np.asarray(t.var()), np.var(a, ddof=1))                # PyTorch default unbiased
    assert_close(np.asarray(nb.var(tn, axis=0, ddof=1)), np.var(a, axis=0, ddof=1))
    assert_close(np.asarray(nb.std(t, dim=1, correction=0)), np.std(a, axis=1))
    assert_close(np.asarray(t.std(1, False)), np.std(a, axis=1))         # positional unbiased
    assert_close(np.asarray(t.var(1, True, True)), np.var(a, axis=1, ddof=1, keepdims=True))
    assert_close(np.asarray(nb.var(t, unbiased=False)), np.var(a))
    assert_close(np.asarray(np.std(tn, axis=1, ddof=2, keepdims=True)), np.std(a, 1, ddof=2, keepdims=True))
    assert_close(np.asarray(nb.var(tn, correction=1.5)), np.var(a, ddof=1.5))
    with pytest.raises(TypeError):
        nb.var(t, ddof=1, unbiased=True)
    x = nb.asarray(a)
    assert_close(np.asarray(OPS["var"].decomp(x, axis=(0,), keepdims=False, correction=1.0)),
                 np.var(a, axis=0, ddof=1))


def test_any_all_results_are_bool():
    t = nb.asarray(np.array([[0, 2], [0, 0]], np.int16))
    assert t.any().dtype == nb.bool and t.all(dim=1).tolist() == [False, False]
    assert nb.any(t, 1, keepdims=True).tolist() == [[True], [False]]


def test_nondifferentiable_reductions():
    x = nb.tensor([1.0, 3.0, 2.0], requires_grad=True)
    for out in (x.argmax(), x.argmin(), (x > 1).any(), (x > 1).all(), nb.count_nonzero(x)):
        assert not out.requires_grad


# ---- gradients --------------------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("name", ["sum", "prod", "amax", "amin", "mean", "var", "std", "logsumexp"])
def test_gradcheck_reductions(name, axis, keepdims):
    a = random_array((2, 3), "float64", 0.5, 2.0)
    gradcheck(lambda t: getattr(nb, name)(t, axis=axis, keepdims=keepdims), a)


@pytest.mark.parametrize("zeros", [[], [(0, 1)], [(0, 1), (1, 2)], [(0, 0), (0, 2)]])
def test_prod_grad_with_zeros(zeros):
    a = random_array((2, 3), "float64", 0.5, 2.0)
    for idx in zeros:
        a[idx] = 0.0
    for axis in (None, 1):
        gradcheck(lambda t: nb.prod(t, axis=axis), a)


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_gradcheck_scans(name, axis):
    a = random_array((3, 4), "float64", 0.5, 1.5)
    gradcheck(lambda t: getattr(nb, name)(t, axis=axis), a)
    if name == "cumprod":   # zeros: exact gradient before, at and after the first zero
        a[1, 1] = a[2, 3] = a[0, 2] = 0.0
        a[2, 1] = 0.0
        gradcheck(lambda t: nb.cumprod(t, axis=axis), a)


def test_max_dim_grad_and_ties():
    x = nb.tensor([[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]], dtype="float64", requires_grad=True)
    x.max(dim=1).values.sum().backward()
    assert x.grad.tolist() == [[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]]   # ties share (amax)
