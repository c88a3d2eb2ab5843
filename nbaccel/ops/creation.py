"""Creation ops and the seeded random generator.

Creation functions default to float32 (nbaccel's default float) and int64; the NumPy-compatible
namespace (``nbaccel.numpy``) wraps them with NumPy's float64 default.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as D
from ..devices import device as _device
from .fronts import apply, as_tensor
from .movement import _shape_arg
from .registry import defalias, defop
from ..convert import asarray
from ..tensor_meta import is_tensor


def _dev(device):
    return _device(device) if device is not None else _device("cpu")


def _dt(dtype, default=D.float32):
    return D.dtype(dtype) if dtype is not None else default


def _value_dtype(value):
    if isinstance(value, bool):
        return D.bool_
    if isinstance(value, int):
        return D.int64
    if isinstance(value, complex):
        return D.complex64
    return D.float32


# ---- full (the primitive) and its friends ---------------------------------------------------

def _full_front(shape, fill_value, *, dtype=None, device=None, requires_grad=False):
    shape = _shape_arg((shape,)) if isinstance(shape, (tuple, list)) else _shape_arg((shape,) if isinstance(shape, int) else shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"negative dimensions are not allowed: {shape}")
    if is_tensor(fill_value):
        fill_value = fill_value.item()
    t = apply(full, (), {"shape": shape, "value": fill_value,
                         "dtype": _dt(dtype, _value_dtype(fill_value)), "device": _dev(device)})
    return t.requires_grad_(True) if requires_grad else t


full = defop("full", kind="creation", differentiable=False, fill=lambda p: p["value"],
             impl=lambda xp, shape, value, dtype, device: xp.full(shape, value, dtype=dtype.np),
             infer=lambda args, p: (p["shape"], p["dtype"]),
             front=_full_front, numpy="full")


def _creator(value, name):
    # the Array API's zeros(shape) (one int or tuple) and PyTorch's zeros(2, 3) / zeros(size=...)
    def front(shape=None, *more, dtype=None, device=None, requires_grad=False, size=None):
        if size is not None:
            if shape is not None or more:
                raise TypeError("got both a positional shape and size=")
            shape = size
        dims = () if shape is None and not more else (shape,) + more
        return _full_front(_shape_arg(dims), value, dtype=_dt(dtype), device=device,
                           requires_grad=requires_grad)
    front.__doc__ = f"A tensor of {name} (float32 unless ``dtype`` says otherwise)."
    return front


defalias("zeros", _creator(0, "zeros"), numpy="zeros")
defalias("ones", _creator(1, "ones"), numpy="ones")
# "empty" is zero-filled: never hand out uninitialised memory
defalias("empty", _creator(0, "zeros (empty is zero-filled)"), numpy="empty")


def _like_impl(xp, x, value, dtype):
    return xp.full(x.shape, value, dtype=dtype.np)


def _like_front(value):
    # *_like take a tensor argument, so they trace (their shape comes from the traced tensor)
    def front(x, fill_value=None, *, dtype=None, device=None, requires_grad=False):
        x = as_tensor(x)
        v = value if value is not None else fill_value
        if is_tensor(v):
            v = v.item()
        t = apply(full_like, (x,), {"value": v, "dtype": _dt(dtype, x.dtype)})
        if device is not None:
            t = t.to(device)
        return t.requires_grad_(True) if requires_grad else t
    return front


full_like = defop("full_like", kind="creation", differentiable=False, impl=_like_impl,
                  fill=lambda p: p["value"],
                  infer=lambda args, p: (args[0].shape, p["dtype"]), numpy="full_like",
                  front=_like_front(None))
defalias("zeros_like", _like_front(0), numpy="zeros_like")
defalias("ones_like", _like_front(1), numpy="ones_like")
defalias("empty_like", _like_front(0), numpy="empty_like")


# ---- ranges -----------------------------------------------------------------------------------

def _arange_front(start, stop=None, step=1, *, dtype=None, device=None, requires_grad=False):
    if stop is None:
        start, stop = 0, start
    vals = (start, stop, step)
    vals = tuple(v.item() if is_tensor(v) else v for v in vals)
    if vals[2] == 0:
        raise ValueError("arange: step must be nonzero")
    default = D.int64 if all(isinstance(v, int) for v in vals) else D.float32
    dt = _dt(dtype, default)
    n = max(0, math.ceil((vals[1] - vals[0]) / vals[2]))
    t = apply(arange, (), {"start": vals[0], "stop": vals[1], "step": vals[2], "n": n,
                           "dtype": dt, "device": _dev(device)})
    return t.requires_grad_(True) if requires_grad else t


arange = defop("arange", kind="creation", differentiable=False,
               impl=lambda xp, start, stop, step, n, dtype, device: xp.arange(start, stop, step).astype(dtype.np)[:n],
               infer=lambda args, p: ((p["n"],), p["dtype"]), front=_arange_front, numpy="arange")


def _linspace_front(start, stop, num=50, *, endpoint=True, dtype=None, device=None, steps=None,
                    requires_grad=False):
    if steps is not None:
        num = steps
    if num < 0:
        raise ValueError(f"linspace: number of samples {num} must be non-negative")
    cplx = isinstance(start, (complex, np.complexfloating)) or isinstance(stop, (complex, np.complexfloating)) or (
        dtype is not None and D.dtype(dtype).kind == "c")
    part = complex if cplx else float
    t = apply(linspace, (), {"start": part(start), "stop": part(stop), "num": int(num),
                             "endpoint": bool(endpoint),
                             "dtype": _dt(dtype, D.complex64 if cplx else D.float32),
                             "device": _dev(device)})
    return t.requires_grad_(True) if requires_grad else t


linspace = defop("linspace", kind="creation", differentiable=False,
                 impl=lambda xp, start, stop, num, endpoint, dtype, device: xp.linspace(
                     start, stop, num, endpoint=endpoint).astype(dtype.np),
                 infer=lambda args, p: ((p["num"],), p["dtype"]), front=_linspace_front,
                 numpy="linspace")


def _eye_front(n_rows, n_cols=None, k=0, *, dtype=None, device=None, M=None, requires_grad=False):
    n_cols = M if M is not None else n_cols
    n_cols = n_rows if n_cols is None else n_cols
    t = apply(eye, (), {"n": int(n_rows), "m": int(n_cols), "k": int(k), "dtype": _dt(dtype),
                        "device": _dev(device)})
    return t.requires_grad_(True) if requires_grad else t


eye = defop("eye", kind="creation", differentiable=False,
            impl=lambda xp, n, m, k, dtype, device: xp.eye(n, m, k, dtype=dtype.np),
            infer=lambda args, p: ((p["n"], p["m"]), p["dtype"]), front=_eye_front, numpy="eye")


# ---- random: one seeded generator, NumPy's PCG64 ---------------------------------------------

_rng = np.random.default_rng()


def manual_seed(seed: int):
    """Seed nbaccel's generator (rand, randn, randint, dropout, init)."""
    global _rng
    _rng = np.random.default_rng(int(seed))
    return _rng


def generator():
    return _rng


# Set by nbaccel.func.vmap while a vmapped function runs (the engine never imports it): it
# decides how a draw batches (randomness= "error" raises, "same" draws once, "different"
# draws one sample per example). ``hook(sample, shape, make) -> Tensor``.
vmap_random_hook = None


def _random_tensor(sample, shape, dtype, device, requires_grad):
    shape = _shape_arg(shape)
    make = lambda data: asarray(data, dtype=dtype, device=device, _np=False)   # noqa: E731
    t = make(sample(shape)) if vmap_random_hook is None else vmap_random_hook(sample, shape, make)
    return t.requires_grad_(True) if requires_grad else t


def _complex_draw(draw, scale=1.0):
    """A complex sample from two real draws (real and imaginary parts independent, as in
    PyTorch), each part scaled by ``scale``."""
    def sample(s):
        re, im = draw(s), draw(s)
        return (re + 1j * im) * scale if scale != 1.0 else re + 1j * im
    return sample


def rand(*shape, dtype=None, device=None, requires_grad=False):
    """Uniform samples in [0, 1) (complex: both parts uniform in [0, 1), as PyTorch)."""
    dt = _dt(dtype)
    draw = lambda s: _rng.random(s, dtype=np.float64)   # noqa: E731
    if dt.kind == "c":
        draw = _complex_draw(draw)
    return _random_tensor(lambda s: draw(s).astype(dt.np), shape, dt, device, requires_grad)


def randn(*shape, dtype=None, device=None, requires_grad=False):
    """Standard normal samples (complex: E|z|^2 = 1, each part of variance 1/2, as PyTorch)."""
    dt = _dt(dtype)
    draw = _rng.standard_normal
    if dt.kind == "c":
        draw = _complex_draw(draw, np.sqrt(0.5))
    return _random_tensor(lambda s: draw(s).astype(dt.np), shape, dt, device, requires_grad)


def randint(low, high=None, size=(), *, dtype=None, device=None):
    """Integers in [low, high)."""
    if high is None:
        low, high = 0, low
    dt = _dt(dtype, D.int64)
    return _random_tensor(lambda s: _rng.integers(low, high, s).astype(dt.np), size, dt, device, False)


def randperm(n, *, dtype=None, device=None):
    dt = _dt(dtype, D.int64)
    return _random_tensor(lambda s: _rng.permutation(n).astype(dt.np), (), dt, device, False)


def rand_like(x, *, dtype=None):
    return rand(*x.shape, dtype=dtype or x.dtype, device=x.device)


def randn_like(x, *, dtype=None):
    return randn(*x.shape, dtype=dtype or x.dtype, device=x.device)
