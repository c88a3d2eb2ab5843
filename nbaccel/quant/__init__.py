"""nbaccel.quant: torchao-style weight-only and dynamic quantization.

>>> import nbaccel as nb
>>> model = nb.nn.Sequential(nb.nn.Linear(128, 64), nb.nn.GELU(), nb.nn.Linear(64, 10))
>>> before = nb.quant.model_bytes(model)
>>> _ = nb.quant.quantize_(model, nb.quant.int4_weight_only(group_size=64))
>>> nb.quant.model_bytes(model) < before / 4
True
>>> model(nb.randn(2, 128)).shape
(2, 10)

See docs/quantization.md.
"""
from ..ops import quantized as _quantized_ops  # noqa: F401  (registers the ops)
from ..ops.quantized import quantized_linear as _ql, dequantize_weight as _dw
quantized_linear, dequantize_weight = _ql.front, _dw.front
from .config import (Int4WeightOnlyConfig, Int8DynamicActivationInt8WeightConfig,  # noqa: F401
                     Int8WeightOnlyConfig, int4_weight_only, int8_dynamic_activation_int8_weight,
                     int8_weight_only)
from .tensor import QuantizedTensor  # noqa: F401
from .linear import QuantizedLinear  # noqa: F401
from .api import quantize_, model_bytes  # noqa: F401
