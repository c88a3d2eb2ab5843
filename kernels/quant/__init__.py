"""Quantized matmul on raw arrays: int8/int4 weight-only and int8 dynamic; reference, cpu (numba), triton."""
