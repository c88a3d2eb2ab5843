"""The backward of indexing: basic keys (slices, steps, ints, None, Ellipsis) add the gradient
into a view in place, advanced keys accumulate repeated indices; both against PyTorch."""
import numpy as np
import pytest

import nbaccel as nb


@pytest.mark.parametrize("key", [
    (slice(None), slice(1, 3)), (1,), (slice(None, None, 2), slice(None, None, 3)),
    (Ellipsis, slice(2, None)), (None, slice(0, 2), 1), (-1, slice(1, None, 2))])
def test_basic_index_gradients(key):
    torch = pytest.importorskip("torch")
    x0 = np.arange(20.0, dtype=np.float32).reshape(4, 5)
    x, xt = nb.tensor(x0, requires_grad=True), torch.tensor(x0, requires_grad=True)
    g = np.random.default_rng(0).standard_normal(x0[key].shape).astype(np.float32)
    (x[key] * nb.tensor(g)).sum().backward()
    (xt[key] * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy())


def test_split_pieces_and_repeated_advanced_indices_accumulate():
    torch = pytest.importorskip("torch")
    x0 = np.random.default_rng(1).standard_normal((3, 6)).astype(np.float32)
    x, xt = nb.tensor(x0, requires_grad=True), torch.tensor(x0, requires_grad=True)
    idx = np.array([0, 2, 2, 0, 2])
    for lib, t in ((nb, x), (torch, xt)):
        a, b, c = t.split(2, dim=1)
        (a * 1 + b * 2 + c * 3).sum().backward(retain_graph=True)
        t[lib.tensor(idx)].sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-6)


def test_an_index_gradient_starts_from_one_broadcast_zero(monkeypatch):
    # the scatter of an index's gradient copies its zeros first: they are a broadcast view of
    # one zero, not a filled array of the input's size made only to be copied (qkv.split)
    from nbaccel.ops.registry import OPS
    x0 = np.random.default_rng(2).standard_normal((2, 3, 6)).astype(np.float32)
    x = nb.tensor(x0, requires_grad=True)
    shapes = []
    full = OPS["full"]
    impl = full.impl
    monkeypatch.setattr(full, "impl", lambda xp, **kw: shapes.append(tuple(kw["shape"])) or
                        impl(xp, **kw))
    q, k, v = x.split(2, dim=2)
    (q * 1 + k * 2 + v * 3).sum().backward(retain_graph=True)
    x[1].sum().backward()
    assert shapes and all(s == () for s in shapes)
    want = np.repeat(np.array([1, 2, 3], np.float32), 2)[None, None].repeat(3, 1).repeat(2, 0)
    want[1] += 1
    np.testing.assert_array_equal(x.grad.numpy(), want)
    assert x.grad.numpy().flags.writeable and x.grad.numpy().strides == (72, 24, 4)
