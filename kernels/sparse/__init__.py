"""2:4 semi-structured sparsity on raw arrays: compression and sparse matmul; reference, cpu (numba), triton."""
