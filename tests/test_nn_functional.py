"""nbaccel.nn.functional against NumPy references, gradchecks in float64, and the op-table
contract (composites decompose, the decomposition agrees with the eager impl)."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nbaccel as nb
import nbaccel.nn.functional as F
from nbaccel.ops import OPS
from oracle import assert_close, check, gradcheck, random_array

FLOATS = ("float32", "float64")
_erf = np.vectorize(math.erf, otypes=[np.float64])


def tols(dtype):
    return {"rtol": 1e-4, "atol": 1e-5} if dtype == "float32" else {"rtol": 1e-9, "atol": 1e-11}


def ref(fn):
    """Compute a reference in float64 and return it in the input's dtype."""
    def wrapped(*arrays):
        out = fn(*(a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype.kind == "f"
                   else a for a in arrays))
        return np.asarray(out).astype(arrays[0].dtype)
    return wrapped


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_log_softmax(x, axis=-1):
    s = x - x.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


# ---- activations -------------------------------------------------------------------------------

ACTS = {
    "relu": (F.relu, lambda x: np.maximum(x, 0)),
    "gelu": (F.gelu, lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2)))),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"),
                  lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    "silu": (F.silu, lambda x: x / (1 + np.exp(-x))),
    "softplus": (F.softplus, lambda x: np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))),
    "softplus_beta": (lambda x: F.softplus(x, beta=2.0, threshold=5.0),
                      lambda x: np.where(2 * x > 5, x, np.log1p(np.exp(np.minimum(2 * x, 5))) / 2)),
    "sigmoid": (F.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    "tanh": (F.tanh, np.tanh),
}


@pytest.mark.parametrize("name", ACTS)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 4)])
def test_activation_values(name, dtype, shape):
    f, npf = ACTS[name]
    check(f, ref(npf), random_array(shape, dtype, -6, 6), **tols(dtype))


@pytest.mark.parametrize("name", [n for n in ACTS if n != "relu"])
def test_activation_grad(name):
    gradcheck(ACTS[name][0], random_array((3, 4), "float64", -4, 4))


def test_relu_grad_and_inplace():
    x = np.array([-2.0, -0.5, 0.5, 3.0])
    gradcheck(F.relu, x)
    t = nb.tensor(x)
    assert F.relu(t, inplace=True) is t
    np.testing.assert_array_equal(np.asarray(t), np.maximum(x, 0))


def test_softplus_large_inputs_are_linear_and_small_are_exact():
    x = nb.tensor([-100.0, -30.0, 0.0, 30.0, 1000.0], dtype="float64")
    got = np.asarray(F.softplus(x))
    np.testing.assert_allclose(got, [math.exp(-100), math.log1p(math.exp(-30)), math.log(2), 30, 1000],
                               rtol=1e-12)


def test_gelu_rejects_unknown_approximation():
    with pytest.raises(ValueError, match="approximate"):
        F.gelu(nb.ones(2), approximate="fast")


# ---- softmax family ---------------------------------------------------------------------------------

@pytest.mark.parametrize("fn,npf", [(F.softmax, np_softmax), (F.log_softmax, np_log_softmax)])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,dim", [((5,), 0), ((3, 4), -1), ((3, 4), 0), ((2, 3, 4), 1),
                                       ((0, 4), 1), ((3, 0), 0)])
def test_softmax_values(fn, npf, dtype, shape, dim):
    check(lambda x: fn(x, dim=dim), ref(lambda x: npf(x, dim)), random_array(shape, dtype), **tols(dtype))


@pytest.mark.parametrize("fn,npf", [(F.softmax, np_softmax), (F.log_softmax, np_log_softmax)])
@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_large_logits_are_stable(fn, npf, dtype):
    x = np.array([[1000.0, 0.0, -1000.0], [-1e4, -1e4 + 1, -1e4 + 2], [88.0, 89.0, 90.0]], dtype)
    got = np.asarray(fn(nb.asarray(x), dim=-1))
    assert np.isfinite(got).all()
    assert_close(got, npf(x.astype(np.float64), -1).astype(dtype), **tols(dtype))


def test_softmax_with_minus_inf_entries():
    x = nb.tensor([[0.0, float("-inf"), 1.0]], dtype="float64")
    np.testing.assert_allclose(np.asarray(F.softmax(x, -1)), np_softmax(np.array([[0, -np.inf, 1.0]])))
    assert np.asarray(F.log_softmax(x, -1))[0, 1] == -np.inf


@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax])
@pytest.mark.parametrize("dim", [0, -1])
def test_softmax_grad(fn, dim):
    gradcheck(lambda x: fn(x, dim=dim), random_array((3, 4), "float64"))


def test_softmax_methods_and_dtype_argument():
    x = nb.randn(2, 3)
    assert_close(np.asarray(x.softmax(-1)), np.asarray(F.softmax(x, -1)))
    assert F.softmax(x, -1, dtype="float64").dtype == nb.float64
    assert F.softmax(nb.tensor(2.0)).item() == 1.0
    with pytest.raises(TypeError, match="dim"):
        F.softmax(x)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4), st.integers(1, 6), st.floats(-50, 50))
def test_softmax_rows_sum_to_one(rows, cols, shift):
    x = random_array((rows, cols), "float64") + shift
    s = np.asarray(F.softmax(nb.asarray(x), dim=1))
    np.testing.assert_allclose(s.sum(1), 1.0, rtol=1e-12)


# ---- normalisation ------------------------------------------------------------------------------

def np_layer_norm(x, ndims, w=None, b=None, eps=1e-5):
    axes = tuple(range(x.ndim - ndims, x.ndim))
    y = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)
    return y * (1 if w is None else w) + (0 if b is None else b)


def np_rms_norm(x, ndims, w=None, eps=1e-6):
    axes = tuple(range(x.ndim - ndims, x.ndim))
    return x / np.sqrt((x * x).mean(axes, keepdims=True) + eps) * (1 if w is None else w)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ns", [(4,), (3, 4)])
@pytest.mark.parametrize("affine", [(False, False), (True, False), (True, True)])
def test_layer_norm(dtype, ns, affine):
    x = random_array((2,) + (3, 4)[-len(ns) - 1:] if len(ns) == 1 else (2, 3, 4), dtype)
    w = random_array(ns, dtype) if affine[0] else None
    b = random_array(ns, dtype) if affine[1] else None
    args = [x] + [a for a in (w, b) if a is not None]

    def nbf(x, *wb):
        it = iter(wb)
        return F.layer_norm(x, ns, next(it) if affine[0] else None, next(it) if affine[1] else None)

    def npf(x, *wb):
        it = iter(wb)
        return np_layer_norm(x, len(ns), next(it) if affine[0] else None, next(it) if affine[1] else None)
    check(nbf, ref(npf), *args, **tols(dtype))
    gradcheck(nbf, *[a.astype(np.float64) for a in args])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("affine", [False, True])
def test_rms_norm(dtype, affine):
    x = random_array((2, 3, 5), dtype)
    args = [x] + ([random_array((5,), dtype)] if affine else [])
    eps = float(np.finfo(dtype).eps)
    check(lambda x, *w: F.rms_norm(x, (5,), *w), ref(lambda x, *w: np_rms_norm(x, 1, *w, eps=eps)),
          *args, **tols(dtype))
    gradcheck(lambda x, *w: F.rms_norm(x, 5, *w, eps=1e-6), *[a.astype(np.float64) for a in args])


def test_norm_shape_errors_name_shapes():
    with pytest.raises((ValueError, RuntimeError), match=r"\[2, 3\]"):
        F.layer_norm(nb.ones(2, 3), (4,))
    with pytest.raises(RuntimeError, match="weight"):
        F.layer_norm(nb.ones(2, 3), 3, weight=nb.ones(4))


# ---- linear --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("xshape", [(5,), (4, 5), (2, 3, 5), (0, 5)])
@pytest.mark.parametrize("bias", [False, True])
def test_linear(dtype, xshape, bias):
    x, w, b = random_array(xshape, dtype), random_array((3, 5), dtype), random_array((3,), dtype)
    args = (x, w, b) if bias else (x, w)
    check(F.linear, ref(lambda x, w, *b: x @ w.T + (b[0] if b else 0)), *args, **tols(dtype))
    if xshape != (0, 5):
        gradcheck(F.linear, *args)


def test_linear_shape_error():
    with pytest.raises(ValueError, match=r"\(4, 5\).*\(3, 4\)"):
        F.linear(nb.ones(4, 5), nb.ones(3, 4))


# ---- dropout --------------------------------------------------------------------------------------

def test_dropout_values_mask_and_scaling():
    nb.manual_seed(0)
    x = nb.ones(200, 100)
    y = np.asarray(F.dropout(x, p=0.3))
    vals = np.unique(y)
    assert len(vals) == 2 and vals[0] == 0 and abs(vals[1] - 1 / 0.7) < 1e-6
    assert abs((y == 0).mean() - 0.3) < 0.02
    nb.manual_seed(0)
    np.testing.assert_array_equal(np.asarray(F.dropout(x, p=0.3)), y)   # seeded: reproducible


def test_dropout_identity_cases_and_errors():
    x = nb.randn(3, 4)
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x
    assert (np.asarray(F.dropout(x, 1.0)) == 0).all()
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout(x, 1.5)


def test_dropout_grad_uses_the_same_mask():
    nb.manual_seed(3)
    x = nb.randn(6, 7, dtype="float64", requires_grad=True)
    y = F.dropout(x, 0.4)
    y.sum().backward()
    kept = np.asarray(y.detach()) != 0
    np.testing.assert_allclose(np.asarray(x.grad), np.where(kept, 1 / 0.6, 0.0))


# ---- embedding -------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
def test_embedding_values_and_grad(dtype):
    w = random_array((6, 3), dtype)
    idx = np.array([[0, 5, 2], [2, 2, 1]])
    check(lambda w: F.embedding(nb.asarray(idx), w), lambda w: w[idx], w)
    gradcheck(lambda w: F.embedding(nb.asarray(idx), w), w.astype(np.float64))
    # grad is an index-add: row 2 is used three times
    wt = nb.asarray(w.astype(np.float64)).requires_grad_()
    F.embedding(nb.asarray(idx), wt).sum().backward()
    np.testing.assert_allclose(np.asarray(wt.grad)[:, 0], [1, 1, 3, 0, 0, 1])


def test_embedding_padding_idx_gets_no_grad():
    w = nb.randn(4, 2, dtype="float64", requires_grad=True)
    F.embedding(nb.tensor([0, 1, 1, 3]), w, padding_idx=1).sum().backward()
    np.testing.assert_allclose(np.asarray(w.grad)[:, 0], [1, 0, 0, 1])


def test_embedding_errors():
    w = nb.randn(4, 2)
    with pytest.raises(IndexError, match="out of range"):
        F.embedding(nb.tensor([0, 4]), w)
    with pytest.raises(IndexError):
        F.embedding(nb.tensor([-1]), w)
    with pytest.raises(TypeError, match="integer"):
        F.embedding(nb.tensor([0.0]), w)


# ---- losses ----------------------------------------------------------------------------------------

def np_cross_entropy(x, t, w=None, ignore_index=-100, reduction="mean", ls=0.0):
    x = x.astype(np.float64)
    single = x.ndim == 1
    if single:
        x, t = x[None], (t[None] if t.dtype.kind == "f" else np.asarray(t)[None])
    c = x.shape[1]
    logp = np_log_softmax(np.moveaxis(x, 1, -1), -1)
    w = np.ones(c) if w is None else w.astype(np.float64)
    if t.dtype.kind == "f":
        q = np.moveaxis(t.astype(np.float64), 1, -1) * (1 - ls) + ls / c
        loss = -(q * w * logp).sum(-1)
        denom = loss.size
    else:
        valid = t != ignore_index
        tc = np.where(valid, t, 0)
        nll = -np.take_along_axis(logp, tc[..., None], -1)[..., 0] * w[tc]
        smooth = -(logp * w).sum(-1)
        loss = ((1 - ls) * nll + ls / c * smooth) * valid
        denom = (w[tc] * valid).sum()
    if reduction == "none":
        return loss[0] if single else loss
    return loss.sum() if reduction == "sum" else loss.sum() / denom


CE_CASES = [
    dict(shape=(4, 5)),
    dict(shape=(5,)),
    dict(shape=(2, 5, 3)),
    dict(shape=(4, 5), weight=True),
    dict(shape=(4, 5), ignore=True),
    dict(shape=(4, 5), ignore=True, weight=True, ls=0.1),
    dict(shape=(4, 5), ls=0.2),
    dict(shape=(4, 5), probs=True),
    dict(shape=(2, 5, 3), probs=True, ls=0.1, weight=True),
]


@pytest.mark.parametrize("case", CE_CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_cross_entropy(case, reduction, dtype):
    rng = np.random.default_rng(5)
    shape = case["shape"]
    c = shape[0] if len(shape) == 1 else shape[1]
    x = random_array(shape, dtype)
    tshape = () if len(shape) == 1 else shape[:1] + shape[2:]
    if case.get("probs"):
        t = np_softmax(rng.normal(size=shape), axis=0 if len(shape) == 1 else 1).astype(dtype)
    else:
        t = rng.integers(0, c, size=tshape)
        if case.get("ignore"):
            t.reshape(-1)[::3] = 2
    w = rng.uniform(0.5, 2, c).astype(dtype) if case.get("weight") else None
    kw = dict(reduction=reduction, label_smoothing=case.get("ls", 0.0))
    if case.get("ignore"):
        kw["ignore_index"] = 2
    wt = None if w is None else nb.asarray(w)

    def nbf(x, *tt):
        return F.cross_entropy(x, tt[0] if tt else nb.asarray(t), wt, **kw)
    want = np_cross_entropy(x, t, w, kw.get("ignore_index", -100), reduction, kw["label_smoothing"])
    got = nbf(nb.asarray(x))
    assert_close(np.asarray(got), np.asarray(want).astype(dtype), **tols(dtype))
    if dtype == "float64":
        gradcheck(nbf, x)
        if case.get("probs"):   # probability targets are differentiable too
            gradcheck(lambda tt: F.cross_entropy(nb.asarray(x), tt, wt, **kw), t, wrt=[0])


@pytest.mark.parametrize("dtype", FLOATS)
def test_cross_entropy_large_logits_are_stable(dtype):
    x = np.array([[1000.0, 0.0, -1000.0], [-1e4, 1e4, 0.0]], dtype)
    t = np.array([2, 1])
    got = F.cross_entropy(nb.asarray(x), nb.asarray(t), reduction="none")
    np.testing.assert_allclose(np.asarray(got), [2000.0, 0.0], rtol=1e-6)
    xt = nb.asarray(x).requires_grad_()
    F.cross_entropy(xt, nb.asarray(t)).backward()
    assert np.isfinite(np.asarray(xt.grad)).all()


def test_cross_entropy_errors():
    x = nb.randn(3, 4)
    with pytest.raises(IndexError, match="out of bounds"):
        F.cross_entropy(x, nb.tensor([0, 4, 1]))
    with pytest.raises(ValueError, match="target"):
        F.cross_entropy(x, nb.tensor([0, 1]))
    with pytest.raises(ValueError, match="reduction"):
        F.cross_entropy(x, nb.tensor([0, 1, 2]), reduction="avg")


def test_cross_entropy_all_ignored_mean_is_nan():
    loss = F.cross_entropy(nb.randn(2, 3), nb.tensor([-100, -100]))
    assert math.isnan(loss.item())


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 4), (4,)), ((), ())])
def test_mse_loss(dtype, reduction, shapes):
    a, b = random_array(shapes[0], dtype), random_array(shapes[1], dtype)
    red = {"mean": np.mean, "sum": np.sum, "none": lambda v: v}[reduction]
    check(lambda x, y: F.mse_loss(x, y, reduction=reduction), ref(lambda x, y: red((x - y) ** 2)),
          a, b, **tols(dtype))
    gradcheck(lambda x, y: F.mse_loss(x, y, reduction=reduction), a, b)


def test_nll_loss_matches_cross_entropy():
    x = nb.randn(5, 4, dtype="float64")
    t = nb.tensor([0, 3, 1, 1, 2])
    assert_close(np.asarray(F.nll_loss(F.log_softmax(x, 1), t)), np.asarray(F.cross_entropy(x, t)))


# ---- attention -------------------------------------------------------------------------------------

def np_attention(q, k, v, mask=None, causal=False, scale=None):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isneginf(m), 0, m)
    e = np.exp(s - m)
    d = e.sum(-1, keepdims=True)
    return (e / np.where(d == 0, 1, d)) @ v


SDPA_CASES = ["plain", "causal", "bool_mask", "float_mask", "scale", "rect"]


def _sdpa_inputs(case, dtype):
    lq = 3 if case == "rect" else 4
    q, k, v = random_array((2, 2, lq, 8), dtype), random_array((2, 2, 4, 8), dtype), \
        random_array((2, 2, 4, 6), dtype)
    kw, npkw = {}, {}
    if case == "causal":
        kw = npkw = {"causal": True}
        kw = {"is_causal": True}
    elif case == "bool_mask":
        m = np.random.default_rng(2).random((lq, 4)) < 0.7
        m[0] = False   # one row fully masked: zeros, not nan
        kw, npkw = {"attn_mask": nb.asarray(m)}, {"mask": m}
    elif case == "float_mask":
        m = random_array((2, 1, lq, 4), dtype)
        m[..., 1] = -np.inf
        kw, npkw = {"attn_mask": nb.asarray(m)}, {"mask": m}
    elif case == "scale":
        kw = npkw = {"scale": 0.3}
    return (q, k, v), kw, npkw


@pytest.mark.parametrize("case", SDPA_CASES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_sdpa(case, dtype):
    (q, k, v), kw, npkw = _sdpa_inputs(case, dtype)
    f = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kw)  # noqa: E731
    got = check(f, ref(lambda q, k, v: np_attention(q, k, v, **npkw)), q, k, v, **tols(dtype),
                all_layouts=False)
    assert np.isfinite(got).all()
    if dtype == "float64":
        gradcheck(f, q, k, v)


def test_sdpa_dropout_is_seeded_and_errors():
    q = nb.randn(1, 4, 8)
    nb.manual_seed(1)
    a = np.asarray(F.scaled_dot_product_attention(q, q, q, dropout_p=0.5))
    nb.manual_seed(1)
    b = np.asarray(F.scaled_dot_product_attention(q, q, q, dropout_p=0.5))
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, np.asarray(F.scaled_dot_product_attention(q, q, q)))
    with pytest.raises(RuntimeError, match="not both"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=nb.ones(4, 4), is_causal=True)
    with pytest.raises(ValueError, match="shapes"):
        F.scaled_dot_product_attention(q, nb.randn(1, 4, 7), q)


# ---- the op-table contract -------------------------------------------------------------------------

NN_OPS = ["relu", "gelu", "silu", "softplus", "softmax", "log_softmax", "layer_norm", "rms_norm",
          "linear", "dropout", "cross_entropy", "mse_loss", "scaled_dot_product_attention"]


@pytest.mark.parametrize("name", NN_OPS)
def test_nn_ops_are_composites(name):
    op = OPS[name]
    assert op.decomp is not None and op.impl is not None


def test_softmax_decomposes_into_reductions_and_elementwise():
    seen = []
    x = nb.randn(3, 4)
    import sys
    real = sys.modules["nbaccel.dispatch"].apply
    # every module whose fronts call dispatch.apply (the op modules are bound to it directly)
    users = [m for n, m in list(sys.modules.items())
             if n.startswith("nbaccel") and getattr(m, "apply", None) is real]
    users.append(sys.modules["nbaccel.ops.fronts"].ENGINE)   # (and the default fronts' engine)

    def spy(op, args, params):
        seen.append(op.name)
        return real(op, args, params)
    for m in users:
        m.apply = spy
    try:
        OPS["softmax"].decomp(x, axis=1)
    finally:
        for m in users:
            m.apply = real
    assert set(seen) == {"amax", "subtract", "exp", "sum", "divide"}


@pytest.mark.parametrize("name,make", [
    ("gelu", lambda: ((nb.randn(3, 4),), {"approximate": "none"})),
    ("gelu", lambda: ((nb.randn(3, 4),), {"approximate": "tanh"})),
    ("silu", lambda: ((nb.randn(5),), {})),
    ("softplus", lambda: ((nb.randn(5) * 30,), {"beta": 1.0, "threshold": 20.0})),
    ("softmax", lambda: ((nb.randn(3, 4),), {"axis": 0})),
    ("log_softmax", lambda: ((nb.randn(3, 4),), {"axis": 1})),
    ("layer_norm", lambda: ((nb.randn(2, 4), nb.randn(4), nb.randn(4)),
                            {"ndims": 1, "eps": 1e-5, "affine": (True, True)})),
    ("rms_norm", lambda: ((nb.randn(2, 4),), {"ndims": 1, "eps": 1e-6, "affine": (False,)})),
    ("linear", lambda: ((nb.randn(2, 4), nb.randn(3, 4), nb.randn(3)), {"bias": True})),
    ("cross_entropy", lambda: ((nb.randn(4, 3), nb.tensor([0, 2, 1, -100])),
                               {"reduction": "mean", "ignore_index": -100,
                                "label_smoothing": 0.1, "probs": False})),
    ("mse_loss", lambda: ((nb.randn(3), nb.randn(3)), {"reduction": "sum"})),
    ("scaled_dot_product_attention", lambda: ((nb.randn(2, 3, 4), nb.randn(2, 5, 4), nb.randn(2, 5, 2)),
                                              {"scale": 0.5, "causal": True, "mask": None,
                                               "dropout": 0.0})),
])
def test_decomposition_matches_eager_impl(name, make):
    args, params = make()
    op = OPS[name]
    with nb.no_grad():
        via_decomp = op.decomp(*args, **params)
        via_impl = nb.tensor(op.impl(np, *(np.asarray(a) for a in args), **params))
    assert_close(np.asarray(via_decomp), np.asarray(via_impl).astype(np.asarray(via_decomp).dtype),
                 rtol=1e-5, atol=1e-6)
