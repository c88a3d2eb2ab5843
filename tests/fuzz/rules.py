"""The rules of the program generator: each writes one statement of one NumPy construct.

A rule takes the ``Builder`` (variables with concrete values, a seeded ``rng``) and returns
``(code, note)`` — one line of Python and what it chose — or ``None`` where it does not
apply. It need not check that NumPy accepts the line: the builder runs it and keeps it only
if NumPy does (or, rarely, ends the program on NumPy's exception).

``WEIGHTS`` is the whitelist of constructs: how often each rule is drawn. Set a weight to 0
(or pass your own dict to ``generate``) to switch a construct off.
"""
from __future__ import annotations

# -- operators and spellings ------------------------------------------------------------------
ARITHMETIC = ["+", "-", "*", "/", "np.maximum", "np.minimum", "np.add", "np.multiply",
              "np.subtract", "np.true_divide"]
COMPARISONS = ["<", "<=", "==", "!=", ">", ">=", "np.greater", "np.equal"]
LOGICAL = ["&", "|", "^", "np.logical_and", "np.logical_or", "np.logical_xor"]
# Python scalars follow NumPy 2's weak promotion (int32 + 2 stays int32, float32 * 0.5
# stays float32, int32 + 2**40 raises OverflowError); NumPy scalars are strong.
SCALARS = ["2", "-1", "0.5", "1.5", "0", "3", "True", "-2.25", "np.float32(0.5)",
           "np.float64(2.0)", "np.int64(2)", "np.int32(-1)", "2**40"]
SCALAR_WEIGHTS = [4, 3, 4, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1]
UNARY = ["-{x}", "np.negative({x})", "abs({x})", "np.abs({x})", "np.square({x})",
         "np.sqrt(np.abs({x}))", "np.exp(np.clip({x}, -4, 4))", "np.tanh({x})",
         "np.log(np.abs({x}) + 1)", "np.sign({x})", "np.isnan({x})", "np.isfinite({x})",
         "~{x}", "np.logical_not({x})", "{x} ** 2", "{x} ** -1", "{x}.copy()", "+{x}"]
DTYPE_NAMES = ["float32", "float64", "int32", "int64", "bool"]
REDUCTIONS = ["sum", "prod", "max", "min", "argmax", "argmin", "any", "all", "mean", "var", "std"]
SLICE_PIECES = [":", "::2", "::-1", "1:", ":-1", "1::2", "::-2", "-2::-1", "{int}", "None"]
SLICE_WEIGHTS = [3, 3, 3, 2, 2, 1, 2, 1, 3, 1]


def _call_or_infix(op, x, y):
    return f"{op}({x}, {y})" if op.startswith("np.") else f"{x} {op} {y}"


def _assign(b, expr, note=""):
    return f"{b.temp()} = {expr}", note


# -- broadcasting ---------------------------------------------------------------------------
# How often each pattern relates a second operand's shape to the first's (0 switches it off).
PATTERN_WEIGHTS = {"same": 4, "scalar": 2, "suffix": 3, "ones": 3, "cross": 3, "prepend": 2,
                   "mismatch": 1}


# -- --------------------------------------------------------------------------
def _partner_shape(b, shape):
    """A second operand's shape for shape, and the broadcasting pattern's name."""
    rng = b.rng
    names = [k for k, w in PATTERN_WEIGHTS.items() if w > 0]
    pattern = rng.choices(names, [PATTERN_WEIGHTS[k] for k in names])[0]
    if pattern == "same":
        other = shape
    elif pattern == "scalar":
        other = ()
    elif pattern == "suffix":                # fewer leading dims: (D,) with (N, D)
        other = shape[rng.randint(0, len(shape)):]
    elif pattern == "ones":                  # size-1 dims that stretch: (N, 1) with (N, D)
        other = tuple(1 if rng.random() < 0.5 else d for d in shape)
    elif pattern == "cross":                 # both stretch: (N, 1, D) with (1, M, D)
        other = tuple(b.size() if d == 1 else rng.choice((d, 1)) for d in shape)
    elif pattern == "prepend":               # more leading dims: (M, 1, N, D) with (N, D)
        other = tuple(b.size() for _ in range(rng.randint(1, 2))) + shape
        other = other[-4:]
    else:                                    # NumPy raises ValueError
        bigger = [i for i, d in enumerate(shape) if d > 1]
        if not bigger:
            return "same", shape
        i = rng.choice(bigger)
        other = shape[:i] + (shape[i] + 1,) + shape[i + 1:]
    return pattern, tuple(other)


def _partner(b, x, scalar=0.0):
    """A broadcast partner for variable x: (operand text, pattern)."""
    if b.rng.random() < scalar:
        return b.rng.choices(SCALARS, SCALAR_WEIGHTS)[0], "scalar"
    pattern, shape = _partner_shape(b, b.shape(x))
    return b.operand_of_shape(shape), pattern


def _maybe_swap(b, x, y):
    return (y, x) if b.rng.random() < 0.3 else (x, y)


def binary(b):
    """Arithmetic between two arrays under one broadcasting pattern."""
    x = b.operand()
    y, pattern = _partner(b, x)
    x, y = _maybe_swap(b, x, y)
    op = b.rng.choice(ARITHMETIC)
    return _assign(b, _call_or_infix(op, x, y), f"{pattern} {b.shape(x)} with {b.shape(y)}")


def pairwise(b):
    """The k-means / n-body pattern: x[:, None] - y[None, :], (N, 1, D) with (1, M, D)."""
    x = b.operand()
    shape = b.shape(x)
    if not shape:
        return None
    y = b.operand_of_shape((b.size(),) + shape[1:], reuse=0.3)
    op = b.rng.choice(["-", "*", "+", "np.maximum"])
    expr = _call_or_infix(op, f"{x}[:, None]", f"{y}[None, :]")
    if b.rng.random() < 0.5:
        expr = f"({expr}) ** 2"
    return _assign(b, expr, f"{shape} with {b.shape(y)}")


def scalar(b):
    """An array with a Python or NumPy scalar, on either side (NumPy 2 weak-scalar rules)."""
    x = b.operand()
    s = b.rng.choices(SCALARS, SCALAR_WEIGHTS)[0]
    op = b.rng.choice(["+", "-", "*", "/", "np.maximum", "**"] if s in ("2", "3", "0.5") else
                      ["+", "-", "*", "/", "np.maximum"])
    note = f"{op} {s}"
    x, s = _maybe_swap(b, x, s) if op != "**" else (x, s)
    return _assign(b, _call_or_infix(op, x, s), note)


def unary(b):
    x = b.operand()
    return _assign(b, b.rng.choice(UNARY).format(x=x))


def astype(b):
    x = b.operand()
    dt = b.rng.choice(DTYPE_NAMES)
    form = b.rng.choice(["{x}.astype(np.{dt})", "{x}.astype({dt!r})", "np.asarray({x}, dtype=np.{dt})"])
    if b.rng.random() < 0.3:      # the array itself, or a copy where NumPy makes one (issue 37)
        form = b.rng.choice(["np.asarray({x})", "np.asanyarray({x})", "np.ascontiguousarray({x})",
                             "np.asarray({x}, copy=True)"])
        return _assign(b, form.format(x=x), "as-is")
    return _assign(b, form.format(x=x, dt=dt), f"{b.dtype(x)} -> {dt}")


def compare(b):
    x = b.operand()
    y, pattern = _partner(b, x, scalar=0.4)
    op = b.rng.choice(COMPARISONS)
    return _assign(b, _call_or_infix(op, x, y), pattern)


def logical(b):
    x = b.operand()
    y, pattern = _partner(b, x, scalar=0.2)
    op = b.rng.choice(LOGICAL)
    return _assign(b, _call_or_infix(op, x, y), pattern)


def where(b):
    """np.where(cond, x, y): cond a bool variable or a comparison, x and y arrays or scalars."""
    c = b.operand()
    ref = c
    if b.dtype(c) != bool or b.rng.random() < 0.4:
        rhs, _ = _partner(b, c, scalar=0.7)
        c = f"{c} {b.rng.choice(['>', '<', '!=', '>='])} {rhs}"
    x, px = _partner(b, ref, scalar=0.3)
    y, py = _partner(b, ref, scalar=0.3)
    return _assign(b, f"np.where({c}, {x}, {y})", f"{px} / {py}")


def clip(b):
    x = b.operand()
    lo, _ = _partner(b, x, scalar=0.7)
    hi, _ = _partner(b, x, scalar=0.7)
    form = b.rng.choice(["np.clip({x}, {lo}, {hi})", "{x}.clip({lo}, {hi})", "{x}.clip(min={lo})",
                         "{x}.clip(max={hi})", "np.clip({x}, {lo}, None)", "np.clip({x}, None, {hi})"])
    return _assign(b, form.format(x=x, lo=lo, hi=hi))


# -- reductions -------------------------------------------------------------------------------
def _axes(b, ndim, single=False):
    """None, one axis (maybe negative) or, unless single, a tuple over any subset (maybe empty)."""
    rng = b.rng
    if rng.random() < 0.04:                  # out of range: NumPy raises AxisError
        return str(ndim)
    kinds = ["none", "int"] if single else ["none", "int", "tuple"]
    kind = rng.choice(kinds) if ndim else "none"
    if kind == "none":
        return "None"
    if kind == "int":
        return str(rng.randrange(-ndim, ndim))
    axes = [a for a in range(ndim) if rng.random() < 0.5]
    rng.shuffle(axes)
    axes = [a - ndim if rng.random() < 0.3 else a for a in axes]
    return "(" + ", ".join(map(str, axes)) + ("," if len(axes) == 1 else "") + ")"


def reduce(b):
    """A reduction over any axis subset, keepdims on or off, as a method or a function."""
    x = b.operand()
    op = b.rng.choice(REDUCTIONS)
    args = []
    axis = _axes(b, len(b.shape(x)), single=op in ("argmax", "argmin") and b.rng.random() < 0.95)
    if axis != "None" or b.rng.random() < 0.3:
        args.append(f"axis={axis}")
    if b.rng.random() < 0.5:
        args.append("keepdims=True")
    if op in ("var", "std") and b.rng.random() < 0.3:
        args.append("ddof=1")
    if b.rng.random() < 0.5:
        expr = f"{x}.{op}({', '.join(args)})"
    else:
        expr = f"np.{op}({', '.join([x] + args)})"
    return _assign(b, expr, op)


# -- movement ---------------------------------------------------------------------------------
def slice_(b):
    """Basic indexing: steps, negative steps, integers, None, a leading Ellipsis."""
    x = b.operand()
    shape = b.shape(x)
    k = b.rng.randint(1, max(1, len(shape)))
    dims = shape[-k:] if b.rng.random() < 0.3 else shape[:k]
    lead = "..., " if dims is not shape[:k] and len(dims) < len(shape) else ""
    pieces = []
    for d in dims or (1,):
        piece = b.rng.choices(SLICE_PIECES, SLICE_WEIGHTS)[0]
        if piece == "{int}":
            piece = str(b.rng.randrange(-d, d)) if d else "0"
        pieces.append(piece)
    if not shape:
        pieces = [b.rng.choice(["None", "...", "()"])]
    return _assign(b, f"{x}[{lead}{', '.join(pieces)}]")


def transpose(b):
    """.T, .mT, transpose with or without a permutation, swapaxes, moveaxis."""
    x = b.operand()
    n = len(b.shape(x))
    perm = list(range(n))
    b.rng.shuffle(perm)
    i, j = (b.rng.randrange(-n, n), b.rng.randrange(-n, n)) if n else (0, 0)
    forms = ["{x}.T", "np.transpose({x})", "{x}.transpose({p})", "np.transpose({x}, {p})"]
    if n:
        forms += ["np.swapaxes({x}, {i}, {j})", "np.moveaxis({x}, {i}, {j})", "{x}.swapaxes({i}, {j})"]
    if n >= 2:
        # (ndarray.transpose takes the permutation as separate ints too: a.transpose(1, 0),
        # and a.transpose(0, 1) of a 2-d array is the array itself, not PyTorch's swap)
        forms += ["{x}.mT", "{x}.transpose({s})"]
    form = b.rng.choice(forms)
    return _assign(b, form.format(x=x, p=tuple(perm), i=i, j=j, s=", ".join(map(str, perm))))


def _new_shape(b, shape):
    """A shape of the same size: merge, split, add or drop size-1 dims; maybe a -1."""
    dims = list(shape)
    for _ in range(b.rng.randint(1, 2)):
        move = b.rng.choice(["merge", "split", "insert1", "drop1"])
        if move == "merge" and len(dims) >= 2:
            i = b.rng.randrange(len(dims) - 1)
            dims[i:i + 2] = [dims[i] * dims[i + 1]]
        elif move == "split" and dims:
            i = b.rng.randrange(len(dims))
            f = b.rng.choice([f for f in (1, 2, 3, 4) if dims[i] % f == 0] if dims[i] else [0])
            dims[i:i + 1] = [f, dims[i] // f] if f else [0, b.size()]
        elif move == "insert1" and len(dims) < 4:
            dims.insert(b.rng.randint(0, len(dims)), 1)
        elif move == "drop1" and 1 in dims:
            dims.remove(1)
    if dims and b.rng.random() < 0.4:
        dims[b.rng.randrange(len(dims))] = -1
    return tuple(dims)


def reshape(b):
    """reshape (tuple, varargs, with -1), ravel, flatten: of views too, where strides break."""
    x = b.operand()
    shape = _new_shape(b, b.shape(x))
    form = b.rng.choice(["{x}.reshape({s})", "np.reshape({x}, {s})", "{x}.reshape({v})",
                         "{x}.ravel()", "np.ravel({x})", "{x}.flatten()", "{x}.reshape(-1)"])
    return _assign(b, form.format(x=x, s=shape, v=", ".join(map(str, shape)) or "()"))


def expand(b):
    """New size-1 axes ([None], expand_dims) and removed ones (squeeze)."""
    x = b.operand()
    shape = b.shape(x)
    n = len(shape)
    ones = [i for i, d in enumerate(shape) if d == 1]
    forms = ["{x}[None]", "{x}[..., None]", "np.expand_dims({x}, {a})", "np.squeeze({x})",
             "{x}.squeeze()"]
    if n:
        forms += ["{x}[:, None]"]
    if ones or b.rng.random() < 0.1:
        forms += ["np.squeeze({x}, axis={o})", "{x}.squeeze({o})"]
    a = b.rng.randint(-n - 1, n)
    o = b.rng.choice(ones) if ones else (b.rng.randrange(n) if n else 0)
    return _assign(b, b.rng.choice(forms).format(x=x, a=a, o=o))


def broadcast_to(b):
    x = b.operand()
    shape = b.shape(x)
    target = tuple(b.size() for _ in range(b.rng.randint(0, 2))) + tuple(
        b.size() if d == 1 else d for d in shape)
    return _assign(b, f"np.broadcast_to({x}, {target[-4:] if len(shape) <= 4 else target})")


def wrap(b):
    """np.roll (scalar or tuple shifts, axis None/int/tuple, shifts past the size), np.pad
    (constant with values, edge, wrap; per-axis widths) and np.tile (reps shorter or longer
    than ndim): the compiler reads them as wrapped, clamped or masked loads."""
    x = b.operand()
    shape = b.shape(x)
    n, rng = len(shape), b.rng
    shift = lambda: rng.randint(-7, 7)  # noqa: E731
    kind = rng.choice(["roll", "roll", "pad", "pad", "tile"])
    if kind == "roll":
        forms = ["np.roll({x}, {s})", "np.roll({x}, {s}, None)"]
        if n:
            a = rng.randrange(-n, n)
            forms += [f"np.roll({{x}}, {{s}}, {a})", f"np.roll({{x}}, {{s}}, axis={a})",
                      f"np.roll({{x}}, ({shift()}, {shift()}), ({a}, {rng.randrange(-n, n)}))",
                      f"np.roll({{x}}, {{s}}, ({a},))"]
        return _assign(b, rng.choice(forms).format(x=x, s=shift()), "roll")
    if kind == "tile":
        reps = tuple(rng.randint(0 if rng.random() < 0.1 else 1, 3) for _ in range(rng.randint(1, 3)))
        return _assign(b, f"np.tile({x}, {reps[0] if len(reps) == 1 and rng.random() < 0.5 else reps})", "tile")
    mode = rng.choice(["constant", "constant", "edge", "wrap"])
    width = rng.choice([rng.randint(0, 2), (rng.randint(0, 3), rng.randint(0, 3))] +
                       ([tuple((rng.randint(0, 3), rng.randint(0, 3)) for _ in range(n))] if n else []))
    extra = ""
    if mode == "constant" and rng.random() < 0.6:
        extra = f", constant_values={rng.choice(['1', '-2.5', '(1, 2)', 'True'])}"
    return _assign(b, f"np.pad({x}, {width}, mode={mode!r}{extra})", f"pad {mode}")


# -- matmul -----------------------------------------------------------------------------------
def matmul(b):
    """Batched matmul with broadcasting batch dims; vectors on either side."""
    x = b.operand()
    shape = b.shape(x)
    rng = b.rng
    if not shape:
        other = b.random_shape(ndim=rng.randint(1, 2))   # NumPy raises ValueError
    else:
        k = shape[-1]
        if rng.random() < 0.05:
            k += 1                                        # NumPy raises ValueError
        m = b.size()
        if len(shape) == 1:
            other = rng.choice([(k,), (k, m), (b.size(), k, m)])
        elif rng.random() < 0.2:
            other = (k,)
        else:
            _, batch = _partner_shape(b, shape[:-2])
            if len(batch) != len(shape[:-2]) and rng.random() < 0.5:
                batch = shape[:-2]
            other = tuple(batch)[-2:] + (k, m)
    y = b.operand_of_shape(other, reuse=0.3)
    op = rng.choice(["{x} @ {y}", "np.matmul({x}, {y})"])
    return _assign(b, op.format(x=x, y=y), f"{shape} @ {other}")


# -- in-place updates of intermediates ----------------------------------------------------------
INPLACE = ["{t} += 1", "{t} *= 2", "{t} -= {y}", "{t} /= 2", "{t} += {y}", "{t}[1:] *= 2",
           "{t}[..., ::2] += 1", "{t}[::-1] -= {y}", "{t}[0] = 0", "{t}[:] = {y}",
           "{t}[..., -1:] = 1.5", "{t} **= 2", "np.multiply({t}, 2, out={t})",
           "np.copyto({t}[..., ::2], 1)",
           # NumPy refuses some before their shapes: bool subtract, a float or an int32 result
           # into bool, bitwise ops on floats (the loop and the cast come first)
           "np.subtract({t}, {y}, out={t})", "{t} //= {y}", "{t} |= {y}", "{t}[::2] ^= {y}"]


def inplace(b):
    """Augmented assignment or item assignment on an intermediate (never on an input)."""
    temps = [v for v in b.vars if b.is_temp(v) and not b.aliases_input(v)]
    if not temps:
        return None
    t = b.rng.choice(temps[-3:])
    form = b.rng.choice(INPLACE)
    y = ""
    if "{y}" in form:
        y, _ = _partner(b, t, scalar=0.3)
    return form.format(t=t, y=y), ""


RULES = {
    "binary": binary, "pairwise": pairwise, "scalar": scalar, "unary": unary, "astype": astype,
    "compare": compare, "logical": logical, "where": where, "clip": clip, "reduce": reduce,
    "slice": slice_, "transpose": transpose, "reshape": reshape, "expand": expand,
    "broadcast_to": broadcast_to, "matmul": matmul, "inplace": inplace, "wrap": wrap,
}

WEIGHTS = {
    "binary": 10, "pairwise": 3, "scalar": 6, "unary": 5, "astype": 3, "compare": 4,
    "logical": 2, "where": 4, "clip": 3, "reduce": 10, "slice": 6, "transpose": 4,
    "reshape": 5, "expand": 4, "broadcast_to": 3, "matmul": 3, "inplace": 5, "wrap": 4,
}
