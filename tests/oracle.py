"""The one helper every op test uses: run the same expression in nbaccel and in NumPy (and in
PyTorch when it is installed) and compare values, dtypes and gradients."""
from __future__ import annotations

import numpy as np

import nbaccel as nb

try:  # PyTorch is a peer, never a dependency
    import torch
except Exception:  # pragma: no cover - depends on the machine
    torch = None

RNG = np.random.default_rng(1234)

FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
ALL = ("bool",) + INTS + FLOATS


def tol(dtype):
    """(rtol, atol) by dtype: what a correct implementation differs by."""
    name = np.dtype(nb.dtypes.dtype(dtype).np).name if not isinstance(dtype, str) else dtype
    return {"float16": (2e-3, 2e-3), "bfloat16": (2e-2, 2e-2), "float32": (2e-5, 1e-6),
            "float64": (1e-10, 1e-12)}.get(name, (0, 0))


def random_array(shape, dtype="float32", low=-3.0, high=3.0, rng=RNG):
    """Random data of any nbaccel dtype (bfloat16 via ml_dtypes)."""
    dt = nb.dtypes.dtype(dtype)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt.np)
        lo, hi = max(int(low), info.min), min(int(high), info.max)
        if dt.kind == "u":
            lo = max(lo, 0)
        return rng.integers(lo, hi + 1, size=shape).astype(dt.np)
    return rng.uniform(low, high, size=shape).astype(dt.np)


def layouts(a):
    """The same values as contiguous, transposed-back and negatively-strided arrays."""
    yield "contiguous", a
    if a.ndim >= 2:
        yield "transposed", np.ascontiguousarray(a.swapaxes(-1, -2)).swapaxes(-1, -2)
    if a.ndim >= 1 and a.shape[-1] > 0:
        yield "negative-stride", np.ascontiguousarray(a[..., ::-1])[..., ::-1]


def to_nb(a):
    return nb.asarray(a) if isinstance(a, np.ndarray) else a


def as_numpy(x):
    if isinstance(x, nb.Tensor):
        return np.asarray(x.detach())
    return np.asarray(x)


def assert_close(got, want, dtype=None, rtol=None, atol=None, check_dtype=True, msg=""):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"{msg}: shape {got.shape} != {want.shape}"
    if check_dtype:
        assert got.dtype == want.dtype, f"{msg}: dtype {got.dtype} != {want.dtype}"
    r, a = tol(dtype or want.dtype.name if want.dtype.name in FLOATS else want.dtype)
    rtol = r if rtol is None else rtol
    atol = a if atol is None else atol
    g = got.astype(np.float64) if got.dtype.kind == "f" or got.dtype.name == "bfloat16" else got
    w = want.astype(np.float64) if want.dtype.kind == "f" or want.dtype.name == "bfloat16" else want
    np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=msg)


def check(nb_fn, np_fn, *arrays, torch_fn=None, rtol=None, atol=None, check_dtype=True,
          all_layouts=True):
    """Compare nb_fn(tensors) with np_fn(arrays) (and torch_fn(torch tensors) if given and
    PyTorch is installed), for every memory layout of the inputs."""
    want = np_fn(*arrays)
    cases = [("as-is", arrays)]
    if all_layouts:
        for i, a in enumerate(arrays):
            if isinstance(a, np.ndarray):
                for name, alt in layouts(a):
                    if name != "contiguous":
                        cases.append((f"arg{i} {name}", arrays[:i] + (alt,) + arrays[i + 1:]))
    for name, args in cases:
        got = nb_fn(*(to_nb(a) for a in args))
        assert isinstance(got, nb.Tensor), f"{name}: expected a Tensor, got {type(got).__name__}"
        assert_close(as_numpy(got), want, rtol=rtol, atol=atol, check_dtype=check_dtype,
                     msg=f"{getattr(nb_fn, '__name__', 'op')} [{name}]")
    if torch is not None and torch_fn is not None:
        targs = [torch.from_numpy(np.ascontiguousarray(a)) if isinstance(a, np.ndarray)
                 and a.dtype.name != "bfloat16" else a for a in arrays]
        if all(not (isinstance(a, np.ndarray) and a.dtype.name == "bfloat16") for a in arrays):
            tw = torch_fn(*targs)
            got = nb_fn(*(to_nb(a) for a in arrays))
            assert_close(as_numpy(got), tw.numpy(), rtol=rtol, atol=atol, check_dtype=False,
                         msg="vs torch")
    return want


def numerical_grad(f, arrays, i, eps=1e-6):
    """Central differences of sum(f(arrays) * w) w.r.t. arrays[i], w a fixed random weight."""
    x = arrays[i].astype(np.float64)
    out = np.asarray(f(*arrays))
    w = np.random.default_rng(7).standard_normal(out.shape)
    grad = np.zeros_like(x)
    it = np.nditer(x, flags=["multi_index"])
    for _ in it:
        idx = it.multi_index
        plus = [a.copy() for a in arrays]
        minus = [a.copy() for a in arrays]
        plus[i][idx] += eps
        minus[i][idx] -= eps
        grad[idx] = ((np.asarray(f(*plus)) * w).sum() - (np.asarray(f(*minus)) * w).sum()) / (2 * eps)
    return grad, w


def gradcheck(nb_fn, *arrays, eps=1e-6, rtol=1e-5, atol=1e-7, wrt=None):
    """Check autograd against central finite differences, in float64."""
    arrays = tuple(np.asarray(a, dtype=np.float64) if isinstance(a, np.ndarray) else a for a in arrays)
    wrt = [i for i, a in enumerate(arrays) if isinstance(a, np.ndarray)] if wrt is None else wrt

    def f_np(*xs):
        with nb.no_grad():
            return np.asarray(nb_fn(*(nb.asarray(x) if isinstance(x, np.ndarray) else x for x in xs)))

    for i in wrt:
        num, w = numerical_grad(f_np, list(arrays), i, eps)
        ts = [nb.asarray(a.copy()).requires_grad_(j == i) if isinstance(a, np.ndarray) else a
              for j, a in enumerate(arrays)]
        out = nb_fn(*ts)
        (out * nb.asarray(w)).sum().backward()
        got = ts[i].grad
        assert got is not None, f"no gradient reached argument {i}"
        np.testing.assert_allclose(np.asarray(got), num, rtol=rtol, atol=atol,
                                   err_msg=f"gradient of argument {i}")
