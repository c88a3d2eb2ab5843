"""Row-block chunks read and written straight to their files, in zarr v3's own layout.

When every chunk of an array spans all of its trailing dimensions (the usual case: shards and
8 MiB blocks of rows), a chunk is one contiguous run of the C-ordered data. zarr's pipeline
would copy it while encoding (bytes codec, then crc32c appends the checksum) and again while
decoding; here a chunk file is written from the caller's buffer and read straight into the
destination, with the same bytes on disk: the raw little-endian values, then their crc32c as a
little-endian uint32 (``c/<row block>/0/...``, the default chunk key encoding). Partial edge
chunks are padded to the full chunk shape with zeros (the fill value), as zarr stores them.
Any other layout goes through zarr itself.
"""
from __future__ import annotations

import math
import os
import struct
import sys

import numpy as np


class ChunkError(Exception):
    """A chunk file that is missing, of the wrong size or whose checksum does not match."""

    def __init__(self, coords, path, what):
        super().__init__(what)
        self.coords, self.path, self.what = coords, path, what


def applies(shape, chunks) -> bool:
    return (sys.byteorder == "little" and len(shape) >= 1 and all(shape)
            and tuple(chunks[1:]) == tuple(shape[1:]))


def open_chunk(path, mode):
    """Opens every chunk file this module reads or writes (tests count the reads here)."""
    return open(path, mode)


def _crc(data, crc=None):
    import google_crc32c
    return google_crc32c.value(data) if crc is None else google_crc32c.extend(crc, data)


def _file(array_dir, i, ndim):
    return os.path.join(array_dir, "c", str(i), *(["0"] * (ndim - 1)))


def write_rows(array_dir, shape, chunks, first_row, array: np.ndarray) -> None:
    """Write the rows ``first_row : first_row + len(array)`` (whole chunks: ``first_row`` is a
    multiple of the chunk's rows, and the block ends on a chunk boundary or the array's end)."""
    rows_per = chunks[0]
    row_bytes = array.dtype.itemsize * math.prod(shape[1:])
    flat = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    for r0 in range(0, array.shape[0], rows_per):
        part = flat[r0 * row_bytes:min(r0 + rows_per, array.shape[0]) * row_bytes]
        pad = rows_per * row_bytes - part.nbytes
        crc = _crc(part)
        if pad:
            crc = _crc(bytes(pad), crc)
        path = _file(array_dir, (first_row + r0) // rows_per, len(shape))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open_chunk(path, "wb") as f:
            f.write(part)
            if pad:
                f.write(bytes(pad))
            f.write(struct.pack("<I", crc))


def read_rows(array_dir, shape, chunks, lo, hi, out: np.ndarray) -> int:
    """Read rows ``lo:hi`` into ``out`` (C-contiguous, of those rows' shape); a chunk that lies
    wholly inside goes straight into ``out``. Returns the number of chunk files read."""
    rows_per = chunks[0]
    row_bytes = out.dtype.itemsize * math.prod(shape[1:])
    chunk_bytes = rows_per * row_bytes
    flat = out.reshape(-1).view(np.uint8)
    first, last = lo // rows_per, -(-hi // rows_per)
    for i in range(first, last):
        coords = (i,) + (0,) * (len(shape) - 1)
        path = _file(array_dir, i, len(shape))
        c0, c1 = i * rows_per, min((i + 1) * rows_per, shape[0])
        try:
            size = os.path.getsize(path)
        except OSError:
            raise ChunkError(coords, path, "missing") from None
        if size != chunk_bytes + 4:
            raise ChunkError(coords, path, f"corrupt (the file has {size} bytes, a chunk has "
                                           f"{chunk_bytes} + 4 for its crc32c: truncated or altered)")
        whole = c0 >= lo and c1 <= hi and c1 - c0 == rows_per
        with open_chunk(path, "rb") as f:
            if whole:
                dest = flat[(c0 - lo) * row_bytes:(c1 - lo) * row_bytes]
                f.readinto(dest)
                stored = f.read(4)
            else:
                buf = np.empty(chunk_bytes + 4, np.uint8)
                f.readinto(buf)
                dest, stored = buf[:-4], buf[-4:].tobytes()
        if struct.pack("<I", _crc(dest)) != stored:
            raise ChunkError(coords, path, "corrupt (its crc32c checksum does not match: truncated "
                                           "or altered after the save)")
        if not whole:
            a, b = max(lo, c0), min(hi, c1)
            flat[(a - lo) * row_bytes:(b - lo) * row_bytes] = dest[(a - c0) * row_bytes:(b - c0) * row_bytes]
    return last - first
