"""Index maps: how ``np.roll``, ``np.pad`` and ``np.tile`` read their input inside a kernel.

A plain load reads element ``offset + Σ stride[d] · i[d]``. An axis with an *index map*
``(mode, a, b, n)`` reads source index ``j = mode(a · i + b)`` of a source axis of size ``n``
and contributes ``stride[d] · j``:

* ``wrap``   ``j = (a·i + b) mod n``            roll, pad(mode="wrap"), tile
* ``clamp``  ``j = min(max(a·i + b, 0), n - 1)`` pad(mode="edge")
* ``mask``   ``j = a·i + b`` when ``0 <= j < n``, else the layout's ``fill`` value
             (pad(mode="constant"); only ever on a bare load, see ``schedule.movement``)

``a`` is 1 until a slice with a step (or a flip) is taken of the mapped axis. A map composes
with the other movement ops (permute, slice, broadcast, a reshape that keeps the mapped axis
whole), and a wrap composes with another wrap of the same period (roll of roll, tile of
roll), so every op here stays index arithmetic; any other composition returns None and the
scheduler materialises the value first (always correct). This module knows nothing of
Layout: it works on tuples, and ``loops.Layout`` calls it.
"""
from __future__ import annotations

WRAP, CLAMP, MASK = "wrap", "clamp", "mask"
PAD_MODES = {"wrap": WRAP, "edge": CLAMP, "constant": MASK}


def source_index(m, i):
    """The source index position i reads through map m (None: masked out)."""
    mode, a, b, n = m
    t = a * i + b
    if mode == WRAP:
        return t % n
    if mode == CLAMP:
        return min(max(t, 0), n - 1)
    return t if 0 <= t < n else None


def normalise(shape, strides, offset, maps):
    """(strides, offset, maps) with every map that reads one source index folded into the
    offset (a size-1 or broadcast axis), wraps of broadcast axes dropped and wrap shifts
    reduced mod n, so equal reads compare equal. An axis masked out everywhere raises
    ValueError: the caller turns that into "cannot be expressed" (None)."""
    strides, out = list(strides), []
    for d, m in enumerate(maps):
        if m is not None and (shape[d] == 1 or m[1] == 0):
            j = source_index((m[0], 0, m[2], m[3]), 0)
            if j is None:
                raise ValueError("an axis is masked out everywhere")
            offset += strides[d] * j
            strides[d], m = 0, None
        elif m is not None and strides[d] == 0 and m[0] != MASK:
            m = None                     # every source index holds the same value
        elif m is not None and m[0] == WRAP:
            m = (WRAP, m[1], m[2] % m[3], m[3])
        out.append(m)
    return strides, offset, (tuple(out) if any(out) else None)


def sliced(m, start, step):
    """Map m seen through a slice ``start::step`` of its axis."""
    mode, a, b, n = m
    return (mode, a * step, a * start + b, n)


def rolled(m, shift, n):
    """Map of an axis of size n rolled by ``shift`` (output i reads input (i - shift) mod n),
    read through the input's map m (None: a plain axis). None: not expressible."""
    if m is None:
        return (WRAP, 1, -shift, n)
    if m[0] == WRAP and m[3] == n:       # a·((i - s) mod n) + b ≡ a·i - a·s + b (mod n)
        return (WRAP, m[1], m[2] - m[1] * shift, n)
    return None


def tiled(m, n):
    """Map of an axis of size n tiled (output i reads input i mod n)."""
    if m is None:
        return (WRAP, 1, 0, n)
    if m[0] == WRAP and m[3] == n:       # a·(i mod n) + b ≡ a·i + b (mod n)
        return m
    return None


def padded(m, before, mode, n):
    """Map of an axis of size n padded with ``before`` elements in front, in map mode ``mode``."""
    if m is None:
        return (mode, 1, -before, n)
    if mode == WRAP and m[0] == WRAP and m[3] == n:
        return (WRAP, m[1], m[2] - m[1] * before, n)
    return None


def wrap_class(m, size):
    """How a renderer computes a wrap over ``size`` positions: 'sub' (one conditional
    subtraction of n: a roll), 'add' (one conditional addition) or 'mod' (a remainder: a
    tile, a wide pad). Integer division costs ~20 cycles, a select one."""
    _, a, b, n = m
    lo, hi = min(b, a * (size - 1) + b), max(b, a * (size - 1) + b)
    if 0 <= lo and hi < 2 * n:
        return "sub"
    if -n <= lo and hi < n:
        return "add"
    return "mod"


def source_shape(shape, strides, maps):
    """The shape of the region a mapped layout reads: the source size n on a mapped axis, the
    axis's own size on a plain one, 1 where the stride is 0 (a broadcast, or a mask alone)."""
    return tuple(1 if st == 0 else (s if m is None else m[3]) for s, st, m in zip(shape, strides, maps))


def gather(xp, src, shape, maps, fill):
    """The NumPy tier's reading of a mapped layout: ``src`` is the strided view of the region
    it reads (:func:`source_shape`), and each mapped axis is one ``take`` with a short index
    vector (a copy per axis, as NumPy's own roll and pad make; a full N-D index array costs
    8 bytes per element and a random gather). Plain axes keep their size-1 broadcasts."""
    nd = len(shape)
    inside = None
    for d, (s, m) in enumerate(zip(shape, maps)):
        if m is None:
            continue
        mode, a, b, n = m
        t = a * xp.arange(s, dtype=xp.int64) + b
        if mode == MASK:
            ok = ((t >= 0) & (t < n)).reshape([s if k == d else 1 for k in range(nd)])
            inside = ok if inside is None else inside & ok
            if n == 0:
                src = xp.zeros(src.shape[:d] + (1,) + src.shape[d + 1:], src.dtype)
                continue
        if src.shape[d] == 1 and n > 1:
            continue                      # a stride-0 axis: every source index holds this value
        t = t % n if mode == WRAP else xp.clip(t, 0, n - 1)
        src = xp.take(src, t, axis=d)
    if inside is not None:
        src = xp.where(inside, src, xp.asarray(fill, dtype=src.dtype))
    return src
