"""Convolutional modules against PyTorch: state_dict keys and shapes, default initialisation
in distribution, BatchNorm's running statistics, and whole programs (a CNN classifier, a
DCGAN-style generator/discriminator pair) written once against a ``torch`` namespace and run
with ``nbaccel`` as ``torch``, eager and compiled, matching PyTorch's losses over 5 steps from
the same weights (copied through state_dict)."""
import numpy as np
import pytest

import nbaccel as nb

RNG = np.random.default_rng(0)


def _modules(torch):
    nn = torch.nn
    return {
        "conv1d": lambda: nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2),
        "conv2d": lambda: nn.Conv2d(3, 8, 3, padding="same", bias=False),
        "conv2d_reflect": lambda: nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"),
        "convT2d": lambda: nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1, groups=2),
        "convT1d": lambda: nn.ConvTranspose1d(4, 2, 3, stride=2),
        "bn1d": lambda: nn.BatchNorm1d(5),
        "bn2d": lambda: nn.BatchNorm2d(6, momentum=None),
        "bn2d_plain": lambda: nn.BatchNorm2d(6, affine=False, track_running_stats=False),
        "gn": lambda: nn.GroupNorm(2, 6),
        "seq": lambda: nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU6(),
                                     nn.MaxPool2d(2), nn.AvgPool2d(2, ceil_mode=True),
                                     nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Dropout2d(0.0),
                                     nn.LeakyReLU(0.2), nn.Linear(4, 3)),
    }


def _torch():
    return pytest.importorskip("torch")


def _to_torch(sd, torch):
    return {k: torch.from_numpy(np.array(v.numpy())) for k, v in sd.items()}


def _to_nb(sd):
    return {k: np.array(v.detach().numpy() if hasattr(v, "detach") else v) for k, v in sd.items()}


@pytest.mark.parametrize("name", sorted(_modules(nb)))
def test_state_dict_keys_shapes_and_dtypes_equal_pytorchs(name):
    torch = _torch()
    ours, theirs = _modules(nb)[name](), _modules(torch)[name]()
    a, b = ours.state_dict(), theirs.state_dict()
    assert list(a) == list(b)
    for k in a:
        assert tuple(a[k].shape) == tuple(b[k].shape), k
        assert str(a[k].dtype) == str(b[k].dtype).replace("torch.", ""), k
    ours.load_state_dict(_to_nb(b))       # both directions
    theirs.load_state_dict(_to_torch(a, torch))


@pytest.mark.parametrize("name,shape", [("conv1d", (2, 4, 9)), ("conv2d", (2, 3, 6, 6)),
                                        ("conv2d_reflect", (2, 3, 5, 6)), ("convT2d", (2, 8, 3, 3)),
                                        ("convT1d", (2, 4, 5)), ("bn1d", (4, 5, 3)),
                                        ("bn2d", (3, 6, 2, 2)), ("bn2d_plain", (3, 6, 2, 2)),
                                        ("gn", (2, 6, 3, 3)), ("seq", (2, 1, 12, 12))])
@pytest.mark.parametrize("training", [True, False])
def test_modules_compute_what_pytorch_computes(name, shape, training):
    torch = _torch()
    ours, theirs = _modules(nb)[name](), _modules(torch)[name]()
    ours.load_state_dict(_to_nb(theirs.state_dict()))
    ours.train(training)
    theirs.train(training)
    x = RNG.standard_normal(shape).astype(np.float32)
    for _ in range(2):       # twice: the running statistics move in training mode
        a, b = ours(nb.tensor(x)), theirs(torch.tensor(x))
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-4, atol=1e-5)
    for k, v in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[k].numpy(), v.numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=k)


def test_batchnorm_counts_batches_and_uses_running_stats_in_eval():
    bn = nb.nn.BatchNorm2d(3)
    x = nb.randn(4, 3, 2, 2) * 3 + 1
    for _ in range(3):
        bn(x)
    assert bn.num_batches_tracked.item() == 3 and bn.num_batches_tracked.dtype == nb.int64
    mean = x.numpy().mean(axis=(0, 2, 3))
    np.testing.assert_allclose(bn.running_mean.numpy(), mean * (1 - 0.9 ** 3), rtol=1e-5)
    bn.eval()
    y = bn(x).numpy()
    expect = (x.numpy() - bn.running_mean.numpy()[None, :, None, None]) / np.sqrt(
        bn.running_var.numpy()[None, :, None, None] + 1e-5)
    np.testing.assert_allclose(y, expect, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="expected 4D input"):
        bn(nb.randn(2, 3))


def test_default_initialisation_in_distribution():
    """kaiming_uniform(a=sqrt(5)) = U(-1/sqrt(fan_in), 1/sqrt(fan_in)), the bias the same."""
    nb.manual_seed(0)
    conv = nb.nn.Conv2d(16, 64, 5)
    bound = 1 / np.sqrt(16 * 25)
    w = conv.weight.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    assert abs(w.std() - bound / np.sqrt(3)) < 0.02 * bound
    b = conv.bias.numpy()
    assert np.abs(b).max() <= bound and b.std() > 0.4 * bound
    convt = nb.nn.ConvTranspose2d(16, 8, 3)      # fan_in is weight.shape[1] * k*k = 8 * 9
    assert np.abs(convt.weight.numpy()).max() <= 1 / np.sqrt(72)
    bn = nb.nn.BatchNorm2d(4)
    assert (bn.weight.numpy() == 1).all() and (bn.bias.numpy() == 0).all()


def test_default_initialisation_matches_pytorchs_distribution():
    torch = _torch()
    torch.manual_seed(0)
    nb.manual_seed(0)
    a = nb.nn.Conv2d(8, 32, 3).weight.numpy().ravel()
    b = torch.nn.Conv2d(8, 32, 3).weight.detach().numpy().ravel()
    assert abs(a.std() - b.std()) < 0.05 * b.std() and abs(np.abs(a).max() - np.abs(b).max()) < 0.01


# ---- whole programs, written once for a `torch` namespace --------------------------------------

def cnn_program(torch):
    nn = torch.nn
    F = torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
            self.bn1 = nn.BatchNorm2d(8)
            self.conv2 = nn.Conv2d(8, 16, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(16)
            self.pool = nn.MaxPool2d(2)
            self.drop = nn.Dropout2d(0.0)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            x = self.pool(F.relu(self.bn1(self.conv1(x))))
            x = self.drop(F.relu(self.bn2(self.conv2(x))))
            x = F.adaptive_avg_pool2d(x, 1).flatten(1)
            return F.log_softmax(self.fc(x), dim=1)

    def make():
        return Net()

    def step(model, opt, x, y):
        opt.zero_grad()
        loss = F.nll_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return make, step, lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9)


def dcgan_program(torch):
    nn = torch.nn

    def make():
        gen = nn.Sequential(
            nn.ConvTranspose2d(8, 16, 4, 1, 0, bias=False), nn.BatchNorm2d(16), nn.ReLU(True),
            nn.ConvTranspose2d(16, 8, 4, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(True),
            nn.ConvTranspose2d(8, 1, 4, 2, 1, bias=False), nn.Tanh())
        disc = nn.Sequential(
            nn.Conv2d(1, 8, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(8, 16, 4, 2, 1, bias=False), nn.BatchNorm2d(16),
            nn.LeakyReLU(0.2, inplace=True), nn.Conv2d(16, 1, 4, 1, 0, bias=False), nn.Sigmoid())
        return nn.ModuleDict({"gen": gen, "disc": disc})

    bce = nn.BCELoss()

    def step(model, opts, real, noise):
        g_opt, d_opt = opts
        gen, disc = model["gen"], model["disc"]
        ones, zeros = torch.ones(real.shape[0]), torch.zeros(real.shape[0])
        d_opt.zero_grad()
        fake = gen(noise)
        d_loss = bce(disc(real).reshape(-1), ones) + bce(disc(fake.detach()).reshape(-1), zeros)
        d_loss.backward()
        d_opt.step()
        g_opt.zero_grad()
        g_loss = bce(disc(fake).reshape(-1), ones)
        g_loss.backward()
        g_opt.step()
        return d_loss + g_loss

    def optimizers(model):
        mk = lambda m: torch.optim.Adam(m.parameters(), lr=2e-3, betas=(0.5, 0.999))  # noqa: E731
        return mk(model["gen"]), mk(model["disc"])

    return make, step, optimizers


def _run(program, lib, state, batches, compiled=False):
    make, step, opt_for = program(lib)
    lib.manual_seed(0)
    model = make()
    model.load_state_dict(state if lib is not nb else _to_nb(state))
    model.train()
    opt = opt_for(model.parameters()) if program is cnn_program else opt_for(model)
    run = nb.compile(step) if compiled else step
    losses = []
    for a, b in batches:
        losses.append(float(run(model, opt, lib.tensor(a), lib.tensor(b)).item()))
    return losses, model


def _batches(kind):
    rng = np.random.default_rng(1)
    if kind == "cnn":
        return [(rng.standard_normal((8, 1, 8, 8)).astype(np.float32),
                 rng.integers(0, 10, 8).astype(np.int64)) for _ in range(5)]
    return [(np.tanh(rng.standard_normal((4, 1, 16, 16))).astype(np.float32),
             rng.standard_normal((4, 8, 1, 1)).astype(np.float32)) for _ in range(5)]


def test_compiled_step_with_two_backwards_through_one_forward():
    """A GAN's step: backward through the discriminator on a detached generator output, then
    through both (regression: a KeyError, then 'backward through the graph a second time', in
    the capture's flush of gradients that entered the segment unchanged or were updated in
    place)."""
    nb.manual_seed(0)
    gen, disc = nb.nn.Linear(4, 4), nb.nn.Linear(4, 1)
    params = list(gen.parameters()) + list(disc.parameters())

    def step(noise):
        fake = gen(noise)
        d = disc(fake.detach()).sum()
        d.backward()
        g = disc(fake).sum()
        g.backward()
        return d + g

    def run(f, x):
        for p in params:
            p.grad = None
        out = f(x)
        return out.item(), [p.grad.numpy().copy() for p in params]

    x = nb.tensor(np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4))
    want = run(step, x)
    compiled = nb.compile(step)
    for _ in range(3):                       # the capture, then replays
        got = run(compiled, x)
        assert got[0] == pytest.approx(want[0], rel=1e-6)
        for a, b in zip(got[1], want[1]):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("program,kind,compiled", [
    (cnn_program, "cnn", False), (cnn_program, "cnn", True), (dcgan_program, "dcgan", False),
    (dcgan_program, "dcgan", True)])
def test_whole_program_losses_match_pytorch(program, kind, compiled):
    torch = _torch()
    torch.manual_seed(0)
    theirs = program(torch)[0]()
    state = theirs.state_dict()
    expect, t_model = _run(program, torch, state, _batches(kind))
    got, n_model = _run(program, nb, state, _batches(kind), compiled=compiled)
    np.testing.assert_allclose(got, expect, rtol=2e-4, atol=2e-5)
    for k, v in t_model.state_dict().items():      # and the trained weights and statistics
        np.testing.assert_allclose(n_model.state_dict()[k].numpy(), v.numpy(), rtol=2e-3,
                                   atol=2e-4, err_msg=k)


@pytest.mark.parametrize("program,kind", [(cnn_program, "cnn"),
                                          (dcgan_program, "dcgan")])
def test_whole_program_compiled_matches_eager_without_torch(program, kind):
    nb.manual_seed(0)
    state = {k: v.numpy().copy() for k, v in program(nb)[0]().state_dict().items()}
    eager, _ = _run(program, nb, state, _batches(kind))
    compiled, _ = _run(program, nb, state, _batches(kind), compiled=True)
    np.testing.assert_allclose(compiled, eager, rtol=1e-4, atol=1e-5)
    assert eager[-1] < eager[0] or kind == "dcgan"
