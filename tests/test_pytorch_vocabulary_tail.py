"""Issue 24, the rest of the vocabulary: AdaptiveMaxPool1d/2d/3d, LPPool1d/2d/3d,
ConvTranspose3d and interpolate(antialias=True).

The first half runs without PyTorch (known values, gradients against central differences in
float64); the second half compares forward values, indices, gradients (float32 and float64)
and state_dict keys and shapes with PyTorch itself (skipped where it is not installed)."""
import math
import warnings

import numpy as np
import pytest

import nbaccel as nb
import nbaccel.nn.functional as F
from oracle import gradcheck

RNG = np.random.default_rng(24)


def _rand(*shape):
    return RNG.standard_normal(shape)


def _numgrad_check(fn, arrays, tol=1e-6):
    gradcheck(fn, *arrays, rtol=tol, atol=tol)      # against central differences, float64


# ---- without PyTorch -----------------------------------------------------------------------------

def test_adaptive_max_pool_known_values_and_indices():
    x = nb.tensor([[[1.0, 5.0, 2.0, 4.0, 3.0]]])
    y, i = F.adaptive_max_pool1d(x, 2, return_indices=True)
    # bins [0, 3) and [2, 5)
    assert y.numpy().tolist() == [[[5.0, 4.0]]] and i.numpy().tolist() == [[[1, 3]]]
    assert i.dtype == nb.int64
    # more bins than inputs: overlapping single-element bins
    assert F.adaptive_max_pool1d(x[0], 7).numpy().tolist() == [[1, 5, 5, 2, 4, 4, 3]]
    # 2-D indices are flat per plane, ties go to the first maximum in raster order
    z = nb.zeros(1, 1, 4, 4)
    z[0, 0, 1, 1] = z[0, 0, 0, 3] = 2.0
    y, i = F.adaptive_max_pool2d(z, 1, return_indices=True)
    assert float(y) == 2.0 and int(i) == 3
    y, i = nb.nn.AdaptiveMaxPool3d((1, None, 2), return_indices=True)(nb.arange(24.0).reshape(1, 2, 3, 4))
    assert y.shape == (1, 1, 3, 2) and i.numpy().ravel().tolist() == [13, 15, 17, 19, 21, 23]
    assert nb.nn.AdaptiveMaxPool2d((2, 3))(nb.ones(2, 3, 5, 7)).shape == (2, 3, 2, 3)
    assert F.adaptive_max_pool1d(x, 0).shape == (1, 1, 0)
    with pytest.raises(RuntimeError):
        F.adaptive_max_pool2d(nb.ones(2, 3), 2)
    with pytest.raises(NotImplementedError):
        F.adaptive_max_pool1d(nb.tensor([[[1, 2, 3]]]), 1)


def test_adaptive_max_pool_gradient_reaches_the_chosen_element():
    x = nb.tensor([[[[1.0, 1.0], [0.0, 1.0]]]], requires_grad=True)
    F.adaptive_max_pool2d(x, 1).sum().backward()      # a three-way tie: all to the first
    assert x.grad.numpy().ravel().tolist() == [1.0, 0.0, 0.0, 0.0]
    _numgrad_check(lambda t: F.adaptive_max_pool2d(t, (2, 3)), [_rand(1, 2, 5, 4)])
    _numgrad_check(lambda t: F.adaptive_max_pool3d(t, (2, 1, 3)), [_rand(1, 1, 3, 4, 5)])


def test_lp_pool_known_values_and_gradients():
    assert F.lp_pool1d(nb.tensor([[3.0, 4.0]]), 2, 2).numpy().tolist() == [[5.0]]
    x = nb.tensor([[[[1.0, -2.0], [2.0, 4.0]]]])
    np.testing.assert_allclose(F.lp_pool2d(x, 1, 2).numpy().ravel(), [5.0])
    np.testing.assert_allclose(F.lp_pool2d(x, 3, 2).numpy().ravel(), [65.0 ** (1 / 3)])
    np.testing.assert_allclose(F.lp_pool2d(x, math.inf, 2).numpy().ravel(), [4.0])
    pool = nb.nn.LPPool2d(2, 3, stride=2, ceil_mode=True)
    assert pool(nb.ones(2, 3, 7, 8)).shape == (2, 3, 3, 4)
    assert "norm_type=2, kernel_size=3, stride=2, ceil_mode=True" in repr(pool)
    _numgrad_check(lambda t: F.lp_pool2d(t, 2, (2, 3), 1), [_rand(1, 2, 4, 5)])
    _numgrad_check(lambda t: F.lp_pool1d(t, 3, 2), [np.abs(_rand(2, 1, 6)) + 0.5])


# ---- against PyTorch ------------------------------------------------------------------------------

def _torch():
    return pytest.importorskip("torch")


def _both(fn_nb, fn_t, arrays, tol=None):
    """Forward and every float input's gradient of fn_nb equal fn_t's; returns the outputs."""
    torch = _torch()
    tol = tol or (2e-5 if arrays[0].dtype == np.float32 else 1e-10)
    xs_nb = [nb.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    xs_t = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    y_nb, y_t = fn_nb(*xs_nb), fn_t(*xs_t)
    first_nb, first_t = (y_nb[0], y_t[0]) if isinstance(y_t, tuple) else (y_nb, y_t)
    assert tuple(first_nb.shape) == tuple(first_t.shape)
    assert first_nb.dtype.np == np.dtype(str(first_t.dtype).replace("torch.", ""))
    np.testing.assert_allclose(first_nb.numpy(), first_t.detach().numpy(), rtol=tol, atol=tol,
                               equal_nan=True)
    g = RNG.standard_normal(tuple(first_t.shape)).astype(arrays[0].dtype)
    (first_nb * nb.tensor(g)).sum().backward()
    (first_t * torch.tensor(g)).sum().backward()
    for a, b in zip(xs_nb, xs_t):
        if b.grad is not None:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=tol * 10,
                                       atol=tol * 10, equal_nan=True)
    return y_nb, y_t


ADAPTIVE_MAX = [
    (1, (2, 3, 11), 4), (1, (3, 7), 7), (1, (2, 2, 5), 9),             # unbatched; more bins
    (2, (2, 3, 7, 9), (3, 4)), (2, (3, 5, 4), (7, 2)), (2, (2, 2, 6, 6), (None, 4)),
    (2, (1, 2, 9, 5), 1),
    (3, (2, 2, 5, 6, 7), (2, 3, 4)), (3, (2, 5, 6, 7), (6, 1, 9)), (3, (1, 1, 4, 4, 4), 2),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", ADAPTIVE_MAX, ids=[str(i) for i in range(len(ADAPTIVE_MAX))])
def test_adaptive_max_pool_equals_torch(case, dtype):
    torch = _torch()
    n, shape, size = case
    a = RNG.standard_normal(shape).astype(dtype)
    fn, tfn = getattr(F, f"adaptive_max_pool{n}d"), getattr(torch.nn.functional, f"adaptive_max_pool{n}d")
    (y, i), (ty, ti) = _both(lambda x: fn(x, size, True), lambda x: tfn(x, size, True), [a])
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    # the modules, and ties (relu zeros) sent where PyTorch sends them
    m, tm = getattr(nb.nn, f"AdaptiveMaxPool{n}d")(size), getattr(torch.nn, f"AdaptiveMaxPool{n}d")(size)
    assert repr(m) == repr(tm)
    _both(lambda x: m(F.relu(x)), lambda x: tm(torch.relu(x)), [a])


LP_CASES = [
    (1, (2, 3, 9), dict(kernel_size=3)), (1, (3, 10), dict(kernel_size=3, stride=2, ceil_mode=True)),
    (1, (2, 2, 5), dict(kernel_size=7, ceil_mode=True)),               # kernel larger than input
    (2, (2, 3, 7, 8), dict(kernel_size=2)), (2, (3, 7, 9), dict(kernel_size=(3, 2), stride=(2, 1))),
    (2, (2, 2, 7, 7), dict(kernel_size=3, stride=2, ceil_mode=True)),
    (2, (1, 2, 3, 4), dict(kernel_size=(4, 2), stride=3, ceil_mode=True)),
    (3, (2, 2, 5, 6, 7), dict(kernel_size=2)), (3, (2, 5, 5, 6), dict(kernel_size=3, stride=2, ceil_mode=True)),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("p", [1, 2, 3, 1.5, math.inf])
@pytest.mark.parametrize("case", LP_CASES, ids=[str(i) for i in range(len(LP_CASES))])
def test_lp_pool_equals_torch(case, p, dtype):
    """Random signed inputs: an odd p gives negative sums (PyTorch's sign * relu(|s|) keeps
    them; 1/p then gives NaN for p = 3, the negative sum itself for p = 1), p = 1.5 NaNs."""
    torch = _torch()
    n, shape, kw = case
    a = RNG.standard_normal(shape).astype(dtype)
    fn, tfn = getattr(F, f"lp_pool{n}d"), getattr(torch.nn.functional, f"lp_pool{n}d")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)      # NumPy's note on NaN powers
        _both(lambda x: fn(x, p, **kw), lambda x: tfn(x, p, **kw), [a])
        if p == 2:
            m, tm = getattr(nb.nn, f"LPPool{n}d")(p, **kw), getattr(torch.nn, f"LPPool{n}d")(p, **kw)
            assert repr(m) == repr(tm)
            _both(m, tm, [a])


def test_lp_pool_too_large_kernel_raises_like_torch():
    torch = _torch()
    with pytest.raises(RuntimeError):
        torch.nn.functional.lp_pool1d(torch.ones(1, 2, 5), 2, 7)
    with pytest.raises(RuntimeError):
        F.lp_pool1d(nb.ones(1, 2, 5), 2, 7)


# ---- ConvTranspose3d -------------------------------------------------------------------------------

def test_conv_transpose3d_gradients_by_differences_and_shapes():
    _numgrad_check(lambda x, w: F.conv_transpose3d(x, w, stride=(2, 1, 2), padding=(1, 0, 0),
                                                   output_padding=(1, 0, 0), groups=2),
                   [_rand(1, 2, 2, 3, 2), _rand(2, 1, 2, 2, 2)])
    m = nb.nn.ConvTranspose3d(4, 6, (3, 2, 3), stride=2, padding=1, groups=2)
    assert tuple(m.weight.shape) == (4, 3, 3, 2, 3) and list(m.state_dict()) == ["weight", "bias"]
    x = nb.tensor(_rand(2, 4, 3, 4, 5).astype(np.float32))
    assert m(x).shape == (2, 6, 5, 6, 9) and m(x[0]).shape == (6, 5, 6, 9)
    assert m(x, output_size=(6, 7, 10)).shape == (2, 6, 6, 7, 10)
    assert "output_padding" not in repr(m) and "groups=2" in repr(m)
    with pytest.raises(ValueError):
        m(x, output_size=(8, 7, 10))
    with pytest.raises(ValueError):
        F.conv_transpose3d(x, m.weight, output_padding=(1, 0, 0))      # not below stride 1
    with pytest.raises(RuntimeError):
        F.conv_transpose3d(x, nb.ones(3, 2, 2, 2, 2))                  # 4 channels, weight 3
    with pytest.raises(ValueError):
        nb.nn.ConvTranspose3d(4, 6, 3, padding_mode="reflect")


CONV_T3D = [
    dict(x=(2, 3, 4, 5, 6), w=(3, 2, 3, 3, 3)),
    dict(x=(1, 4, 3, 4, 5), w=(4, 3, 2, 3, 2), stride=(2, 1, 2), padding=(1, 0, 1),
         output_padding=(1, 0, 1), groups=2),
    dict(x=(2, 2, 3, 3, 4), w=(2, 2, 3, 2, 2), stride=2, padding=2, dilation=(2, 1, 3),
         output_padding=1),
    dict(x=(4, 3, 3, 3), w=(4, 1, 2, 2, 2), groups=4, stride=3, output_padding=(2, 0, 1)),   # unbatched
    dict(x=(1, 2, 2, 2, 2), w=(2, 3, 5, 4, 3), padding=(1, 1, 0)),      # kernel larger than input
    dict(x=(1, 1, 5, 1, 3), w=(1, 2, 1, 1, 1), stride=(1, 2, 3), output_padding=(0, 1, 2)),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CONV_T3D, ids=[str(i) for i in range(len(CONV_T3D))])
def test_conv_transpose3d_equals_torch(case, dtype):
    tF = _torch().nn.functional
    kw = {k: v for k, v in case.items() if k not in ("x", "w")}
    x = RNG.standard_normal(case["x"]).astype(dtype)
    w = RNG.standard_normal(case["w"]).astype(dtype)
    b = RNG.standard_normal(case["w"][1] * kw.get("groups", 1)).astype(dtype)
    _both(lambda x, w, b: F.conv_transpose3d(x, w, b, **kw),
          lambda x, w, b: tF.conv_transpose3d(x, w, b, **kw), [x, w, b],
          tol=5e-5 if dtype == "float32" else 1e-10)
    _both(lambda x, w: F.conv_transpose3d(x, w, **kw), lambda x, w: tF.conv_transpose3d(x, w, **kw),
          [x, w], tol=5e-5 if dtype == "float32" else 1e-10)


def test_conv_transpose3d_module_loads_torch_weights():
    torch = _torch()
    t = torch.nn.ConvTranspose3d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2,
                                 dilation=(1, 2, 1))
    n = nb.nn.ConvTranspose3d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2,
                              dilation=(1, 2, 1))
    assert repr(n) == repr(t)
    assert [(k, tuple(v.shape)) for k, v in t.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in n.state_dict().items()]
    n.load_state_dict({k: nb.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    a = RNG.standard_normal((2, 4, 3, 4, 3)).astype(np.float32)
    np.testing.assert_allclose(n(nb.tensor(a)).numpy(), t(torch.tensor(a)).detach().numpy(),
                               rtol=5e-5, atol=5e-5)
    np.testing.assert_allclose(n(nb.tensor(a), output_size=(6, 10, 5)).numpy(),
                               t(torch.tensor(a), output_size=(6, 10, 5)).detach().numpy(),
                               rtol=5e-5, atol=5e-5)
    # and back: nbaccel's weights load into PyTorch; the default init bound is PyTorch's
    t.load_state_dict({k: torch.tensor(v.numpy()) for k, v in nb.nn.ConvTranspose3d(
        4, 6, 3, groups=2).state_dict().items()})
    bound = 1 / math.sqrt(3 * 27)
    fresh = nb.nn.ConvTranspose3d(4, 6, 3, groups=2)
    assert float(abs(fresh.bias).max()) <= bound and float(abs(fresh.weight).max()) <= bound


# ---- interpolate(antialias=True) -----------------------------------------------------------------

def test_antialias_known_values_and_gradients():
    # halving a row with the widened triangle: weights 1/8, 3/8, 3/8, 1/8 inside, renormalised
    # at the borders (3/7, 3/7, 1/7 at the first output)
    x = nb.arange(8.0).reshape(1, 1, 1, 8)
    y = F.interpolate(x, size=(1, 4), mode="bilinear", antialias=True)
    np.testing.assert_allclose(y.numpy().ravel(), [(0 * 3 + 1 * 3 + 2) / 7, 2.5, 4.5,
                                                   (5 + 6 * 3 + 7 * 3) / 7], rtol=1e-6)
    c = F.interpolate(nb.full((1, 2, 9, 7), 1.5), scale_factor=0.4, mode="bicubic", antialias=True)
    np.testing.assert_allclose(c.numpy(), 1.5, rtol=1e-6)
    for mode in ("bilinear", "bicubic"):
        _numgrad_check(lambda t: F.interpolate(t, size=(2, 3), mode=mode, antialias=True),
                       [_rand(1, 2, 5, 7)])
    with pytest.raises(ValueError):
        F.interpolate(nb.ones(1, 1, 8), size=4, mode="linear", antialias=True)
    with pytest.raises(ValueError):
        F.interpolate(nb.ones(1, 1, 8, 8), size=4, mode="nearest", antialias=True)


AA_CASES = [
    ((2, 3, 17, 13), dict(size=(5, 4))), ((1, 2, 16, 16), dict(scale_factor=0.3)),
    ((1, 1, 20, 3), dict(size=(1, 1))), ((2, 1, 7, 8), dict(scale_factor=(0.5, 1.7))),
    ((1, 2, 9, 10), dict(size=(9, 23))),                             # upsampling too
    ((1, 1, 15, 11), dict(scale_factor=0.45, recompute_scale_factor=True)),
    ((1, 2, 6, 6), dict(size=(6, 6))),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("case", AA_CASES, ids=[str(i) for i in range(len(AA_CASES))])
def test_antialias_interpolate_equals_torch(case, mode, align_corners, dtype):
    tF = _torch().nn.functional
    shape, kw = case
    a = RNG.standard_normal(shape).astype(dtype)
    _both(lambda x: F.interpolate(x, mode=mode, align_corners=align_corners, antialias=True, **kw),
          lambda x: tF.interpolate(x, mode=mode, align_corners=align_corners, antialias=True, **kw),
          [a])
