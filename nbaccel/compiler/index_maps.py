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


def gather(xp, flat, shape, strides, offset, maps, fill):
    """The NumPy tier's reading of a mapped layout: the elements as a real array (a copy, as
    NumPy's own roll/pad/tile make). Axes with stride 0 and no map stay size 1 (the NumPy tier
    broadcasts them)."""
    nd = len(shape)
    idx, inside = offset, None
    for d, (s, st, m) in enumerate(zip(shape, strides, maps)):
        if m is None and st == 0:
            continue
        i = xp.arange(s, dtype=xp.int64).reshape([s if k == d else 1 for k in range(nd)])
        if m is not None:
            mode, a, b, n = m
            i = a * i + b
            if mode == WRAP:
                i = i % n
            elif mode == CLAMP:
                i = xp.clip(i, 0, n - 1)
            else:
                ok = (i >= 0) & (i < n)
                inside = ok if inside is None else inside & ok
                i = xp.clip(i, 0, max(n - 1, 0))
        if st:
            idx = idx + st * i
    idx = xp.broadcast_to(xp.asarray(idx, dtype=xp.int64),
                          tuple(1 if (m is None and st == 0) else s for s, st, m in zip(shape, strides, maps)))
    out = flat[idx] if flat.size else xp.zeros(idx.shape, flat.dtype)
    if inside is not None:
        out = xp.where(inside, out, xp.asarray(fill, dtype=flat.dtype))
    return out
