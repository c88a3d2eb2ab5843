"""How a rendered Triton kernel is launched: its grid, block sizes and warps for one shape.

The block constants are chosen for a GPU (a program of 4 warps holds about ``ELEMS_GPU``
elements) and, under Triton's interpreter, for fewer and larger programs, since the interpreter
pays per program. The renderer (``triton.py``) reads ``BLOCK_R_MAX``, ``COLUMN_BLOCK_R`` and the
limits to decide a kernel's reduction loop and index width.
"""
from __future__ import annotations

ELEMS_GPU = 1024          # elements per program of an elementwise kernel (4 warps × 8 per thread)
RED_ELEMS_GPU = 4096      # BLOCK_O × BLOCK_R of a reduction kernel
BLOCK_R_MAX = 8192        # a longer reduction range (along memory) loops in blocks of 4096
COLUMN_BLOCK_R = 64       # a reduction across memory (axis 0 of a row-major array) loops over
                          # blocks of this many rows, BLOCK_O contiguous columns wide
ELEMS_INTERP = 1 << 14    # the interpreter pays per program: fewer, larger blocks
INT32_LIMIT = 2 ** 31 - 1


class Rendered:
    """A kernel's Triton module source and how to launch it for this shape."""

    def __init__(self, source, values, n_out, n_red, reducing, single, r_limit=BLOCK_R_MAX):
        self.r_limit = r_limit        # the largest BLOCK_R: the whole range when single
        self.source = source
        self.values = values          # the scalar arguments after the pointers
        self.n_out = n_out
        self.n_red = n_red
        self.reducing = reducing
        self.single = single
        self.errors: list[str] = []   # NumPy errors the kernel flags in its `err` argument (1-based)
        self.column = False

    def blocks(self, interpret: bool):
        """(grid, constexpr block sizes, num_warps) for this shape."""
        elems = ELEMS_INTERP if interpret else (RED_ELEMS_GPU if self.reducing else ELEMS_GPU)
        if not self.reducing:
            bo = min(_pow2(self.n_out), elems)
            return (triton_cdiv(self.n_out, bo),), {"BLOCK_O": bo}, 4
        limit = self.r_limit if self.single else min(self.r_limit, 4096)
        br = min(_pow2(self.n_red), limit)
        bo = max(1, min(_pow2(self.n_out), elems // br))
        warps = 16 if bo * br >= 8192 else 8 if bo * br >= 2048 else 4
        return (triton_cdiv(self.n_out, bo),), {"BLOCK_O": bo, "BLOCK_R": br}, warps


def _pow2(n):
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def triton_cdiv(a, b):
    return -(-a // b)
