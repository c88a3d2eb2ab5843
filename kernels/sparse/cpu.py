"""2:4 semi-structured sparsity on the CPU with numba: compression, decompression and the
sparse x dense products (see ``reference.py`` for the format).

The products read only the kept values and the packed metadata, never a dense weight, and run
in parallel over the weight's rows (the output features):

* GEMV (one input vector): each row is a dot product of its kept values with the input entries
  their 2-bit positions select (by selects over the 8 inputs of a metadata byte's two groups,
  which vectorise). The input (a few KB) stays in L1, so what it costs is streaming the values
  and the metadata: 0.53 of the dense weight's bytes.
* GEMM (a batch of inputs): the batch is transposed so the ``m`` inputs of one column ``k`` are
  contiguous; each kept value ``w[n, k]`` then adds ``w * xt[k, :]`` to the output row ``n``: a
  vectorised axpy over the batch, half the multiply-adds of the dense product.
"""
from __future__ import annotations

import types

import numpy as np

from .._parallel import dynamic_chunks
from .reference import check_dense, meta_cols

# no-NaN/no-Inf assumptions stay off (see FINDINGS.md: they turn overflow into NaN)
_FASTMATH = {"reassoc", "contract", "arcp", "nsz", "afn"}
_KERNELS = None
_GEMV_BATCH = 4     # batches up to this size run as one GEMV per input vector
# multiply-adds from which a product runs in parallel: below it, starting the threads costs
# more than the work (as in the quantized kernels)
PARALLEL_WORK = 1 << 20


def _build():
    import numba as nb

    jit = dict(nogil=True, cache=True, fastmath=_FASTMATH)

    @nb.njit(inline="always", **jit)
    def _key(v):
        a = abs(np.float64(v))
        return np.inf if a != a else a

    @nb.njit(parallel=True, **jit)
    def compress(w, values, meta):
        rows, cols = w.shape
        groups = cols // 4
        for r in nb.prange(rows):
            for g in range(groups):
                key = (_key(w[r, 4 * g]), _key(w[r, 4 * g + 1]), _key(w[r, 4 * g + 2]),
                       _key(w[r, 4 * g + 3]))
                nib = 0
                slot = 0
                for i in range(4):
                    beaten = 0   # entries that outrank i: larger, or equal at a smaller position
                    for j in range(4):
                        if key[j] > key[i] or (key[j] == key[i] and j < i):
                            beaten += 1
                    if beaten < 2:
                        values[r, 2 * g + slot] = w[r, 4 * g + i]
                        nib |= i << (2 * slot)
                        slot += 1
                if g % 2 == 0:
                    meta[r, g // 2] = nib
                else:
                    meta[r, g // 2] |= nib << 4

    @nb.njit(parallel=True, **jit)
    def decompress(values, meta, out):
        rows, cols = out.shape
        for r in nb.prange(rows):
            for c in range(cols):
                out[r, c] = 0
            for g in range(cols // 4):
                nib = (meta[r, g // 2] >> (4 * (g % 2))) & 15
                out[r, 4 * g + (nib & 3)] = values[r, 2 * g]
                out[r, 4 * g + (nib >> 2)] = values[r, 2 * g + 1]

    @nb.njit(parallel=True, **jit)
    def gather(dense, meta, out):
        rows, cols = dense.shape
        for r in nb.prange(rows):
            for g in range(cols // 4):
                nib = (meta[r, g // 2] >> (4 * (g % 2))) & 15
                out[r, 2 * g] = dense[r, 4 * g + (nib & 3)]
                out[r, 2 * g + 1] = dense[r, 4 * g + (nib >> 2)]

    @nb.njit(parallel=True, **jit)
    def gemv(x, xp, values, meta, out, zero):
        # xp: x deinterleaved, xp[i, b] = x[8 * b + i] (contiguous loads per position; every
        # row reuses it, so the shuffles are paid once instead of once per row)
        rows = values.shape[0]
        groups = values.shape[1] // 2
        pairs = groups // 2
        for r in nb.prange(rows):
            vr = values[r]
            mr = meta[r]
            acc = zero                      # of the values' dtype: float32 stays float32
            for b in range(pairs):          # one metadata byte: two groups, four kept values
                m = np.int32(mr[b])
                j = 4 * b
                p0 = m & 3
                p1 = (m >> 2) & 3
                p2 = (m >> 4) & 3
                p3 = m >> 6
                x0, x1, x2, x3 = xp[0, b], xp[1, b], xp[2, b], xp[3, b]
                x4, x5, x6, x7 = xp[4, b], xp[5, b], xp[6, b], xp[7, b]
                # a group's first kept position is 0, 1 or 2 and its second 1, 2 or 3: selects
                # over the eight loaded inputs vectorise, where gathers x[c + p] did not
                a0 = x0 if p0 == 0 else (x1 if p0 == 1 else x2)
                a1 = x3 if p1 == 3 else (x2 if p1 == 2 else x1)
                a2 = x4 if p2 == 0 else (x5 if p2 == 1 else x6)
                a3 = x7 if p3 == 3 else (x6 if p3 == 2 else x5)
                acc += vr[j] * a0 + vr[j + 1] * a1 + vr[j + 2] * a2 + vr[j + 3] * a3
            if groups % 2:                  # a last group alone in its byte
                m = np.int32(mr[pairs])
                c = 8 * pairs
                j = 4 * pairs
                acc += vr[j] * x[c + (m & 3)] + vr[j + 1] * x[c + ((m >> 2) & 3)]
            out[r] = acc

    @nb.njit(parallel=True, **jit)
    def gemm_t(xt, values, meta, outt):
        # outt = W @ xt: W is (rows, cols) 2:4, xt the batch transposed, (cols, m) contiguous.
        # Each output row accumulates axpys of whole xt rows (the batch is the vector axis).
        rows = values.shape[0]
        groups = values.shape[1] // 2
        pairs = groups // 2
        m_cols = xt.shape[1]
        for r in nb.prange(rows):
            o = outt[r]
            vr = values[r]
            mr = meta[r]
            for i in range(m_cols):
                o[i] = 0
            for b in range(pairs):          # four kept values per pass over the output row
                m = np.int64(mr[b])
                c = 8 * b
                j = 4 * b
                xa = xt[c + (m & 3)]
                xb = xt[c + ((m >> 2) & 3)]
                xc = xt[c + 4 + ((m >> 4) & 3)]
                xd = xt[c + 4 + (m >> 6)]
                va, vb, vc, vd = vr[j], vr[j + 1], vr[j + 2], vr[j + 3]
                for i in range(m_cols):
                    o[i] += va * xa[i] + vb * xb[i] + vc * xc[i] + vd * xd[i]
            if groups % 2:
                m = np.int64(mr[pairs])
                xa = xt[8 * pairs + (m & 3)]
                xb = xt[8 * pairs + ((m >> 2) & 3)]
                va, vb = vr[4 * pairs], vr[4 * pairs + 1]
                for i in range(m_cols):
                    o[i] += va * xa[i] + vb * xb[i]

    def serial(fn):
        """The same kernel without threads, under its own name (numba's disk cache keys
        entries by name, so the two versions keep separate entries)."""
        f = fn.py_func
        g = types.FunctionType(f.__code__, f.__globals__, f.__name__ + "_serial", f.__defaults__,
                               f.__closure__)
        g.__qualname__ = f.__qualname__ + "_serial"
        return nb.njit(**jit)(g)

    return {"compress": compress, "decompress": decompress, "gather": gather, "gemv": gemv,
            "gemm_t": gemm_t, "gemv_serial": serial(gemv), "gemm_t_serial": serial(gemm_t)}


def _k(name):
    global _KERNELS
    if _KERNELS is None:
        _KERNELS = _build()
    return _KERNELS[name]


def _check_pair(values, meta, cols):
    if values.ndim != 2 or meta.ndim != 2 or values.shape[0] != meta.shape[0]:
        raise ValueError(f"2:4 values {values.shape} and metadata {meta.shape} don't match")
    if cols % 4 or values.shape[1] != cols // 2 or meta.shape[1] != meta_cols(cols):
        raise ValueError(f"2:4 values {values.shape} and metadata {meta.shape} don't describe "
                         f"{cols} dense columns")
    if meta.dtype != np.uint8:
        raise TypeError(f"2:4 metadata must be uint8, got {meta.dtype}")


def compress(w):
    """Dense 2-D ``w`` -> ``(values, meta)`` keeping the two largest magnitudes per group of 4."""
    check_dense(w)
    w = np.ascontiguousarray(w)
    rows, cols = w.shape
    values = np.empty((rows, cols // 2), w.dtype)
    meta = np.zeros((rows, meta_cols(cols)), np.uint8)
    if w.size:
        _k("compress")(w, values, meta)
    return values, meta


def decompress(values, meta, cols: int):
    """``(values, meta)`` -> dense ``(rows, cols)``."""
    _check_pair(values, meta, cols)
    out = np.empty((values.shape[0], cols), values.dtype)
    if out.size:
        _k("decompress")(np.ascontiguousarray(values), np.ascontiguousarray(meta), out)
    return out


def gather(dense, meta):
    """Entries of dense ``(rows, cols)`` at the kept positions -> ``(rows, cols // 2)``."""
    rows, cols = dense.shape
    _check_pair(np.empty((rows, cols // 2)), meta, cols)
    out = np.empty((rows, cols // 2), dense.dtype)
    if out.size:
        _k("gather")(np.ascontiguousarray(dense), np.ascontiguousarray(meta), out)
    return out


def _gemv(x, values, meta, out):
    cols = x.shape[0]
    planes = np.ascontiguousarray(x[:cols - cols % 8].reshape(-1, 8).T)
    args = (x, planes, values, meta, out, values.dtype.type(0))
    if values.size < PARALLEL_WORK:
        _k("gemv_serial")(*args)
        return
    with dynamic_chunks(values.shape[0]):      # a late thread costs one chunk of rows
        _k("gemv")(*args)


def linear(x, values, meta, cols: int, out=None):
    """``x @ W.T`` for the 2:4 weight W: ``x`` is ``(cols,)`` (GEMV) or ``(m, cols)`` (GEMM).
    ``x`` is cast to the values' dtype."""
    _check_pair(values, meta, cols)
    rows = values.shape[0]
    if x.shape[-1] != cols or x.ndim not in (1, 2):
        raise ValueError(f"2:4 linear: input of shape {x.shape} doesn't match a weight with "
                         f"{cols} columns")
    values = np.ascontiguousarray(values)
    meta = np.ascontiguousarray(meta)
    x = np.ascontiguousarray(x, dtype=values.dtype)
    if x.ndim == 1:
        out = np.empty(rows, values.dtype) if out is None else out
        _gemv(x, values, meta, out)
        return out
    m = x.shape[0]
    if m <= _GEMV_BATCH:        # a few vectors: one GEMV each beats an axpy a few lanes wide
        res = np.empty((m, rows), values.dtype)
        for i in range(m):
            _gemv(x[i], values, meta, res[i])
    else:
        xt = np.ascontiguousarray(x.T)
        outt = np.empty((rows, m), values.dtype)
        if outt.size and values.size * m < PARALLEL_WORK:
            _k("gemm_t_serial")(xt, values, meta, outt)
        elif outt.size:
            with dynamic_chunks(rows):
                _k("gemm_t")(xt, values, meta, outt)
        res = outt.T
    if out is None:
        return np.ascontiguousarray(res)
    out[...] = res
    return out
