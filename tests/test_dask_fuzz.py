"""Differential fuzzing of the Dask bridge: random small programs (elementwise chains with
broadcasting, reductions over random axes, a reduction fed back into elementwise work, Dask's
own slicing, transposes, cumsum, matmul and concatenation between them) on random
chunkings, compiled against plain Dask on the same arrays: same type, shape, dtype and chunks,
same values when computed. ``make test`` runs CI_PROGRAMS programs; ``make fuzz`` runs
``NBACCEL_FUZZ_EXAMPLES`` (from seed ``NBACCEL_FUZZ_SEED``). A failure prints its program."""
import os
import random

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
import dask  # noqa: E402

import nbaccel as nb  # noqa: E402

CI_PROGRAMS = 300
UNARY = ["np.tanh({})", "np.abs({})", "np.sqrt(np.abs({}))", "-{}", "np.sin({})", "({} * {c})",
         "np.exp(np.minimum({}, 5))", "({} + {c})", "np.square({})"]
BINARY = ["({} + {})", "({} - {})", "({} * {})", "np.maximum({}, {})", "np.minimum({}, {})",
          "np.where({} > {}, 1.5, -0.5)"]
REDUCE = ["sum", "max", "min", "mean", "std", "var", "prod", "argmax", "argmin", "any", "all"]
MOVEMENT = ["({})[::2]", "({}).T", "np.cumsum({}, axis=0)", "({})[1:, ::-1]", "(({}) @ x.T)",
            "np.concatenate([{0}, {0}], axis=1)"]
DTYPES = [np.float64, np.float32, np.float32, np.int32, np.bool_]


def _chunks(rng, n):
    """A random chunking of n: one chunk, even chunks or uneven ones."""
    kind = rng.random()
    if kind < 0.25 or n == 1:
        return (n,)
    if kind < 0.6:
        return rng.randint(1, n)
    cuts = sorted(rng.sample(range(1, n), min(rng.randint(1, 3), n - 1)))
    return tuple(b - a for a, b in zip([0] + cuts, cuts + [n]))


def _expr(rng, names, depth):
    if depth == 0 or rng.random() < 0.25:
        return rng.choice(names)
    if rng.random() < 0.5:
        return rng.choice(UNARY).format(_expr(rng, names, depth - 1), c=rng.choice([2, 0.5, -1.25]))
    return rng.choice(BINARY).format(_expr(rng, names, depth - 1), _expr(rng, names, depth - 1))


def program(seed):
    """(source of f, argument arrays) for one seed."""
    rng = random.Random(seed)
    n, m = rng.randint(1, 9), rng.randint(1, 9)
    shapes = {"x": (n, m), "y": rng.choice([(m,), (n, 1), (n, m), (1, m)])}
    dtype = rng.choice(DTYPES)
    names = ["x", "y"] if rng.random() < 0.7 else ["x"]
    body = _expr(rng, names, rng.randint(1, 3))
    if dtype is np.bool_ and rng.random() < 0.7:
        body = f"np.logical_xor({names[0]}, {names[-1]})" if rng.random() < 0.5 else f"({names[0]} | {names[-1]})"
    if rng.random() < 0.25:      # Dask's own ops between the compiled stages
        body = rng.choice(MOVEMENT).format(body)
        body = _expr(rng, [body], 1) if rng.random() < 0.5 else body
    form = rng.random()
    axis = rng.choice([0, 1, None, (0, 1)])
    red = rng.choice(REDUCE)
    if red in ("argmax", "argmin") and isinstance(axis, tuple):
        axis = None
    keep = rng.random() < 0.3 and red not in ("argmax", "argmin")
    kd = ", keepdims=True" if keep else ""
    if form < 0.3:
        ret = body
    elif form < 0.75:
        ret = f"np.{red}(e, axis={axis}{kd})" if red not in ("std", "var") else f"np.{red}(e, axis={axis}{kd}, ddof={rng.choice([0, 1])})"
    else:   # a reduction fed back into elementwise work over the same axis
        r = rng.choice(["max", "mean", "sum", "min"])
        ax = rng.choice([0, 1])
        ret = f"(e - np.{r}(e, axis={ax}, keepdims=True)) * 0.5"
    src = f"def f({', '.join(names)}):\n    e = {body}\n    return {ret}\n"
    g = np.random.default_rng(seed)
    args = []
    for name in names:
        a = g.standard_normal(shapes[name]) * (10 if np.dtype(dtype).kind == "i" else 1)
        a = (a > 0) if dtype is np.bool_ else a.astype(dtype)
        if dtype in (np.float32, np.float64) and rng.random() < 0.1 and a.size:
            a.flat[rng.randrange(a.size)] = np.nan
        chunks = tuple(_chunks(rng, s) for s in a.shape)
        args.append(da.from_array(a, chunks=chunks))
    return src, args


def run_one(seed):
    """None when compiled matches plain, else a description of the difference."""
    src, args = program(seed)
    scope = {"np": np}
    exec(src, scope)
    f = scope["f"]
    try:
        want = f(*args)
        plain = want.compute()
    except Exception as e:   # noqa: BLE001 - plain Dask raises: the compiled call must too
        try:
            nb.compile(f, backend="numpy")(*args).compute()
        except type(e):
            return None
        if "zero-size array to reduction" in str(e):
            return None   # known: Dask's own max of an empty chunk raises where NumPy does not
        return f"plain raised {type(e).__name__}: {e}; compiled did not"
    cf = nb.compile(f, backend="numpy")
    got = cf(*args)
    if type(got) is not type(want):
        return f"type {type(got).__name__} != {type(want).__name__}"
    if (got.shape, got.dtype, got.chunks) != (want.shape, want.dtype, want.chunks):
        return f"{got.shape} {got.dtype} {got.chunks} != {want.shape} {want.dtype} {want.chunks}"
    value = got.compute()
    if type(value) is not type(plain) or np.asarray(value).dtype != np.asarray(plain).dtype:
        return f"computed {type(value).__name__} {np.asarray(value).dtype} != {type(plain).__name__}"
    if plain.dtype.kind == "f":
        tol = 2e-3 if plain.dtype == np.float16 else 2e-4   # (bool inputs of tanh give float16)
        ok = np.allclose(value, plain, rtol=tol, atol=tol / 20, equal_nan=True)
    else:
        ok = np.array_equal(value, plain)
    return None if ok else f"values differ:\n{value}\n{plain}"


def _check(seeds):
    failures = []
    with dask.config.set(scheduler="sync"):
        for s in seeds:
            why = run_one(s)
            if why is not None:
                failures.append(f"seed {s}: {why}\n{program(s)[0]}")
    assert not failures, f"{len(failures)} of {len(seeds)} programs differ:\n\n" + "\n".join(failures[:5])


def test_dask_fuzz_ci():
    _check(range(CI_PROGRAMS))


@pytest.mark.fuzz
def test_dask_fuzz_long():
    start = int(os.environ.get("NBACCEL_FUZZ_SEED", "1000000"))
    _check(range(start, start + int(os.environ.get("NBACCEL_FUZZ_EXAMPLES", "10000"))))
