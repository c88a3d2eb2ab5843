"""Which byte order an int4 weight's codes take, chosen when it is quantized.

``"rows"`` is row-major (``packing.pack_int4``). ``"rows4x64"`` interleaves each block of 4
rows into one sequential stream (``packing.interleave_int4``): the CPU's explicit-SIMD GEMV
then serves four rows per activation load and reads one stream, 2.5-2.7 ms against 3.3-3.6 ms
for 8 layers of 4096² (docs/quantization.md, "Weight layouts"). Every other reader (the
portable loops, dequantization, Triton) reads a row-major copy, so the layout is only chosen
where that GEMV runs it, and only where it was measured faster.
"""
from __future__ import annotations

import numpy as np
from nbaccel_kernels.quant import packing

from ..ops import kernel_modules

LAYOUTS = packing.INT4_LAYOUTS
# rows4x64 was slower than row-major at group size 32 (four rows' per-group scale permutes:
# 4.4 against 3.8 ms for the 8 layers) and faster at 64 and 128
INTERLEAVED_GROUP_SIZES = (64, 128)


def simd_gemv_runs(k: int) -> bool:
    """Whether this CPU has an explicit-SIMD int4 GEMV for rows of ``k`` inputs (float32)."""
    # the numba kernels load here, at quantize time (import nbaccel must not load numba)
    cpu = kernel_modules.kernels("quant", on_cpu=True)
    return any(cpu.simd.usable(v, k, np.float32) for v in cpu.INT4_GEMV_SIMD)


def choose(n: int, k: int, group_size: int) -> str:
    """The layout of a new ``[n, k]`` int4 CPU weight: ``"rows4x64"`` where the shape allows it,
    the group size gained from it and the CPU runs the SIMD GEMV that reads it; else ``"rows"``."""
    if (group_size in INTERLEAVED_GROUP_SIZES and packing.int4_interleavable(n, k)
            and simd_gemv_runs(k)):
        return "rows4x64"
    return "rows"


def check(layout, n: int, k: int) -> None:
    """A ``ValueError`` naming the problem when ``layout`` cannot hold an ``[n, k]`` weight."""
    packing.check_int4_layout(layout, n, k)


def convert(codes, src: str, dst: str):
    """Packed codes (a NumPy array) in layout ``src``, reordered to ``dst``."""
    if src == dst:
        return codes
    rows = codes if src == "rows" else packing.deinterleave_int4(codes)
    return rows if dst == "rows" else packing.interleave_int4(rows)
