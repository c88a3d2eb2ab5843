"""The eager ops that run one fused kernel (issue 36 items 3 and 4): LayerNorm, GELU, the
softmaxes' backward, cross-entropy, BatchNorm in training mode, embedding's and max pooling's
backward and Adam(W)'s update. Each runs on both of its eager paths, the numba kernel and the NumPy fallback that
runs while numba loads, against NumPy's formula and against PyTorch (forward and gradients);
the two paths must agree with each other, and Adam's to the bit."""
import math

import numpy as np
import pytest

import nbaccel as nb
import nbaccel.nn.functional as F
from nbaccel.ops import kernel_modules


def _torch():
    return pytest.importorskip("torch")


def _tol(dt):
    return dict(rtol=1e-4, atol=1e-5) if dt == "float32" else dict(rtol=1e-9, atol=1e-11)


def _leaf(a):
    return nb.tensor(a, requires_grad=True)


def _pair(*arrays):
    """nbaccel and torch leaves holding the same arrays."""
    torch = _torch()
    return ([_leaf(a) for a in arrays],
            [torch.tensor(a, requires_grad=True) for a in arrays])


def _check_grads(ours, theirs, tol):
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), **tol)


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("ns", [(16,), (6, 16)])
def test_layer_norm(fused_path, dt, ns):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((4, 6, 16)) * 2 + 1).astype(dt)
    w, b = (rng.standard_normal(ns).astype(dt) for _ in range(2))
    g = rng.standard_normal(x.shape).astype(dt)
    (xa, wa, ba), (xt, wt, bt) = _pair(x, w, b)
    y = F.layer_norm(xa, ns, wa, ba)
    axes = tuple(range(3 - len(ns), 3))
    xc = x.astype(np.float64) - x.mean(axis=axes, keepdims=True)
    want = xc / np.sqrt((xc * xc).mean(axis=axes, keepdims=True) + 1e-5) * w + b
    np.testing.assert_allclose(y.numpy(), want, **_tol(dt))
    y.backward(nb.tensor(g))
    torch = _torch()
    torch.nn.functional.layer_norm(xt, ns, wt, bt).backward(torch.tensor(g))
    _check_grads((xa, wa, ba), (xt, wt, bt), _tol(dt))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_gelu(fused_path, approximate, dt):
    x = (np.random.default_rng(0).standard_normal((8, 33)) * 3).astype(dt)
    (xa,), (xt,) = _pair(x)
    y = F.gelu(xa, approximate=approximate)
    if approximate == "none":
        erf = np.vectorize(math.erf)(x.astype(np.float64) / math.sqrt(2))
        np.testing.assert_allclose(y.numpy(), 0.5 * x * (1 + erf), **_tol(dt))
    torch = _torch()
    yt = torch.nn.functional.gelu(xt, approximate=approximate)
    np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), **_tol(dt))
    y.sum().backward()
    yt.sum().backward()
    _check_grads((xa,), (xt,), _tol(dt))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [-1, 0])
def test_softmaxes_and_their_backward(fused_path, name, dim):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((5, 7, 9)) * 3).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    (xa,), (xt,) = _pair(x)
    y = getattr(F, name)(xa, dim=dim)
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    want = e / e.sum(axis=dim, keepdims=True)
    np.testing.assert_allclose(y.numpy(), np.log(want) if name == "log_softmax" else want,
                               rtol=1e-5, atol=1e-6)
    y.backward(nb.tensor(g))
    torch = _torch()
    getattr(torch.nn.functional, name)(xt, dim=dim).backward(torch.tensor(g))
    _check_grads((xa,), (xt,), dict(rtol=1e-4, atol=1e-5))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_cross_entropy(fused_path, reduction, smoothing, dt):
    torch = _torch()
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((12, 10)) * 3).astype(dt)
    t = rng.integers(0, 10, 12)
    t[[1, 5]] = -100
    (xa,), (xt,) = _pair(x)
    loss = F.cross_entropy(xa, nb.tensor(t), reduction=reduction, label_smoothing=smoothing)
    lt = torch.nn.functional.cross_entropy(xt, torch.tensor(t), reduction=reduction,
                                           label_smoothing=smoothing)
    np.testing.assert_allclose(loss.numpy(), lt.detach().numpy(), **_tol(dt))
    if reduction == "mean" and not smoothing:
        logp = x - x.max(-1, keepdims=True)
        logp = logp - np.log(np.exp(logp).sum(-1, keepdims=True))
        keep = t != -100
        np.testing.assert_allclose(loss.numpy(), -logp[keep, t[keep]].mean(), **_tol(dt))
    g = rng.standard_normal(lt.shape).astype(dt)
    loss.backward(nb.tensor(g))
    lt.backward(torch.tensor(g))
    _check_grads((xa,), (xt,), _tol(dt))


def test_cross_entropy_with_every_target_ignored_is_nan(fused_path):
    x = _leaf(np.ones((3, 4), np.float32))
    loss = F.cross_entropy(x, nb.tensor(np.full(3, -100)))
    assert np.isnan(loss.item())


@pytest.mark.parametrize("shape", [(6, 4, 5, 5), (8, 3)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_training(fused_path, shape, affine):
    torch = _torch()
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    kind = "BatchNorm2d" if len(shape) == 4 else "BatchNorm1d"
    ours, theirs = getattr(nb.nn, kind)(shape[1], affine=affine), \
        getattr(torch.nn, kind)(shape[1], affine=affine)
    if affine:
        w, b = (rng.standard_normal(shape[1]).astype(np.float32) for _ in range(2))
        with torch.no_grad():
            theirs.weight.copy_(torch.tensor(w))
            theirs.bias.copy_(torch.tensor(b))
        ours.weight.data = nb.tensor(w)
        ours.bias.data = nb.tensor(b)
    (xa,), (xt,) = _pair(x)
    for _ in range(2):                         # the running statistics move twice
        y, yt = ours(xa), theirs(xt)
    axes = (0,) + tuple(range(2, len(shape)))
    xc = x.astype(np.float64) - x.mean(axis=axes, keepdims=True)
    want = xc / np.sqrt((xc * xc).mean(axis=axes, keepdims=True) + 1e-5)
    if affine:
        cs = (1, -1) + (1,) * (len(shape) - 2)
        want = want * w.reshape(cs) + b.reshape(cs)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    for name in ("running_mean", "running_var"):
        np.testing.assert_allclose(getattr(ours, name).numpy(), getattr(theirs, name).numpy(),
                                   rtol=1e-5, atol=1e-6)
    y.backward(nb.tensor(g))
    yt.backward(torch.tensor(g))
    tol = dict(rtol=1e-4, atol=1e-4)
    _check_grads((xa,), (xt,), tol)
    if affine:
        for name in ("weight", "bias"):
            np.testing.assert_allclose(getattr(ours, name).grad.numpy(),
                                       getattr(theirs, name).grad.numpy(), **tol)


def test_embedding_backward_adds_repeated_indices(fused_path):
    torch = _torch()
    rng = np.random.default_rng(0)
    w = rng.standard_normal((7, 5)).astype(np.float32)
    idx = rng.integers(0, 7, (4, 9))
    (wa,), (wt,) = _pair(w)
    F.embedding(nb.tensor(idx), wa, padding_idx=2).sum().backward()
    torch.nn.functional.embedding(torch.tensor(idx), wt, padding_idx=2).sum().backward()
    _check_grads((wa,), (wt,), dict(rtol=1e-6, atol=1e-6))


@pytest.mark.parametrize("name,kw", [("AdamW", {"lr": 1e-2}),
                                     ("Adam", {"lr": 1e-2, "weight_decay": 0.1}),
                                     ("Adam", {"lr": 1e-2, "maximize": True})])
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_adam_paths_give_the_same_bits_and_torchs_values(name, kw, dt):
    torch = _torch()
    rng = np.random.default_rng(0)
    p0 = rng.standard_normal((6, 5)).astype(dt)
    grads = [rng.standard_normal(p0.shape).astype(dt) for _ in range(4)]
    finals = {}
    for which in ("kernel", "numpy"):
        module = kernel_modules.load_now("fused") if which == "kernel" else None
        prev = kernel_modules.set_eager_kernels("fused", module)
        try:
            p = nb.nn.Parameter(nb.tensor(p0.copy()))
            opt = getattr(nb.optim, name)([p], **kw)
            for gr in grads:
                p.grad = nb.tensor(gr)
                opt.step()
            finals[which] = p.numpy().copy()
        finally:
            kernel_modules.set_eager_kernels("fused", prev)
    np.testing.assert_array_equal(finals["kernel"], finals["numpy"])
    pt = torch.tensor(p0.copy(), requires_grad=True)
    opt = getattr(torch.optim, name)([pt], **kw)
    for gr in grads:
        pt.grad = torch.tensor(gr)
        opt.step()
    np.testing.assert_allclose(finals["kernel"], pt.detach().numpy(), **_tol(dt))


def test_the_kernel_path_runs_one_kernel_per_op(fused_kernel_calls):
    """With the kernels loaded, each op calls its kernel (and nothing falls back unseen)."""
    with fused_kernel_calls() as called:
        rng = np.random.default_rng(0)
        x = _leaf(rng.standard_normal((4, 8)).astype(np.float32))
        w = _leaf(np.ones(8, np.float32))
        F.layer_norm(x, (8,), w, w).sum().backward()
        F.gelu(x).sum().backward()
        F.gelu(x, approximate="tanh").sum().backward()
        F.softmax(x, -1).sum().backward()
        F.cross_entropy(x, nb.tensor(np.arange(4))).backward()
        xb = _leaf(rng.standard_normal((4, 3, 2, 2)).astype(np.float32))
        nb.nn.BatchNorm2d(3)(xb).sum().backward()
        F.max_pool2d(xb, 2).sum().backward()
        p = nb.nn.Parameter(nb.tensor(np.ones(3, np.float32)))
        p.grad = nb.tensor(np.ones(3, np.float32))
        nb.optim.AdamW([p]).step()
    assert set(called) >= {"layer_norm_forward", "layer_norm_backward",
                           "layer_norm_affine_backward", "gelu_forward", "gelu_backward",
                           "gelu_tanh_forward", "gelu_tanh_backward",
                           "softmax_backward", "cross_entropy_forward", "cross_entropy_backward",
                           "batch_norm_stats", "batch_norm_forward", "batch_norm_backward",
                           "batch_norm_affine_backward", "adam_update", "max_pool2d_backward"}


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_cross_entropy_over_spatial_positions(fused_path, reduction):
    """Class axis 1 of (N, C, H, W) logits: the op sees the classes last, rows per position."""
    torch = _torch()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5, 4, 2)).astype(np.float32)
    t = rng.integers(0, 5, (3, 4, 2))
    t[0, 1, 1] = -100
    (xa,), (xt,) = _pair(x)
    loss = F.cross_entropy(xa, nb.tensor(t), reduction=reduction)
    lt = torch.nn.functional.cross_entropy(xt, torch.tensor(t), reduction=reduction)
    np.testing.assert_allclose(loss.numpy(), lt.detach().numpy(), rtol=1e-5, atol=1e-6)
    loss.sum().backward()
    lt.sum().backward()
    _check_grads((xa,), (xt,), dict(rtol=1e-5, atol=1e-6))


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=(3, 2), stride=(1, 2), dilation=(2, 1)),
                                dict(kernel_size=2, ceil_mode=True)])
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_max_pool2d_backward(fused_path, kw, dt):
    torch = _torch()
    rng = np.random.default_rng(0)
    x = rng.integers(-2, 3, (2, 3, 7, 7)).astype(dt)      # ties everywhere
    (xa,), (xt,) = _pair(x)
    y = F.max_pool2d(xa, **kw)
    yt = torch.nn.functional.max_pool2d(xt, **kw)
    np.testing.assert_array_equal(y.numpy(), yt.detach().numpy())
    g = rng.standard_normal(yt.shape).astype(dt)
    y.backward(nb.tensor(g))
    yt.backward(torch.tensor(g))
    _check_grads((xa,), (xt,), _tol(dt))
