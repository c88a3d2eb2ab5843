"""2:4 semi-structured sparsity in plain NumPy: the executable spec the numba and Triton
kernels are tested against.

The compressed format (shared by every backend):

* ``values``: ``(rows, cols // 2)``, the two kept entries of each group of four columns, in
  column order (the entry at the smaller position first).
* ``meta``: ``(rows, ceil(cols / 8))`` ``uint8``. Each kept value has a 2-bit position inside
  its group; a group's two positions make a 4-bit nibble (``first | second << 2``) and two
  groups share a byte (group ``2j`` in the low nibble of byte ``j``, group ``2j + 1`` in the
  high one). A row with an odd number of groups leaves its last high nibble zero.

So a float32 weight shrinks to 1/2 of its bytes plus 1/32 for the metadata (0.53 of dense).

Which two entries a group keeps: the two largest magnitudes, ties going to the smaller
position, NaN counting as the largest (a NaN is never silently dropped). For a tensor that is
already 2:4 (at most two non-zeros per group) that is exactly its non-zeros, so the same rule
serves pruning and lossless compression.
"""
from __future__ import annotations

import numpy as np

SUPPORTED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def check_dense(w, what="weight"):
    """Raise a clear error unless ``w`` is a 2-D float32/float64 array whose last dim is a
    multiple of 4."""
    if w.ndim != 2:
        raise ValueError(f"2:4 sparsity needs a 2-D {what}, got shape {tuple(w.shape)}")
    if w.shape[1] % 4:
        raise ValueError(f"2:4 sparsity needs the last dim of the {what} to be a multiple of 4, "
                         f"got shape {tuple(w.shape)}")
    if np.dtype(w.dtype) not in SUPPORTED_DTYPES:
        raise TypeError(f"2:4 sparsity supports float32 and float64 {what}s, got {w.dtype}")


def meta_cols(cols: int) -> int:
    """Bytes of metadata per row for ``cols`` dense columns."""
    return (cols // 4 + 1) // 2


def keep_positions(w) -> np.ndarray:
    """``(rows, cols // 4, 2)`` int: the positions (0..3, ascending) each group keeps."""
    rows, cols = w.shape
    key = np.abs(w.reshape(rows, cols // 4, 4))
    key = np.where(np.isnan(key), np.inf, key)
    top2 = np.argsort(-key, axis=-1, kind="stable")[..., :2]   # stable: ties keep the smaller position
    return np.sort(top2, axis=-1)


def prune_mask(w) -> np.ndarray:
    """Bool mask of the entries 2:4 pruning keeps (two largest magnitudes of every four)."""
    check_dense(w)
    rows, cols = w.shape
    mask = np.zeros((rows, cols // 4, 4), dtype=bool)
    np.put_along_axis(mask, keep_positions(w), True, axis=-1)
    return mask.reshape(rows, cols)


def first_violation(w):
    """``(row, group)`` of the first group (row-major) with more than two non-zeros, or None."""
    rows, cols = w.shape
    bad = np.count_nonzero(w.reshape(rows, cols // 4, 4), axis=-1) > 2
    if not bad.any():
        return None
    r, g = np.unravel_index(int(np.argmax(bad)), bad.shape)
    return int(r), int(g)


def pack_meta(pos) -> np.ndarray:
    """Positions ``(rows, groups, 2)`` -> packed ``uint8`` metadata ``(rows, ceil(groups / 2))``."""
    rows, groups, _ = pos.shape
    nib = (pos[..., 0] | (pos[..., 1] << 2)).astype(np.uint8)
    if groups % 2:
        nib = np.concatenate([nib, np.zeros((rows, 1), np.uint8)], axis=1)
    return (nib[:, 0::2] | (nib[:, 1::2] << 4)).astype(np.uint8)


def unpack_meta(meta, cols: int) -> np.ndarray:
    """Packed metadata -> positions ``(rows, cols // 4, 2)`` (int64)."""
    groups = cols // 4
    nib = np.empty((meta.shape[0], 2 * meta.shape[1]), dtype=np.int64)
    nib[:, 0::2] = meta & 0xF
    nib[:, 1::2] = meta >> 4
    nib = nib[:, :groups]
    return np.stack([nib & 3, nib >> 2], axis=-1)


def compress(w):
    """Dense 2-D ``w`` -> ``(values, meta)``, keeping the two largest magnitudes of each group."""
    check_dense(w)
    rows, cols = w.shape
    pos = keep_positions(w)
    values = np.take_along_axis(w.reshape(rows, cols // 4, 4), pos, axis=-1).reshape(rows, cols // 2)
    return np.ascontiguousarray(values), pack_meta(pos)


def decompress(values, meta, cols: int):
    """``(values, meta)`` -> the dense ``(rows, cols)`` array (zeros where pruned)."""
    rows = values.shape[0]
    dense = np.zeros((rows, cols // 4, 4), dtype=values.dtype)
    np.put_along_axis(dense, unpack_meta(meta, cols), values.reshape(rows, cols // 4, 2), axis=-1)
    return dense.reshape(rows, cols)


def gather(dense, meta):
    """The entries of a dense ``(rows, cols)`` array at the kept positions: ``(rows, cols // 2)``.
    (The transpose of decompress: it maps a dense weight gradient to the values' gradient.)"""
    rows, cols = dense.shape
    pos = unpack_meta(meta, cols)
    return np.take_along_axis(dense.reshape(rows, cols // 4, 4), pos, axis=-1).reshape(rows, cols // 2)


def linear(x, values, meta, cols: int):
    """``x @ W.T`` for the 2:4 weight ``W`` (``(rows, cols)``): x is ``(cols,)`` or ``(m, cols)``."""
    return x @ decompress(values, meta, cols).T
