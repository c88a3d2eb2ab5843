"""nbaccel_kernels: hand-written kernels the compiler calls as externs (fused attention,
quantized and 2:4-sparse matmul), each with a NumPy reference, a CPU (numba) version and a
Triton version. They work on raw arrays (NumPy, CuPy) and import nothing from nbaccel.

The kernels arrive in a later milestone; this package is installed now so the layout and
the import name (``nbaccel_kernels``) are fixed.
"""
