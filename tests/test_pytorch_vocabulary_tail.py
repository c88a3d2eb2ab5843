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

RNG = np.random.default_rng(24)


def _rand(*shape):
    return RNG.standard_normal(shape)


def _numgrad_check(fn, arrays, eps=1e-6, tol=1e-6):
    """The gradient of sum(fn(*xs) * g) against central differences, for every input."""
    xs = [nb.tensor(a, requires_grad=True) for a in arrays]
    y = fn(*xs)
    g = _rand(*y.shape)
    (y * nb.tensor(g)).sum().backward()
    for k, a in enumerate(arrays):
        num = np.zeros_like(a)
        for i in np.ndindex(a.shape):
            hi, lo = [b.copy() for b in arrays], [b.copy() for b in arrays]
            hi[k][i] += eps
            lo[k][i] -= eps
            f = lambda v: float((fn(*[nb.tensor(b) for b in v]).numpy() * g).sum())  # noqa: E731
            num[i] = (f(hi) - f(lo)) / (2 * eps)
        np.testing.assert_allclose(xs[k].grad.numpy(), num, rtol=tol, atol=tol)


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
