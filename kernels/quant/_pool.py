"""The row-chunk launcher, now shared by the quantized and 2:4 sparse kernels: see
:mod:`nbaccel_kernels._pool` (kept here for the names ``nbaccel_kernels.quant._pool.*``)."""
from .._pool import atomic_add, claim, finish, helpers, run, wide_vectors  # noqa: F401
