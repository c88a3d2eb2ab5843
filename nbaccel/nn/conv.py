"""Convolution layers: Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d,
with PyTorch's parameter names, shapes and default initialisation (kaiming_uniform with
a = sqrt(5), bias U(-1/sqrt(fan_in), 1/sqrt(fan_in))), so state_dicts load in both directions.

>>> import nbaccel as nb
>>> conv = nb.nn.Conv2d(3, 8, 3, padding=1)
>>> conv(nb.randn(2, 3, 16, 16)).shape
(2, 8, 16, 16)
"""
from __future__ import annotations

import math

from . import functional as F
from . import init
from .module import Module
from .modules import _empty

_PAD_MODES = ("zeros", "reflect", "replicate", "circular")


def _tuple(v, n):
    return (int(v),) * n if isinstance(v, int) else tuple(int(a) for a in v)


class _ConvNd(Module):
    _dims = 2
    transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", output_padding=0, device=None,
                 dtype=None):
        super().__init__()
        n = self._dims
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError(f"in_channels ({in_channels}) and out_channels ({out_channels}) must "
                             f"be divisible by groups ({groups})")
        if padding_mode not in _PAD_MODES:
            raise ValueError(f"padding_mode must be one of {_PAD_MODES}, got {padding_mode!r}")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"invalid padding string {padding!r}, should be one of "
                                 "{'valid', 'same'}")
            if padding == "same" and any(s != 1 for s in _tuple(stride, n)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride = _tuple(kernel_size, n), _tuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _tuple(padding, n)
        self.dilation, self.groups = _tuple(dilation, n), groups
        self.output_padding = _tuple(output_padding, n)
        self.padding_mode = padding_mode
        shape = ((in_channels, out_channels // groups) if self.transposed
                 else (out_channels, in_channels // groups)) + self.kernel_size
        self.weight = _empty(shape, device, dtype)
        if bias:
            self.bias = _empty((out_channels,), device, dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.weight.shape[1] * math.prod(self.kernel_size)
            bound = 1 / math.sqrt(fan_in) if fan_in else 0.0
            init.uniform_(self.bias, -bound, bound)

    def _mode_padded(self, x):
        """A non-zero padding_mode pads explicitly first (then the convolution pads nothing)."""
        if self.padding_mode == "zeros":
            return x, self.padding
        if isinstance(self.padding, str):
            if self.padding == "valid":
                return x, 0
            totals = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
            pairs = [(t // 2, t - t // 2) for t in totals]
        else:
            pairs = [(p, p) for p in self.padding]
        flat = tuple(v for pair in reversed(pairs) for v in pair)
        return F.pad(x, flat, mode=self.padding_mode), 0

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * self._dims:
            s += f", padding={self.padding!r}" if isinstance(self.padding, str) else f", padding={self.padding}"
        if self.dilation != (1,) * self._dims:
            s += f", dilation={self.dilation}"
        if self.transposed and self.output_padding != (0,) * self._dims:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    """1-D convolution over (N, C, L) or (C, L) input (PyTorch's ``nn.Conv1d``)."""
    _dims = 1

    def forward(self, input):
        x, padding = self._mode_padded(input)
        return F.conv1d(x, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)


class Conv2d(_ConvNd):
    """2-D convolution over (N, C, H, W) or (C, H, W) input (PyTorch's ``nn.Conv2d``): stride,
    padding (int, pair, 'same', 'valid'), dilation, groups, padding_mode."""
    _dims = 2

    def forward(self, input):
        x, padding = self._mode_padded(input)
        return F.conv2d(x, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)


class Conv3d(_ConvNd):
    """3-D convolution over (N, C, D, H, W) or (C, D, H, W) input (PyTorch's ``nn.Conv3d``):
    stride, padding (int, triple, 'same', 'valid'), dilation, groups, padding_mode."""
    _dims = 3

    def forward(self, input):
        x, padding = self._mode_padded(input)
        return F.conv3d(x, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)


class _ConvTransposeNd(_ConvNd):
    transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, output_padding, device, dtype)

    def _output_padding(self, input, output_size):
        if output_size is None:
            return self.output_padding
        size = tuple(output_size)[-self._dims:]
        extra = []
        for a in range(self._dims):
            n_in = input.shape[input.ndim - self._dims + a]
            base = ((n_in - 1) * self.stride[a] - 2 * self.padding[a]
                    + self.dilation[a] * (self.kernel_size[a] - 1) + 1)
            if not 0 <= size[a] - base < max(self.stride[a], self.dilation[a]):
                raise ValueError(f"requested an output size of {size}, but valid sizes range "
                                 f"from {base} (for an input of {n_in})")
            extra.append(size[a] - base)
        return tuple(extra)


class ConvTranspose1d(_ConvTransposeNd):
    """Transposed 1-D convolution (PyTorch's ``nn.ConvTranspose1d``)."""
    _dims = 1

    def forward(self, input, output_size=None):
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups,
                                  self.dilation)


class ConvTranspose2d(_ConvTransposeNd):
    """Transposed 2-D convolution (PyTorch's ``nn.ConvTranspose2d``); weight (C_in,
    C_out/groups, KH, KW)."""
    _dims = 2

    def forward(self, input, output_size=None):
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups,
                                  self.dilation)


class ConvTranspose3d(_ConvTransposeNd):
    """Transposed 3-D convolution (PyTorch's ``nn.ConvTranspose3d``); weight (C_in,
    C_out/groups, KD, KH, KW); ``forward(input, output_size=None)``."""
    _dims = 3

    def forward(self, input, output_size=None):
        return F.conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups,
                                  self.dilation)
