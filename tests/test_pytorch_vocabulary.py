"""Issue 24, the missing vocabulary: max_pool return_indices and MaxUnpool1d/2d/3d, bicubic /
area / trilinear interpolate and nn.Upsample, Conv3d / MaxPool3d / AvgPool3d / BatchNorm3d /
AdaptiveAvgPool3d, LSTM(proj_size=...), SequentialLR and ChainedScheduler.

The first half runs without PyTorch (known values, gradients against central differences in
float64, state_dict shapes); the second half compares forward, backward, state_dict keys and
shapes, and lr sequences with PyTorch itself (skipped where it is not installed)."""
import warnings

import numpy as np
import pytest

import nbaccel as nb
import nbaccel.nn.functional as F
from oracle import gradcheck

RNG = np.random.default_rng(7)


def _rand(*shape):
    return RNG.standard_normal(shape)


def _numgrad_check(fn, arrays, tol=1e-6):
    gradcheck(fn, *arrays, rtol=tol, atol=tol)      # against central differences, float64


# ---- without PyTorch -----------------------------------------------------------------------------

def test_max_pool_indices_are_flat_per_plane():
    x = nb.arange(16.0).reshape(1, 1, 4, 4)
    y, i = F.max_pool2d(x, 2, return_indices=True)
    assert i.dtype == nb.int64 and i.numpy().tolist() == [[[[5, 7], [13, 15]]]]
    u = F.max_unpool2d(y, i, 2)
    expect = np.zeros((4, 4))
    expect[1, 1], expect[1, 3], expect[3, 1], expect[3, 3] = 5, 7, 13, 15
    np.testing.assert_array_equal(u.numpy()[0, 0], expect)
    # padding is never chosen; 1-D and 3-D use the same flat convention
    y1, i1 = F.max_pool1d(nb.tensor([[[-5.0, -6.0, -1.0]]]), 2, 2, 1, return_indices=True)
    assert i1.numpy().tolist() == [[[0, 2]]]
    x3 = nb.zeros(1, 1, 2, 2, 2)
    x3[0, 0, 1, 0, 1] = 3.0
    _, i3 = F.max_pool3d(x3, 2, return_indices=True)
    assert i3.numpy().ravel().tolist() == [(1 * 2 + 0) * 2 + 1]
    # a module with return_indices, and unpooling with an explicit output size
    pool, unpool = nb.nn.MaxPool2d(2, return_indices=True), nb.nn.MaxUnpool2d(2)
    y, i = pool(nb.tensor(_rand(2, 3, 5, 5)))
    assert unpool(y, i, output_size=(5, 5)).shape == (2, 3, 5, 5)
    assert unpool(*pool(nb.tensor(_rand(2, 3, 4, 4)))).shape == (2, 3, 4, 4)
    with pytest.raises(IndexError):             # an index outside the default 4x4 output
        unpool(nb.ones(1, 1, 2, 2), nb.tensor([[[[0, 1], [2, 24]]]]))
    with pytest.raises(ValueError):
        unpool(y, i, output_size=(9, 9))


def test_unpool_and_pool3d_gradients_by_differences():
    a = _rand(1, 2, 4, 5)
    _, idx = F.max_pool2d(nb.tensor(a), 2, 2, return_indices=True)
    _numgrad_check(lambda x: F.max_unpool2d(x, idx, 2, 2, output_size=(4, 5)), [_rand(1, 2, 2, 2)])
    _numgrad_check(lambda x: F.max_pool3d(x, (2, 2, 1), (1, 2, 1), (1, 0, 0)), [_rand(1, 1, 3, 4, 2)])
    _numgrad_check(lambda x: F.avg_pool3d(x, 2, 1, 1, count_include_pad=False), [_rand(1, 1, 3, 2, 3)])


def test_conv3d_gradients_by_differences():
    _numgrad_check(lambda x, w: F.conv3d(x, w, stride=(1, 2, 1), padding=1, groups=2),
                   [_rand(1, 2, 3, 4, 3), _rand(2, 1, 2, 2, 2)])
    _numgrad_check(lambda x, w: F.conv3d(x, w, padding="same", dilation=(2, 1, 1)),
                   [_rand(1, 1, 4, 3, 3), _rand(1, 1, 2, 3, 2)])


def test_bicubic_and_area_gradients_by_differences():
    for ac in (False, True):
        _numgrad_check(lambda x: F.interpolate(x, size=(5, 3), mode="bicubic", align_corners=ac),
                       [_rand(1, 1, 3, 4)])
    _numgrad_check(lambda x: F.interpolate(x, scale_factor=0.6, mode="area"), [_rand(1, 2, 5, 4)])
    _numgrad_check(lambda x: F.interpolate(x, size=(3, 2, 3), mode="trilinear"), [_rand(1, 1, 2, 3, 2)])


def test_bicubic_known_values():
    # same size: the identity; a constant stays constant (the weights sum to 1 after clamping)
    x = nb.tensor(_rand(1, 2, 4, 5).astype(np.float32))
    np.testing.assert_allclose(F.interpolate(x, size=(4, 5), mode="bicubic").numpy(), x.numpy())
    c = F.interpolate(nb.full((1, 1, 3, 3), 2.5), scale_factor=3.3, mode="bicubic")
    np.testing.assert_allclose(c.numpy(), 2.5, rtol=1e-6)
    # 1 -> 2 upsampling of a ramp with align_corners: the end points exactly
    r = F.interpolate(nb.arange(4.0).reshape(1, 1, 1, 4), size=(1, 7), mode="bicubic",
                      align_corners=True)
    np.testing.assert_allclose(r.numpy()[0, 0, 0, [0, 2, 4, 6]], [0, 1, 2, 3], atol=1e-6)
    with pytest.raises(ValueError):
        F.interpolate(x, scale_factor=2, mode="area", align_corners=True)


def test_upsample_modules():
    x = nb.tensor(_rand(1, 2, 3, 4).astype(np.float32))
    up = nb.nn.Upsample(scale_factor=2, mode="bicubic", align_corners=False)
    assert up(x).shape == (1, 2, 6, 8) and "bicubic" in repr(up)
    assert nb.nn.UpsamplingNearest2d(size=(5, 5))(x).shape == (1, 2, 5, 5)
    np.testing.assert_allclose(nb.nn.UpsamplingBilinear2d(scale_factor=2)(x).numpy(),
                               F.interpolate(x, scale_factor=2, mode="bilinear",
                                             align_corners=True).numpy())


def test_conv3d_module_and_3d_layers_shapes():
    conv = nb.nn.Conv3d(4, 6, (3, 2, 3), stride=(2, 1, 1), padding=(1, 0, 1), groups=2)
    assert tuple(conv.weight.shape) == (6, 2, 3, 2, 3) and list(conv.state_dict()) == ["weight", "bias"]
    x = nb.tensor(_rand(2, 4, 5, 6, 7).astype(np.float32))
    assert conv(x).shape == (2, 6, 3, 5, 7)
    assert conv(x[0]).shape == (6, 3, 5, 7)                    # unbatched
    same = nb.nn.Conv3d(4, 2, 4, padding="same", padding_mode="reflect")
    assert same(x).shape == (2, 2, 5, 6, 7)
    assert nb.nn.MaxPool3d(2)(x).shape == (2, 4, 2, 3, 3)
    assert nb.nn.AvgPool3d(3, 2, 1, ceil_mode=True)(x).shape == (2, 4, 3, 4, 4)
    assert nb.nn.AdaptiveAvgPool3d((1, None, 2))(x).shape == (2, 4, 1, 6, 2)
    bn = nb.nn.BatchNorm3d(4)
    assert list(bn.state_dict()) == ["weight", "bias", "running_mean", "running_var",
                                     "num_batches_tracked"]
    y = bn(x)
    np.testing.assert_allclose(y.numpy().mean(axis=(0, 2, 3, 4)), 0, atol=1e-5)
    with pytest.raises(ValueError):
        bn(x[0])


def test_lstm_proj_size_shapes_and_errors():
    lstm = nb.nn.LSTM(5, 8, num_layers=2, bidirectional=True, proj_size=3)
    sd = lstm.state_dict()
    assert list(sd)[:5] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_hr_l0"]
    assert tuple(sd["weight_hh_l0"].shape) == (32, 3) and tuple(sd["weight_hr_l0"].shape) == (3, 8)
    assert tuple(sd["weight_ih_l1_reverse"].shape) == (32, 6)
    out, (h, c) = lstm(nb.tensor(_rand(4, 2, 5).astype(np.float32)))
    assert out.shape == (4, 2, 6) and h.shape == (4, 2, 3) and c.shape == (4, 2, 8)
    with pytest.raises(ValueError):
        nb.nn.LSTM(5, 4, proj_size=4)
    with pytest.raises(ValueError):
        nb.nn.GRU(5, 4, proj_size=2)


def test_lstm_proj_gradient_by_differences():
    lstm = nb.nn.LSTM(2, 3, proj_size=2, num_layers=2, dtype="float64")
    _numgrad_check(lambda x: lstm(x)[0], [_rand(3, 1, 2)])
    x, g = nb.tensor(_rand(3, 1, 2)), _rand(3, 1, 2)
    lstm.zero_grad()
    (lstm(x)[0] * nb.tensor(g)).sum().backward()
    for name in ("weight_hr_l0", "weight_hh_l1"):
        p = getattr(lstm, name)
        base, num = p.numpy().copy(), np.zeros(tuple(p.shape))
        for i in np.ndindex(base.shape):
            vals = []
            for eps in (1e-6, -1e-6):
                w = base.copy()
                w[i] += eps
                with nb.no_grad():
                    p.copy_(nb.tensor(w))
                vals.append(float((lstm(x)[0].numpy() * g).sum()))
            num[i] = (vals[0] - vals[1]) / 2e-6
        with nb.no_grad():
            p.copy_(nb.tensor(base))
        np.testing.assert_allclose(p.grad.numpy(), num, rtol=1e-6, atol=1e-6)


def _lrs(sched_fn, steps=12):
    o = nb.optim.SGD([nb.nn.Parameter(nb.ones(1))], lr=1.0)
    s = sched_fn(nb.optim.lr_scheduler, o)
    out = [s.get_last_lr()[0]]
    for _ in range(steps):
        o.step()
        s.step()
        out.append(s.get_last_lr()[0])
    return out


def test_sequential_and_chained_known_sequences():
    seq = _lrs(lambda L, o: L.SequentialLR(o, [L.ConstantLR(o, 0.5, total_iters=10),
                                               L.StepLR(o, 2, 0.5)], milestones=[3]), 7)
    assert seq == [0.5, 0.5, 0.5, 1.0, 1.0, 0.5, 0.5, 0.25]
    chain = _lrs(lambda L, o: L.ChainedScheduler([L.ConstantLR(o, 0.5, total_iters=2),
                                                  L.StepLR(o, 1, 0.5)]), 3)
    assert chain == [0.5, 0.25, 0.25, 0.125]
    with pytest.raises(ValueError):
        o = nb.optim.SGD([nb.nn.Parameter(nb.ones(1))], lr=1.0)
        L = nb.optim.lr_scheduler
        L.SequentialLR(o, [L.StepLR(o, 2), L.StepLR(o, 3)], milestones=[])


# ---- against PyTorch ------------------------------------------------------------------------------

def _torch():
    return pytest.importorskip("torch")


def _both(fn_nb, fn_t, arrays, tol=1e-5):
    """Forward and every float input's gradient of fn_nb equal fn_t's; returns the outputs."""
    torch = _torch()
    xs_nb = [nb.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    xs_t = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    y_nb, y_t = fn_nb(*xs_nb), fn_t(*xs_t)
    first_nb, first_t = (y_nb[0], y_t[0]) if isinstance(y_t, tuple) else (y_nb, y_t)
    assert tuple(first_nb.shape) == tuple(first_t.shape)
    np.testing.assert_allclose(first_nb.numpy(), first_t.detach().numpy(), rtol=tol, atol=tol)
    g = RNG.standard_normal(tuple(first_t.shape)).astype(arrays[0].dtype)
    (first_nb * nb.tensor(g)).sum().backward()
    (first_t * torch.tensor(g)).sum().backward()
    for a, b in zip(xs_nb, xs_t):
        if b.grad is not None:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=tol * 10, atol=tol * 10)
    return y_nb, y_t


POOL_CASES = [
    dict(k=2), dict(k=3, s=2, p=1), dict(k=(2, 3), s=(1, 2), p=(1, 0), d=(2, 1), ceil=True),
    dict(k=3, s=2, ceil=True),
]


@pytest.mark.parametrize("case", POOL_CASES)
@pytest.mark.parametrize("dims", [1, 2, 3])
def test_max_pool_indices_and_unpool_equal_torch(case, dims):
    torch = _torch()
    tF = torch.nn.functional
    shape = {1: (2, 3, 11), 2: (2, 3, 7, 9), 3: (2, 2, 5, 6, 7)}[dims]

    def per(v):
        return v if isinstance(v, int) else (tuple(v) + (v[-1],))[:dims]
    k, s, p, d = per(case["k"]), per(case.get("s", case["k"])), per(case.get("p", 0)), per(case.get("d", 1))
    ceil = case.get("ceil", False)
    a = RNG.standard_normal(shape).astype(np.float32)
    nb_pool, t_pool = getattr(F, f"max_pool{dims}d"), getattr(tF, f"max_pool{dims}d")
    (y, i), (ty, ti) = _both(lambda x: nb_pool(x, k, s, p, d, ceil, True),
                             lambda x: t_pool(x, k, s, p, d, ceil, True), [a])
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    size = shape[2:]
    nb_un, t_un = getattr(F, f"max_unpool{dims}d"), getattr(tF, f"max_unpool{dims}d")
    try:
        t_un(ty, ti, k, s, p, output_size=size)
    except ValueError:                # the input size is outside PyTorch's range: both refuse
        with pytest.raises(ValueError):
            nb_un(y, i, k, s, p, output_size=size)
        return
    _both(lambda v: nb_un(v, i, k, s, p, output_size=size),
          lambda v: t_un(v, ti, k, s, p, output_size=size), [y.numpy()])
    mod = getattr(nb.nn, f"MaxUnpool{dims}d")(k, s, p)
    tmod = getattr(torch.nn, f"MaxUnpool{dims}d")(k, s, p)
    try:
        want = tmod(ty, ti).detach().numpy()
    except RuntimeError:              # the default size may be too small for the indices
        return
    np.testing.assert_array_equal(mod(y, i).numpy(), want)


@pytest.mark.parametrize("kw", [dict(), dict(ceil_mode=True, padding=1, stride=2),
                                dict(count_include_pad=False, padding=1),
                                dict(divisor_override=5, stride=(1, 2, 2), ceil_mode=True)])
def test_avg_pool3d_equals_torch(kw):
    tF = _torch().nn.functional
    a = RNG.standard_normal((2, 2, 5, 6, 7)).astype(np.float32)
    _both(lambda x: F.avg_pool3d(x, 3, **kw), lambda x: tF.avg_pool3d(x, 3, **kw), [a])


CONV3D = [
    dict(x=(2, 3, 5, 6, 7), w=(4, 3, 3, 3, 3)),
    dict(x=(1, 4, 6, 5, 5), w=(6, 2, 2, 3, 1), stride=(2, 1, 2), padding=(1, 0, 2), groups=2),
    dict(x=(2, 2, 7, 6, 5), w=(3, 2, 2, 2, 3), padding="same", dilation=(2, 1, 2)),
    dict(x=(1, 4, 4, 4, 4), w=(4, 1, 3, 3, 3), padding=1, groups=4),          # depthwise
    dict(x=(3, 5, 6, 4), w=(2, 3, 2, 1, 2), padding="valid", stride=2),        # unbatched
]


@pytest.mark.parametrize("case", CONV3D, ids=[str(i) for i in range(len(CONV3D))])
def test_conv3d_equals_torch(case):
    tF = _torch().nn.functional
    kw = {k: v for k, v in case.items() if k not in ("x", "w")}
    x, w = RNG.standard_normal(case["x"]).astype(np.float32), RNG.standard_normal(case["w"]).astype(np.float32)
    b = RNG.standard_normal(case["w"][0]).astype(np.float32)
    _both(lambda x, w, b: F.conv3d(x, w, b, **kw), lambda x, w, b: tF.conv3d(x, w, b, **kw),
          [x, w, b], tol=2e-5)


@pytest.mark.parametrize("mode", ["zeros", "reflect", "circular"])
def test_conv3d_module_loads_torch_weights(mode):
    torch = _torch()
    t = torch.nn.Conv3d(4, 6, 3, padding=1, groups=2, padding_mode=mode)
    n = nb.nn.Conv3d(4, 6, 3, padding=1, groups=2, padding_mode=mode)
    assert [(k, tuple(v.shape)) for k, v in t.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in n.state_dict().items()]
    n.load_state_dict({k: nb.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    a = RNG.standard_normal((2, 4, 4, 5, 6)).astype(np.float32)
    np.testing.assert_allclose(n(nb.tensor(a)).numpy(), t(torch.tensor(a)).detach().numpy(),
                               rtol=2e-5, atol=2e-5)
    # PyTorch's default initialisation bound (kaiming_uniform, a = sqrt(5))
    assert float(np.abs(n.weight.numpy()).max()) <= 1 / np.sqrt(2 * 27) + 1e-7


def test_batchnorm3d_equals_torch():
    torch = _torch()
    t, n = torch.nn.BatchNorm3d(3, momentum=None), nb.nn.BatchNorm3d(3, momentum=None)
    a = RNG.standard_normal((2, 3, 3, 4, 5)).astype(np.float32)
    _both(n, t, [a])
    _both(n, t, [a * 2 + 1])
    for k, v in t.state_dict().items():
        np.testing.assert_allclose(n.state_dict()[k].numpy(), v.numpy(), rtol=1e-5, atol=1e-6)
    n.eval(), t.eval()
    _both(n, t, [a])


INTERP = [
    ((2, 3, 5, 7), dict(size=(9, 4), mode="bicubic")),
    ((2, 3, 5, 7), dict(size=(9, 4), mode="bicubic", align_corners=True)),
    ((1, 2, 4, 4), dict(scale_factor=2.5, mode="bicubic")),
    ((1, 2, 6, 5), dict(scale_factor=(0.5, 1.7), mode="bicubic", align_corners=True)),
    ((1, 2, 6, 5), dict(scale_factor=(0.6, 1.5), mode="bicubic", recompute_scale_factor=True)),
    ((1, 1, 1, 3), dict(size=(3, 1), mode="bicubic", align_corners=True)),
    ((2, 3, 7, 9), dict(size=(3, 4), mode="area")),
    ((2, 3, 5, 5), dict(scale_factor=1.6, mode="area")),
    ((2, 3, 11), dict(size=4, mode="area")),
    ((1, 2, 4, 5, 6), dict(size=(2, 3, 4), mode="area")),
    ((1, 2, 3, 4, 5), dict(scale_factor=(1.5, 2, 0.5), mode="trilinear")),
    ((1, 2, 3, 4, 5), dict(size=(5, 3, 4), mode="trilinear", align_corners=True)),
    ((1, 2, 3, 4, 5), dict(scale_factor=2, mode="nearest")),
]


@pytest.mark.parametrize("shape,kw", INTERP, ids=[str(i) for i in range(len(INTERP))])
def test_interpolate_new_modes_equal_torch(shape, kw):
    torch = _torch()
    a = RNG.standard_normal(shape).astype(np.float32)
    _both(lambda x: F.interpolate(x, **kw), lambda x: torch.nn.functional.interpolate(x, **kw), [a])
    mod_kw = {k: v for k, v in kw.items() if k != "recompute_scale_factor"}
    _both(nb.nn.Upsample(**mod_kw), torch.nn.Upsample(**mod_kw), [a])


LSTM_PROJ = [dict(proj_size=3), dict(num_layers=2, proj_size=2, batch_first=True),
             dict(bidirectional=True, proj_size=4), dict(num_layers=2, bidirectional=True,
                                                          proj_size=1, bias=False)]


@pytest.mark.parametrize("kw", LSTM_PROJ, ids=[str(i) for i in range(len(LSTM_PROJ))])
@pytest.mark.parametrize("with_state", [False, True])
def test_lstm_proj_equals_torch(kw, with_state):
    torch = _torch()
    t, n = torch.nn.LSTM(5, 6, **kw), nb.nn.LSTM(5, 6, **kw)
    tsd, nsd = t.state_dict(), n.state_dict()
    assert [(k, tuple(v.shape)) for k, v in tsd.items()] == [(k, tuple(v.shape)) for k, v in nsd.items()]
    if with_state:        # nbaccel -> torch
        t.load_state_dict({k: torch.tensor(v.numpy()) for k, v in nsd.items()})
    else:
        n.load_state_dict({k: nb.tensor(v.numpy()) for k, v in tsd.items()})
    dirs = 2 if kw.get("bidirectional") else 1
    layers = kw.get("num_layers", 1)
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    args = [x]
    if with_state:
        args += [RNG.standard_normal((layers * dirs, 3 if kw.get("batch_first") else 4,
                                      kw["proj_size"])).astype(np.float32),
                 RNG.standard_normal((layers * dirs, 3 if kw.get("batch_first") else 4, 6)).astype(np.float32)]

    def run(m):
        return lambda x, *hc: (lambda o: (o[0], o[1][0], o[1][1]))(m(x, tuple(hc) if hc else None))
    (o, h, c), (to, th, tc) = _both(run(n), run(t), args, tol=2e-5)
    for a, b in ((h, th), (c, tc)):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=2e-5, atol=2e-5)
    for name, p in n.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), dict(t.named_parameters())[name].grad.numpy(),
                                   rtol=2e-4, atol=2e-4)


def test_lstm_proj_packed_equals_torch():
    torch = _torch()
    t, n = torch.nn.LSTM(3, 5, proj_size=2, bidirectional=True), nb.nn.LSTM(3, 5, proj_size=2, bidirectional=True)
    n.load_state_dict({k: nb.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    x = RNG.standard_normal((4, 3, 3)).astype(np.float32)
    lens = [4, 2, 3]
    tp = torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(x), lens, enforce_sorted=False)
    npk = nb.nn.utils.rnn.pack_padded_sequence(nb.tensor(x), lens, enforce_sorted=False)
    (to, (th, tc)), (no, (nh, nc)) = t(tp), n(npk)
    np.testing.assert_allclose(no.data.numpy(), to.data.detach().numpy(), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(nh.numpy(), th.detach().numpy(), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(nc.numpy(), tc.detach().numpy(), rtol=2e-5, atol=2e-5)


SEQ = {
    "linear-cosine": lambda L, o: L.SequentialLR(o, [L.LinearLR(o, 0.1, total_iters=4),
                                                     L.CosineAnnealingLR(o, T_max=9, eta_min=0.01)],
                                                 milestones=[4]),
    "three": lambda L, o: L.SequentialLR(o, [L.ConstantLR(o, 0.5, total_iters=2), L.StepLR(o, 2, 0.5),
                                             L.ExponentialLR(o, 0.9)], milestones=[3, 8]),
    "multiplicative": lambda L, o: L.SequentialLR(o, [L.LambdaLR(o, lambda e: (e + 1) / 5),
                                                      L.MultiplicativeLR(o, lambda e: 0.95)],
                                                  milestones=[5]),
    "multistep-exp": lambda L, o: L.SequentialLR(o, [L.MultiStepLR(o, [1, 3], 0.5),
                                                     L.ExponentialLR(o, 0.8)], milestones=[6]),
    "chained": lambda L, o: L.ChainedScheduler([L.ConstantLR(o, 0.1, total_iters=4),
                                                L.ExponentialLR(o, 0.9)]),
    "chained-cosine": lambda L, o: L.ChainedScheduler([L.LinearLR(o, 0.2, total_iters=5),
                                                       L.CosineAnnealingLR(o, T_max=6)]),
    "chained-in-sequential": lambda L, o: L.SequentialLR(
        o, [L.ChainedScheduler([L.LinearLR(o, 0.2, total_iters=3), L.ExponentialLR(o, 0.8)]),
            L.MultiStepLR(o, [2, 5], 0.3)], milestones=[4]),
}


@pytest.mark.parametrize("name", sorted(SEQ))
@pytest.mark.parametrize("opt", ["SGD", "AdamW"])
def test_composite_schedulers_equal_torch(name, opt):
    torch = _torch()

    def lrs(lib):
        params = [{"params": [lib.nn.Parameter(lib.ones(1))], "lr": 0.1 * (i + 1)} for i in range(2)]
        o = getattr(lib.optim, opt)(params, lr=0.1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = SEQ[name](lib.optim.lr_scheduler, o)
            out = [list(s.get_last_lr())]
            for _ in range(20):
                o.step()
                s.step()
                out.append(list(s.get_last_lr()) + [g["lr"] for g in o.param_groups])
        return out, s
    (a, s), (b, ts) = lrs(nb), lrs(torch)
    assert a == b
    keys = lambda sd: sorted(k for k in sd if not k.startswith("_get_lr"))  # noqa: E731
    assert keys(s.state_dict()) == keys(ts.state_dict())
    assert len(s.state_dict()["_schedulers"]) == len(ts.state_dict()["_schedulers"])


def test_composite_scheduler_state_dict_resumes():
    L = nb.optim.lr_scheduler

    def make():
        o = nb.optim.SGD([nb.nn.Parameter(nb.ones(1))], lr=1.0)
        return o, L.SequentialLR(o, [L.LinearLR(o, 0.25, total_iters=3), L.ExponentialLR(o, 0.5)],
                                 milestones=[3])
    o, s = make()
    for _ in range(4):
        s.step()
    o2, s2 = make()
    s2.load_state_dict(s.state_dict())
    o2.param_groups[0]["lr"] = o.param_groups[0]["lr"]
    s.step(), s2.step()
    assert s.get_last_lr() == s2.get_last_lr() and s2.last_epoch == 5


RESUMED = {
    "ExponentialLR": lambda L, o: L.ExponentialLR(o, 0.9, last_epoch=3),
    "CosineAnnealingLR": lambda L, o: L.CosineAnnealingLR(o, 8, last_epoch=3),
    "LinearLR": lambda L, o: L.LinearLR(o, 0.5, total_iters=6, last_epoch=2),
    "MultiplicativeLR": lambda L, o: L.MultiplicativeLR(o, lambda e: 0.9, last_epoch=2),
    "StepLR": lambda L, o: L.StepLR(o, 2, last_epoch=3),
}


@pytest.mark.parametrize("name", sorted(RESUMED))
def test_resumed_schedulers_do_not_step_ahead_as_torch(name):
    """PyTorch 2.13's initial step (``_is_initial``) keeps a resumed scheduler's lr."""
    torch = _torch()

    def lrs(lib):
        p = lib.nn.Parameter(lib.ones(1))
        o = lib.optim.SGD([{"params": [p], "lr": 0.5, "initial_lr": 1.0}], lr=0.5)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = RESUMED[name](lib.optim.lr_scheduler, o)
            out = [s.get_last_lr()[0]]
            for _ in range(6):
                o.step()
                s.step()
                out.append(s.get_last_lr()[0])
        return out
    assert lrs(nb) == lrs(torch)
