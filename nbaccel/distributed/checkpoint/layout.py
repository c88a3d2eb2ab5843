"""The chunk grid of a saved tensor: chunks never straddle two shards, so every writer writes
whole chunks of its own and a reader of any region reads only the chunks that meet it."""
from __future__ import annotations

import math

# A shard larger than this is split into row blocks (along dim 0) so that a resharded reader
# that needs part of it reads little more than its share (4 -> 3 shards of 16 MiB: 1.125x,
# not 1.5x), and no chunk is a GiB-sized buffer.
CHUNK_TARGET_BYTES = 8 << 20


def chunk_shape(shape, boxes, itemsize: int, target: int = CHUNK_TARGET_BYTES) -> tuple:
    """The regular chunk shape for a tensor of ``shape`` written as ``boxes``
    (``(offsets, sizes)`` pairs that tile it): per dimension the gcd of all inner shard
    boundaries, then dim 0 cut further while a chunk exceeds ``target`` bytes."""
    chunks = []
    for d, n in enumerate(shape):
        cuts = {b for off, size in boxes for b in (off[d], off[d] + size[d]) if 0 < b < n}
        chunks.append(max(1, math.gcd(*cuts) if cuts else n))
    if chunks and chunks[0] > 1:
        row_bytes = itemsize * math.prod(chunks[1:])
        if row_bytes * chunks[0] > target:
            # the largest divisor of chunks[0] that keeps a chunk under target (boundaries stay
            # multiples of it); a prime row count keeps the big chunk rather than 1-row chunks
            fits = [k for k in _divisors(chunks[0]) if k * row_bytes <= target]
            best = max(fits, default=chunks[0])
            if best * row_bytes >= target // 8:
                chunks[0] = best
    return tuple(chunks)


def _divisors(n: int):
    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    return small + [n // k for k in small]


def check_tiling(key: str, shape, boxes) -> None:
    """Raise unless ``boxes`` cover ``shape`` exactly once (a save needs the whole tensor)."""
    total = math.prod(shape)
    covered = sum(math.prod(size) for _, size in boxes)
    for off, size in boxes:
        if len(off) != len(shape) or any(o < 0 or o + s > n for o, s, n in zip(off, size, shape)):
            raise ValueError(f"checkpoint.save: {key!r}: a shard at offsets {tuple(off)} of sizes "
                             f"{tuple(size)} lies outside the global shape {tuple(shape)}")
    for i, (oa, sa) in enumerate(boxes):
        for ob, sb in boxes[i + 1:]:
            if all(a < b + m and b < a + n and n and m for a, n, b, m in zip(oa, sa, ob, sb)):
                raise ValueError(f"checkpoint.save: {key!r}: shards at offsets {tuple(oa)} and "
                                 f"{tuple(ob)} overlap")
    if covered != total:
        raise ValueError(f"checkpoint.save: {key!r}: the shards cover {covered} of the {total} "
                         f"elements of shape {tuple(shape)}; a save needs every shard")


def chunks_of_region(region, chunks) -> list:
    """Grid coordinates of every chunk that ``region`` (``(start, stop)`` per dim) meets."""
    ranges = [range(lo // c, -(-hi // c)) if hi > lo else range(0) for (lo, hi), c in zip(region, chunks)]
    out = [()]
    for r in ranges:
        out = [p + (i,) for p in out for i in r]
    return out
