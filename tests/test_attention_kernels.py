"""nbaccel_kernels.attention: the CPU (numba + BLAS) and Triton kernels against the NumPy
reference, the reference against PyTorch, and a numerical gradient check."""
import os

import numpy as np
import pytest

from nbaccel_kernels.attention import cpu, reference

RNG = np.random.default_rng(0)

# (B, Hq, Hkv, L, S, D, Dv): GQA, L and S not multiples of the blocks, L = 1, L > S and L < S
SHAPES = [(2, 4, 2, 70, 90, 16, 16), (1, 2, 2, 1, 1, 64, 64), (1, 2, 1, 45, 33, 128, 64),
          (1, 1, 1, 33, 70, 64, 16)]
TOL = {np.float32: 2e-5, np.float64: 1e-12}


def _inputs(shape, dtype, mask=None):
    b, hq, hkv, n_q, n_k, d, d_v = shape
    q = RNG.standard_normal((b, hq, n_q, d)).astype(dtype)
    k = RNG.standard_normal((b, hkv, n_k, d)).astype(dtype)
    v = RNG.standard_normal((b, hkv, n_k, d_v)).astype(dtype)
    do = RNG.standard_normal((b, hq, n_q, d_v)).astype(dtype)
    m = None
    if mask == "additive":
        m = RNG.standard_normal((n_q, n_k)).astype(dtype)
    elif mask == "per-head":          # (1, Hq, L, S) with -inf entries and one dead row
        m = np.where(RNG.random((1, hq, n_q, n_k)) < 0.3, -np.inf, 0.0).astype(dtype)
        m[:, :, n_q // 2] = -np.inf
    return q, k, v, do, m, d ** -0.5


def _close(a, b, tol):
    np.testing.assert_allclose(a, b, rtol=tol * 10, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_cpu_kernel_matches_reference(shape, causal, dtype):
    q, k, v, do, _, scale = _inputs(shape, dtype)
    ref_out, ref_lse = reference.attention_forward(q, k, v, scale, causal)
    out, lse = cpu.attention_forward(q, k, v, scale, causal, block_q=32, block_k=32)
    assert out.dtype == dtype and lse.shape == shape[:2] + (shape[3],)
    _close(out, ref_out, TOL[dtype])
    _close(lse, ref_lse, TOL[dtype])
    ref_grads = reference.attention_backward(do, q, k, v, ref_out, ref_lse, scale, causal)
    grads = cpu.attention_backward(do, q, k, v, out, lse, scale, causal, block_q=32, block_k=16)
    for g, r, x in zip(grads, ref_grads, (q, k, v)):
        assert g.shape == x.shape and g.dtype == dtype
        _close(g, r, TOL[dtype] * 5)


@pytest.mark.parametrize("mask", ["additive", "per-head"])
def test_cpu_kernel_with_masks_and_dead_rows(mask):
    q, k, v, do, m, scale = _inputs((2, 4, 2, 40, 50, 16, 16), np.float64, mask)
    ref_out, ref_lse = reference.attention_forward(q, k, v, scale, mask=m)
    out, lse = cpu.attention_forward(q, k, v, scale, mask=m, block_q=16, block_k=16)
    _close(out, ref_out, 1e-12)
    if mask == "per-head":   # a row with nothing visible: zeros and lse = -inf
        assert np.all(out[:, :, 20] == 0) and np.all(lse[:, :, 20] == -np.inf)
    ref_grads = reference.attention_backward(do, q, k, v, ref_out, ref_lse, scale, mask=m)
    grads = cpu.attention_backward(do, q, k, v, out, lse, scale, mask=m, block_q=16, block_k=16)
    for g, r in zip(grads, ref_grads):
        assert np.isfinite(g).all()
        _close(g, r, 1e-11)


@pytest.mark.parametrize("mask", [None, "additive", "per-head"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", SHAPES + [(5, 6, 2, 17, 9, 8, 4), (16, 4, 4, 64, 64, 32, 32)],
                         ids=str)
def test_whole_score_path_matches_reference(shape, causal, dtype, mask):
    # with the default blocks these shapes are one tile a head: attention_forward/backward
    # take whole.py's stacked products over blocks of images instead of the flash tiles
    from nbaccel_kernels.attention import whole
    assert whole.fits(shape[3], shape[4], cpu.BLOCK_Q, cpu.BLOCK_K)
    q, k, v, do, m, scale = _inputs(shape, dtype, mask)
    tol = TOL[dtype]
    ref_out, ref_lse = reference.attention_forward(q, k, v, scale, causal, m)
    for threads in (1, 3):
        out, lse = cpu.attention_forward(q, k, v, scale, causal, m, threads=threads)
        _close(out, ref_out, tol)
        _close(lse, ref_lse, tol)
        ref_grads = reference.attention_backward(do, q, k, v, ref_out, ref_lse, scale, causal, m)
        grads = cpu.attention_backward(do, q, k, v, out, lse, scale, causal, m, threads=threads)
        for g, r, x in zip(grads, ref_grads, (q, k, v)):
            assert g.shape == x.shape and g.dtype == dtype
            _close(g, r, tol * 5)


def test_whole_score_path_writes_strided_outputs_and_accumulates():
    # the fused op hands the kernel views of a packed buffer (strided rows) and zero-filled
    # gradient views to add into: results must land in those views, not in copies
    q, k, v, do, _, scale = _inputs((3, 4, 2, 10, 12, 8, 6), np.float64)
    packed = np.full((3, 4, 10, 7), 7.0)
    cpu.attention_forward(q, k, v, scale, True, out=packed[..., :-1], lse=packed[..., -1])
    ref_out, ref_lse = reference.attention_forward(q, k, v, scale, True)
    _close(packed[..., :-1], ref_out, 1e-12)
    _close(packed[..., -1], ref_lse, 1e-12)
    dq, dk, dv = np.zeros_like(q), np.ones_like(k), np.ones_like(v)
    cpu.attention_backward(do, q, k, v, ref_out, ref_lse, scale, True, dq=dq, dk=dk, dv=dv)
    rq, rk, rv = reference.attention_backward(do, q, k, v, ref_out, ref_lse, scale, True)
    _close(dq, rq, 1e-11)
    _close(dk, rk + 1, 1e-11)
    _close(dv, rv + 1, 1e-11)


def test_cpu_kernel_default_blocks_and_threads_agree():
    q, k, v, do, _, scale = _inputs((1, 3, 3, 300, 300, 64, 64), np.float32)
    one, _ = cpu.attention_forward(q, k, v, scale, True, threads=1)
    two, _ = cpu.attention_forward(q, k, v, scale, True, threads=2)
    np.testing.assert_array_equal(one, two)      # each task is computed the same way


def test_numerical_gradient_of_the_cpu_kernel():
    q, k, v, do, m, scale = _inputs((1, 2, 1, 3, 4, 3, 2), np.float64, "additive")

    def loss(q, k, v):
        return float((cpu.attention_forward(q, k, v, scale, True, m)[0] * do).sum())

    out, lse = cpu.attention_forward(q, k, v, scale, True, m)
    grads = cpu.attention_backward(do, q, k, v, out, lse, scale, True, m)
    eps = 1e-6
    for which, g in enumerate(grads):
        args = [q, k, v]
        num = np.zeros_like(args[which])
        for idx in np.ndindex(num.shape):
            plus = [a.copy() for a in args]
            minus = [a.copy() for a in args]
            plus[which][idx] += eps
            minus[which][idx] -= eps
            num[idx] = (loss(*plus) - loss(*minus)) / (2 * eps)
        np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("causal", [False, True])
def test_reference_matches_torch(causal):
    torch = pytest.importorskip("torch")
    q, k, v, do, m, scale = _inputs((2, 4, 2, 20, 30, 16, 8), np.float64, "additive")
    if causal:
        m = None
    out, lse = reference.attention_forward(q, k, v, scale, causal, m)
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    t_out = torch.nn.functional.scaled_dot_product_attention(
        tq, tk, tv, attn_mask=None if m is None else torch.tensor(m), is_causal=causal,
        scale=scale, enable_gqa=True)
    t_out.backward(torch.tensor(do))
    np.testing.assert_allclose(out, t_out.detach().numpy(), rtol=1e-10, atol=1e-12)
    grads = reference.attention_backward(do, q, k, v, out, lse, scale, causal, m)
    for g, t in zip(grads, (tq, tk, tv)):
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_kernel_input_errors_name_the_shapes():
    q = np.zeros((1, 2, 4, 8), np.float32)
    with pytest.raises(ValueError, match=r"\(1, 2, 4, 8\)"):
        cpu.attention_forward(q[0], q, q, 1.0)
    with pytest.raises(ValueError, match="multiple of key/value heads"):
        cpu.attention_forward(np.zeros((1, 3, 4, 8), np.float32), q, q, 1.0)
    with pytest.raises(ValueError, match=r"mask of shape \(3, 3\)"):
        cpu.attention_forward(q, q, q, 1.0, mask=np.zeros((3, 3), np.float32))
    with pytest.raises(TypeError, match="floating point"):
        cpu.attention_forward(q.astype(np.int32), q.astype(np.int32), q.astype(np.int32), 1.0)


# ---- Triton, through its interpreter on NumPy arrays ---------------------------------------------

@pytest.fixture(scope="module")
def triton_kernels():
    import sys
    old = os.environ.get("TRITON_INTERPRET")
    # read when triton's own library functions and our kernels are decorated: before import
    was_imported = "triton" in sys.modules
    os.environ["TRITON_INTERPRET"] = "1"
    pytest.importorskip("triton")
    from nbaccel_kernels.attention import triton as tk
    if not tk._kernels()[0].__class__.__name__.startswith("Interpreted") or \
            (was_imported and old != "1"):
        pytest.skip("triton was imported without TRITON_INTERPRET=1 earlier in this process")
    yield tk
    if old is None:
        del os.environ["TRITON_INTERPRET"]
    else:
        os.environ["TRITON_INTERPRET"] = old


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", [(1, 2, 1, 37, 21, 16, 16), (1, 1, 1, 1, 1, 16, 16),
                                   (1, 2, 2, 20, 40, 32, 16)], ids=str)
def test_triton_kernels_match_reference(triton_kernels, shape, causal):
    q, k, v, do, _, scale = _inputs(shape, np.float32)
    ref_out, ref_lse = reference.attention_forward(q, k, v, scale, causal)
    out, lse = triton_kernels.attention_forward(q, k, v, scale, causal, block_m=16, block_n=16)
    _close(out, ref_out, 2e-5)
    _close(lse, ref_lse, 2e-5)
    ref_grads = reference.attention_backward(do, q, k, v, ref_out, ref_lse, scale, causal)
    grads = triton_kernels.attention_backward(do, q, k, v, out, lse, scale, causal,
                                              block_m=16, block_n=16)
    for g, r in zip(grads, ref_grads):
        _close(g, r, 1e-4)


def test_triton_forward_in_float16(triton_kernels):
    q, k, v, _, _, scale = _inputs((1, 2, 1, 24, 20, 16, 16), np.float16)
    ref_out, _ = reference.attention_forward(*(a.astype(np.float32) for a in (q, k, v)), scale, True)
    out, lse = triton_kernels.attention_forward(q, k, v, scale, True, block_m=16, block_n=16)
    assert out.dtype == np.float16 and lse.dtype == np.float32
    np.testing.assert_allclose(out.astype(np.float32), ref_out, rtol=1e-2, atol=5e-3)


@pytest.mark.parametrize("mask", ["additive", "per-head"])
def test_triton_kernels_with_masks_and_dead_rows(triton_kernels, mask):
    q, k, v, do, m, scale = _inputs((1, 2, 1, 20, 24, 16, 16), np.float32, mask)
    ref_out, ref_lse = reference.attention_forward(q, k, v, scale, mask=m)
    out, lse = triton_kernels.attention_forward(q, k, v, scale, mask=m, block_m=16, block_n=16)
    _close(out, ref_out, 2e-5)
    ref_grads = reference.attention_backward(do, q, k, v, ref_out, ref_lse, scale, mask=m)
    grads = triton_kernels.attention_backward(do, q, k, v, out, lse, scale, mask=m,
                                              block_m=16, block_n=16)
    for g, r in zip(grads, ref_grads):
        assert np.isfinite(g).all()
        _close(g, r, 1e-4)


def test_vectorisable_exp_is_accurate_and_exact_at_the_ends():
    from numba import njit

    from nbaccel_kernels.attention._fastexp import vexp

    @njit
    def apply(x):
        out = np.empty_like(x)
        for i in range(x.size):
            out[i] = vexp(x[i])
        return out

    x = np.concatenate([np.linspace(-87, 0, 20001), np.linspace(0, 80, 2001)]).astype(np.float32)
    got = apply(x)
    want = np.exp(x.astype(np.float64))
    assert np.max(np.abs(got - want) / want) < 3e-7
    edge = apply(np.array([-np.inf, -200.0, -88.0, 0.0], np.float32))
    assert edge[0] == 0 and edge[1] == 0 and edge[2] == 0 and edge[3] == 1
    assert apply(np.array([-1.5])).dtype == np.float64          # float64 takes math.exp


def test_whole_score_path_takes_strided_heads():
    # a GPT hands (B, L, H, D) projections transposed to (B, H, L, D): rows contiguous, heads
    # strided (read in place); a value whose last axis is strided is copied first
    rng = np.random.default_rng(5)
    q, k = (rng.standard_normal((3, 10, 4, 8)).transpose(0, 2, 1, 3) for _ in range(2))
    v = rng.standard_normal((3, 10, 4, 12)).transpose(0, 2, 1, 3)[..., ::2]
    do = rng.standard_normal((3, 4, 10, 6))
    ref_out, ref_lse = reference.attention_forward(q, k, v, 0.3, True)
    out, lse = cpu.attention_forward(q, k, v, 0.3, True)
    _close(out, ref_out, 1e-12)
    _close(lse, ref_lse, 1e-12)
    for g, r in zip(cpu.attention_backward(do, q, k, v, out, lse, 0.3, True),
                    reference.attention_backward(do, q, k, v, ref_out, ref_lse, 0.3, True)):
        _close(g, r, 1e-11)
