"""Recurrent and transformer layers (issue 24) against PyTorch: forward, backward, state_dict
keys and shapes (weights load both ways), PyTorch's initialisation, compiled against eager."""
import numpy as np
import pytest

import nbaccel as nb

torch = pytest.importorskip("torch")


def _copy(n, t, to_torch=False):
    tsd, nsd = t.state_dict(), n.state_dict()
    assert list(tsd) == list(nsd)
    for k in tsd:
        assert tuple(tsd[k].shape) == tuple(nsd[k].shape), k
    if to_torch:
        t.load_state_dict({k: torch.tensor(v.numpy()) for k, v in nsd.items()})
    else:
        n.load_state_dict({k: nb.tensor(v.numpy()) for k, v in tsd.items()})


def _close(a, b, tol=2e-5):
    np.testing.assert_allclose(np.asarray(a.detach().numpy(), np.float64),
                               b.detach().double().numpy(), rtol=tol, atol=tol)


RNN_CASES = [
    ("LSTM", dict()), ("LSTM", dict(num_layers=2, batch_first=True, bidirectional=True)),
    ("LSTM", dict(num_layers=3, bias=False)),
    ("GRU", dict()), ("GRU", dict(num_layers=2, bidirectional=True)),
    ("RNN", dict(nonlinearity="relu", num_layers=2)), ("RNN", dict(batch_first=True, bidirectional=True)),
]


@pytest.mark.parametrize("cls,kw", RNN_CASES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(RNN_CASES)])
@pytest.mark.parametrize("with_state", [False, True])
def test_rnn_layers_equal_torch(cls, kw, with_state):
    t = getattr(torch.nn, cls)(5, 6, **kw)
    n = getattr(nb.nn, cls)(5, 6, **kw)
    to_torch = with_state          # one direction each: torch -> nbaccel, nbaccel -> torch
    _copy(n, t, to_torch)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    nx, tx = nb.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    dirs = 2 if kw.get("bidirectional") else 1
    state = None
    if with_state:
        h = rng.standard_normal((dirs * kw.get("num_layers", 1), 4 if kw.get("batch_first") else 4, 6))
        h = h.astype(np.float32)
        if kw.get("batch_first"):
            h = rng.standard_normal((dirs * kw.get("num_layers", 1), 3, 6)).astype(np.float32)
        state = (h, h * 0.5) if cls == "LSTM" else h
    wrap = lambda lib, s: None if s is None else (tuple(lib.tensor(a) for a in s) if isinstance(s, tuple)  # noqa: E731
                                                  else lib.tensor(s))
    a_out, a_state = n(nx, wrap(nb, state))
    b_out, b_state = t(tx, wrap(torch, state))
    _close(a_out, b_out)
    a_states = a_state if isinstance(a_state, tuple) else (a_state,)
    b_states = b_state if isinstance(b_state, tuple) else (b_state,)
    for p, q in zip(a_states, b_states):
        _close(p, q)
    w = rng.standard_normal(tuple(b_out.shape)).astype(np.float32)
    ((a_out * nb.tensor(w)).sum() + sum(s.sum() for s in a_states)).backward()
    ((b_out * torch.tensor(w)).sum() + sum(s.sum() for s in b_states)).backward()
    _close(nx.grad, tx.grad, 1e-4)
    for (name, p), (_, q) in zip(n.named_parameters(), t.named_parameters()):
        _close(p.grad, q.grad, 1e-4)


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
def test_rnn_unbatched_dropout_and_init(cls):
    nb.manual_seed(0)
    n = getattr(nb.nn, cls)(4, 50, num_layers=2, dropout=0.5)
    bound = 1 / np.sqrt(50)
    w = np.concatenate([p.numpy().ravel() for p in n.parameters()])
    assert w.min() >= -bound and w.max() <= bound and abs(w.mean()) < 0.01
    assert abs(w.std() - bound / np.sqrt(3)) < 0.01                 # U(-b, b)
    x = nb.randn(7, 4)
    out, _ = n(x)
    assert out.shape == (7, 50)
    n.eval()
    a, _ = n(x)
    b, _ = n(x)
    np.testing.assert_array_equal(a.numpy(), b.numpy())             # no dropout in eval
    n.train()
    c, _ = n(x)
    assert not np.allclose(c.numpy(), a.numpy())
    t = getattr(torch.nn, cls)(4, 50, num_layers=2, dropout=0.5).eval()
    n.eval()
    _copy(n, t)
    tb, _ = t(torch.tensor(x.numpy()))
    _close(n(x)[0], tb)
    with pytest.raises(ValueError, match="input_size"):
        n(nb.randn(3, 2, 5))


@pytest.mark.parametrize("cls", ["LSTMCell", "GRUCell", "RNNCell"])
def test_cells_equal_torch(cls):
    t, n = getattr(torch.nn, cls)(5, 7), getattr(nb.nn, cls)(5, 7)
    _copy(n, t)
    x = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    nx, tx = nb.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    a, b = n(nx), t(tx)
    if cls == "LSTMCell":
        a2, b2 = n(nx, a), t(tx, b)
        la, lb = a2[0].sum() + a2[1].sum(), b2[0].sum() + b2[1].sum()
        _close(a2[1], b2[1])
    else:
        a2, b2 = n(nx, a), t(tx, b)
        la, lb = a2.sum(), b2.sum()
        _close(a2, b2)
    la.backward(), lb.backward()
    _close(nx.grad, tx.grad, 1e-4)
    assert (n(nx[0])[0] if cls == "LSTMCell" else n(nx[0])).shape == (7,)


def test_lstm_compiles_like_eager():
    nb.manual_seed(0)
    lstm = nb.nn.LSTM(6, 8, num_layers=2, batch_first=True)
    head = nb.nn.Linear(8, 3)
    x, y = nb.randn(4, 5, 6), nb.randint(0, 3, (4,))

    def loss_fn(x, y):
        out, (h, c) = lstm(x)
        return nb.nn.functional.cross_entropy(head(out[:, -1]), y) + (c * c).mean()

    eager = loss_fn(x, y)
    eager.backward()
    ref = [p.grad.numpy().copy() for p in lstm.parameters()]
    lstm.zero_grad()
    compiled = nb.compile(loss_fn)(x, y)
    compiled.backward()
    np.testing.assert_allclose(compiled.item(), eager.item(), rtol=1e-5)
    for p, r in zip(lstm.parameters(), ref):
        np.testing.assert_allclose(p.grad.numpy(), r, rtol=1e-4, atol=1e-6)


def test_lstm_scan_is_an_op_with_a_checked_gradient():
    from nbaccel.ops import OPS
    assert "lstm_scan" in OPS and OPS["lstm_scan"].grad is not None
    rng = np.random.default_rng(2)
    args = [rng.standard_normal(s) for s in [(3, 2, 8), (2, 2), (2, 2), (8, 2)]]
    ts = [nb.tensor(a, requires_grad=True) for a in args]
    w = nb.tensor(rng.standard_normal((3, 2, 12)))
    (nb.lstm_scan(*ts) * w).sum().backward()
    eps = 1e-6
    for t, a in zip(ts, args):
        num = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            hi, lo = [x.copy() for x in args], [x.copy() for x in args]
            k = next(i for i, b in enumerate(args) if b is a)
            hi[k][idx] += eps
            lo[k][idx] -= eps
            f = lambda v: float((nb.lstm_scan(*[nb.tensor(q) for q in v]) * w).sum())  # noqa: E731
            num[idx] = (f(hi) - f(lo)) / (2 * eps)
        np.testing.assert_allclose(t.grad.numpy(), num, rtol=1e-5, atol=1e-7)


TRANSFORMER_CASES = [dict(norm_first=False, activation="relu"), dict(norm_first=True, activation="gelu"),
                     dict(norm_first=False, activation="gelu", batch_first=False)]


@pytest.mark.parametrize("kw", TRANSFORMER_CASES)
def test_encoder_equals_torch_with_masks(kw):
    kw = dict(dict(d_model=16, nhead=4, dim_feedforward=24, dropout=0.0, batch_first=True), **kw)
    t = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(**kw), 2, norm=torch.nn.LayerNorm(16),
                                    enable_nested_tensor=False)
    n = nb.nn.TransformerEncoder(nb.nn.TransformerEncoderLayer(**kw), 2, norm=nb.nn.LayerNorm(16))
    _copy(n, t)
    rng = np.random.default_rng(3)
    shape = (2, 5, 16) if kw["batch_first"] else (5, 2, 16)
    x = rng.standard_normal(shape).astype(np.float32)
    kpm = np.array([[False] * 5, [False, False, False, True, True]])
    nx, tx = nb.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    a = n(nx, mask=nb.nn.Transformer.generate_square_subsequent_mask(5), src_key_padding_mask=nb.tensor(kpm))
    b = t(tx, mask=torch.nn.Transformer.generate_square_subsequent_mask(5),
          src_key_padding_mask=torch.tensor(kpm).float().masked_fill(torch.tensor(kpm), float("-inf")))
    _close(a, b)
    a.pow(2).sum().backward()
    b.pow(2).sum().backward()
    _close(nx.grad, tx.grad, 1e-4)
    for (k, p), (_, q) in zip(n.named_parameters(), t.named_parameters()):
        _close(p.grad, q.grad, 1e-4)


def test_decoder_and_full_transformer_equal_torch():
    t = torch.nn.Transformer(16, 4, 2, 2, 32, 0.0, norm_first=True)
    n = nb.nn.Transformer(16, 4, 2, 2, 32, 0.0, norm_first=True)
    w = np.concatenate([p.numpy().ravel() for p in n.parameters() if p.ndim > 1])
    assert abs(w.std() - np.concatenate([p.detach().numpy().ravel() for p in t.parameters()
                                         if p.ndim > 1]).std()) < 0.02   # xavier_uniform_
    _copy(n, t, to_torch=True)
    rng = np.random.default_rng(4)
    s, g = rng.standard_normal((6, 2, 16)).astype(np.float32), rng.standard_normal((4, 2, 16)).astype(np.float32)
    mem_kpm = np.zeros((2, 6), bool)
    mem_kpm[1, 4:] = True
    a = n(nb.tensor(s), nb.tensor(g), tgt_mask=nb.nn.Transformer.generate_square_subsequent_mask(4),
          memory_key_padding_mask=nb.tensor(mem_kpm))
    b = t(torch.tensor(s), torch.tensor(g), tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(4),
          memory_key_padding_mask=torch.tensor(mem_kpm))
    _close(a, b)
    dec_t = torch.nn.TransformerDecoderLayer(16, 4, 32, 0.0, batch_first=True)
    dec_n = nb.nn.TransformerDecoderLayer(16, 4, 32, 0.0, batch_first=True)
    _copy(dec_n, dec_t)
    _close(dec_n(nb.tensor(g.swapaxes(0, 1)), nb.tensor(s.swapaxes(0, 1))),
           dec_t(torch.tensor(g.swapaxes(0, 1)), torch.tensor(s.swapaxes(0, 1))))


def test_encoder_compiles_like_eager():
    nb.manual_seed(1)
    enc = nb.nn.TransformerEncoder(nb.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), 2)
    x = nb.randn(2, 6, 8)
    mask = nb.nn.Transformer.generate_square_subsequent_mask(6)
    f = lambda x: enc(x, mask=mask).sum(-1)   # noqa: E731
    np.testing.assert_allclose(nb.compile(f)(x).numpy(), f(x).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("enforce_sorted", [False, True])
def test_packed_sequences_equal_torch(cls, enforce_sorted):
    from nbaccel.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence
    TU = torch.nn.utils.rnn
    rng = np.random.default_rng(0)
    lens = [5, 3, 2] if enforce_sorted else [2, 5, 3]
    seqs = [rng.standard_normal((n, 4)).astype(np.float32) for n in lens]
    t = getattr(torch.nn, cls)(4, 6, num_layers=2, bidirectional=True)
    n = getattr(nb.nn, cls)(4, 6, num_layers=2, bidirectional=True)
    _copy(n, t)
    ns = [nb.tensor(s, requires_grad=True) for s in seqs]
    ts = [torch.tensor(s, requires_grad=True) for s in seqs]
    npk = pack_padded_sequence(pad_sequence(ns, batch_first=True), lens, batch_first=True,
                               enforce_sorted=enforce_sorted)
    tpk = TU.pack_padded_sequence(TU.pad_sequence(ts, batch_first=True), lens, batch_first=True,
                                  enforce_sorted=enforce_sorted)
    assert npk.batch_sizes.tolist() == tpk.batch_sizes.tolist()
    if not enforce_sorted:
        assert npk.sorted_indices.tolist() == tpk.sorted_indices.tolist()
    _close(npk.data, tpk.data)
    a, ah = n(npk)
    b, bh = t(tpk)
    _close(a.data, b.data)
    ah, bh = (ah if isinstance(ah, tuple) else (ah,)), (bh if isinstance(bh, tuple) else (bh,))
    for p, q in zip(ah, bh):
        _close(p, q)
    pa, la = pad_packed_sequence(a, batch_first=True)
    pb, lb = TU.pad_packed_sequence(b, batch_first=True)
    _close(pa, pb)
    assert la.tolist() == lb.tolist() == lens
    (pa.sum() + sum(p.sum() for p in ah)).backward()
    (pb.sum() + sum(q.sum() for q in bh)).backward()
    for x, y in zip(ns, ts):
        _close(x.grad, y.grad, 1e-4)
