"""nbaccel.quant: torchao-style weight-only and dynamic quantization (see issue 11)."""
