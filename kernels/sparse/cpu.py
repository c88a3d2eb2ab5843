"""2:4 semi-structured sparsity on the CPU with numba: compression, decompression and the
sparse x dense products (see ``reference.py`` for the format).

The products read only the kept values and the packed metadata, never a dense weight, and run
in parallel over the weight's rows (the output features): the calling thread and one helper
per extra core claim chunks of rows from an atomic counter (``kernels/_pool.py``; a ``prange``
waited at its closing barrier for a worker that another process's job held back). The
kernels themselves are in ``_products.py``:

* GEMV (one input vector): each row is a dot product of its kept values with the input entries
  their 2-bit positions select (by selects over the 8 inputs of a metadata byte's two groups,
  which vectorise), four rows per pass sharing the input loads. The input (a few KB) stays in
  L1, so what it costs is streaming the values and the metadata: 0.53 of the dense weight's
  bytes.
* GEMV in float32, where the CPU has AVX-512F or AVX2: explicit SIMD (``simd.py``): each
  vector of kept values fetches its inputs with one permute indexed by the metadata, one row
  at a time (1.7x the dense GEMV against 1.06x for the loop above, one thread, loaded machine).
* GEMM (a batch of inputs): the batch is transposed so the ``m`` inputs of one column ``k`` are
  contiguous; each kept value ``w[n, k]`` then adds ``w * xt[k, :]`` to the output row ``n``: a
  vectorised axpy over the batch, half the multiply-adds of the dense product. The columns go
  in blocks whose ``xt`` rows stay in L1 while every row of a chunk uses them.
* GEMM in float32, where the CPU has AVX-512F or AVX2: explicit SIMD (``simd_gemm.py``), the
  same axpys with a tile of the output row held in registers over a column block, the batch
  padded to whole vectors (the same multiply-adds; 1.2-2.0x the dense BLAS GEMM at batch 64
  against 0.6-0.7x, loaded machine).
"""
from __future__ import annotations


import numpy as np

from .. import _pool
from .._parallel import CHUNKS_PER_THREAD
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

    # lazy: they import numba; cpu.py loads without it until a product runs
    from . import _products, simd, simd_gemm

    return {"compress": _products.compress, "decompress": decompress, "gather": gather, "gemv": _products.gemv,
            "gemm_t": _products.gemm_t, "simd": simd, "simd_gemm": simd_gemm}


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


def _threads(work):
    """Threads for a product of ``work`` multiply-adds: one below ``PARALLEL_WORK``."""
    if work < PARALLEL_WORK:
        return 1
    import numba
    return numba.get_num_threads()


def _run(kernel, args, rows, threads):
    """``kernel`` over ``rows`` output rows in chunks of whole 4-row blocks, on the calling
    thread and ``threads - 1`` helpers claiming chunks (``kernels/_pool.py``: no closing
    barrier, so a helper that another process's job holds back costs at most one chunk)."""
    chunk, n_chunks = _pool.chunked(rows, threads, CHUNKS_PER_THREAD, 4)
    _pool.run(_k(kernel), args + (chunk,), n_chunks, threads)


# the explicit-SIMD GEMVs this CPU runs (``simd.py``), widest first; None until the first GEMV
# (simd.py imports numba); tests set it to pick one, or () for the portable loop
GEMV_SIMD = None
# the same for the batch GEMM (``simd_gemm.py``)
GEMM_SIMD = None


def _gemv(x, values, meta, out):
    global GEMV_SIMD
    if GEMV_SIMD is None:
        simd = _k("simd")
        GEMV_SIMD = tuple(name for name in simd.VARIANTS if simd.available(name))
    threads = _threads(values.size)
    if GEMV_SIMD and values.dtype == np.float32:
        chunk, n_chunks = _pool.chunked(values.shape[0], threads, CHUNKS_PER_THREAD, 4)
        _pool.run(_k("simd").PARTS[GEMV_SIMD[0]], (x, values, meta, out, chunk), n_chunks, threads)
        return
    cols = x.shape[0]
    planes = np.ascontiguousarray(x[:cols - cols % 8].reshape(-1, 8).T)
    _run("gemv", (x, planes, values, meta, out, values.dtype.type(0)), values.shape[0],
         threads)


# xt bytes per column block of the batch GEMM: well inside L1 (48 KiB), next to the output rows
_GEMM_BLOCK_BYTES = 16 << 10
# the same for the SIMD GEMM, whose output tile lives in registers: 32 KiB ran fastest at batch
# 64 (4096 x 4096, loaded machine, one thread / two: 24 KiB 1.55x / 1.74x the dense GEMM,
# 32 KiB 1.74x / 1.98x, 48 KiB 1.19x / 1.74x, 64 KiB 1.05x / 1.53x; 16 KiB 1.28x / 1.18x)
_SIMD_GEMM_BLOCK_BYTES = 32 << 10


def _gemm(x, values, meta, rows):
    """``x @ W.T`` for a batch ``x`` (m > _GEMV_BATCH), as a view of the transposed result."""
    global GEMM_SIMD
    simd_gemm = _k("simd_gemm")
    if GEMM_SIMD is None:
        GEMM_SIMD = tuple(name for name in simd_gemm.VARIANTS if simd_gemm.available(name))
    variant = next((v for v in GEMM_SIMD if simd_gemm.usable(v, values.dtype)), None)
    m = x.shape[0]
    threads = _threads(values.size * m)
    if variant is None:
        xt = np.ascontiguousarray(x.T)
        outt = np.empty((rows, m), values.dtype)
        if outt.size:
            block = max(1, _GEMM_BLOCK_BYTES // (8 * m * xt.itemsize))   # metadata bytes
            _run("gemm_t", (xt, values, meta, outt, block), rows, threads)
        return outt.T
    # the batch padded with zero inputs to whole vectors (the tiles have no masked lanes):
    # batch 17 as 32 still ran 2.6x the portable kernel, batch 8 as 16 1.9x (loaded machine)
    lanes = simd_gemm.VARIANTS[variant][0]
    mp = -(-m // lanes) * lanes
    xt = np.zeros((x.shape[1], mp), values.dtype)
    xt[:, :m] = x.T
    outt = np.empty((rows, mp), values.dtype)
    if outt.size:
        block = max(1, _SIMD_GEMM_BLOCK_BYTES // (8 * mp * xt.itemsize))
        chunk, n_chunks = _pool.chunked(rows, threads, CHUNKS_PER_THREAD, 4)
        _pool.run(simd_gemm.PARTS[variant], (xt, values, meta, outt, block, chunk), n_chunks,
                  threads)
    return outt[:, :m].T


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
        res = _gemm(x, values, meta, rows)
    if out is None:
        return np.ascontiguousarray(res)
    out[...] = res
    return out
