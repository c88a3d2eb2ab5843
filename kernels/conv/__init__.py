"""2-D convolution on raw arrays (NCHW): forward, input gradient (the transposed convolution)
and weight gradient, with stride, asymmetric padding, dilation and groups.

Three implementations with one signature each: ``reference`` (NumPy, the executable spec),
``cpu`` (im2col + BLAS, or direct numba loops for depthwise-like convolutions) and ``triton``
(direct kernels; GPU, tested on the CPU with ``TRITON_INTERPRET=1``). 1-D convolutions are
2-D ones with a height of 1. Nothing here imports nbaccel.
"""
from .geometry import Conv2dGeometry, output_size  # noqa: F401
