"""FlashAttention-2 on the CPU: tiled online softmax with BLAS tiles and numba softmax work.

The forward splits the work into (batch, head, query block) tasks. A task walks the key
blocks, computing each score tile with one BLAS call (``np.matmul`` on tile views), folding it
into a running row max, row sum and output (``_tiles.softmax_tile``, numba, vectorised exp),
and multiplying the tile's probabilities into the output with a second BLAS call. Extra
memory is O(block²) per thread plus the (B, H, L) log-sum-exp, never the L×S score matrix.
Causal tasks stop at the diagonal block.

The backward rebuilds each probability tile from the saved log-sum-exp. A task owns one
(batch, key/value head): it walks key blocks, and for each the query blocks of every query
head in its group, accumulating dK and dV for the key block and dQ for the query rows it owns,
so no two threads write the same memory.

When each (batch, head) is one tile (short sequences, a small GPT's T = 64), the tiling gains
nothing and its per-task Python dominates: ``whole.py`` then computes whole score matrices for
blocks of images with stacked products instead.

Both BLAS (``np.matmul``) and the numba functions release the GIL, so tasks run on a small
thread pool (``NBACCEL_KERNEL_THREADS``, else ``NUMBA_NUM_THREADS``, else the CPU count).

>>> import numpy as np
>>> q = np.random.default_rng(0).standard_normal((1, 2, 5, 8)).astype(np.float32)
>>> out, lse = attention_forward(q, q, q, scale=8 ** -0.5, causal=True)
>>> out.shape, lse.shape
((1, 2, 5, 8), (1, 2, 5))
"""
from __future__ import annotations

import numpy as np

from .. import _tasks
from . import _tiles, whole
from .checks import check_inputs

BLOCK_Q = 128
BLOCK_K = 256

num_threads = _tasks.num_threads
_run = _tasks.run_tasks


def _scratch(state, name, n, dtype):
    """A per-thread flat buffer of at least n elements."""
    buf = state.get(name)
    if buf is None or buf.size < n or buf.dtype != dtype:
        buf = state[name] = np.empty(n, dtype)
    return buf


def _tile(state, name, rows, cols, dtype):
    return _scratch(state, name, rows * cols, dtype)[:rows * cols].reshape(rows, cols)


def _mask_views(mask, shape, dtype):
    """The mask broadcast to (B, H, L, S) as a view, or a dummy for the numba signature."""
    if mask is None:
        return None, np.zeros((1, 1), dtype)
    return np.broadcast_to(np.asarray(mask, dtype=dtype), shape), None


def attention_forward(q, k, v, scale, causal=False, mask=None, block_q=BLOCK_Q, block_k=BLOCK_K,
                      threads=None, out=None, lse=None):
    """``(out, lse)`` of softmax(q @ k^T * scale + mask) @ v (layout as in ``reference``).
    ``out`` (B, Hq, L, Dv) and ``lse`` (B, Hq, L) may be given (any strides) to be written."""
    b, hq, n_q, hkv, n_k, d_v, dt = check_inputs(q, k, v, mask)
    group = hq // hkv
    qs = np.multiply(q, dt.type(scale), dtype=dt)      # the scale folded into q once
    out = np.empty((b, hq, n_q, d_v), dt) if out is None else out
    lse = np.empty((b, hq, n_q), dt) if lse is None else lse
    mask4, dummy = _mask_views(mask, (b, hq, n_q, n_k), dt)
    if whole.fits(n_q, n_k, block_q, block_k):      # one tile a head: no tiling to gain
        whole.forward(qs, k, v, causal, mask4, out, lse, threads, dt)
        return out, lse
    k, v = np.ascontiguousarray(k), np.ascontiguousarray(v)
    # the last query blocks of a causal task see the most keys: start with them
    tasks = [(i, bi, h) for i in range(0, n_q, block_q) for bi in range(b) for h in range(hq)]
    if causal:
        tasks.reverse()

    def work(task, state):
        i0, bi, h = task
        i1 = min(i0 + block_q, n_q)
        rows = i1 - i0
        kh = h // group
        m = np.full(rows, -np.inf, dt)
        l = np.zeros(rows, dt)
        acc = np.zeros((rows, d_v), dt)
        end = min(n_k, i1) if causal else n_k
        q_blk = qs[bi, h, i0:i1]
        for j0 in range(0, end, block_k):
            j1 = min(j0 + block_k, end)
            s = _tile(state, "s", rows, j1 - j0, dt)
            np.matmul(q_blk, k[bi, kh, j0:j1].T, out=s)
            tile_mask = dummy if mask4 is None else mask4[bi, h, i0:i1, j0:j1]
            _tiles.softmax_tile(s, m, l, acc, i0, j0, causal and j1 > i0, tile_mask,
                                mask4 is not None)
            pv = _tile(state, "pv", rows, d_v, dt)
            np.matmul(s, v[bi, kh, j0:j1], out=pv)
            _tiles.add_into(acc, pv)
        _tiles.finish_rows(acc, m, l, out[bi, h, i0:i1], lse[bi, h, i0:i1])

    _run(tasks, work, threads)
    return out, lse


def attention_backward(do, q, k, v, out, lse, scale, causal=False, mask=None, block_q=BLOCK_Q,
                       block_k=BLOCK_K, threads=None, dq=None, dk=None, dv=None):
    """``(dq, dk, dv)``: gradients of sum(out * do), probabilities rebuilt from ``lse``.
    ``dq``, ``dk``, ``dv`` may be given, zero-filled, to be accumulated into."""
    b, hq, n_q, hkv, n_k, d_v, dt = check_inputs(q, k, v, mask)
    group = hq // hkv
    d_qk = q.shape[-1]
    qs = np.multiply(q, dt.type(scale), dtype=dt)   # dK = dS^T (scale q), dQ = scale dS K
    do = np.asarray(do, dt)          # rows may be strided: BLAS takes a leading dimension
    if do.strides[-1] != dt.itemsize:
        do = np.ascontiguousarray(do)
    lse = np.ascontiguousarray(lse, dt)
    delta = np.einsum("bhld,bhld->bhl", do, np.asarray(out, dt))   # rowsum(P * dP), O(L)
    dq = np.zeros(q.shape, dt) if dq is None else dq
    dk = np.zeros(k.shape, dt) if dk is None else dk
    dv = np.zeros(v.shape, dt) if dv is None else dv
    mask4, dummy = _mask_views(mask, (b, hq, n_q, n_k), dt)
    if whole.fits(n_q, n_k, block_q, block_k):
        whole.backward(do, qs, k, v, lse, delta, causal, mask4, dq, dk, dv, threads, dt)
        dq *= dt.type(scale)
        return dq, dk, dv
    k, v = np.ascontiguousarray(k), np.ascontiguousarray(v)
    tasks = [(bi, kh) for bi in range(b) for kh in range(hkv)]

    def work(task, state):
        bi, kh = task
        for j0 in range(0, n_k, block_k):
            j1 = min(j0 + block_k, n_k)
            cols = j1 - j0
            k_blk, v_blk = k[bi, kh, j0:j1], v[bi, kh, j0:j1]
            dk_blk, dv_blk = dk[bi, kh, j0:j1], dv[bi, kh, j0:j1]
            first = (j0 // block_q) * block_q if causal else 0   # earlier rows see none of it
            for h in range(kh * group, (kh + 1) * group):
                for i0 in range(first, n_q, block_q):
                    i1 = min(i0 + block_q, n_q)
                    rows = i1 - i0
                    q_blk, do_blk = qs[bi, h, i0:i1], do[bi, h, i0:i1]
                    p = _tile(state, "p", rows, cols, dt)
                    np.matmul(q_blk, k_blk.T, out=p)
                    tile_mask = dummy if mask4 is None else mask4[bi, h, i0:i1, j0:j1]
                    _tiles.probs_tile(p, lse[bi, h, i0:i1], i0, j0, causal and j1 > i0,
                                      tile_mask, mask4 is not None)
                    tmp_v = _tile(state, "dv", cols, d_v, dt)
                    np.matmul(p.T, do_blk, out=tmp_v)
                    _tiles.add_into(dv_blk, tmp_v)
                    ds = _tile(state, "ds", rows, cols, dt)
                    np.matmul(do_blk, v_blk.T, out=ds)
                    _tiles.dscores_tile(p, ds, delta[bi, h, i0:i1])
                    tmp_k = _tile(state, "dk", cols, d_qk, dt)
                    np.matmul(ds.T, q_blk, out=tmp_k)
                    _tiles.add_into(dk_blk, tmp_k)
                    tmp_q = _tile(state, "dq", rows, d_qk, dt)
                    np.matmul(ds, k_blk, out=tmp_q)
                    _tiles.add_into(dq[bi, h, i0:i1], tmp_q)

    _run(tasks, work, threads)
    dq *= dt.type(scale)
    return dq, dk, dv
