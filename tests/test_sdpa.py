"""nb.nn.functional.scaled_dot_product_attention: the flash and math backends against each
other and PyTorch, backend choice, autograd, the compiler's extern node, and bad input."""
import numpy as np
import pytest

import nbaccel as nb
from nbaccel.nn.attention import SDPBackend, sdpa_kernel

F = nb.nn.functional
RNG = np.random.default_rng(1)
BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]


def _arrays(b=2, hq=4, hkv=4, n_q=19, n_k=23, d=16, d_v=16, dtype=np.float32):
    return (RNG.standard_normal((b, hq, n_q, d)).astype(dtype),
            RNG.standard_normal((b, hkv, n_k, d)).astype(dtype),
            RNG.standard_normal((b, hkv, n_k, d_v)).astype(dtype))


def _run(arrays, backend, grad=True, **kw):
    """(out, (dq, dk, dv)) of sum(out * w) for a fixed w, through one backend."""
    ts = [nb.tensor(a, requires_grad=grad) for a in arrays]
    with sdpa_kernel([backend]):
        out = F.scaled_dot_product_attention(*ts, **kw)
    if not grad:
        return out.numpy(), None
    w = np.cos(np.arange(out.numel())).reshape(out.shape).astype(out.numpy().dtype)
    (out * nb.tensor(w)).sum().backward()
    return out.numpy(), tuple(t.grad.numpy() for t in ts)


def _torch(arrays, **kw):
    torch = pytest.importorskip("torch")
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    mask = kw.pop("attn_mask", None)
    out = torch.nn.functional.scaled_dot_product_attention(
        *ts, attn_mask=None if mask is None else torch.tensor(np.asarray(mask)), **kw)
    w = np.cos(np.arange(out.numel())).reshape(out.shape).astype(arrays[0].dtype)
    (out * torch.tensor(w)).sum().backward()
    return out.detach().numpy(), tuple(t.grad.numpy() for t in ts)


def _same(a, b, tol):
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


CASES = {
    "plain": dict(arrays={}, kw={}),
    "causal": dict(arrays={}, kw=dict(is_causal=True)),
    "gqa": dict(arrays=dict(hq=4, hkv=2), kw=dict(enable_gqa=True, is_causal=True)),
    "L=1": dict(arrays=dict(n_q=1, n_k=1, d=64, d_v=64), kw={}),
    "d128": dict(arrays=dict(n_q=9, n_k=33, d=128, d_v=32), kw=dict(scale=0.3)),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_flash_and_math_agree_with_torch(case, dtype):
    spec = CASES[case]
    arrays = _arrays(dtype=dtype, **spec["arrays"])
    tol = 2e-5 if dtype == np.float32 else 1e-10
    want, want_grads = _torch(arrays, **spec["kw"])
    for backend in BACKENDS:
        out, grads = _run(arrays, backend, **spec["kw"])
        assert out.dtype == dtype
        _same(out, want, tol)
        for g, w in zip(grads, want_grads):
            _same(g, w, tol * 5)


@pytest.mark.parametrize("mask_kind", ["bool", "additive", "bool-broadcast"])
@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
def test_masks_broadcast_like_torch(backend, mask_kind):
    arrays = _arrays(dtype=np.float64)
    if mask_kind == "bool":
        mask = RNG.random((2, 4, 19, 23)) > 0.4
        mask[0, 1, 5] = False      # a fully masked row: zeros, as PyTorch
    elif mask_kind == "additive":
        mask = RNG.standard_normal((19, 23))
    else:
        mask = RNG.random((2, 1, 1, 23)) > 0.3
    want, want_grads = _torch(arrays, attn_mask=mask)
    out, grads = _run(arrays, backend, attn_mask=nb.tensor(mask))
    _same(out, want, 1e-10)
    for g, w in zip(grads, want_grads):
        _same(g, w, 1e-9)
    if mask_kind == "bool":
        assert np.all(out[0, 1, 5] == 0) and np.all(grads[0][0, 1, 5] == 0)


@pytest.mark.parametrize("shape", [(7, 8), (3, 7, 8), (2, 3, 7, 8)], ids=str)
def test_lower_ranks_take_the_flash_path(shape):
    q = RNG.standard_normal(shape).astype(np.float32)
    out, _ = _run((q, q, q), SDPBackend.FLASH_ATTENTION, grad=False, is_causal=True)
    ref, _ = _run((q, q, q), SDPBackend.MATH, grad=False, is_causal=True)
    assert out.shape == shape
    _same(out, ref, 2e-6)


def _ops_on_tape(out):
    """The names of the ops that autograd recorded behind ``out``."""
    names, todo, seen = set(), [out.grad_fn], set()
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names.add(node.name)
        todo.extend(fn for fn, _ in node.next_functions)
    return names


def _backend_ran(**kw):
    q, k, v = (nb.tensor(a, requires_grad=True) for a in _arrays())
    names = _ops_on_tape(F.scaled_dot_product_attention(q, k, v, **kw))
    # the math op differentiates through its decomposition: its tape holds the matmuls
    assert ("flash_attention" in names) != ("matmul" in names), names
    return "flash" if "flash_attention" in names else "math"


def test_automatic_choice_and_sdpa_kernel():
    assert _backend_ran(is_causal=True) == "flash"
    with sdpa_kernel(SDPBackend.MATH):
        assert _backend_ran(is_causal=True) == "math"
    # dropout needs the math path; the automatic choice falls back to it by itself
    assert _backend_ran(dropout_p=0.2) == "math"
    with sdpa_kernel([SDPBackend.MATH, SDPBackend.FLASH_ATTENTION]):
        assert _backend_ran() == "flash"


def test_a_backend_that_cannot_take_the_inputs_says_why():
    q, k, v = (nb.tensor(a) for a in _arrays())
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        with pytest.raises(RuntimeError, match="FLASH_ATTENTION: dropout_p=0.5"):
            F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
        with pytest.raises(RuntimeError, match="takes float32 or float64, got float16"):
            F.scaled_dot_product_attention(*(t.astype("float16") for t in (q, k, v)))
        mask = nb.zeros((19, 23), requires_grad=True)
        with pytest.raises(RuntimeError, match="no gradient for the mask"):
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]):
        with pytest.raises(RuntimeError, match="EFFICIENT_ATTENTION is not implemented"):
            F.scaled_dot_product_attention(q, k, v)
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]):    # restored after
        F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)


def test_dropout_uses_the_seeded_generator():
    q = nb.tensor(_arrays()[0])
    nb.manual_seed(3)
    a = F.scaled_dot_product_attention(q, q, q, dropout_p=0.3).numpy()
    nb.manual_seed(3)
    b = F.scaled_dot_product_attention(q, q, q, dropout_p=0.3).numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, F.scaled_dot_product_attention(q, q, q).numpy())


def test_compiled_attention_is_one_extern_kernel_with_gradients():
    x0 = RNG.standard_normal((2, 24, 32)).astype(np.float32)
    w0 = (RNG.standard_normal((32, 96)) * 0.2).astype(np.float32)

    def block(x, w):
        qkv = (x @ w).reshape((2, 24, 3, 4, 8)).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True)
        return (o.permute(0, 2, 1, 3).reshape((2, 24, 32)) * 0.5).tanh()

    cf = nb.compile(block)
    grads = []
    for fn in (block, cf):
        x, w = nb.tensor(x0), nb.tensor(w0, requires_grad=True)
        out = fn(x, w)
        out.sum().backward()
        grads.append((out.numpy(), w.grad.numpy()))
    _same(grads[0][0], grads[1][0], 1e-6)
    _same(grads[0][1], grads[1][1], 1e-5)
    flash = [k for k in cf.report.kernels if k["ops"] == ["flash_attention"]]
    assert len(flash) == 1 and flash[0]["backend"] == "flash" and flash[0]["device"] == "cpu"


def test_multihead_attention_runs_the_fused_kernel():
    mha = nb.nn.MultiheadAttention(16, 4, batch_first=True)
    x = nb.tensor(RNG.standard_normal((2, 10, 16)).astype(np.float32))
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        out, w = mha(x, x, x, need_weights=False, is_causal=True)
    causal = np.triu(np.ones((10, 10), bool), 1)
    ref, _ = mha(x, x, x, attn_mask=nb.tensor(causal))      # need_weights: the explicit path
    assert w is None and "flash_attention" in _ops_on_tape(out)
    _same(out.numpy(), ref.numpy(), 2e-6)
    # a bool key-padding mask also takes the fused kernel (as an additive mask)
    pad = nb.tensor(np.arange(10)[None, :] >= np.array([[10], [6]]))
    out, _ = mha(x, x, x, key_padding_mask=pad, need_weights=False)
    ref, _ = mha(x, x, x, key_padding_mask=pad)
    assert "flash_attention" in _ops_on_tape(out)
    _same(out.numpy(), ref.numpy(), 2e-6)


BAD = [
    ("rank", lambda q: (q[0, 0, 0], q, q), {}, ValueError, r"at least 2 dims.*query \(16,\)"),
    ("heads", lambda q: (q, q[:, :3], q[:, :3]), {}, ValueError, r"don't broadcast.*key \(2, 3, 19, 16\)"),
    ("gqa heads", lambda q: (q, q[:, :3], q[:, :3]), dict(enable_gqa=True), ValueError,
     r"query heads \(4\) must be a multiple"),
    ("dims", lambda q: (q, q[..., :8], q), {}, ValueError, r"shapes don't match.*key \(2, 4, 19, 8\)"),
    ("mask shape", lambda q: (q, q, q), dict(attn_mask=np.zeros((3, 3), bool)), ValueError,
     r"attn_mask of shape \(3, 3\) doesn't broadcast to the scores' shape \(2, 4, 19, 19\)"),
    ("mask dtype", lambda q: (q, q, q), dict(attn_mask=np.zeros((19, 19), np.int64)), TypeError,
     "attn_mask must be bool or floating point, got int64"),
    ("int inputs", lambda q: (q.astype("int32"), q, q), {}, TypeError,
     r"query must be a floating point tensor, got int32 \(query \(2, 4, 19, 16\)"),
    ("scale", lambda q: (q, q, q), dict(scale=float("inf")), ValueError, "scale must be finite"),
    ("mask and causal", lambda q: (q, q, q), dict(attn_mask=np.ones((19, 19), bool), is_causal=True),
     RuntimeError, "attn_mask or is_causal"),
    ("dropout", lambda q: (q, q, q), dict(dropout_p=1.5), ValueError, "between 0 and 1"),
]


@pytest.mark.parametrize("name,args,kw,exc,match", BAD, ids=[b[0] for b in BAD])
def test_bad_input_names_the_shapes(name, args, kw, exc, match):
    q = nb.tensor(_arrays()[0])
    kw = {k: (nb.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
    with pytest.raises(exc, match=match):
        F.scaled_dot_product_attention(*args(q), **kw)


def test_backend_labels_and_sdpa_kernel_state():
    from nbaccel.nn.attention import enabled_backends
    from nbaccel.ops import OPS
    assert OPS["flash_attention"].extern_backend({"kernel": "cpu"}) == "flash"
    assert OPS["flash_attention_backward"].extern_backend({"kernel": "triton"}) == "triton-flash"
    before = enabled_backends()
    with sdpa_kernel([SDPBackend.MATH, SDPBackend.FLASH_ATTENTION]):
        assert enabled_backends()[0] == SDPBackend.FLASH_ATTENTION     # flash is preferred
        with sdpa_kernel([SDPBackend.MATH, SDPBackend.FLASH_ATTENTION], set_priority=True):
            assert enabled_backends() == [SDPBackend.MATH, SDPBackend.FLASH_ATTENTION]
    assert enabled_backends() == before
    with pytest.raises(TypeError, match="SDPBackend"):
        with sdpa_kernel(["flash"]):
            pass
