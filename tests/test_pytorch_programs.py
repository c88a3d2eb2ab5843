"""Whole programs (issue 24): an LSTM language model, a small ViT-style encoder and a
Llama-style decoder (RoPE, RMSNorm, SwiGLU), each written once as a PyTorch program over a
module ``torch`` and run with ``torch`` = nbaccel, eagerly and compiled, and = PyTorch. With
the same initial weights (copied through state_dict) the losses of 5 training steps match."""
import math

import numpy as np
import pytest

import nbaccel

real_torch = pytest.importorskip("torch")


# ---- the programs (PyTorch code; `torch` is whichever library runs it) ---------------------------

def lstm_language_model(torch):
    nn, F = torch.nn, torch.nn.functional

    class RNNModel(nn.Module):
        def __init__(self, ntoken, ninp, nhid, nlayers):
            super().__init__()
            self.drop = nn.Dropout(0.0)
            self.encoder = nn.Embedding(ntoken, ninp)
            self.rnn = nn.LSTM(ninp, nhid, nlayers)
            self.decoder = nn.Linear(nhid, ntoken)
            self.nhid, self.nlayers = nhid, nlayers
            nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

        def forward(self, input, hidden):
            emb = self.drop(self.encoder(input))
            output, hidden = self.rnn(emb, hidden)
            decoded = self.decoder(self.drop(output)).view(-1, self.decoder.out_features)
            return F.log_softmax(decoded, dim=1), hidden

        def init_hidden(self, bsz):
            w = next(self.parameters())
            return (w.new_zeros(self.nlayers, bsz, self.nhid), w.new_zeros(self.nlayers, bsz, self.nhid))

    model = RNNModel(50, 16, 24, 2)
    criterion = nn.NLLLoss()
    opt = torch.optim.SGD(model.parameters(), lr=2.0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)

    def step(data, targets):
        model.train()
        opt.zero_grad()
        hidden = model.init_hidden(data.size(1))
        output, hidden = model(data, hidden)
        loss = criterion(output, targets.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        return loss

    def batch(rng):
        d = rng.integers(0, 50, (9, 4))
        return d[:-1], d[1:]
    return model, step, sched, batch, lambda a: torch.tensor(a, dtype=torch.long)


def small_vit(torch):
    nn, F = torch.nn, torch.nn.functional

    class ViT(nn.Module):
        def __init__(self, image=8, patch=4, dim=16, depth=2, heads=4, classes=5):
            super().__init__()
            self.patch = patch
            n = (image // patch) ** 2
            self.proj = nn.Linear(patch * patch * 3, dim)
            self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
            self.pos_embedding = nn.Parameter(torch.empty(1, n + 1, dim).normal_(std=0.02))
            layer = nn.TransformerEncoderLayer(dim, heads, dim * 2, dropout=0.0, activation="gelu",
                                               batch_first=True, norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, depth, norm=nn.LayerNorm(dim),
                                                 enable_nested_tensor=False)
            self.head = nn.Linear(dim, classes)

        def forward(self, x):
            b, c, h, w = x.shape
            p = self.patch
            x = x.reshape(b, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5)
            x = self.proj(x.reshape(b, (h // p) * (w // p), c * p * p))
            x = torch.cat([self.cls_token.expand(b, -1, -1), x], dim=1) + self.pos_embedding
            return self.head(self.encoder(x)[:, 0])

    model = ViT()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5)

    def step(images, labels):
        opt.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        opt.step()
        return loss

    def batch(rng):
        return rng.standard_normal((4, 3, 8, 8)).astype(np.float32), rng.integers(0, 5, 4)
    return model, step, sched, batch, lambda a: torch.tensor(a) if a.dtype.kind == "f" else torch.tensor(a, dtype=torch.long)


def llama_decoder(torch):
    nn, F = torch.nn, torch.nn.functional

    def precompute_rope(dim, end, theta=10000.0):
        freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
        t = torch.arange(end).float()
        freqs = torch.outer(t, freqs)
        return torch.cos(freqs), torch.sin(freqs)

    def apply_rope(x, cos, sin):
        # x: (b, t, h, d): rotate (even, odd) pairs
        xr = x.float().reshape(x.shape[:-1] + (-1, 2))
        a, b = xr[..., 0], xr[..., 1]
        cos, sin = cos.view(1, cos.shape[0], 1, cos.shape[1]), sin.view(1, sin.shape[0], 1, sin.shape[1])
        out = torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1)
        return out.flatten(3).type_as(x)

    class Attention(nn.Module):
        def __init__(self, dim, n_heads):
            super().__init__()
            self.n_heads, self.head_dim = n_heads, dim // n_heads
            self.wq = nn.Linear(dim, dim, bias=False)
            self.wk = nn.Linear(dim, dim, bias=False)
            self.wv = nn.Linear(dim, dim, bias=False)
            self.wo = nn.Linear(dim, dim, bias=False)

        def forward(self, x, cos, sin):
            b, t, _ = x.shape
            q = self.wq(x).view(b, t, self.n_heads, self.head_dim)
            k = self.wk(x).view(b, t, self.n_heads, self.head_dim)
            v = self.wv(x).view(b, t, self.n_heads, self.head_dim)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.wo(out.transpose(1, 2).contiguous().view(b, t, -1))

    class FeedForward(nn.Module):
        def __init__(self, dim, hidden):
            super().__init__()
            self.w1 = nn.Linear(dim, hidden, bias=False)
            self.w2 = nn.Linear(hidden, dim, bias=False)
            self.w3 = nn.Linear(dim, hidden, bias=False)

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class Block(nn.Module):
        def __init__(self, dim, heads):
            super().__init__()
            self.attention = Attention(dim, heads)
            self.feed_forward = FeedForward(dim, 4 * dim)
            self.attention_norm = nn.RMSNorm(dim, eps=1e-5)
            self.ffn_norm = nn.RMSNorm(dim, eps=1e-5)

        def forward(self, x, cos, sin):
            h = x + self.attention(self.attention_norm(x), cos, sin)
            return h + self.feed_forward(self.ffn_norm(h))

    class Transformer(nn.Module):
        def __init__(self, vocab=40, dim=16, layers=2, heads=2, max_seq=16):
            super().__init__()
            self.tok_embeddings = nn.Embedding(vocab, dim)
            self.layers = nn.ModuleList([Block(dim, heads) for _ in range(layers)])
            self.norm = nn.RMSNorm(dim, eps=1e-5)
            self.output = nn.Linear(dim, vocab, bias=False)
            self.tok_embeddings.weight = self.output.weight          # weight tying
            cos, sin = precompute_rope(dim // heads, max_seq)
            self.register_buffer("freqs_cos", cos, persistent=False)
            self.register_buffer("freqs_sin", sin, persistent=False)
            self.apply(self._init_weights)
            for pn, p in self.named_parameters():
                if pn.endswith("wo.weight") or pn.endswith("w2.weight"):
                    torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * layers))

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, tokens, targets):
            b, t = tokens.shape
            h = self.tok_embeddings(tokens)
            cos, sin = self.freqs_cos[:t], self.freqs_sin[:t]
            for layer in self.layers:
                h = layer(h, cos, sin)
            logits = self.output(self.norm(h))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)

    model = Transformer()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3, betas=(0.9, 0.95), weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda it: min(1.0, (it + 1) / 3))

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    def batch(rng):
        d = rng.integers(0, 40, (3, 9))
        return d[:, :-1], d[:, 1:]
    return model, step, sched, batch, lambda a: torch.tensor(a, dtype=torch.long)


PROGRAMS = {"lstm_lm": lstm_language_model, "vit": small_vit, "llama": llama_decoder}


# compiled on the fused NumPy tier: the same captured graphs (forward, backward and optimizer in
# one replayed program) without numba's JIT wait, which its own tests cover
def _losses(lib, program, state, compiled=False, steps=5, backend="numpy"):
    lib.manual_seed(0)
    model, step, sched, batch, as_tensor = program(lib)
    if state is not None:
        model.load_state_dict({k: lib.tensor(np.asarray(v)) for k, v in state.items()})
    if compiled:
        step = nbaccel.compile(step, mode="reduce-overhead", backend=backend)
    rng = np.random.default_rng(7)
    out = []
    for _ in range(steps):
        x, y = batch(rng)
        out.append(float(step(as_tensor(x), as_tensor(y)).item()))
        sched.step()
    return out, model


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_trains_like_pytorch_eager_and_compiled(name):
    program = PROGRAMS[name]
    real_torch.manual_seed(0)
    ref_model = program(real_torch)[0]
    state = {k: v.detach().numpy().copy() for k, v in ref_model.state_dict().items()}
    want, _ = _losses(real_torch, program, state)
    eager, m = _losses(nbaccel, program, state)
    assert list(m.state_dict()) == list(state)          # the same names, in the same order
    np.testing.assert_allclose(eager, want, rtol=2e-5, atol=2e-5)
    compiled, _ = _losses(nbaccel, program, state, compiled=True)
    np.testing.assert_allclose(compiled, want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("unused", ["lstm_state", "view"])
def test_a_compiled_step_with_an_unused_output_over_the_backpropagated_graph(unused):
    # the LSTM's final state (or a view of an intermediate) is never used by the loss: after
    # backward() freed the tape under it, it must get no backward graph (it was an internal
    # error before)
    nbaccel.manual_seed(0)
    lstm = nbaccel.nn.LSTM(4, 5)
    opt = nbaccel.optim.SGD(lstm.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        out, hidden = lstm(x)
        side = hidden if unused == "lstm_state" else out[1:]      # noqa: F841
        loss = out.sum()
        loss.backward()
        opt.step()
        return loss

    x = nbaccel.randn(3, 2, 4)
    ref = nbaccel.nn.LSTM(4, 5)
    ref.load_state_dict(lstm.state_dict())
    ropt = nbaccel.optim.SGD(ref.parameters(), lr=0.1)
    f = nbaccel.compile(step, backend="numpy")
    for _ in range(2):
        got = f(x).item()
        ropt.zero_grad()
        want = ref(x)[0].sum()
        want.backward()
        ropt.step()
        np.testing.assert_allclose(got, want.item(), rtol=1e-5)
