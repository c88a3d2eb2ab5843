"""Fused scaled-dot-product attention on raw arrays: reference (NumPy), cpu (numba + BLAS tiles), triton."""
