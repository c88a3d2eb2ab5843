"""``nbaccel.nn.functional``: PyTorch's functional API over nbaccel's op table.

>>> import nbaccel as nb
>>> import nbaccel.nn.functional as F
>>> F.softmax(nb.tensor([[1.0, 1.0]]), dim=-1)
tensor([[0.5, 0.5]])

Each function here is the front of an op (``nbaccel.ops.nn``) or a short composition of ops,
so eager calls, autograd and compiled tracing all go through the op table.
"""
from __future__ import annotations

from ..ops import OPS
from .. import ops
from ..amp import float32_input

relu = OPS["relu"].front
gelu = OPS["gelu"].front
silu = OPS["silu"].front
softplus = OPS["softplus"].front
softmax = OPS["softmax"].front
log_softmax = OPS["log_softmax"].front
layer_norm = OPS["layer_norm"].front
rms_norm = OPS["rms_norm"].front
linear = OPS["linear"].front
dropout = OPS["dropout"].front
embedding = OPS["embedding"].front
cross_entropy = OPS["cross_entropy"].front
mse_loss = OPS["mse_loss"].front
scaled_dot_product_attention = OPS["scaled_dot_product_attention"].front
sigmoid = OPS["sigmoid"].front
tanh = OPS["tanh"].front
leaky_relu = OPS["leaky_relu"].front
binary_cross_entropy = OPS["binary_cross_entropy"].front
binary_cross_entropy_with_logits = OPS["binary_cross_entropy_with_logits"].front

__all__ = ["binary_cross_entropy", "binary_cross_entropy_with_logits", "relu", "relu_", "gelu", "silu", "softplus", "softmax", "log_softmax", "layer_norm",
           "rms_norm", "linear", "dropout", "embedding", "cross_entropy", "mse_loss",
           "scaled_dot_product_attention", "sigmoid", "tanh", "leaky_relu", "nll_loss",
           "one_hot"]


def relu_(input):
    """In-place relu."""
    return relu(input, inplace=True)


def one_hot(tensor, num_classes: int = -1):
    """int64 one-hot encoding along a new last axis."""
    if tensor.dtype.kind not in "iu":
        raise TypeError(f"one_hot is only applicable to index tensors, got {tensor.dtype}")
    if num_classes < 0:
        num_classes = int(tensor.max().item()) + 1 if tensor.numel() else 0
    classes = ops.arange(num_classes, device=tensor.device)
    return (tensor.reshape(tuple(tensor.shape) + (1,)) == classes).astype("int64")


def nll_loss(input, target, weight=None, size_average=None, ignore_index: int = -100,
             reduce=None, reduction: str = "mean"):
    """Negative log likelihood of log-probabilities ``input`` (class axis 1) at class indices
    ``target``; weighted mean as PyTorch."""
    input = float32_input(input)           # (autocast runs the losses in float32)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"nll_loss: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
    x = input
    if x.ndim > 2:
        x = x.permute((0,) + tuple(range(2, x.ndim)) + (1,))
    n = x.shape[-1]
    t = target.reshape(tuple(target.shape) + (1,))
    pick = (t == ops.arange(n, device=x.device)).astype(x.dtype) * (t != ignore_index).astype(x.dtype)
    if weight is not None:
        pick = pick * weight
    loss = -(ops.where(pick != 0, x * pick, 0)).sum(axis=-1)
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / pick.sum()



# ---- convolutional networks (ops/conv.py, ops/pooling.py, functional_vision.py) ----------------
from ..ops.registry import ALIASES as _ALIASES  # noqa: E402
from .functional_vision import (  # noqa: E402,F401
    adaptive_avg_pool1d, adaptive_avg_pool2d, batch_norm, dropout2d, group_norm, hardtanh,
    interpolate, pad, relu6, upsample)

conv2d = OPS["conv2d"].front
conv_transpose2d = OPS["conv_transpose2d"].front
max_pool2d = OPS["max_pool2d"].front
avg_pool2d = OPS["avg_pool2d"].front
conv1d, conv_transpose1d = _ALIASES["conv1d"], _ALIASES["conv_transpose1d"]
max_pool1d, avg_pool1d = _ALIASES["max_pool1d"], _ALIASES["avg_pool1d"]
conv3d, max_pool3d, avg_pool3d = _ALIASES["conv3d"], _ALIASES["max_pool3d"], _ALIASES["avg_pool3d"]
max_unpool1d, max_unpool2d, max_unpool3d = (_ALIASES[f"max_unpool{n}d"] for n in (1, 2, 3))
from .functional_vision import adaptive_avg_pool3d, upsample_bilinear, upsample_nearest  # noqa: E402,F401
__all__ += ["conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d", "max_pool1d", "max_pool2d",
            "avg_pool1d", "avg_pool2d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "batch_norm",
            "group_norm", "interpolate", "upsample", "pad", "relu6", "hardtanh", "dropout2d",
            "conv3d", "max_pool3d", "avg_pool3d", "adaptive_avg_pool3d", "max_unpool1d",
            "max_unpool2d", "max_unpool3d", "upsample_nearest", "upsample_bilinear"]
from .functional_pooling import (  # noqa: E402,F401
    adaptive_max_pool1d, adaptive_max_pool2d, adaptive_max_pool3d, lp_pool1d, lp_pool2d, lp_pool3d)
__all__ += ["adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d", "lp_pool1d",
            "lp_pool2d", "lp_pool3d"]
from .functional_conv import conv_transpose3d  # noqa: E402,F401
__all__ += ["conv_transpose3d"]
