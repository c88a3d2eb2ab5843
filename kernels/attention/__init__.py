"""Fused scaled-dot-product attention on raw arrays, three versions of one kernel:

* :mod:`.reference`  NumPy math with the full score matrix (the oracle),
* :mod:`.cpu`        FlashAttention-2 tiles: BLAS for the products, numba for the softmax,
* :mod:`.triton`     Triton kernels (GPU, or the interpreter under ``TRITON_INTERPRET=1``).

All take (B, Hq, L, D) queries and (B, Hkv, S, D) / (B, Hkv, S, Dv) keys and values, and return
``(out, lse)`` forward and ``(dq, dk, dv)`` backward. Nothing here imports nbaccel.
"""
