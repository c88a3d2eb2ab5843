"""roll, tile and pad: copies whose every element is the input's at a wrapped, clamped or
masked index.

Each is one primitive whose eager meaning is NumPy's own function on raw arrays (``impl``),
and whose ``layout`` function tells the compiler the same thing as index arithmetic
(``Layout.roll/tile/pad``, ``compiler/schedule/index_maps.py``): a fused kernel reads the input at
``(i - shift) mod n`` instead of concatenating slices, so a Game of Life written with
``np.roll`` is one kernel. The fronts normalise NumPy's many spellings into the params.
"""
from __future__ import annotations

import numpy as np

from .fronts import apply, as_tensor, numpy_made
from .meta import normalize_axis
from .registry import ALIASES, OPS, defmethod, defop


def _copy(x, order):
    """A copy laid out as NumPy's function lays out its copy (``clone``'s order)."""
    return apply(OPS["clone"], (x,), {"order": order})


def _fn(name):
    """An op's front or an alias, looked up when called (no import of the ops package)."""
    return OPS[name].front if name in OPS else ALIASES[name]


# ---- roll ----------------------------------------------------------------------------------------

def _roll_front(x, shift=None, axis=None, *, dims=None, shifts=None):
    """Rotate elements along axes (the flattened tensor when axis is None); a copy. Shifts of
    one axis named twice add up, as in NumPy. ``shifts``/``dims`` are PyTorch's names."""
    x = as_tensor(x)
    axis = dims if dims is not None else axis
    shift = shifts if shifts is not None else shift
    if shift is None:
        raise TypeError("roll() missing 1 required positional argument: 'shift'")
    if axis is None:
        if x.ndim != 1:   # a flat roll is a wrap of the flattened index: roll the flat view
            return _roll_front(x.reshape(-1), shift, 0).reshape(x.shape)
        axis = 0
    sh = tuple(int(s) for s in np.atleast_1d(np.asarray(shift)).reshape(-1))
    ax = tuple(int(a) for a in np.atleast_1d(np.asarray(axis)).reshape(-1))
    if len(sh) == 1:
        sh = sh * len(ax)
    if len(ax) == 1:
        ax = ax * len(sh)
    if len(sh) != len(ax):
        raise ValueError(f"roll: shift {shift} and axis {axis} have different lengths")
    per = [0] * x.ndim
    for s, a in zip(sh, ax):
        a = normalize_axis(a, x.ndim)[0]
        per[a] += s
    if all(n == 0 or s % n == 0 for s, n in zip(per, x.shape)):
        return _copy(x, "K")                  # (np.roll's copy is laid out as its operand)
    # the shifts stay as written (not reduced mod n): the graph of np.roll(Z, -1) is then the
    # same for every size, so a new board size makes the sizes dynamic instead of a new graph
    return apply(roll, (x,), {"shift": tuple(per)})


roll = defop(
    "roll", kind="movement", front=_roll_front, methods="roll", numpy="roll",
    impl=lambda xp, x, shift: xp.roll(x, shift, tuple(range(x.ndim))),
    infer=lambda args, p: (tuple(args[0].shape), args[0].dtype),
    layout=lambda lay, p, shape: lay.roll(p["shift"]),
    grad=lambda g, out, x, shift: (apply(roll, (g,), {"shift": tuple(-s for s in shift)}),),
    batch_rule=lambda args, batched, p, size: apply(roll, args, {"shift": (0,) + tuple(p["shift"])}))


# ---- tile ----------------------------------------------------------------------------------------

def _tile_front(x, reps):
    """Repeat the whole tensor ``reps`` times per axis (NumPy tile; PyTorch's Tensor.repeat)."""
    x = as_tensor(x)
    reps = tuple(int(r) for r in np.atleast_1d(np.asarray(reps)).reshape(-1))
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: negative repetitions {reps}")
    nd = max(len(reps), x.ndim)
    reps = (1,) * (nd - len(reps)) + reps
    if x.ndim < nd:
        x = x.reshape((1,) * (nd - x.ndim) + tuple(x.shape))
    if all(r == 1 for r in reps):
        return _copy(x, "K")                  # (np.tile's copy is laid out as its operand)
    return apply(tile, (x,), {"reps": reps})


def _tile_grad(g, out, x, reps):
    spread = sum(((r, s) for r, s in zip(reps, x.shape)), ())
    return (g.reshape(spread).sum(axis=tuple(range(0, 2 * len(reps), 2))).reshape(x.shape),)


tile = defop(
    "tile", kind="movement", front=_tile_front, methods="tile", numpy="tile",
    impl=lambda xp, x, reps: xp.tile(x, reps),
    infer=lambda args, p: (tuple(r * s for r, s in zip(p["reps"], args[0].shape)), args[0].dtype),
    layout=lambda lay, p, shape: lay.tile(p["reps"]), grad=_tile_grad,
    batch_rule=lambda args, batched, p, size: apply(tile, args, {"reps": (1,) + tuple(p["reps"])}))


def _torch_repeat(x, *sizes):
    """PyTorch's ``Tensor.repeat(*sizes)``: NumPy's tile, with at least x.ndim sizes."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = sizes[0]
    sizes = tuple(int(s) for s in sizes)
    if len(sizes) < x.ndim:
        raise RuntimeError(f"repeat: the number of sizes ({len(sizes)}) can't be smaller than "
                           f"the number of dimensions of the tensor ({x.ndim})")
    return _tile_front(x, sizes)


defmethod("repeat", _torch_repeat)


# ---- pad -----------------------------------------------------------------------------------------

FUSED_MODES = ("constant", "edge", "wrap")   # what the compiler reads as index arithmetic


def _pairs(value, ndim, what, cast=int):
    """NumPy's (before, after) per axis from a scalar, one pair, or one pair per axis."""
    arr = np.asarray(value, dtype=object)
    try:
        arr = np.broadcast_to(arr, (ndim, 2))
    except ValueError:
        raise ValueError(f"pad: {what} {value!r} cannot be broadcast to ({ndim}, 2)") from None
    return tuple((cast(a), cast(b)) for a, b in arr.tolist())


def _pad_impl(xp, x, widths, mode, value):
    if mode == "constant":
        return xp.pad(x, widths, mode, constant_values=value)
    return xp.pad(x, widths, mode)


def _pad_grad(g, out, x, widths, mode, value):
    if mode == "constant":
        return (g[tuple(slice(lo, lo + n) for (lo, _), n in zip(widths, x.shape))],)
    for d, (lo, hi) in enumerate(widths):      # each padded axis: g @ one-hot(source index)
        if lo or hi:
            src = np.pad(np.arange(x.shape[d]), (lo, hi), mode)
            onehot = (src[:, None] == np.arange(x.shape[d])[None, :]).astype(g.dtype.np)
            g = _fn("moveaxis")(_fn("moveaxis")(g, d, -1) @ as_tensor(onehot), -1, d)
    return (g,)


def _scalar_of(value, dtype):
    """The fill as NumPy writes it into the array: cast (unsafely) to the array's dtype."""
    return np.asarray(value).astype(dtype.np).item()


def _pad_front(array, pad_width, mode="constant", **kwargs):
    """NumPy's ``np.pad``. 'constant', 'edge' and 'wrap' are one op the compiler fuses;
    'reflect' and 'symmetric' gather with NumPy's own index pattern (``take``)."""
    x = as_tensor(array)
    widths = _pairs(pad_width, x.ndim, "pad_width")
    if any(lo < 0 or hi < 0 for lo, hi in widths):
        raise ValueError("index can't contain negative values")
    if mode in ("edge", "wrap", "reflect", "symmetric"):
        extra = set(kwargs) - ({"reflect_type"} if mode in ("reflect", "symmetric") else set())
        if extra:
            raise ValueError(f"unsupported keyword arguments for mode '{mode}': {extra}")
        if any((lo or hi) and n == 0 for (lo, hi), n in zip(widths, x.shape)):
            raise ValueError(f"can't extend empty axis using modes other than 'constant' or 'empty'")
    if mode in ("edge", "wrap"):
        return apply(pad, (x,), {"widths": widths, "mode": mode, "value": 0})
    if mode in ("reflect", "symmetric"):
        if kwargs.get("reflect_type", "even") != "even":
            raise NotImplementedError("pad: reflect_type='odd' is not supported")
        for d, (lo, hi) in enumerate(widths):
            if lo or hi:
                x = _fn("take")(x, np.pad(np.arange(x.shape[d]), (lo, hi), mode), axis=d)
        return x
    if mode in _STATS:
        if set(kwargs) - {"stat_length"}:
            raise ValueError(f"unsupported keyword arguments for mode '{mode}': {set(kwargs) - {'stat_length'}}")
        return _pad_stat(x, widths, mode, kwargs.get("stat_length"))
    if mode == "empty":         # NumPy leaves the border uninitialised: any value is right
        mode, kwargs = "constant", {}
    if mode != "constant":      # median, linear_ramp, a callable: NumPy on the concrete values
        return as_tensor(np.pad(np.asarray(x), pad_width, mode, **kwargs))    # (a graph break)
    if set(kwargs) - {"constant_values"}:
        raise ValueError(f"unsupported keyword arguments for mode 'constant': {set(kwargs) - {'constant_values'}}")
    values = _pairs(kwargs.get("constant_values", 0), x.ndim, "constant_values",
                    cast=lambda v: _scalar_of(v, x.dtype))
    # NumPy pads axis by axis, a later axis writing the corners: runs of one value are one op
    steps = []
    for d, (lo, hi) in enumerate(widths):
        for side, w in ((0, lo), (1, hi)):
            if not w:
                continue
            v = values[d][side]
            if not steps or (type(steps[-1][1]), repr(steps[-1][1])) != (type(v), repr(v)):
                steps.append([[[0, 0] for _ in range(x.ndim)], v])
            steps[-1][0][d][side] = w
    if not steps:
        return _copy(x, "A")                  # (np.pad's is F order for an F-ordered operand)
    for w, v in steps:
        w = tuple(tuple(p) for p in w)
        if x.size == 0:     # nothing to read: every element is the fill
            shape = tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, w))
            full = _fn("full")(shape, v, dtype=x.dtype)
            x = numpy_made(full) if x._np else full
        else:
            x = apply(pad, (x,), {"widths": w, "mode": "constant", "value": v})
    return x


_STATS = {"maximum": "amax", "minimum": "amin", "mean": "mean"}


def _pad_stat(x, widths, mode, stat_length):
    """np.pad's statistic modes, axis by axis as NumPy does them (each axis's statistic is
    taken over the array padded along the earlier axes): the border is the statistic of the
    first / last ``stat_length`` elements, rounded for integer arrays, then concatenated."""
    lengths = _pairs(stat_length, x.ndim, "stat_length") if stat_length is not None else None
    for d, (lo, hi) in enumerate(widths):
        if not (lo or hi):
            continue
        n = x.shape[d]
        if n == 0:
            raise ValueError(f"can't extend empty axis using modes other than 'constant' or 'empty'")
        parts = []
        for side, w in ((0, lo), (1, hi)):
            k = n if lengths is None else max(1, min(lengths[d][side], n)) if lengths[d][side] else 0
            if k == 0:
                raise ValueError("stat_length of 0 yields no value for padding")
            chunk = x[(slice(None),) * d + ((slice(0, k),) if side == 0 else (slice(n - k, n),))]
            stat = _fn(_STATS[mode])(chunk, axis=d, keepdims=True)
            if x.dtype.kind in "iu" and stat.dtype != x.dtype:
                stat = _fn("round")(stat)
            shape = tuple(w if a == d else s for a, s in enumerate(x.shape))
            parts.append(_fn("broadcast_to")(stat.astype(x.dtype), shape))
        x = _fn("concat")([parts[0], x, parts[1]], axis=d)
    return x


pad = defop(
    "pad", kind="movement", impl=_pad_impl, grad=_pad_grad,
    front=_pad_front, numpy="pad",
    infer=lambda args, p: (tuple(n + lo + hi for n, (lo, hi) in zip(args[0].shape, p["widths"])),
                           args[0].dtype),
    layout=lambda lay, p, shape: lay.pad(p["widths"], p["mode"], p["value"]),
    batch_rule=lambda args, batched, p, size: apply(pad, args, dict(p, widths=((0, 0),) + tuple(p["widths"]))))
