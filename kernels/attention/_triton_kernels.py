"""The Triton kernels of :mod:`.triton` (imported only when they are first used, so that
Triton stays optional and ``TRITON_INTERPRET=1`` set before that takes effect)."""
import triton
import triton.language as tl


@triton.jit
def forward_kernel(Q, K, V, O, LSE, s_qb, s_qh, s_ql, s_kb, s_kh, s_kl, s_vb, s_vh, s_vl,
                   s_ob, s_oh, s_ol, s_lb, s_lh, HQ, GROUP, N_Q, N_K, scale,
                   M, s_mb, s_mh, s_ml, s_ms, HAS_MASK: tl.constexpr,
                   D: tl.constexpr, DV: tl.constexpr, BLOCK_D: tl.constexpr,
                   BLOCK_DV: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   CAUSAL: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // HQ
    h = pid_bh % HQ
    kh = h // GROUP
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, BLOCK_D)
    vdims = tl.arange(0, BLOCK_DV)
    q = tl.load(Q + b * s_qb + h * s_qh + rows[:, None] * s_ql + dims[None, :],
                mask=(rows[:, None] < N_Q) & (dims[None, :] < D), other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
    end = N_K
    if CAUSAL:
        end = tl.minimum(N_K, (pid_m + 1) * BLOCK_M)
    for start in range(0, end, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        kt = tl.load(K + b * s_kb + kh * s_kh + cols[None, :] * s_kl + dims[:, None],
                     mask=(cols[None, :] < N_K) & (dims[:, None] < D), other=0.0)
        s = tl.dot(q, kt) * scale
        if HAS_MASK:
            s += mask_tile(M, b, h, rows, cols, s_mb, s_mh, s_ml, s_ms, N_Q, N_K)
        visible = cols[None, :] < N_K
        if CAUSAL:
            visible = visible & (cols[None, :] <= rows[:, None])
        s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp(s - m_safe[:, None])
        alpha = tl.exp(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + b * s_vb + kh * s_vh + cols[:, None] * s_vl + vdims[None, :],
                    mask=(cols[:, None] < N_K) & (vdims[None, :] < DV), other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    seen = l_i > 0
    l_safe = tl.where(seen, l_i, 1.0)
    out = acc / l_safe[:, None]
    lse = tl.where(seen, m_i + tl.log(l_safe), float("-inf"))
    tl.store(O + b * s_ob + h * s_oh + rows[:, None] * s_ol + vdims[None, :],
             out.to(O.dtype.element_ty), mask=(rows[:, None] < N_Q) & (vdims[None, :] < DV))
    tl.store(LSE + b * s_lb + h * s_lh + rows, lse, mask=rows < N_Q)

@triton.jit
def mask_tile(M, b, h, rows, cols, s_mb, s_mh, s_ml, s_ms, N_Q, N_K):
    """The additive mask's tile (broadcast dims have stride 0)."""
    return tl.load(M + b * s_mb + h * s_mh + rows[:, None] * s_ml + cols[None, :] * s_ms,
                   mask=(rows[:, None] < N_Q) & (cols[None, :] < N_K), other=0.0).to(tl.float32)


@triton.jit
def probs_tile(q, kt, lse, rows, cols, N_Q, N_K, scale, M, b, h, s_mb, s_mh, s_ml, s_ms,
               HAS_MASK: tl.constexpr, CAUSAL: tl.constexpr):
    """exp(q k^T scale + mask - lse), 0 where masked, outside the arrays, or on dead rows."""
    s = tl.dot(q, kt) * scale
    if HAS_MASK:
        s += mask_tile(M, b, h, rows, cols, s_mb, s_mh, s_ml, s_ms, N_Q, N_K)
    live = (rows[:, None] < N_Q) & (cols[None, :] < N_K) & (lse[:, None] != float("-inf"))
    if CAUSAL:
        live = live & (cols[None, :] <= rows[:, None])
    shift = tl.where(lse == float("-inf"), 0.0, lse)
    return tl.where(live, tl.exp(s - shift[:, None]), 0.0)

@triton.jit
def dkdv_kernel(Q, K, V, DO, LSE, DELTA, DK, DV_, s_qb, s_qh, s_ql, s_kb, s_kh, s_kl,
                s_vb, s_vh, s_vl, s_lb, s_lh, HKV, GROUP, N_Q, N_K, scale,
                M, s_mb, s_mh, s_ml, s_ms, HAS_MASK: tl.constexpr,
                D: tl.constexpr, DV: tl.constexpr, BLOCK_D: tl.constexpr,
                BLOCK_DV: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                CAUSAL: tl.constexpr):
    # do is contiguous (B, HQ, L, DV): its offsets need no stride arguments
    pid_n = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // HKV
    kh = pid_bh % HKV
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    dims = tl.arange(0, BLOCK_D)
    vdims = tl.arange(0, BLOCK_DV)
    kt = tl.load(K + b * s_kb + kh * s_kh + cols[None, :] * s_kl + dims[:, None],
                 mask=(cols[None, :] < N_K) & (dims[:, None] < D), other=0.0)
    vt = tl.load(V + b * s_vb + kh * s_vh + cols[None, :] * s_vl + vdims[:, None],
                 mask=(cols[None, :] < N_K) & (vdims[:, None] < DV), other=0.0)
    dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_DV], tl.float32)
    first = 0
    if CAUSAL:
        first = (pid_n * BLOCK_N // BLOCK_M) * BLOCK_M   # earlier rows see none of it
    for g in range(0, GROUP):
        h = kh * GROUP + g
        for start in range(first, N_Q, BLOCK_M):
            rows = start + tl.arange(0, BLOCK_M)
            q = tl.load(Q + b * s_qb + h * s_qh + rows[:, None] * s_ql + dims[None, :],
                        mask=(rows[:, None] < N_Q) & (dims[None, :] < D), other=0.0)
            do = tl.load(DO + (b * HKV * GROUP + h) * N_Q * DV + rows[:, None] * DV
                         + vdims[None, :],
                         mask=(rows[:, None] < N_Q) & (vdims[None, :] < DV), other=0.0)
            lse = tl.load(LSE + b * s_lb + h * s_lh + rows, mask=rows < N_Q,
                          other=float("-inf"))
            delta = tl.load(DELTA + b * s_lb + h * s_lh + rows, mask=rows < N_Q, other=0.0)
            p = probs_tile(q, kt, lse, rows, cols, N_Q, N_K, scale, M, b, h, s_mb, s_mh, s_ml,
                       s_ms, HAS_MASK, CAUSAL)
            dv += tl.dot(tl.trans(p).to(do.dtype), do)
            dp = tl.dot(do, vt)
            ds = p * (dp - delta[:, None])
            dk += tl.dot(tl.trans(ds).to(q.dtype), q)
    dk = dk * scale
    tl.store(DK + b * s_kb + kh * s_kh + cols[:, None] * s_kl + dims[None, :],
             dk.to(DK.dtype.element_ty), mask=(cols[:, None] < N_K) & (dims[None, :] < D))
    tl.store(DV_ + b * s_vb + kh * s_vh + cols[:, None] * s_vl + vdims[None, :],
             dv.to(DV_.dtype.element_ty), mask=(cols[:, None] < N_K) & (vdims[None, :] < DV))

@triton.jit
def dq_kernel(Q, K, V, DO, LSE, DELTA, DQ, s_qb, s_qh, s_ql, s_kb, s_kh, s_kl,
              s_vb, s_vh, s_vl, s_lb, s_lh, HQ, GROUP, N_Q, N_K, scale,
              M, s_mb, s_mh, s_ml, s_ms, HAS_MASK: tl.constexpr,
              D: tl.constexpr, DV: tl.constexpr, BLOCK_D: tl.constexpr,
              BLOCK_DV: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              CAUSAL: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // HQ
    h = pid_bh % HQ
    kh = h // GROUP
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, BLOCK_D)
    vdims = tl.arange(0, BLOCK_DV)
    q = tl.load(Q + b * s_qb + h * s_qh + rows[:, None] * s_ql + dims[None, :],
                mask=(rows[:, None] < N_Q) & (dims[None, :] < D), other=0.0)
    do = tl.load(DO + pid_bh * N_Q * DV + rows[:, None] * DV + vdims[None, :],
                 mask=(rows[:, None] < N_Q) & (vdims[None, :] < DV), other=0.0)
    lse = tl.load(LSE + b * s_lb + h * s_lh + rows, mask=rows < N_Q, other=float("-inf"))
    delta = tl.load(DELTA + b * s_lb + h * s_lh + rows, mask=rows < N_Q, other=0.0)
    dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    end = N_K
    if CAUSAL:
        end = tl.minimum(N_K, (pid_m + 1) * BLOCK_M)
    for start in range(0, end, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        kt = tl.load(K + b * s_kb + kh * s_kh + cols[None, :] * s_kl + dims[:, None],
                     mask=(cols[None, :] < N_K) & (dims[:, None] < D), other=0.0)
        vt = tl.load(V + b * s_vb + kh * s_vh + cols[None, :] * s_vl + vdims[:, None],
                     mask=(cols[None, :] < N_K) & (vdims[:, None] < DV), other=0.0)
        p = probs_tile(q, kt, lse, rows, cols, N_Q, N_K, scale, M, b, h, s_mb, s_mh, s_ml,
                       s_ms, HAS_MASK, CAUSAL)
        dp = tl.dot(do, vt)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(kt.dtype), tl.trans(kt))
    dq = dq * scale
    tl.store(DQ + b * s_qb + h * s_qh + rows[:, None] * s_ql + dims[None, :],
             dq.to(DQ.dtype.element_ty), mask=(rows[:, None] < N_Q) & (dims[None, :] < D))
