"""nbaccel_kernels: hand-written kernels on raw arrays (NumPy, CuPy), importing nothing from
nbaccel. Each family has a NumPy reference, a CPU (numba) version and, where a GPU wants one, a
Triton version:

* ``attention``: fused (FlashAttention-style) scaled dot-product attention;
* ``quant``: int8 / int4 weight-only and int8 dynamic matmuls, with explicit SIMD variants;
* ``sparse``: 2:4 semi-structured sparse matmuls;
* ``conv``: convolutions (shifted GEMMs, im2col + BLAS, direct loops);
* ``rnn``: the LSTM / GRU scans and their backward;
* ``fused``: the eager engine's composite ops as single passes (LayerNorm, BatchNorm, GELU,
  softmax backward, cross-entropy, embedding backward, AdamW).

The compiler calls them as extern steps and the eager ops call them directly
(nbaccel/ops/kernel_modules.py). The modules that start with ``_`` are shared machinery: the
kernels' thread pool and task runner, NumPy's OpenBLAS, Triton's arguments, and numba compiles
on background threads that leave the warnings state alone.
"""

if __name__ != "nbaccel_kernels":
    # Imported as "kernels", the folder's own name (importable from the repository's root):
    # numba's disk cache then records that module name in the kernels' cache entries, which
    # sit beside the source and are shared with every later process; one that imports
    # nbaccel_kernels without "kernels" on its path cannot load them, and the eager ops keep
    # their NumPy paths without a word (float32 GELU ran 100x slower that way).
    raise ImportError(f"import this package as nbaccel_kernels, not as {__name__!r} (numba's "
                      f"cache would record that name for every later process)")
