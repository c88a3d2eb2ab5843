"""2:4 pruning of tensors and modules: ``prune_2_4``, ``apply_2_4_`` and the Linear layer whose
weight stays compressed (``SparseSemiStructuredLinear``)."""
from __future__ import annotations

import math

from .. import autograd
from ..nn import functional as F
from ..nn.module import Module
from ..nn.modules import Linear
from ..ops import sparse as sparse_ops
from ..convert import asarray
from ..tensor import Parameter, Tensor
from .semi_structured import SparseSemiStructuredTensor, _as_tensor, _check, compress_meta


def prune_2_4(t) -> Tensor:
    """Zero all but the two largest magnitudes in every group of four consecutive entries of
    each row (ties keep the earlier entry; a NaN counts as the largest). The result is dense,
    2:4 sparse, and ready for :func:`to_sparse_semi_structured`; gradients flow through the
    kept entries.

    >>> import nbaccel as nb
    >>> nb.sparse.prune_2_4(nb.tensor([[0.1, -0.9, 0.5, 0.2]]))
    tensor([[ 0. , -0.9,  0.5,  0. ]])
    """
    t = _as_tensor(t)
    _check(t, "prune_2_4")
    meta = compress_meta(t)
    return sparse_ops.to_dense.front(sparse_ops.gather.front(t, meta), meta, t.shape[1])


class SparseSemiStructuredLinear(Module):
    """``y = x @ W.T + bias`` with W kept 2:4-compressed: the parameters are the kept values
    (``weight_values``, what an optimizer updates, so fine-tuning keeps the pattern) and the
    buffer ``weight_meta`` (their positions). ``weight`` is the
    :class:`SparseSemiStructuredTensor` over both. Build one with :meth:`from_linear` or
    :func:`apply_2_4_`."""

    def __init__(self, in_features: int, out_features: int, values: Tensor, meta: Tensor,
                 bias: Tensor | None = None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight_values = values if isinstance(values, Parameter) else Parameter(values)
        self.register_buffer("weight_meta", meta)
        if bias is None:
            self.register_parameter("bias", None)
        else:
            self.bias = bias if isinstance(bias, Parameter) else Parameter(bias)

    @classmethod
    def from_linear(cls, linear: Linear) -> "SparseSemiStructuredLinear":
        """Prune a Linear layer's weight to 2:4 and compress it (the bias is shared)."""
        w = linear.weight
        with autograd.no_grad():
            meta = compress_meta(w)
            values = sparse_ops.gather.front(w.detach(), meta)
        return cls(linear.in_features, linear.out_features,
                   Parameter(values, requires_grad=w.requires_grad), meta, linear.bias)

    @property
    def weight(self) -> SparseSemiStructuredTensor:
        return SparseSemiStructuredTensor(self.weight_values, self.weight_meta, self.in_features)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, 2:4 sparse")


def apply_2_4_(module: Module, filter=None) -> Module:
    """Prune every ``nn.Linear`` of ``module`` to 2:4 and swap it, in place, for a
    :class:`SparseSemiStructuredLinear` whose weight stays compressed.

    ``filter(layer, name) -> bool`` picks the layers (``name`` as in ``named_modules``); by
    default every Linear whose ``in_features`` is a multiple of 4 (others cannot be 2:4 along
    their rows and stay dense). A layer the filter picks that cannot be 2:4 is an error.
    Returns the module (the new layer itself when ``module`` is a Linear).

    >>> import nbaccel as nb
    >>> net = nb.nn.Sequential(nb.nn.Linear(1, 8), nb.nn.GELU(), nb.nn.Linear(8, 4))
    >>> net = nb.sparse.apply_2_4_(net)
    >>> type(net[0]).__name__, type(net[2]).__name__
    ('Linear', 'SparseSemiStructuredLinear')
    """
    def wanted(layer, name):
        if not isinstance(layer, Linear):
            return False
        if filter is None:
            return layer.in_features % 4 == 0 and layer.weight.dtype.name in ("float32", "float64")
        if not filter(layer, name):
            return False
        _check(layer.weight, f"apply_2_4_: layer {name or '(root)'!r}")
        return True

    if wanted(module, ""):
        return SparseSemiStructuredLinear.from_linear(module)
    for name, parent in list(module.named_modules()):
        for child_name, child in list(parent._modules.items()):
            full = f"{name}.{child_name}" if name else child_name
            if child is not None and wanted(child, full):
                # in the same slot: containers (Sequential) keep their order
                parent._modules[child_name] = SparseSemiStructuredLinear.from_linear(child)
    return module
