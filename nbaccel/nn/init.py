"""In-place parameter initialisers (``nbaccel.nn.init``), drawing from nbaccel's seeded generator.

>>> import nbaccel as nb
>>> w = nb.empty(4, 3)
>>> _ = nb.nn.init.xavier_uniform_(w)
"""
from __future__ import annotations

import math

from .. import autograd
from ..ops.creation import generator as _default_rng
from ..convert import asarray

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "zeros_",
           "ones_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_"]


def _fill(tensor, sample):
    """Write ``sample(shape)`` (a NumPy array) into ``tensor`` in place, without autograd."""
    values = asarray(sample(tuple(tensor.shape)), dtype=tensor.dtype, device=tensor.device, _np=False)
    with autograd.no_grad():
        tensor.copy_(values)
    return tensor


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    if nonlinearity in ("linear", "conv1d", "conv2d", "conv3d", "sigmoid", "identity"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"unsupported nonlinearity {nonlinearity!r}")


def _fans(tensor):
    if tensor.ndim < 2:
        raise ValueError("fan in and fan out can not be computed for a tensor with fewer than "
                         f"2 dimensions (shape {tuple(tensor.shape)})")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def uniform_(tensor, a: float = 0.0, b: float = 1.0, generator=None):
    """Fill with samples from U(a, b)."""
    return _fill(tensor, lambda s: (generator or _default_rng()).uniform(a, b, s))


def normal_(tensor, mean: float = 0.0, std: float = 1.0, generator=None):
    """Fill with samples from N(mean, std**2)."""
    return _fill(tensor, lambda s: (generator or _default_rng()).normal(mean, std, s))


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0):
    """N(mean, std**2) samples redrawn until they fall in [a, b]."""
    def sample(shape):
        rng = _default_rng()
        out = rng.normal(mean, std, shape)
        bad = (out < a) | (out > b)
        while bad.any():
            out[bad] = rng.normal(mean, std, int(bad.sum()))
            bad = (out < a) | (out > b)
        return out
    return _fill(tensor, sample)


def constant_(tensor, val: float):
    with autograd.no_grad():
        return tensor.fill_(val)


def zeros_(tensor):
    return constant_(tensor, 0)


def ones_(tensor):
    return constant_(tensor, 1)


def xavier_uniform_(tensor, gain: float = 1.0):
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot)."""
    fan_in, fan_out = _fans(tensor)
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -a, a)


def xavier_normal_(tensor, gain: float = 1.0):
    fan_in, fan_out = _fans(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


def _kaiming_std(tensor, a, mode, nonlinearity):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode {mode!r} not supported, use 'fan_in' or 'fan_out'")
    fan_in, fan_out = _fans(tensor)
    fan = fan_in if mode == "fan_in" else fan_out
    return calculate_gain(nonlinearity, a) / math.sqrt(fan) if fan else 0.0


def kaiming_uniform_(tensor, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu"):
    """U(-b, b), b = gain * sqrt(3 / fan) (He). ``a=sqrt(5)`` is PyTorch's Linear default,
    which gives b = 1 / sqrt(fan_in)."""
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu"):
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity))
