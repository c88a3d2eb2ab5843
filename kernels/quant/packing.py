"""Quantize, dequantize, pack and unpack helpers on NumPy arrays (shared by every kernel version).

Formats (what the kernels read):

* **int8 per output channel** (weight ``[N, K]``): ``q`` int8 ``[N, K]`` in [-127, 127] and
  ``scale`` float32 ``[N]``; ``w ≈ q * scale[:, None]`` (symmetric, no zero point).
* **int4 group-wise** (weight ``[N, K]``, ``K % group_size == 0``, group size 32, 64 or 128):
  ``packed`` uint8 ``[N, K // 2]``, two unsigned 4-bit codes per byte; ``scales`` float32
  ``[N, K // group_size]``; optional ``zeros`` uint8 ``[N, K // group_size]`` (codes 0..15).
  ``w ≈ (code - zero) * scale``, where ``zero`` is 8 when there is no zero point (symmetric).
  Packing order: the row is cut into blocks of 32 values; byte ``j`` (0..15) of a block holds
  value ``j`` in its low nibble and value ``j + 16`` in its high nibble. Splitting a block in
  halves (rather than pairing neighbours) lets a SIMD loop read 16 contiguous activations for
  the low nibbles and 16 for the high ones, with no shuffles.
* **int4 rows interleaved** (layout ``"rows4x64"``, optional): the same bytes and shape
  ``[N, K // 2]``, reordered within each block of 4 rows so that a 4-row block is one
  sequential stream: the block's ``4 * K // 2`` bytes are its 64-byte chunks in column order,
  each chunk followed by the same chunk of the next row (chunk ``c`` of row ``4 b + r`` at byte
  ``256 c + 64 r`` of block ``b``). Needs ``N % 4 == 0`` and ``K % 128 == 0``. The explicit-SIMD
  GEMV then serves four rows per activation load while reading one stream
  (docs/quantization.md, "Weight layouts").
* **int8 per token** (activation ``[M, K]``): ``q`` int8 ``[M, K]`` and ``scale`` float32
  ``[M]``, symmetric, as for weights but along rows of the activation.
"""
from __future__ import annotations

import numpy as np

INT4_BLOCK = 32            # values per packing block (16 bytes)
INT4_GROUP_SIZES = (32, 64, 128)
INT4_SYMMETRIC_ZERO = 8
INT4_LAYOUTS = ("rows", "rows4x64")
INT4_IL_ROWS = 4           # rows per interleaved block
INT4_IL_BYTES = 64         # bytes per interleaved chunk


def _check_2d(w, what="weight"):
    w = np.asarray(w)
    if w.ndim != 2:
        raise ValueError(f"{what} must be 2-D [out_features, in_features], got shape {w.shape}")
    if w.dtype.kind != "f":
        raise TypeError(f"{what} must be floating point, got {w.dtype}")
    return w


def _safe_scale(amax, qmax):
    """amax / qmax, with all-zero rows given scale 1 (their codes are all zero anyway)."""
    s = amax.astype(np.float32) / np.float32(qmax)
    return np.where(s > 0, s, np.float32(1.0)).astype(np.float32)


# ---- int8, per output channel / per token -------------------------------------------------

def quantize_int8(w):
    """Symmetric int8 quantization of each row: returns ``(q int8 [N, K], scale float32 [N])``."""
    w = _check_2d(w)
    amax = np.abs(w).max(axis=1) if w.shape[1] else np.zeros(w.shape[0], w.dtype)
    scale = _safe_scale(amax, 127)
    q = np.clip(np.rint(w / scale[:, None]), -127, 127).astype(np.int8)
    return q, scale


def dequantize_int8(q, scale, dtype=np.float32):
    """``q * scale[:, None]`` as a float array."""
    return (np.asarray(q).astype(np.float32) * np.asarray(scale, np.float32)[:, None]).astype(dtype)


def quantize_per_token_int8(x):
    """Dynamic activation quantization: each row of ``x [M, K]`` to int8 with its own scale."""
    return quantize_int8(_check_2d(x, "activation"))


# ---- int4, group-wise -----------------------------------------------------------------------

def check_group_size(k, group_size):
    if group_size not in INT4_GROUP_SIZES:
        raise ValueError(f"int4 group_size must be one of {INT4_GROUP_SIZES}, got {group_size!r}")
    if k % group_size:
        raise ValueError(f"in_features ({k}) must be a multiple of group_size ({group_size}) "
                         "for int4 quantization")


def pack_int4(codes):
    """Codes uint8 ``[N, K]`` in 0..15 (``K % 32 == 0``) -> packed uint8 ``[N, K // 2]``."""
    codes = np.asarray(codes)
    n, k = codes.shape
    if k % INT4_BLOCK:
        raise ValueError(f"pack_int4 needs a multiple of {INT4_BLOCK} columns, got {k}")
    if codes.size and (codes.min() < 0 or codes.max() > 15):
        raise ValueError("int4 codes must lie in 0..15")
    blocks = codes.astype(np.uint8).reshape(n, k // INT4_BLOCK, 2, INT4_BLOCK // 2)
    return (blocks[:, :, 0] | (blocks[:, :, 1] << 4)).reshape(n, k // 2)


def unpack_int4(packed):
    """Packed uint8 ``[N, K // 2]`` -> codes uint8 ``[N, K]`` (the inverse of :func:`pack_int4`)."""
    packed = np.asarray(packed, np.uint8)
    n, kh = packed.shape
    blocks = packed.reshape(n, kh // (INT4_BLOCK // 2), 1, INT4_BLOCK // 2)
    return np.concatenate([blocks & 15, blocks >> 4], axis=2).reshape(n, 2 * kh)


def quantize_int4(w, group_size=128, zero_point=False):
    """Group-wise 4-bit quantization of ``w [N, K]``.

    Returns ``(packed uint8 [N, K//2], scales float32 [N, K//g], zeros uint8 [N, K//g] or None)``.
    Symmetric (default): ``code = round(w / s) + 8`` with ``s = max|w| / 7`` per group.
    With ``zero_point=True`` the group's [min, max] range maps onto 0..15 (asymmetric).
    """
    w = _check_2d(w)
    n, k = w.shape
    check_group_size(k, group_size)
    g = w.astype(np.float32).reshape(n, k // group_size, group_size)
    if zero_point:
        lo = np.minimum(g.min(axis=2), 0)
        hi = np.maximum(g.max(axis=2), 0)
        scales = _safe_scale(hi - lo, 15)
        zeros = np.clip(np.rint(-lo / scales), 0, 15).astype(np.uint8)
        z = zeros.astype(np.float32)
    else:
        scales = _safe_scale(np.abs(g).max(axis=2), 7)
        zeros = None
        z = np.float32(INT4_SYMMETRIC_ZERO)
        z = np.full(scales.shape, z, np.float32)
    codes = np.clip(np.rint(g / scales[:, :, None]) + z[:, :, None], 0, 15).astype(np.uint8)
    return pack_int4(codes.reshape(n, k)), scales, zeros


def dequantize_int4(packed, scales, zeros=None, group_size=128, dtype=np.float32):
    """The float weight ``(code - zero) * scale`` of a packed int4 matrix."""
    codes = unpack_int4(packed).astype(np.float32)
    n, k = codes.shape
    scales = np.asarray(scales, np.float32)
    z = (np.asarray(zeros).astype(np.float32) if zeros is not None
         else np.full(scales.shape, INT4_SYMMETRIC_ZERO, np.float32))
    g = codes.reshape(n, k // group_size, group_size)
    return ((g - z[:, :, None]) * scales[:, :, None]).reshape(n, k).astype(dtype)


def int4_interleavable(n: int, k: int) -> bool:
    """Whether an ``[n, k]`` int4 weight can take the ``"rows4x64"`` layout."""
    return n % INT4_IL_ROWS == 0 and (k // 2) % INT4_IL_BYTES == 0


def check_int4_layout(layout, n, k):
    if layout not in INT4_LAYOUTS:
        raise ValueError(f"int4 layout must be one of {INT4_LAYOUTS}, got {layout!r}")
    if layout == "rows4x64" and not int4_interleavable(n, k):
        raise ValueError(f"the rows4x64 layout needs out_features % 4 == 0 and in_features % 128 "
                         f"== 0, got [{n}, {k}]")


def _blocks(packed):
    n, k2 = packed.shape
    return n // INT4_IL_ROWS, k2 // INT4_IL_BYTES


def interleave_int4(packed):
    """Row-major packed codes ``[N, K // 2]`` -> the ``"rows4x64"`` layout (same shape)."""
    packed = np.asarray(packed, np.uint8)
    check_int4_layout("rows4x64", packed.shape[0], 2 * packed.shape[1])
    nb, nc = _blocks(packed)
    return np.ascontiguousarray(packed.reshape(nb, INT4_IL_ROWS, nc, INT4_IL_BYTES)
                                .transpose(0, 2, 1, 3)).reshape(packed.shape)


def deinterleave_int4(data):
    """The ``"rows4x64"`` layout -> row-major packed codes (same shape)."""
    data = np.asarray(data, np.uint8)
    check_int4_layout("rows4x64", data.shape[0], 2 * data.shape[1])
    nb, nc = _blocks(data)
    return np.ascontiguousarray(data.reshape(nb, nc, INT4_IL_ROWS, INT4_IL_BYTES)
                                .transpose(0, 2, 1, 3)).reshape(data.shape)
