"""Normalisation layers for convolutional networks: BatchNorm1d/2d/3d and GroupNorm, with
PyTorch's parameters and buffers (``weight``, ``bias``, ``running_mean``, ``running_var``,
``num_batches_tracked``), so state_dicts load in both directions.

>>> import nbaccel as nb
>>> bn = nb.nn.BatchNorm2d(4)
>>> list(bn.state_dict())
['weight', 'bias', 'running_mean', 'running_var', 'num_batches_tracked']
"""
from __future__ import annotations

from .. import autograd
from ..ops.creation import _full_front
from ..tensor import Parameter
from . import functional as F
from . import init
from .module import Module


def _full(shape, value, device, dtype):
    return _full_front(tuple(shape), value, dtype=dtype, device=device)


class _BatchNorm(Module):
    _input_dims: tuple = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        dtype = dtype or "float32"
        if affine:
            self.weight = Parameter(_full((num_features,), 1.0, device, dtype))
            self.bias = Parameter(_full((num_features,), 0.0, device, dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", _full((num_features,), 0.0, device, dtype))
            self.register_buffer("running_var", _full((num_features,), 1.0, device, dtype))
            self.register_buffer("num_batches_tracked", _full((), 0, device, "int64"))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self):
        if self.track_running_stats:
            with autograd.no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1.0)
                self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def _check_input_dim(self, input):
        if input.ndim not in self._input_dims:
            raise ValueError(f"expected {' or '.join(f'{d}D' for d in self._input_dims)} input "
                             f"(got {input.ndim}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            with autograd.no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:    # a cumulative moving average
                factor = 1.0 / int(self.num_batches_tracked.item())
        use_batch = self.training or self.running_mean is None
        track = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if track else None,
                            self.running_var if track else None, self.weight, self.bias,
                            use_batch, factor, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalisation over (N, C) or (N, C, L) input."""
    _input_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation over (N, C, H, W) input: per-channel batch statistics in training
    mode (running statistics updated with ``momentum``), the running statistics in eval mode."""
    _input_dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalisation over (N, C, D, H, W) input."""
    _input_dims = (5,)


class GroupNorm(Module):
    """Group normalisation (PyTorch's ``nn.GroupNorm``): per-sample statistics over each
    group of ``num_channels // num_groups`` channels; per-channel affine."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        dtype = dtype or "float32"
        if affine:
            self.weight = Parameter(_full((num_channels,), 1.0, device, dtype))
            self.bias = Parameter(_full((num_channels,), 0.0, device, dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"
