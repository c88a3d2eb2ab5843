"""PyTorch spellings (issue 24): the names of tests/data/pytorch-names.tsv, and each new
spelling against NumPy and, where installed, PyTorch."""
import io
import os
import sys

import numpy as np
import pytest

import nbaccel as nb

sys.path.insert(0, os.path.dirname(__file__))
import pytorch_names  # noqa: E402

# the convolutional half of issue 24, built beside this one (conv, pooling, norms, activations)
CONV_FAMILY = {"torch.nn.Conv2d", "torch.nn.ConvTranspose2d", "torch.nn.BatchNorm1d",
               "torch.nn.BatchNorm2d", "torch.nn.GroupNorm", "torch.nn.MaxPool2d",
               "torch.nn.AdaptiveAvgPool2d", "torch.nn.functional.max_pool2d",
               "torch.nn.functional.adaptive_avg_pool2d", "torch.nn.functional.interpolate",
               "torch.nn.Dropout2d", "torch.nn.ReLU6", "torch.nn.LeakyReLU"}


PENDING = set()


def test_every_name_of_the_programs_exists():
    have, missing = pytorch_names.coverage(nb)
    assert len(have) + len(missing) == 179
    assert set(missing) - CONV_FAMILY - PENDING == set()


@pytest.mark.parametrize("name", sorted(pytorch_names.NEEDS_GPU_OR_CLUSTER))
def test_gpu_and_cluster_names_say_what_to_do_instead(name):
    f = pytorch_names.resolve(name, nb)
    args = [nb.nn.Linear(2, 2) if a == "MODULE" else a for a in pytorch_names.NEEDS_GPU_OR_CLUSTER[name]]
    with pytest.raises(NotImplementedError, match="nbaccel"):
        f(*args)


def test_dtype_aliases_and_typed_constructors():
    assert (nb.long, nb.float, nb.double, nb.half, nb.int, nb.short, nb.cfloat, nb.cdouble) == (
        nb.int64, nb.float32, nb.float64, nb.float16, nb.int32, nb.int16, nb.complex64, nb.complex128)
    t = nb.LongTensor([1, 2, 3])
    assert t.dtype is nb.int64 and t.tolist() == [1, 2, 3]
    z = nb.FloatTensor(2, 3)
    assert z.shape == (2, 3) and z.dtype is nb.float32 and not z.numpy().any()
    assert isinstance(z, nb.FloatTensor) and not isinstance(z, nb.LongTensor)
    assert nb.BoolTensor([True]).dtype is nb.bool_ and nb.ByteTensor([1]).dtype is nb.uint8
    assert nb.get_default_dtype() is nb.float32
    assert nb.zeros(2, dtype=nb.long).dtype is nb.int64


def test_devices_answer_truthfully():
    from nbaccel.devices import cuda_available
    assert nb.cuda.is_available() == cuda_available() == nb.accelerator.is_available()
    acc = nb.accelerator.current_accelerator()
    assert (acc is None) == (not cuda_available())
    dev = nb.device("cuda" if nb.cuda.is_available() else "cpu")
    assert nb.ones(2).to(dev).device == dev
    assert not nb.ones(1).is_xpu and nb.ones(1).is_cpu
    if not cuda_available():
        assert nb.cuda.device_count() == 0
        with pytest.raises(NotImplementedError, match="CPU"):
            nb.cuda.set_device(0)
    nb.backends.cuda.matmul.allow_tf32 = True        # settable flags, as in PyTorch
    nb.backends.cudnn.benchmark = True
    assert nb.distributed.is_available() is False and nb.distributed.get_world_size() == 1


def test_masked_fill_narrow_t_view_as_type_as():
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    t = nb.tensor(x)
    m = x % 3 == 0
    np.testing.assert_array_equal(t.masked_fill(nb.tensor(m), -1.5).numpy(), np.where(m, -1.5, x))
    # a row mask broadcasts; an int tensor keeps its dtype
    i = nb.arange(4).masked_fill(nb.tensor([True, False, False, True]), 7)
    assert i.dtype is nb.int64 and i.tolist() == [7, 1, 2, 7]
    u = t.clone()
    u.masked_fill_(nb.tensor(m[0]), 0.0)
    np.testing.assert_array_equal(u.numpy(), np.where(m[0], 0.0, x))
    with pytest.raises(TypeError, match="boolean"):
        t.masked_fill(nb.ones(3, 4), 0)
    np.testing.assert_array_equal(t.narrow(1, 1, 2).numpy(), x[:, 1:3])
    np.testing.assert_array_equal(t.narrow(-2, -2, 2).numpy(), x[1:3])
    with pytest.raises(RuntimeError):
        t.narrow(0, 2, 2)
    np.testing.assert_array_equal(t.t().numpy(), x.T)
    assert nb.ones(3).t().shape == (3,)
    with pytest.raises(RuntimeError):
        nb.ones(2, 2, 2).t()
    assert t.view_as(nb.ones(4, 3)).shape == (4, 3)
    assert t.type_as(nb.ones(1, dtype=nb.int64)).dtype is nb.int64
    assert t.type_as(t) is t


def test_new_constructors_take_dtype_and_device_from_self():
    t = nb.ones(2, dtype=nb.float64)
    assert t.new_zeros(2, 3).dtype is nb.float64 and t.new_zeros((2, 3)).shape == (2, 3)
    assert t.new_ones(2).tolist() == [1.0, 1.0]
    assert t.new_full((2,), 5).tolist() == [5.0, 5.0]
    assert t.new_empty(3).shape == (3,)
    assert t.new_tensor([1, 2]).dtype is nb.float64
    assert t.new_zeros(1, dtype=nb.int32).dtype is nb.int32


def test_spellings_keep_autograd():
    x = nb.randn(3, 4, requires_grad=True)
    y = x.masked_fill(x > 0, 0.0).narrow(1, 0, 3).t()
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy()[:, :3], (x.detach().numpy() <= 0)[:, :3] * 1.0)
    assert not x.grad.numpy()[:, 3].any()


def test_spellings_compile_like_eager():
    def f(x, m):
        return x.masked_fill(m, -1e9).softmax(-1).narrow(1, 1, 2).t() * 2

    x, m = nb.randn(4, 5), nb.randn(4, 5) > 0.5
    np.testing.assert_allclose(nb.compile(f)(x, m).numpy(), f(x, m).numpy(), rtol=1e-6)


def test_multinomial_draws_follow_the_weights():
    nb.manual_seed(0)
    w = nb.tensor([[1.0, 3.0, 0.0, 6.0]])
    draws = nb.multinomial(w.expand(1, 4), 20000, replacement=True)
    assert draws.dtype is nb.int64 and draws.shape == (1, 20000)
    freq = np.bincount(draws.numpy().ravel(), minlength=4) / 20000
    np.testing.assert_allclose(freq, [0.1, 0.3, 0.0, 0.6], atol=0.015)
    s = nb.multinomial(nb.tensor([0.2, 0.0, 0.5, 0.3]), 3)
    assert sorted(s.tolist()) == [0, 2, 3]               # without replacement: each once
    with pytest.raises(RuntimeError):
        nb.multinomial(nb.tensor([1.0, 0.0]), 2)
    nb.manual_seed(5)
    a = nb.multinomial(nb.ones(3, 10), 4).tolist()
    nb.manual_seed(5)
    assert nb.multinomial(nb.ones(3, 10), 4).tolist() == a


def test_inplace_random_fills_and_init_family():
    nb.manual_seed(1)
    t = nb.empty(200, 100)
    assert t.normal_(2.0, 0.5) is t
    assert abs(t.mean().item() - 2.0) < 0.01 and abs(t.std().item() - 0.5) < 0.01
    t.uniform_(-1, 3)
    assert t.min().item() >= -1 and t.max().item() < 3 and abs(t.mean().item() - 1) < 0.02
    assert t.zero_().abs().sum().item() == 0 and t.fill_(2).mean().item() == 2
    g1, g2 = nb.Generator().manual_seed(3), nb.Generator().manual_seed(3)
    a, b = nb.empty(5), nb.empty(5)
    nb.nn.init.normal_(a, generator=g1)
    b.normal_(generator=g2)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    w = nb.empty(64, 32)
    for f in (nb.nn.init.xavier_uniform_, nb.nn.init.kaiming_normal_, nb.nn.init.trunc_normal_,
              nb.nn.init.zeros_, nb.nn.init.ones_, lambda x: nb.nn.init.constant_(x, 0.5)):
        assert f(w) is w
    assert w.mean().item() == 0.5


def test_inference_mode_records_no_graph():
    x = nb.ones(2, requires_grad=True)
    with nb.inference_mode():
        assert (x * 2).requires_grad is False
        assert nb.is_inference_mode_enabled()
    assert (x * 2).requires_grad and not nb.is_inference_mode_enabled()

    @nb.inference_mode()
    def f(v):
        return v * 3
    assert f(x).requires_grad is False
    with nb.inference_mode(False):
        assert (x * 2).requires_grad
    nb._assert(True, "fine")
    with pytest.raises(AssertionError, match="shape"):
        nb._assert(False, "shape")


def test_save_load_any_object(tmp_path):
    m = nb.nn.Linear(3, 2)
    opt = nb.optim.AdamW(m.parameters())
    m(nb.ones(1, 3)).sum().backward()
    opt.step()
    obj = {"model": m.state_dict(), "optimizer": opt.state_dict(), "iter_num": 7,
           "best_val_loss": float("inf"), "config": {"n_layer": 2, "name": "gpt", "dims": (4, 8),
                                                     "bias": None}, "ids": [nb.arange(3), np.ones(2)]}
    path = tmp_path / "ckpt.pt"
    nb.save(obj, path)
    back = nb.load(path, map_location="cpu", weights_only=True)
    assert back["iter_num"] == 7 and back["best_val_loss"] == float("inf")
    assert back["config"] == obj["config"]
    assert back["optimizer"]["param_groups"] == opt.state_dict()["param_groups"]
    st = back["optimizer"]["state"][0]
    assert st["step"].shape == () and st["step"].item() == 1.0
    np.testing.assert_array_equal(st["exp_avg"].numpy(), opt.state[m.weight]["exp_avg"].numpy())
    assert isinstance(back["ids"][1], np.ndarray) and back["ids"][0].tolist() == [0, 1, 2]
    opt2 = nb.optim.AdamW(m.parameters())
    opt2.load_state_dict(back["optimizer"])
    m2 = nb.nn.Linear(3, 2)
    m2.load_state_dict(back["model"])
    np.testing.assert_array_equal(m2.weight.numpy(), m.weight.numpy())
    for single in (nb.tensor(2.5), nb.ones(2, 2, dtype=nb.bfloat16), [1, 2.0, "x"], (nb.ones(1),)):
        buf = io.BytesIO()
        nb.save(single, buf)
        buf.seek(0)
        got = nb.load(buf)
        assert type(got) is type(single)
    with nb.serialization.safe_globals([object]):
        pass


def test_a_flat_state_dict_still_writes_format_1(tmp_path):
    import json
    nb.save({"w": nb.ones(2)}, tmp_path / "a.npz")
    with np.load(tmp_path / "a.npz", allow_pickle=False) as z:
        assert json.loads(str(z["__nbaccel__"]))["format"] == 1


def test_autocast_runs_matmuls_in_bfloat16_like_torch():
    torch = pytest.importorskip("torch")
    nb.manual_seed(0)
    lin = nb.nn.Linear(16, 8)
    tl = torch.nn.Linear(16, 8)
    tl.load_state_dict({k: torch.tensor(v.numpy()) for k, v in lin.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    xt = nb.tensor(x, requires_grad=True)
    with nb.autocast("cpu"):
        y = lin(xt)
        loss = nb.nn.functional.cross_entropy(y, nb.tensor([0, 1, 2, 3]))
    assert y.dtype is nb.bfloat16 and loss.dtype is nb.float32
    loss.backward()
    assert lin.weight.grad.dtype is nb.float32 and xt.grad.dtype is nb.float32
    tx = torch.tensor(x, requires_grad=True)
    with torch.autocast("cpu"):
        ty = tl(tx)
        tloss = torch.nn.functional.cross_entropy(ty, torch.tensor([0, 1, 2, 3]))
    tloss.backward()
    np.testing.assert_allclose(y.float().detach().numpy(), ty.float().detach().numpy(), atol=2e-2)
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-2)
    np.testing.assert_allclose(lin.weight.grad.numpy(), tl.weight.grad.numpy(), atol=2e-2)
    with nb.autocast("cpu"):       # dtypes op by op as torch's CPU autocast gives them
        z = lin(xt)
        got = [z.dtype, nb.log_softmax(z, 1).dtype, nb.nn.functional.nll_loss(nb.log_softmax(z, 1), nb.tensor([0, 1, 2, 3])).dtype,
               (z + 1).dtype, nb.nn.functional.mse_loss(z, z).dtype]
    with torch.autocast("cpu"):
        tz = tl(tx)
        want = [tz.dtype, torch.log_softmax(tz, 1).dtype, torch.nn.functional.nll_loss(torch.log_softmax(tz, 1), torch.tensor([0, 1, 2, 3])).dtype,
                (tz + 1).dtype, torch.nn.functional.mse_loss(tz, tz).dtype]
    assert [str(d) for d in got] == [str(d).replace("torch.", "") for d in want]
    assert not nb.amp.is_autocast_enabled() and (nb.ones(2, 2) @ nb.ones(2, 2)).dtype is nb.float32
    with nb.autocast("cpu", enabled=False):
        assert lin(nb.ones(1, 16)).dtype is nb.float32


def test_grad_scaler_skips_steps_with_inf_gradients():
    w = nb.nn.Parameter(nb.ones(2))
    opt = nb.optim.SGD([w], lr=0.5)
    scaler = nb.amp.GradScaler(init_scale=4.0, growth_interval=1)
    scaler.scale((w * 1.0).sum()).backward()
    assert w.grad.tolist() == [4.0, 4.0]
    scaler.step(opt)
    scaler.update()
    assert w.tolist() == [0.5, 0.5] and scaler.get_scale() == 8.0
    opt.zero_grad()
    scaler.scale((w * float("inf")).sum()).backward()
    scaler.step(opt)
    scaler.update()
    assert w.tolist() == [0.5, 0.5] and scaler.get_scale() == 4.0
    off = nb.cuda.amp.GradScaler(enabled=False)
    loss = (w * 2).sum()
    assert off.scale(loss) is loss
