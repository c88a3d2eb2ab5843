"""nbaccel.nn modules: registration, traversal, state_dict, train/eval, to(), containers,
init, and MultiheadAttention against a NumPy reference with the same weights."""
import math
from collections import OrderedDict

import numpy as np
import pytest

import nbaccel as nb
import nbaccel.nn.functional as F
from nbaccel import nn
from oracle import assert_close


def mlp():
    return nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 1))


# ---- Module basics --------------------------------------------------------------------------------

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.norm = nn.LayerNorm(3)
        self.scale = nn.Parameter(nb.ones(3))
        self.register_buffer("count", nb.zeros(()))
        self.register_buffer("cache", nb.zeros(2), persistent=False)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.norm(self.lin(x)) * self.scale)


def test_registration_and_traversal():
    b = Block()
    names = [n for n, _ in b.named_parameters()]
    assert names == ["scale", "lin.weight", "lin.bias", "norm.weight", "norm.bias"]
    assert [n for n, _ in b.named_buffers()] == ["count", "cache"]
    assert [n for n, _ in b.named_children()] == ["lin", "norm", "drop"]
    assert [n for n, _ in b.named_modules()] == ["", "lin", "norm", "drop"]
    assert len(list(b.modules())) == 4
    assert all(p.requires_grad for p in b.parameters())
    assert b.get_submodule("lin") is b.lin
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        b.nope
    with pytest.raises(TypeError, match="parameter 'scale'"):
        b.scale = nb.ones(3)
    b.lin = None
    assert "lin" not in [n for n, _ in b.named_children()]


def test_parameter_counts():
    assert sum(p.numel() for p in mlp().parameters()) == (2 * 16 + 16) + (16 * 16 + 16) + (16 + 1)
    assert sum(p.numel() for p in nn.Linear(3, 5, bias=False).parameters()) == 15
    e = 8
    mha = nn.MultiheadAttention(e, 2)
    assert sum(p.numel() for p in mha.parameters()) == 3 * e * e + 3 * e + e * e + e
    assert sum(p.numel() for p in nn.Embedding(10, 4).parameters()) == 40


def test_shared_parameters_appear_once():
    lin = nn.Linear(3, 3)
    seq = nn.Sequential(lin, nn.ReLU(), lin)
    assert len(list(seq.parameters())) == 2


def test_module_without_init_call_errors():
    class Bad(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(nb.ones(2))
    with pytest.raises(AttributeError, match="before Module.__init__"):
        Bad()


def test_repr_like_pytorch():
    assert repr(mlp()) == (
        "Sequential(\n"
        "  (0): Linear(in_features=2, out_features=16, bias=True)\n"
        "  (1): ReLU()\n"
        "  (2): Linear(in_features=16, out_features=16, bias=True)\n"
        "  (3): GELU(approximate='none')\n"
        "  (4): Linear(in_features=16, out_features=1, bias=True)\n"
        ")")
    assert repr(nn.LayerNorm(4)) == "LayerNorm((4,), eps=1e-05, elementwise_affine=True)"
    assert repr(nn.Dropout(0.1)) == "Dropout(p=0.1, inplace=False)"


# ---- state_dict ---------------------------------------------------------------------------------------

def test_state_dict_round_trip():
    nb.manual_seed(0)
    a, b = Block(), Block()
    sd = a.state_dict()
    assert list(sd) == ["scale", "count", "lin.weight", "lin.bias", "norm.weight", "norm.bias"]
    w_before = b.lin.weight
    res = b.load_state_dict(sd)
    assert res.missing_keys == [] and res.unexpected_keys == []
    assert b.lin.weight is w_before   # loaded in place: references stay valid
    for k, v in b.state_dict().items():
        np.testing.assert_array_equal(np.asarray(v), np.asarray(sd[k]))
    x = nb.randn(2, 4)
    a.eval(), b.eval()
    np.testing.assert_array_equal(np.asarray(a(x)), np.asarray(b(x)))


def test_state_dict_is_detached_and_shares_memory():
    lin = nn.Linear(2, 2)
    sd = lin.state_dict()
    assert not sd["weight"].requires_grad
    with nb.no_grad():
        lin.weight.fill_(3.0)
    assert (np.asarray(sd["weight"]) == 3).all()


def test_load_state_dict_strict_and_shape_errors():
    lin = nn.Linear(2, 3)
    sd = lin.state_dict()
    with pytest.raises(RuntimeError, match='Missing key.*"bias"'):
        lin.load_state_dict({"weight": sd["weight"]})
    res = lin.load_state_dict({"weight": sd["weight"], "extra": nb.ones(1)}, strict=False)
    assert res.missing_keys == ["bias"] and res.unexpected_keys == ["extra"]
    with pytest.raises(RuntimeError, match="size mismatch for weight.*\\(3, 3\\).*\\(3, 2\\)"):
        lin.load_state_dict({"weight": nb.ones(3, 3), "bias": sd["bias"]})
    with pytest.raises(RuntimeError, match="size mismatch for weight"):
        lin.load_state_dict({"weight": nb.ones(3, 3)}, strict=False)


# ---- modes, grads, dtype ----------------------------------------------------------------------------

def test_train_eval_changes_dropout():
    nb.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5))
    x = nb.randn(4, 8)
    assert net.training and net[1].training
    a, b = np.asarray(net(x)), np.asarray(net(x))
    assert not np.array_equal(a, b)
    net.eval()
    assert not net[1].training
    c, d = np.asarray(net(x)), np.asarray(net(x))
    np.testing.assert_array_equal(c, d)
    np.testing.assert_allclose(c, np.asarray(F.linear(x, net[0].weight, net[0].bias)), rtol=1e-6)
    assert net.train() is net and net[1].training


def test_zero_grad():
    net = mlp()
    net(nb.randn(3, 2)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all((np.asarray(p.grad) == 0).all() for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_to_dtype_keeps_parameter_objects():
    net = mlp()
    w = net[0].weight
    assert net.to(nb.float64) is net
    assert net[0].weight is w and w.dtype == nb.float64 and w.requires_grad
    assert net(nb.randn(3, 2, dtype="float64")).dtype == nb.float64
    net.float()
    assert w.dtype == nb.float32
    net.to("cpu")
    with pytest.raises(TypeError, match="floating"):
        net.to(nb.int32)


def test_requires_grad_and_apply():
    net = mlp().requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen[-1] == "Sequential" and seen.count("Linear") == 3


# ---- layers -------------------------------------------------------------------------------------------

def test_linear_default_init_bounds():
    nb.manual_seed(0)
    lin = nn.Linear(100, 50)
    bound = 1 / math.sqrt(100)
    for p in (lin.weight, lin.bias):
        a = np.asarray(p)
        assert a.dtype == np.float32 and np.abs(a).max() <= bound
        assert np.abs(a).max() > 0.9 * bound
    assert lin.weight.shape == (50, 100)


def test_layers_forward_match_functional():
    x = nb.randn(2, 3, 4)
    ln = nn.LayerNorm(4)
    assert_close(np.asarray(ln(x)), np.asarray(F.layer_norm(x, (4,), ln.weight, ln.bias)))
    rms = nn.RMSNorm([3, 4])
    assert_close(np.asarray(rms(x)), np.asarray(F.rms_norm(x, (3, 4), rms.weight)))
    for mod, f in [(nn.ReLU(), F.relu), (nn.GELU(), F.gelu), (nn.SiLU(), F.silu),
                   (nn.Tanh(), F.tanh), (nn.Sigmoid(), F.sigmoid), (nn.Identity(7), lambda t: t),
                   (nn.Softmax(dim=-1), lambda t: F.softmax(t, -1)),
                   (nn.GELU("tanh"), lambda t: F.gelu(t, approximate="tanh"))]:
        assert_close(np.asarray(mod(x)), np.asarray(f(x)), msg=type(mod).__name__)
    assert nn.Flatten()(x).shape == (2, 12)
    assert nn.LayerNorm(4, elementwise_affine=False).weight is None


def test_embedding_module():
    nb.manual_seed(0)
    emb = nn.Embedding(10, 3, padding_idx=0)
    assert (np.asarray(emb.weight)[0] == 0).all()
    idx = nb.tensor([[0, 2], [9, 2]])
    out = emb(idx)
    assert out.shape == (2, 2, 3)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(emb.weight)[np.asarray(idx)])
    out.sum().backward()
    assert (np.asarray(emb.weight.grad)[0] == 0).all()
    assert np.asarray(emb.weight.grad)[2, 0] == 2
    pre = nn.Embedding.from_pretrained(nb.ones(4, 2))
    assert not pre.weight.requires_grad


def test_loss_modules():
    x, t = nb.randn(4, 3), nb.tensor([0, 1, 2, 1])
    assert_close(np.asarray(nn.CrossEntropyLoss()(x, t)), np.asarray(F.cross_entropy(x, t)))
    y = nb.randn(4, 3)
    assert_close(np.asarray(nn.MSELoss(reduction="sum")(x, y)), np.asarray(F.mse_loss(x, y, reduction="sum")))


# ---- containers ----------------------------------------------------------------------------------------

def test_sequential_container():
    net = mlp()
    assert len(net) == 5
    assert isinstance(net[0], nn.Linear) and isinstance(net[-1], nn.Linear)
    sub = net[1:3]
    assert isinstance(sub, nn.Sequential) and len(sub) == 2 and sub[1] is net[2]
    assert [type(m).__name__ for m in net][:2] == ["Linear", "ReLU"]
    with pytest.raises(IndexError):
        net[5]
    named = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 2)), ("act", nn.Tanh())]))
    assert [n for n, _ in named.named_parameters()] == ["fc.weight", "fc.bias"]
    named.append(nn.ReLU())
    assert len(named) == 3


def test_module_list_and_dict():
    ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(ml) == 3 and len(list(ml.parameters())) == 6
    ml.append(nn.ReLU())
    ml.insert(0, nn.Tanh())
    assert isinstance(ml[0], nn.Tanh) and len(ml) == 5
    assert [n for n, _ in ml.named_parameters()][0] == "1.weight"
    md = nn.ModuleDict({"a": nn.Linear(2, 3), "b": nn.ReLU()})
    assert "a" in md and len(md) == 2 and list(md.keys()) == ["a", "b"]
    assert [n for n, _ in md.named_parameters()] == ["a.weight", "a.bias"]
    md["c"] = nn.Linear(3, 1)
    assert len(list(md.parameters())) == 4
    assert md.pop("c") is not None and "c" not in md


# ---- init ------------------------------------------------------------------------------------------------

def test_init_functions():
    nb.manual_seed(0)
    w = nb.empty(200, 100)
    nn.init.xavier_uniform_(w)
    a = math.sqrt(6 / 300)
    assert np.abs(np.asarray(w)).max() <= a
    nn.init.kaiming_uniform_(w, a=math.sqrt(5))
    assert np.abs(np.asarray(w)).max() <= 1 / math.sqrt(100)
    nn.init.normal_(w, 1.0, 0.1)
    assert abs(np.asarray(w).mean() - 1) < 0.01 and abs(np.asarray(w).std() - 0.1) < 0.01
    nn.init.uniform_(w, -2, -1)
    assert np.asarray(w).min() >= -2 and np.asarray(w).max() < -1
    assert (np.asarray(nn.init.zeros_(w)) == 0).all() and (np.asarray(nn.init.ones_(w)) == 1).all()
    p = nn.Parameter(nb.ones(3, 3))
    assert nn.init.xavier_uniform_(p) is p and p.requires_grad   # works on leaves that need grad
    with pytest.raises(ValueError, match="fewer than 2"):
        nn.init.xavier_uniform_(nb.ones(3))
    assert nn.init.calculate_gain("relu") == math.sqrt(2)


# ---- MultiheadAttention vs NumPy ------------------------------------------------------------------------

def np_mha(mha, q, k, v, attn_mask=None, key_padding_mask=None, batch_first=False,
           average=True, is_causal=False):
    """The same math in NumPy, with the module's weights."""
    g = lambda t: None if t is None else np.asarray(t).astype(np.float64)  # noqa: E731
    e, h = mha.embed_dim, mha.num_heads
    d = e // h
    if mha.in_proj_weight is not None:
        w = g(mha.in_proj_weight)
        wq, wk, wv = w[:e], w[e:2 * e], w[2 * e:]
    else:
        wq, wk, wv = g(mha.q_proj_weight), g(mha.k_proj_weight), g(mha.v_proj_weight)
    b = g(mha.in_proj_bias)
    bq, bk, bv = (0, 0, 0) if b is None else (b[:e], b[e:2 * e], b[2 * e:])
    if not batch_first:
        q, k, v = (np.swapaxes(t, 0, 1) for t in (q, k, v))
    n, lq, _ = q.shape
    s = k.shape[1]

    def heads(x, w, bias, length):
        return (x @ w.T + bias).reshape(n, length, h, d).transpose(0, 2, 1, 3)
    qh, kh, vh = heads(q, wq, bq, lq), heads(k, wk, bk, s), heads(v, wv, bv, s)
    scores = qh @ kh.transpose(0, 1, 3, 2) / math.sqrt(d)
    if is_causal:
        attn_mask = np.triu(np.ones((lq, s), bool), 1)
    if attn_mask is not None:
        m = np.where(attn_mask, -np.inf, 0.0) if attn_mask.dtype == bool else attn_mask
        scores = scores + (m if m.ndim == 2 else m.reshape(n, h, lq, s))
    if key_padding_mask is not None:
        scores = scores + np.where(key_padding_mask, -np.inf, 0.0)[:, None, None, :]
    p = np_softmax(scores)
    out = (p @ vh).transpose(0, 2, 1, 3).reshape(n, lq, e)
    out = out @ g(mha.out_proj.weight).T + (0 if mha.out_proj.bias is None else g(mha.out_proj.bias))
    if not batch_first:
        out = np.swapaxes(out, 0, 1)
    return out, (p.mean(1) if average else p)


def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


MHA_CASES = [
    dict(),
    dict(batch_first=True),
    dict(attn_mask="bool"),
    dict(attn_mask="float", batch_first=True),
    dict(attn_mask="per_head"),
    dict(key_padding_mask=True, batch_first=True),
    dict(key_padding_mask=True, attn_mask="bool"),
    dict(is_causal=True),
    dict(average=False),
    dict(kdim=5, vdim=6),
    dict(bias=False, cross=True),
]


@pytest.mark.parametrize("case", MHA_CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()) or "plain")
@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_attention_vs_numpy(case, need_weights):
    nb.manual_seed(0)
    rng = np.random.default_rng(0)
    e, h, n, lq = 8, 2, 3, 4
    s = 5 if case.get("cross") or case.get("kdim") else lq
    bf = case.get("batch_first", False)
    mha = nn.MultiheadAttention(e, h, bias=case.get("bias", True), kdim=case.get("kdim"),
                                vdim=case.get("vdim"), batch_first=bf).double()
    with nb.no_grad():   # nonzero biases, so a wrong split would show
        for p in mha.parameters():
            if p.ndim == 1:
                p.copy_(nb.asarray(rng.normal(size=p.shape)))
    shape = (lambda length, dim: (n, length, dim)) if bf else (lambda length, dim: (length, n, dim))
    q = rng.normal(size=shape(lq, e))
    k = rng.normal(size=shape(s, case.get("kdim") or e))
    v = rng.normal(size=shape(s, case.get("vdim") or e))
    kw, npkw = {}, {"batch_first": bf, "average": case.get("average", True)}
    if case.get("attn_mask") == "bool":
        m = np.triu(np.ones((lq, s), bool), 1)
        kw["attn_mask"], npkw["attn_mask"] = nb.asarray(m), m
    elif case.get("attn_mask") == "float":
        m = rng.normal(size=(lq, s))
        kw["attn_mask"], npkw["attn_mask"] = nb.asarray(m), m
    elif case.get("attn_mask") == "per_head":
        m = rng.normal(size=(n * h, lq, s))
        kw["attn_mask"], npkw["attn_mask"] = nb.asarray(m), m
    if case.get("key_padding_mask"):
        m = np.zeros((n, s), bool)
        m[:, -1] = True
        m[0, -2] = True
        kw["key_padding_mask"], npkw["key_padding_mask"] = nb.asarray(m), m
    if case.get("is_causal"):
        kw["is_causal"] = npkw["is_causal"] = True
    if "average" in case:
        kw["average_attn_weights"] = case["average"]
    out, w = mha(nb.asarray(q), nb.asarray(k), nb.asarray(v), need_weights=need_weights, **kw)
    want_out, want_w = np_mha(mha, q, k, v, **npkw)
    assert_close(np.asarray(out), want_out, rtol=1e-9, atol=1e-11)
    if need_weights:
        assert_close(np.asarray(w), want_w, rtol=1e-9, atol=1e-11)
    else:
        assert w is None


def test_multihead_attention_unbatched_and_grads():
    nb.manual_seed(0)
    mha = nn.MultiheadAttention(4, 2)
    x = nb.randn(3, 4, requires_grad=True)
    out, w = mha(x, x, x)
    assert out.shape == (3, 4) and w.shape == (3, 3)
    out.sum().backward()
    assert x.grad is not None and all(p.grad is not None for p in mha.parameters())
    with pytest.raises(ValueError, match="multiple"):
        nn.MultiheadAttention(5, 2)


def test_deepcopy_and_pickle_keep_parameters():
    import copy
    import pickle
    net = mlp()
    for clone in (copy.deepcopy(net), pickle.loads(pickle.dumps(net))):
        ps = list(clone.parameters())
        assert len(ps) == 6 and all(isinstance(p, nn.Parameter) and p.requires_grad for p in ps)
        assert ps[0] is not net[0].weight
        x = nb.randn(3, 2)
        np.testing.assert_array_equal(np.asarray(clone(x)), np.asarray(net(x)))
