"""nbaccel.func.vmap: batching rules per op against a loop over examples, in_dims / out_dims
variants and pytrees, torch-like errors, randomness, the coverage of the op table, and a
vmapped function inside nb.compile."""
import warnings

import numpy as np
import pytest

import nbaccel as nb
import nbaccel.nn.functional as F
from nbaccel.func import grad, vmap
from nbaccel.func.kind_rules import LOOPING, NO_TENSOR_INPUTS, coverage
from nbaccel.ops.registry import OPS, primitives

rng = np.random.default_rng(0)


def T(*shape, dtype=np.float64):
    return nb.tensor(rng.standard_normal(shape).astype(dtype))


def _stack_loop(f, args, in_dims):
    """The reference: f on each example (sliced in NumPy), results stacked along dim 0."""
    size = next(a.shape[d] for a, d in zip(args, in_dims) if d is not None)
    outs = []
    for i in range(size):
        ex = [a if d is None else nb.tensor(np.take(a.numpy(), i, axis=d)) for a, d in zip(args, in_dims)]
        outs.append(f(*ex).numpy())
    return np.stack(outs)


def check(f, *args, in_dims=0, atol=1e-10):
    """vmap(f) equals the loop, and no op fell back to the loop (no warning)."""
    dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        got = vmap(f, in_dims=in_dims)(*args)
    want = _stack_loop(f, args, dims)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype.np == want.dtype
    np.testing.assert_allclose(got.numpy(), want, atol=atol, rtol=1e-10)


W34 = T(3, 4)
V4 = T(4)

CASES = {
    "unary": (lambda x: nb.tanh(nb.exp(x) - 1) + nb.abs(x), (T(5, 3, 4),)),
    "binary broadcast unbatched": (lambda x: x * W34 + 2.0, (T(5, 4),)),
    "binary two batched ranks": (lambda x, y: nb.maximum(x, y) - x / (1 + y * y), (T(5, 3, 4), T(5, 4))),
    "where": (lambda x, y: nb.where(x > 0, x, y), (T(5, 3), T(5, 3))),
    "comparison dtype": (lambda x: (x > 0).astype(nb.float64) + nb.isfinite(x), (T(5, 3),)),
    "sum all": (lambda x: x.sum(), (T(5, 3, 4),)),
    "sum axis keepdims": (lambda x: x.sum(axis=-1, keepdims=True) + x.mean(0), (T(5, 3, 4),)),
    "max argmax": (lambda x: x.amax(axis=1) + x.argmax(axis=1) + x.amin(0).sum(), (T(5, 3, 4),)),
    "argmax flat keepdims": (lambda x: nb.argmax(x, axis=None, keepdims=True) + 0.0, (T(5, 3, 4),)),
    "var std logsumexp": (lambda x: x.var(axis=0) + x.std() + nb.logsumexp(x, axis=0), (T(5, 3, 4),)),
    "cumsum argsort": (lambda x: nb.cumsum(x, axis=1) + nb.argsort(x, axis=-1), (T(5, 3, 4),)),
    "cumsum flat": (lambda x: nb.cumsum(x), (T(5, 3, 4),)),
    "reshape permute": (lambda x: x.reshape(4, 3).T.reshape(-1), (T(5, 3, 4),)),
    "expand squeeze": (lambda x: x[None, :, None].expand(1, 3, 2, 4).squeeze(0) + 0, (T(5, 3, 4),)),
    "concat stack": (lambda x, y: nb.concatenate([x, y, W34], axis=0) + nb.stack([x, y]).sum(0).sum(0),
                     (T(5, 3, 4), T(5, 3, 4))),
    "slicing": (lambda x: x[1:, ::2] * x[:-1, 1::2], (T(5, 3, 4),)),
    "index with a constant": (lambda x: x[nb.tensor([2, 0, 2])], (T(5, 3, 4),)),
    "index inner axis": (lambda x: x[:, nb.tensor([3, 1])], (T(5, 3, 4),)),
    "index batched": (lambda x, i: x[i], (T(5, 3, 4), nb.tensor(rng.integers(0, 3, (5, 2))))),
    "setitem": (lambda x: _setitem(x), (T(5, 3, 4),)),
    "matmul vec vec": (lambda x, y: x @ y, (T(5, 4), T(5, 4))),
    "matmul mat vec": (lambda x: W34 @ x, (T(5, 4),)),
    "matmul vec mat": (lambda x: x @ W34.T, (T(5, 4),)),
    "matmul batched both": (lambda x, y: x @ y, (T(5, 2, 3), T(5, 3, 4))),
    "matmul 3d by 2d": (lambda x: x @ W34, (T(5, 2, 6, 3),)),
    "matmul 2d by 3d": (lambda x: x @ nb.tensor(np.ones((2, 3, 4))), (T(5, 6, 3),)),
    "diagonal trace": (lambda x: nb.diagonal(x, 1) + nb.trace(x), (T(5, 4, 4),)),
    "cross": (lambda x: nb.cross(x, V4[:3]), (T(5, 2, 3),)),
    "inv det": (lambda x: nb.linalg.inv(x + 4 * nb.eye(3, dtype=nb.float64)).sum() + nb.linalg.det(x),
                (T(5, 3, 3),)),
    "softmax layer_norm": (lambda x: F.softmax(x, -1) + F.layer_norm(x, (4,)), (T(5, 3, 4),)),
    "log_softmax gelu": (lambda x: F.log_softmax(F.gelu(x), 0), (T(5, 3, 4),)),
    "linear": (lambda x: F.linear(x, W34, V4[:3]), (T(5, 2, 4),)),
    "embedding": (lambda i: F.embedding(i, W34), (nb.tensor(rng.integers(0, 3, (5, 6))),)),
    "full_like clone": (lambda x: nb.zeros_like(x) + x.clone() + nb.ones_like(x), (T(5, 3),)),
    "max_pool2d indices": (lambda x: F.max_pool2d(x, 2, return_indices=True)[1], (T(5, 2, 3, 4, 4),)),
    "in_dims negative": (lambda x: x.sum(0), (T(3, 4, 5),)),
}


def _setitem(x):
    y = x.clone()
    y[0] = 7.0
    y[1:, 1] += x[0, 0]
    return y


@pytest.mark.parametrize("name", list(CASES))
def test_batching_rule_matches_a_loop(name):
    f, args = CASES[name]
    in_dims = -1 if name == "in_dims negative" else 0
    check(f, *args, in_dims=in_dims)


def test_every_primitive_has_a_batching_rule_or_is_listed_as_looping():
    cov = coverage(primitives())
    assert [n for n, how in cov.items() if how == "missing"] == []
    # the lists name real primitives (no stale names), and explicit rules are not also listed
    names = {o.name for o in primitives()}
    assert LOOPING <= names and NO_TENSOR_INPUTS <= names
    assert not {n for n in LOOPING if OPS[n].batch_rule is not None}
    assert cov["add"] == "derived" and cov["sum"] == "derived" and cov["matmul"] == "explicit"


def test_an_op_without_a_rule_loops_with_a_warning_naming_it():
    table = nb.tensor([0.0, 1.0, 2.0, 3.0])
    x = nb.tensor([[0.5, 2.5], [1.5, 3.5], [-1.0, 9.0]])
    with pytest.warns(UserWarning, match="searchsorted"):
        got = vmap(lambda v: nb.searchsorted(table, v))(x)
    np.testing.assert_array_equal(got.numpy(), np.searchsorted(table.numpy(), x.numpy()))


# ---- in_dims / out_dims ------------------------------------------------------------------------

def test_in_dims_none_int_and_tuple():
    x, y = T(4, 3), T(3, 4)
    got = vmap(lambda a, b, c: a * b + c, in_dims=(0, 1, None))(x, y, V4[:3])
    np.testing.assert_allclose(got.numpy(), x.numpy() * y.numpy().T + V4.numpy()[:3])


def test_in_dims_pytrees_of_dicts_and_lists():
    d = {"w": T(5, 3), "b": T(3)}
    pair = [T(5, 3), T(3, 5)]
    f = lambda p, l: p["w"] * l[0] + p["b"] + l[1]   # noqa: E731
    got = vmap(f, in_dims=({"w": 0, "b": None}, [0, 1]))(d, pair)
    want = d["w"].numpy() * pair[0].numpy() + d["b"].numpy() + pair[1].numpy().T
    np.testing.assert_allclose(got.numpy(), want)


def test_out_dims_variants_and_pytree_outputs():
    x = T(5, 3)
    a, b = vmap(lambda v: (v * 2, v.sum()), out_dims=(1, 0))(x)
    assert a.shape == (3, 5) and b.shape == (5,)
    np.testing.assert_allclose(a.numpy(), 2 * x.numpy().T)
    out = vmap(lambda v: {"s": v[None], "c": nb.ones(2, dtype=nb.float64)}, out_dims=-1)(x)
    assert out["s"].shape == (1, 3, 5) and out["c"].shape == (2, 5)   # unbatched: broadcast
    kept = vmap(lambda v: (v, W34), out_dims=(0, None))(x)[1]
    assert kept is W34


def test_nested_vmap():
    x = T(2, 3, 4)
    got = vmap(vmap(lambda v: v @ V4, in_dims=0), in_dims=1)(x.permute(1, 0, 2))
    np.testing.assert_allclose(got.numpy(), x.numpy() @ V4.numpy())
    outer = vmap(lambda a: vmap(lambda b: a * b)(V4))(T(3))
    assert outer.shape == (3, 4)


@pytest.mark.parametrize("call, message", [
    (lambda: vmap(lambda a: a, in_dims="0")(T(2)), "expected `in_dims` to be int or a"),
    (lambda: vmap(lambda a, b: a, in_dims=(0,))(T(2), T(2)), "not compatible with the structure"),
    (lambda: vmap(lambda a: a, in_dims=2)(T(2, 3)), "satisfy -2 <= in_dim < 2"),
    (lambda: vmap(lambda a, b: a, in_dims=(0, 0))(T(2), 3.0), "cannot vmap over non-Tensor"),
    (lambda: vmap(lambda a, b: a + b)(T(2), T(3)), "same size in the mapped dimension, got sizes"),
    (lambda: vmap(lambda a: a, in_dims=None)(T(2)), "at least one input"),
    (lambda: vmap(lambda a: a, in_dims=({"x": 0},))({"y": T(2)}), "not compatible"),
    (lambda: vmap(lambda a: 3)(T(2)), "must only return Tensors"),
    (lambda: vmap(lambda a: a, out_dims=3)(T(2, 2)), "out of range"),
    (lambda: vmap(lambda a: a, out_dims=None)(T(2, 2)), "varies over the batch"),
    (lambda: vmap(lambda a: a, randomness="sometimes"), "randomness"),
])
def test_bad_arguments_give_torch_like_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_data_dependent_control_flow_is_refused_clearly():
    def f(v):
        return v if v.sum() > 0 else -v
    with pytest.raises(RuntimeError, match="vmap: a concrete value"):
        vmap(f)(T(3, 2))


def test_an_inplace_write_of_batched_values_into_an_unbatched_tensor_is_refused():
    buf = nb.zeros(3, dtype=nb.float64)

    def f(v):
        buf.add_(v)
        return buf
    with pytest.raises(RuntimeError, match="inplace arithmetic"):
        vmap(f)(T(2, 3))


# ---- randomness ----------------------------------------------------------------------------------

def test_randomness_error_same_different():
    x = T(4, 3)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        vmap(lambda v: v + nb.randn(3))(x)
    nb.manual_seed(1)
    same = vmap(lambda v: v * 0 + nb.rand(3), randomness="same")(x).numpy()
    assert np.allclose(same, same[0])
    nb.manual_seed(1)
    diff = vmap(lambda v: v * 0 + nb.rand(3), randomness="different")(x).numpy()
    assert not np.allclose(diff[0], diff[1]) and diff.shape == (4, 3)
    masks = vmap(lambda v: F.dropout(v * 0 + 1, 0.5), randomness="different")(T(64, 32)).numpy()
    assert not all(np.array_equal(masks[0], m) for m in masks[1:])
    assert set(np.unique(masks)) <= {0.0, 2.0}


# ---- inside nb.compile ---------------------------------------------------------------------------

def test_vmap_of_grad_inside_compile_is_one_graph():
    w = T(4, 3, dtype=np.float32)

    def loss(x, y):
        return ((nb.tanh(x @ w) - y) ** 2).mean()

    X, Y = T(8, 4, dtype=np.float32), T(8, 3, dtype=np.float32)
    per_example = vmap(grad(loss))
    cf = nb.compile(per_example)
    got = cf(X, Y)
    np.testing.assert_allclose(got.numpy(), per_example(X, Y).numpy(), rtol=1e-5, atol=1e-6)
    rep = cf.report
    assert rep.graphs == 1 and rep.graph_breaks == [] and rep.fallback is None
    assert len(rep.kernels) >= 1
    got2 = cf(X, Y)          # served from the compiled graph
    np.testing.assert_allclose(got2.numpy(), got.numpy())
    assert cf.report.cache == "hit"


@pytest.mark.parametrize("transform", ["vmap(vmap)", "jacrev", "grad(vmap)"])
def test_other_compositions_compile_to_one_graph(transform):
    from nbaccel.func import jacrev
    w = T(3, 3, dtype=np.float32)
    fns = {
        "vmap(vmap)": (vmap(vmap(lambda v: nb.tanh(v @ w).sum())), T(2, 4, 3, dtype=np.float32)),
        "jacrev": (jacrev(lambda v: nb.sin(w @ v)), T(3, dtype=np.float32)),
        "grad(vmap)": (grad(lambda m: vmap(lambda r: (nb.tanh(r @ w) ** 2).sum())(m).sum()),
                       T(5, 3, dtype=np.float32)),
    }
    f, x = fns[transform]
    cf = nb.compile(f)
    np.testing.assert_allclose(cf(x).numpy(), f(x).numpy(), rtol=1e-5, atol=1e-6)
    assert cf.report.graphs == 1 and cf.report.graph_breaks == []


def test_chunk_size_gives_the_same_result():
    x = T(7, 3)
    f = lambda v: (v * 2, v.sum(), W34)   # noqa: E731
    whole = vmap(f, out_dims=(1, 0, None))(x)
    chunked = vmap(f, out_dims=(1, 0, None), chunk_size=3)(x)
    for a, b in zip(whole, chunked):
        np.testing.assert_allclose(a.numpy(), b.numpy())
    assert chunked[2] is W34
    with pytest.raises(ValueError, match="chunk_size"):
        vmap(f, chunk_size=0)
