"""Convolution, pooling, normalisation and resampling ops: against NumPy references, against
PyTorch (when installed), gradients by finite differences, and compiled against eager."""
import numpy as np
import pytest

import nbaccel as nb
import nbaccel.nn.functional as F
from nbaccel_kernels.conv import reference

RNG = np.random.default_rng(0)


def _t(a, grad=False):
    return nb.tensor(a, requires_grad=grad)


def _torch():
    return pytest.importorskip("torch")


def _both(fn_nb, fn_t, arrays, tol=1e-5, **kw):
    """Forward and every input's gradient of fn_nb equal fn_t's (PyTorch)."""
    torch = _torch()
    xs_nb = [_t(a, a.dtype.kind == "f") for a in arrays]
    xs_t = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    y_nb, y_t = fn_nb(*xs_nb, **kw), fn_t(*xs_t, **kw)
    assert tuple(y_nb.shape) == tuple(y_t.shape)
    np.testing.assert_allclose(y_nb.numpy(), y_t.detach().numpy(), rtol=tol, atol=tol)
    g = RNG.standard_normal(tuple(y_t.shape)).astype(arrays[0].dtype)
    (y_nb * _t(g)).sum().backward()
    (y_t * torch.tensor(g)).sum().backward()
    for a, b in zip(xs_nb, xs_t):
        if b.grad is not None:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=tol * 10, atol=tol * 10)


CONV2D = [
    dict(x=(2, 3, 8, 7), w=(4, 3, 3, 3), stride=1, padding=1),
    dict(x=(2, 4, 9, 9), w=(6, 2, 3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2),
    dict(x=(1, 6, 5, 5), w=(6, 1, 3, 3), padding=1, groups=6),            # depthwise
    dict(x=(1, 6, 5, 5), w=(12, 1, 3, 3), stride=2, padding=1, groups=6),  # depthwise x2
    dict(x=(2, 3, 6, 6), w=(4, 3, 4, 4), padding="same"),                  # even kernel: asymmetric
    dict(x=(2, 3, 6, 6), w=(4, 3, 3, 3), padding="same", dilation=2),
    dict(x=(1, 2, 2, 2), w=(3, 2, 3, 3), padding=1),                       # kernel > input
    dict(x=(1, 2, 5, 5), w=(3, 2, 5, 5), padding="valid"),                 # one output pixel
    dict(x=(2, 8, 4, 4), w=(4, 8, 1, 1)),                                  # 1x1
    dict(x=(4, 5, 5), w=(2, 4, 3, 3), padding=1),                          # unbatched
]


@pytest.mark.parametrize("case", CONV2D)
@pytest.mark.parametrize("bias", [False, True])
def test_conv2d_matches_pytorch(case, bias):
    torch = _torch()
    kw = {k: v for k, v in case.items() if k not in ("x", "w")}
    arrays = [RNG.standard_normal(case["x"]), RNG.standard_normal(case["w"])]
    if bias:
        arrays.append(RNG.standard_normal(case["w"][0]))
    _both(F.conv2d, torch.nn.functional.conv2d, arrays, tol=1e-8, **kw)


@pytest.mark.parametrize("case", CONV2D[:4])
def test_conv2d_float32_matches_the_reference(case):
    kw = {k: v for k, v in case.items() if k not in ("x", "w")}
    x, w = (RNG.standard_normal(case[k]).astype(np.float32) for k in ("x", "w"))
    y = F.conv2d(_t(x), _t(w), **kw)
    assert y.dtype == nb.float32
    s, d = (kw.get(k, 1) for k in ("stride", "dilation"))
    s, d = ((s, s) if isinstance(s, int) else s), ((d, d) if isinstance(d, int) else d)
    p = kw.get("padding", 0)
    p = (p, p) if isinstance(p, int) else p
    ref = reference.conv2d_forward(x.astype(np.float64), w.astype(np.float64), s,
                                   ((p[0], p[0]), (p[1], p[1])), d, kw.get("groups", 1))
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_conv2d_low_precision_computes_in_float32(dtype):
    x, w = nb.randn(1, 2, 5, 5).astype(dtype), nb.randn(3, 2, 3, 3).astype(dtype)
    y = F.conv2d(x, w, padding=1)
    assert y.dtype == getattr(nb, dtype)
    ref = F.conv2d(x.astype("float32"), w.astype("float32"), padding=1)
    np.testing.assert_allclose(y.astype("float32").numpy(), ref.numpy(), rtol=2e-2, atol=5e-2)


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1), dict(dilation=2, padding=2),
                                dict(padding="same"), dict(groups=2, stride=3)])
def test_conv1d_matches_pytorch(kw):
    torch = _torch()
    arrays = [RNG.standard_normal((2, 4, 11)), RNG.standard_normal((6, 4 // kw.get("groups", 1), 3)),
              RNG.standard_normal(6)]
    _both(F.conv1d, torch.nn.functional.conv1d, arrays, tol=1e-8, **kw)


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1, output_padding=1),
                                dict(stride=(2, 3), padding=(0, 1), dilation=(1, 2)),
                                dict(groups=2, stride=2), dict(stride=3, output_padding=2)])
def test_conv_transpose2d_matches_pytorch(kw):
    torch = _torch()
    g = kw.get("groups", 1)
    arrays = [RNG.standard_normal((2, 4, 5, 4)), RNG.standard_normal((4, 6 // g, 3, 3)),
              RNG.standard_normal(6)]
    _both(F.conv_transpose2d, torch.nn.functional.conv_transpose2d, arrays, tol=1e-8, **kw)


def test_conv_transpose1d_matches_pytorch():
    torch = _torch()
    arrays = [RNG.standard_normal((2, 4, 7)), RNG.standard_normal((4, 3, 3)), RNG.standard_normal(3)]
    _both(F.conv_transpose1d, torch.nn.functional.conv_transpose1d, arrays, tol=1e-8, stride=2,
          padding=1, output_padding=1)


def test_conv_gradients_by_finite_differences_and_second_order():
    from nbaccel.autograd import grad
    x = _t(RNG.standard_normal((1, 2, 5, 5)), True)
    w = _t(RNG.standard_normal((3, 2, 3, 3)), True)
    loss = lambda x, w: (F.conv2d(x, w, stride=2, padding=1) ** 2).sum()  # noqa: E731
    gx, gw = grad(loss(x, w), (x, w), create_graph=True)
    eps, xa = 1e-6, x.detach().numpy().copy()
    for idx in [(0, 0, 0, 0), (0, 1, 2, 3), (0, 0, 4, 4)]:
        hi, lo = xa.copy(), xa.copy()
        hi[idx] += eps
        lo[idx] -= eps
        fd = (loss(_t(hi), w).item() - loss(_t(lo), w).item()) / (2 * eps)
        assert abs(fd - gx.numpy()[idx]) < 1e-5
    # the gradient ops are differentiable too (a gradient penalty needs them)
    (gx2,) = grad((gw ** 2).sum(), (x,))
    assert gx2.shape == x.shape and np.isfinite(gx2.numpy()).all()


def test_conv_errors_say_what_is_wrong():
    x = nb.randn(1, 3, 4, 4)
    with pytest.raises(ValueError, match="larger than the padded input"):
        F.conv2d(x, nb.randn(2, 3, 5, 5))
    with pytest.raises(ValueError, match="channels"):
        F.conv2d(x, nb.randn(2, 2, 3, 3))
    with pytest.raises(RuntimeError, match="should be the same"):
        F.conv2d(x, nb.randn(2, 3, 3, 3).astype("float64"))
    with pytest.raises(RuntimeError, match="floating point"):
        F.conv2d(nb.ones((1, 1, 3, 3), dtype="int64"), nb.ones((1, 1, 1, 1), dtype="int64"))
    with pytest.raises(ValueError, match="strided"):
        F.conv2d(x, nb.randn(2, 3, 3, 3), stride=2, padding="same")
    with pytest.raises(ValueError, match="output_padding"):
        F.conv_transpose2d(x, nb.randn(3, 2, 3, 3), stride=1, output_padding=1)


# ---- pooling --------------------------------------------------------------------------------------

MAX_POOL = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
            dict(kernel_size=3, stride=2, ceil_mode=True),
            dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 1), dilation=(2, 1)),
            dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)]
AVG_POOL = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
            dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
            dict(kernel_size=3, stride=2, ceil_mode=True),
            dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
            dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
            dict(kernel_size=2, divisor_override=3)]


@pytest.mark.parametrize("kw", MAX_POOL)
def test_max_pool2d_matches_pytorch(kw):
    _both(F.max_pool2d, _torch().nn.functional.max_pool2d, [RNG.standard_normal((2, 3, 9, 8))],
          tol=1e-10, **kw)


def test_max_pool2d_ties_send_the_gradient_to_the_first_maximum():
    x = np.round(RNG.standard_normal((1, 2, 5, 5)))
    _both(F.max_pool2d, _torch().nn.functional.max_pool2d, [x], kernel_size=3, stride=1)
    xt = _t(np.ones((1, 1, 2, 2)), True)
    F.max_pool2d(xt, 2).sum().backward()
    np.testing.assert_array_equal(xt.grad.numpy()[0, 0], [[1, 0], [0, 0]])


def test_max_pool2d_of_integers():
    x = nb.tensor(np.arange(16).reshape(1, 1, 4, 4))
    np.testing.assert_array_equal(F.max_pool2d(x, 2, padding=1).numpy()[0, 0],
                                  [[0, 2, 3], [8, 10, 11], [12, 14, 15]])


@pytest.mark.parametrize("kw", AVG_POOL)
def test_avg_pool2d_matches_pytorch(kw):
    _both(F.avg_pool2d, _torch().nn.functional.avg_pool2d, [RNG.standard_normal((2, 3, 9, 8))],
          tol=1e-10, **kw)


def test_pool1d_match_pytorch():
    torch = _torch()
    x = [RNG.standard_normal((2, 3, 10))]
    _both(F.max_pool1d, torch.nn.functional.max_pool1d, x, kernel_size=3, stride=2, padding=1)
    _both(F.avg_pool1d, torch.nn.functional.avg_pool1d, x, kernel_size=3, stride=2)


def test_avg_pool2d_against_numpy_windows():
    x = RNG.standard_normal((1, 2, 6, 6))
    expect = x.reshape(1, 2, 3, 2, 3, 2).mean(axis=(3, 5))
    np.testing.assert_allclose(F.avg_pool2d(_t(x), 2).numpy(), expect, atol=1e-12)
    np.testing.assert_allclose(F.max_pool2d(_t(x), 2).numpy(), x.reshape(1, 2, 3, 2, 3, 2).max(axis=(3, 5)))


@pytest.mark.parametrize("size", [(1, 1), (2, 3), (3, 5), 4, (None, 2)])
def test_adaptive_avg_pool2d_matches_pytorch(size):
    _both(F.adaptive_avg_pool2d, _torch().nn.functional.adaptive_avg_pool2d,
          [RNG.standard_normal((2, 3, 7, 10))], tol=1e-10, output_size=size)


# ---- normalisation ------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(4, 3), (4, 3, 5), (2, 3, 4, 5)])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_matches_pytorch(shape, training):
    torch = _torch()
    x = RNG.standard_normal(shape)
    rm, rv = RNG.standard_normal(3), RNG.random(3) + 0.5
    w, b = RNG.standard_normal(3), RNG.standard_normal(3)
    stats_nb, stats_t = (_t(rm), _t(rv)), (torch.tensor(rm), torch.tensor(rv))
    _both(lambda x, w, b: F.batch_norm(x, *stats_nb, w, b, training, 0.2, 1e-3),
          lambda x, w, b: torch.nn.functional.batch_norm(x, *stats_t, w, b, training, 0.2, 1e-3),
          [x, w, b], tol=1e-8)
    for a, e in zip(stats_nb, stats_t):
        np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=1e-10)


def test_batch_norm_needs_more_than_one_value_per_channel():
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        F.batch_norm(nb.randn(1, 3), nb.zeros(3), nb.ones(3), training=True)


@pytest.mark.parametrize("groups", [1, 2, 6])
def test_group_norm_matches_pytorch(groups):
    torch = _torch()
    _both(lambda x, w, b: F.group_norm(x, groups, w, b),
          lambda x, w, b: torch.nn.functional.group_norm(x, groups, w, b),
          [RNG.standard_normal((2, 6, 3, 4)), RNG.standard_normal(6), RNG.standard_normal(6)], tol=1e-8)


# ---- interpolation, padding, activations --------------------------------------------------------

@pytest.mark.parametrize("kw", [dict(scale_factor=2), dict(size=(5, 7)), dict(scale_factor=1.7),
                                dict(size=(3, 2), mode="nearest-exact"),
                                dict(scale_factor=2, mode="bilinear"),
                                dict(size=(7, 5), mode="bilinear", align_corners=True),
                                dict(size=(3, 9), mode="bilinear", align_corners=False),
                                dict(scale_factor=0.5, mode="bilinear")])
def test_interpolate_matches_pytorch(kw):
    _both(F.interpolate, _torch().nn.functional.interpolate, [RNG.standard_normal((2, 3, 4, 6))],
          tol=1e-10, **kw)


def test_interpolate_linear_1d():
    _both(F.interpolate, _torch().nn.functional.interpolate, [RNG.standard_normal((2, 3, 5))],
          tol=1e-10, scale_factor=3, mode="linear")


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("pads", [(1, 2), (2, 1, 0, 3), (-1, 2, 1, -1)])
def test_pad_matches_pytorch(mode, pads):
    if mode == "reflect" and min(pads) < 0:
        pytest.skip("PyTorch takes no negative reflect padding")
    shape = (2, 3, 5) if len(pads) == 2 and mode != "constant" else (2, 3, 4, 5)   # torch's rule
    _both(lambda x: F.pad(x, pads, mode), lambda x: _torch().nn.functional.pad(x, pads, mode),
          [RNG.standard_normal(shape)], tol=1e-12)


def test_pad_constant_value_against_numpy():
    x = RNG.standard_normal((2, 3))
    np.testing.assert_array_equal(F.pad(_t(x), (1, 2, 0, 1), value=7.0).numpy(),
                                  np.pad(x, ((0, 1), (1, 2)), constant_values=7.0))


def test_activations_match_pytorch():
    torch = _torch()
    x = [np.array([-7.0, -1.0, 0.0, 0.5, 6.0, 7.5])]
    _both(F.relu6, torch.nn.functional.relu6, x)
    _both(F.leaky_relu, torch.nn.functional.leaky_relu, x, negative_slope=0.2)
    _both(F.hardtanh, torch.nn.functional.hardtanh, x, min_val=-2.0, max_val=1.0)


def test_dropout2d_drops_whole_channels():
    nb.manual_seed(0)
    y = F.dropout2d(nb.ones(8, 16, 3, 3), 0.5).numpy()
    per_channel = y.reshape(8, 16, 9)
    assert ((per_channel == 0).all(-1) | (per_channel == 2).all(-1)).all()
    assert 0.3 < (per_channel[..., 0] == 0).mean() < 0.7
    assert F.dropout2d(nb.ones(2, 3, 4, 4), 0.5, training=False).numpy().min() == 1


# ---- compiled against eager ----------------------------------------------------------------------

def _compiled_equals_eager(fn, *arrays, grad=False, tol=1e-5):
    cf = nb.compile(fn)
    results = []
    for f in (fn, cf, cf):
        xs = [_t(a, grad) for a in arrays]
        out = f(*xs)
        if grad:
            out.sum().backward()
        results.append([out.numpy()] + ([x.grad.numpy() for x in xs] if grad else []))
    for a, b in zip(results[0], results[2]):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    return cf.report


def test_compiled_conv_bn_relu_is_one_extern_and_one_fused_kernel():
    conv, bn = nb.nn.Conv2d(3, 8, 3, padding=1), nb.nn.BatchNorm2d(8)
    bn.eval()
    with nb.no_grad():
        bn.running_mean.copy_(nb.randn(8))
        bn.running_var.copy_(nb.rand(8) + 0.5)

    def block(x):
        return F.relu(bn(conv(x)))

    with nb.no_grad():
        report = _compiled_equals_eager(block, RNG.standard_normal((2, 3, 10, 10)).astype(np.float32))
    kernels = report.kernels
    assert [k["ops"] for k in kernels if k["ops"] == ["conv2d"]] == [["conv2d"]]
    assert kernels[0]["backend"] == "conv-cpu"
    fused = [k for k in kernels if k["ops"] != ["conv2d"]]
    assert len(fused) == 1     # bias + BatchNorm(eval) + ReLU: one pointwise kernel
    assert {"subtract", "sqrt", "multiply", "where"} <= set(fused[0]["ops"])


def test_compiled_training_step_of_conv_layers():
    w0 = RNG.standard_normal((4, 2, 3, 3)).astype(np.float32)

    def step(x, w):
        y = F.conv2d(x, w, padding=1, stride=2)
        y = F.max_pool2d(F.relu(y), 2)
        return (F.avg_pool2d(y, 2, ceil_mode=True) ** 2).mean()

    _compiled_equals_eager(step, RNG.standard_normal((2, 2, 12, 12)).astype(np.float32), w0, grad=True)


def test_compiled_pooling_and_resampling():
    def fn(x):
        a = F.max_pool2d(x, 3, 2, 1) + F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)
        b = F.interpolate(a, scale_factor=2, mode="bilinear")
        return F.adaptive_avg_pool2d(b, (3, 3)), F.conv_transpose2d(a, nb.ones(3, 2, 2, 2, dtype=a.dtype), stride=2)

    cf = nb.compile(fn)
    x = _t(RNG.standard_normal((1, 3, 8, 8)))
    for a, b in zip(fn(x), cf(x)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)
    assert any(k["ops"] == ["conv_transpose2d"] for k in cf.report.kernels)


# ---- vmap --------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["image", "both", "weight", "transpose", "grads"])
def test_vmap_of_convolutions_matches_a_loop_without_looping(case):
    import warnings
    from nbaccel.func import grad, vmap
    x = _t(RNG.standard_normal((3, 2, 4, 6, 6)))
    w = _t(RNG.standard_normal((3, 5, 4, 3, 3)))
    fns = {
        "image": (lambda x: F.conv2d(x, w[0], padding=1, stride=2), (x,)),
        "both": (lambda x, w: F.conv2d(x, w, padding=1), (x, w)),
        "weight": (lambda w: F.conv2d(x[0], w), (w,)),
        "transpose": (lambda x, w: F.conv_transpose2d(x, w.permute(1, 0, 2, 3), stride=2), (x, w)),
        "grads": (lambda x, w: grad(lambda w: (F.max_pool2d(F.conv2d(x, w, padding=1), 2) ** 2).sum())(w),
                  (x, w)),
    }
    f, args = fns[case]
    with warnings.catch_warnings():
        warnings.simplefilter("error")           # a looping vmap warns
        got = vmap(f)(*args)
    expect = nb.stack([f(*[a[i] for a in args]) for i in range(3)])
    np.testing.assert_allclose(got.numpy(), expect.numpy(), rtol=1e-10, atol=1e-10)
