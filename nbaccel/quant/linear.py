"""``QuantizedLinear``: the layer ``quantize_`` turns an ``nn.Linear`` into."""
from __future__ import annotations

from ..nn.module import Module
from ..ops.quantized import quantized_linear
from .tensor import QuantizedTensor


class QuantizedLinear(Module):
    """y = x @ W.T + bias with ``W`` a :class:`QuantizedTensor` (``self.weight``).

    ``mode`` is ``"int8"`` / ``"int4"`` (weight-only) or ``"int8-dynamic"`` (activations
    quantized per token at run time). The bias stays a float Parameter. Inference only: the
    gradient flows to the input, the quantized weight is frozen.
    """

    def __init__(self, weight: QuantizedTensor, bias=None, mode: str = "int8"):
        super().__init__()
        self._init_quantized(weight, bias, mode)

    def _init_quantized(self, weight, bias, mode):
        if not isinstance(weight, QuantizedTensor):
            raise TypeError(f"QuantizedLinear needs a QuantizedTensor weight, got {type(weight).__name__}")
        if mode not in ("int8", "int4", "int8-dynamic") or (mode == "int4") != (weight.bits == 4):
            raise ValueError(f"QuantizedLinear: mode {mode!r} does not fit {weight!r}")
        self.out_features, self.in_features = weight.shape
        object.__setattr__(self, "weight", weight)
        object.__setattr__(self, "mode", mode)
        if bias is None:
            self.register_parameter("bias", None)
        else:
            self.bias = bias

    def forward(self, input):
        w = self.weight
        return quantized_linear.front(input, w.qdata, w.scale, w.zero_point, self.bias,
                                      mode=self.mode, group_size=w.group_size, layout=w.layout)

    # state_dict / load_state_dict see the weight as one entry holding a QuantizedTensor
    def state_dict(self, destination=None, prefix: str = "", keep_vars: bool = False):
        out = super().state_dict(destination, prefix, keep_vars)
        out[prefix + "weight"] = self.weight
        return out

    def extra_repr(self):
        w = self.weight
        group = f", group_size={w.group_size}" if w.bits == 4 else ""
        group += f", layout={w.layout}" if w.layout != "rows" else ""
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, mode={self.mode}{group}")
