"""nbaccel.sparse: pruning, the compressed tensor in F.linear and @, autograd, modules, compile."""
import numpy as np
import pytest

import nbaccel as nb
import nbaccel.nn.functional as F
from nbaccel.sparse import SparseSemiStructuredLinear, SparseSemiStructuredTensor
from nbaccel_kernels.sparse import reference as ref


def _pruned(rows=8, cols=16, dtype="float32"):
    return nb.sparse.prune_2_4(nb.randn(rows, cols).astype(dtype))


def _np(t):
    return np.asarray(t.detach())


# ---- prune_2_4 / to_sparse_semi_structured ------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_prune_keeps_two_largest_magnitudes(dtype):
    w = nb.randn(6, 20).astype(dtype)
    p = nb.sparse.prune_2_4(w)
    assert p.dtype == w.dtype and p.shape == w.shape
    np.testing.assert_array_equal(_np(p), np.where(ref.prune_mask(_np(w)), _np(w), 0))
    assert (np.count_nonzero(_np(p).reshape(6, 5, 4), axis=-1) <= 2).all()


def test_prune_gradient_flows_through_kept_entries():
    w = nb.randn(4, 8, requires_grad=True)
    nb.sparse.prune_2_4(w).sum().backward()
    np.testing.assert_array_equal(_np(w.grad), ref.prune_mask(_np(w)).astype(np.float32))


@pytest.mark.parametrize("rows,cols", [(1, 4), (8, 16), (5, 12), (3, 36)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_round_trip(rows, cols, dtype):
    w = _pruned(rows, cols, dtype)
    s = nb.sparse.to_sparse_semi_structured(w)
    assert isinstance(s, SparseSemiStructuredTensor)
    assert s.shape == (rows, cols) and s.dtype == w.dtype and s.ndim == 2
    assert s.values.shape == (rows, cols // 2) and s.meta.dtype == nb.uint8
    np.testing.assert_array_equal(_np(s.to_dense()), _np(w))
    np.testing.assert_array_equal(np.asarray(s), _np(w))
    assert s.t().shape == (cols, rows)
    np.testing.assert_array_equal(_np(s.t().to_dense()), _np(w).T)
    assert s.nbytes == s.values.nbytes + s.meta.nbytes < w.nbytes * 0.6


def test_already_sparser_tensors_compress_losslessly():
    w = nb.tensor([[0.0, 0.0, 0.0, 0.0, 0.0, -2.0, 0.0, 0.0]])
    s = nb.sparse.to_sparse_semi_structured(w)
    np.testing.assert_array_equal(_np(s.to_dense()), _np(w))
    assert s.density() == 1 / 8


def test_repr_shows_density():
    s = nb.sparse.to_sparse_semi_structured(_pruned(4, 8))
    assert repr(s) == "SparseSemiStructuredTensor(shape=(4, 8), dtype=float32, density=0.5, 2:4)"
    assert "transposed" in repr(s.t())


def test_not_2_4_names_the_first_offending_group():
    w = np.zeros((3, 8), np.float32)
    w[1, 4:7] = [1.0, 2.0, 3.0]
    w[2, :] = 1.0
    with pytest.raises(ValueError, match=r"row 1, columns 4\.\.7 hold 3 non-zeros \[1, 2, 3, 0\]"
                                         r".*prune_2_4"):
        nb.sparse.to_sparse_semi_structured(nb.tensor(w))


@pytest.mark.parametrize("fn", [nb.sparse.to_sparse_semi_structured, nb.sparse.prune_2_4])
@pytest.mark.parametrize("bad,exc,match", [
    (lambda: nb.ones(4, 6), ValueError, r"multiple of 4.*\(4, 6\)"),
    (lambda: nb.ones(8), ValueError, r"2-D.*\(8,\)"),
    (lambda: nb.ones(2, 2, 4), ValueError, r"2-D.*\(2, 2, 4\)"),
    (lambda: nb.ones(2, 4, dtype="int32"), TypeError, "float32 and float64.*int32"),
    (lambda: nb.ones(2, 4, dtype="float16"), TypeError, "float32 and float64.*float16"),
])
def test_bad_input(fn, bad, exc, match):
    with pytest.raises(exc, match=match):
        fn(bad())


# ---- products ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("xshape", [(16,), (1, 16), (5, 16), (2, 3, 16)])
def test_linear_and_matmul_match_the_dense_pruned_weight(dtype, xshape):
    w = _pruned(8, 16, dtype)
    s = nb.sparse.to_sparse_semi_structured(w)
    x = nb.randn(*xshape).astype(dtype)
    b = nb.randn(8).astype(dtype)
    want = _np(x) @ _np(w).T
    tol = dict(rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(F.linear(x, s)), want, **tol)
    np.testing.assert_allclose(_np(F.linear(x, s, b)), want + _np(b), **tol)
    np.testing.assert_allclose(_np(x @ s.t()), want, **tol)
    assert F.linear(x, s).dtype == x.dtype
    if len(xshape) == 2:
        np.testing.assert_allclose(_np(s @ x.T), _np(w) @ _np(x).T, **tol)   # W @ B
        np.testing.assert_allclose(_np(_np(x) @ s.t()), want, **tol)          # ndarray @ s.t()
    if len(xshape) == 1:
        np.testing.assert_allclose(_np(s @ x), _np(w) @ _np(x), **tol)        # GEMV


def test_other_products_go_through_the_dense_weight():
    w = _pruned(8, 16)
    s = nb.sparse.to_sparse_semi_structured(w)
    x = nb.randn(3, 8)
    np.testing.assert_allclose(_np(x @ s), _np(x) @ _np(w), rtol=1e-5, atol=1e-5)


def test_linear_shape_mismatch_is_clear():
    s = nb.sparse.to_sparse_semi_structured(_pruned(8, 16))
    with pytest.raises(ValueError, match=r"input of shape \(3, 12\).*\(8, 16\)"):
        F.linear(nb.ones(3, 12), s)
    with pytest.raises(ValueError, match="bias of shape"):
        F.linear(nb.ones(3, 16), s, nb.ones(5))


# ---- autograd --------------------------------------------------------------------------------------

def test_gradients_match_the_dense_masked_ones():
    w = _pruned(8, 16, "float64")
    s = nb.sparse.to_sparse_semi_structured(w)
    s.values.requires_grad_(True)
    x = nb.randn(2, 3, 16, dtype="float64", requires_grad=True)
    b = nb.randn(8, dtype="float64", requires_grad=True)
    (F.gelu(F.linear(x, s, b)) ** 2).sum().backward()

    wd = nb.tensor(_np(w), requires_grad=True)
    x2 = nb.tensor(_np(x), requires_grad=True)
    b2 = nb.tensor(_np(b), requires_grad=True)
    (F.gelu(F.linear(x2, wd, b2)) ** 2).sum().backward()

    np.testing.assert_allclose(_np(x.grad), _np(x2.grad), rtol=1e-10)
    np.testing.assert_allclose(_np(b.grad), _np(b2.grad), rtol=1e-10)
    mask = _np(w) != 0
    np.testing.assert_allclose(_np(s.grad), np.where(mask, _np(wd.grad), 0), rtol=1e-10)
    assert s.values.grad.shape == (8, 8)


def test_gradient_numerically():
    w = _pruned(4, 8, "float64")
    s = nb.sparse.to_sparse_semi_structured(w)
    s.values.requires_grad_(True)
    x = nb.randn(3, 8, dtype="float64")

    def loss(v):
        return float((F.linear(x, SparseSemiStructuredTensor(v, s.meta, 8)) ** 3).sum())

    (F.linear(x, s) ** 3).sum().backward()
    v0 = _np(s.values).copy()
    eps = 1e-6
    for idx in [(0, 0), (1, 3), (3, 2)]:
        hi, lo = v0.copy(), v0.copy()
        hi[idx] += eps
        lo[idx] -= eps
        num = (loss(nb.tensor(hi)) - loss(nb.tensor(lo))) / (2 * eps)
        assert abs(num - _np(s.values.grad)[idx]) < 1e-5 * max(1.0, abs(num))


def test_gradient_flows_back_to_the_dense_source():
    w = nb.tensor(_np(_pruned(4, 8)), requires_grad=True)
    s = nb.sparse.to_sparse_semi_structured(w)
    F.linear(nb.ones(2, 8), s).sum().backward()
    np.testing.assert_array_equal(_np(w.grad), 2.0 * (_np(w) != 0))


# ---- modules ---------------------------------------------------------------------------------------

def _mlp():
    nb.manual_seed(0)
    return nb.nn.Sequential(nb.nn.Linear(1, 16), nb.nn.GELU(), nb.nn.Linear(16, 16), nb.nn.GELU(),
                            nb.nn.Linear(16, 1))


def test_apply_2_4_swaps_the_prunable_linears():
    model = _mlp()
    dense = _mlp()
    with nb.no_grad():
        for i in (2, 4):
            dense[i].weight.copy_(nb.sparse.prune_2_4(dense[i].weight))
    out = nb.sparse.apply_2_4_(model)
    assert out is model
    assert [type(m).__name__ for m in model] == ["Linear", "GELU", "SparseSemiStructuredLinear",
                                                 "GELU", "SparseSemiStructuredLinear"]
    assert sorted(dict(model.named_parameters())) == [
        "0.bias", "0.weight", "2.bias", "2.weight_values", "4.bias", "4.weight_values"]
    assert "2.weight_meta" in model.state_dict()
    x = nb.randn(7, 1)
    np.testing.assert_allclose(_np(model(x)), _np(dense(x)), rtol=1e-5, atol=1e-6)
    assert "2:4 sparse" in repr(model)


def test_apply_2_4_filter_and_root_linear():
    model = _mlp()
    nb.sparse.apply_2_4_(model, filter=lambda layer, name: name == "4")
    assert [type(m).__name__ for m in model][2:] == ["Linear", "GELU", "SparseSemiStructuredLinear"]
    with pytest.raises(ValueError, match="layer '0'.*multiple of 4"):
        nb.sparse.apply_2_4_(_mlp(), filter=lambda layer, name: True)
    lin = nb.nn.Linear(8, 3)
    new = nb.sparse.apply_2_4_(lin)
    assert isinstance(new, SparseSemiStructuredLinear) and new.weight.shape == (3, 8)


def test_fine_tuning_keeps_the_pattern_and_learns():
    model = nb.sparse.apply_2_4_(_mlp())
    x = nb.linspace(-2, 2, 64).reshape(64, 1)
    y = nb.sin(2 * x)
    before = _np(model[2].weight.to_dense()) != 0
    opt = nb.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < 0.7 * losses[0]
    after = _np(model[2].weight.to_dense())
    assert ((after != 0) <= before).all()           # pruned entries stay zero
    assert (np.count_nonzero(after.reshape(16, 4, 4), axis=-1) <= 2).all()


# ---- the compiler ------------------------------------------------------------------------------------

def test_compiled_sparse_linear_is_one_extern_kernel():
    s = nb.sparse.to_sparse_semi_structured(_pruned(8, 16))
    x = nb.randn(5, 16)

    @nb.compile
    def f(x):
        return F.relu(F.linear(x, s)) * 2.0

    eager = F.relu(F.linear(x, s)) * 2.0
    for _ in range(2):
        np.testing.assert_allclose(_np(f(x)), _np(eager), rtol=1e-6)
    sparse = [k for k in f.report.kernels if k["backend"] == "sparse24"]
    assert [k["ops"] for k in sparse] == [["sparse24_linear"]]
    assert sparse[0]["device"] == "cpu"
    assert f.stats["graph_breaks"] == 0


def test_compiled_training_step():
    model = nb.sparse.apply_2_4_(_mlp())
    opt = nb.optim.SGD(model.parameters(), lr=0.05)
    x = nb.linspace(-2, 2, 32).reshape(32, 1)
    y = nb.sin(2 * x)

    @nb.compile
    def step(xb, yb):
        loss = F.mse_loss(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    losses = [float(step(x, y)) for _ in range(5)]
    assert losses[-1] < losses[0]
    assert step.stats["compiles"] == 1 and step.stats["graph_breaks"] == 0
    ops = {op for k in step.report.kernels if k["backend"] == "sparse24" for op in k["ops"]}
    assert ops == {"sparse24_linear", "sparse24_to_dense", "sparse24_gather"}


# ---- the docstring examples ------------------------------------------------------------------------

@pytest.mark.parametrize("module", ["nbaccel.sparse", "nbaccel.sparse.semi_structured",
                                    "nbaccel.sparse.pruning"])
def test_docstring_examples(module):
    import doctest
    import importlib
    res = doctest.testmod(importlib.import_module(module), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert res.attempted and not res.failed


def test_gather_device_branch_matches_the_kernel():
    # the array-module path the CUDA device takes (CuPy), run here on NumPy under another name
    import types
    from nbaccel.ops.sparse import _gather_impl
    shim = types.SimpleNamespace(**{k: getattr(np, k) for k in ("stack", "arange", "int64",
                                                                 "take_along_axis")})
    shim.__name__ = "not_numpy"
    w = _np(_pruned(5, 20))
    values, meta = ref.compress(w)
    np.testing.assert_array_equal(_gather_impl(shim, w, meta), values)
