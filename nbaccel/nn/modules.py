"""Layers: Linear, norms, Embedding, Dropout, activations, losses and the containers.

>>> import nbaccel as nb
>>> net = nb.nn.Sequential(nb.nn.Linear(2, 4), nb.nn.ReLU(), nb.nn.Linear(4, 1))
>>> net(nb.ones(5, 2)).shape
(5, 1)
"""
from __future__ import annotations

import math
from collections import OrderedDict

from .. import autograd, ops
from ..ops.creation import _full_front
from ..tensor import Parameter
from . import functional as F
from . import init
from .module import Module


def _empty(shape, device, dtype):
    return Parameter(_full_front(tuple(shape), 0.0, dtype=dtype or "float32", device=device))


class Identity(Module):
    """Returns its input (accepts and ignores any constructor arguments)."""
    _takes_tensors = False    # passes its input on (PyTorch's does too)

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x @ weight.T + bias, with PyTorch's default init (U(-1/sqrt(in), 1/sqrt(in)))."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = _empty((out_features, in_features), device, dtype)
        self.bias = _empty((out_features,), device, dtype) if bias else None
        if not bias:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features else 0.0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device=None, dtype=None):
        super().__init__()
        ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps, self.elementwise_affine = ns, eps, elementwise_affine
        if elementwise_affine:
            self.weight = init.ones_(_empty(ns, device, dtype))
            self.bias = init.zeros_(_empty(ns, device, dtype)) if bias else None
            if not bias:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class RMSNorm(Module):
    def __init__(self, normalized_shape, eps=None, elementwise_affine: bool = True, device=None,
                 dtype=None):
        super().__init__()
        ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps, self.elementwise_affine = ns, eps, elementwise_affine
        if elementwise_affine:
            self.weight = init.ones_(_empty(ns, device, dtype))
        else:
            self.register_parameter("weight", None)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class Embedding(Module):
    """A lookup table: ``forward(indices)`` returns rows of ``weight`` (init N(0, 1);
    the ``padding_idx`` row starts at zero and gets no gradient)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx=None, max_norm=None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False,
                 _weight=None, _freeze: bool = False, device=None, dtype=None):
        super().__init__()
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"padding_idx {padding_idx} must be within num_embeddings "
                                 f"{num_embeddings}")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx, self.max_norm, self.norm_type = padding_idx, max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is not None:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError(f"_weight has shape {tuple(_weight.shape)}, expected "
                                 f"{(num_embeddings, embedding_dim)}")
            self.weight = Parameter(_weight, requires_grad=not _freeze)
        else:
            self.weight = _empty((num_embeddings, embedding_dim), device, dtype)
            self.reset_parameters()
            if _freeze:
                self.weight.requires_grad_(False)

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            rows = ops.arange(self.num_embeddings, device=self.weight.device).reshape((-1, 1))
            with autograd.no_grad():
                self.weight.copy_(ops.where(rows == self.padding_idx, 0, self.weight))

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, padding_idx=None, **kwargs):
        rows, dim = embeddings.shape
        return cls(rows, dim, padding_idx=padding_idx, _weight=embeddings, _freeze=freeze, **kwargs)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")


class Dropout(Module):
    """Zeroes elements with probability p in training mode; the identity in eval mode."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


# ---- activations ------------------------------------------------------------------------------

class ReLU(Module):
    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.silu(input, inplace=self.inplace)


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


class Softplus(Module):
    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    def forward(self, input):
        return F.log_softmax(input, self.dim)


class Flatten(Module):
    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        n = input.ndim
        s, e = self.start_dim % n, self.end_dim % n
        return input.reshape(tuple(input.shape[:s]) + (-1,) + tuple(input.shape[e + 1:]))

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


# ---- losses ------------------------------------------------------------------------------------

class CrossEntropyLoss(Module):
    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean", label_smoothing: float = 0.0):
        super().__init__()
        self.register_buffer("weight", weight)
        self.ignore_index, self.reduction, self.label_smoothing = ignore_index, reduction, label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class MSELoss(Module):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


# ---- containers ------------------------------------------------------------------------------------

class Sequential(Module):
    """Runs its modules in order. ``Sequential(m1, m2)`` or ``Sequential(OrderedDict(...))``;
    indexing, slicing, ``len`` and iteration work as on a list."""
    _takes_tensors = False    # passes its input on (PyTorch's does too)

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, m in args[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_check_index(idx, len(self))]

    def __setitem__(self, idx, module):
        key = list(self._modules)[_check_index(idx, len(self))]
        self.add_module(key, module)

    def __delitem__(self, idx):
        keys = list(self._modules)
        for k in (keys[idx] if isinstance(idx, slice) else [keys[_check_index(idx, len(self))]]):
            del self._modules[k]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def forward(self, input):
        for m in self:
            input = m(input)
        return input


def _check_index(idx, n):
    idx = int(idx)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range for a container of length {n}")
    return idx % n


class ModuleList(Module):
    """A list of modules, registered so their parameters are found."""
    _takes_tensors = False    # passes its input on (PyTorch's does too)

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_check_index(idx, len(self)))]

    def __setitem__(self, idx, module):
        self.add_module(str(_check_index(idx, len(self))), module)

    def __delitem__(self, idx):
        mods = list(self._modules.values())
        del mods[idx if isinstance(idx, slice) else _check_index(idx, len(self))]
        self._modules.clear()
        self.extend(mods)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        self.extend(mods)


class ModuleDict(Module):
    """An ordered dict of modules, registered so their parameters are found."""
    _takes_tensors = False    # passes its input on (PyTorch's does too)

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def pop(self, key):
        m = self._modules[key]
        del self._modules[key]
        return m

    def clear(self):
        self._modules.clear()

    def update(self, modules):
        items = modules.items() if hasattr(modules, "items") else modules
        for k, m in items:
            self[k] = m
