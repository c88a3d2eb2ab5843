"""``quantize_``: convert a model's Linear layers in place; ``model_bytes``: what it weighs."""
from __future__ import annotations

from .. import autograd
from ..nn.module import Module
from ..nn.modules import Linear
from ..tensor import Tensor
from .config import CONFIGS
from .linear import QuantizedLinear
from .tensor import QuantizedTensor


def _default_filter(module, fqn):
    return isinstance(module, (Linear, QuantizedLinear))


def quantize_(model: Module, config, filter_fn=None) -> Module:
    """Quantize ``model``'s ``nn.Linear`` layers in place (torchao's ``quantize_``).

    ``config`` is ``int8_weight_only()``, ``int4_weight_only(group_size=128)`` or
    ``int8_dynamic_activation_int8_weight()``. ``filter_fn(module, fqn) -> bool`` selects
    layers (default: every Linear). Each selected layer becomes a :class:`QuantizedLinear`
    (the same object, so references to it stay valid): its float weight is quantized and
    dropped. Every selected layer is checked before any is changed, so an error leaves the
    model as it was. Returns ``model``.

    >>> import nbaccel as nb
    >>> m = nb.nn.Sequential(nb.nn.Linear(64, 32), nb.nn.ReLU(), nb.nn.Linear(32, 4))
    >>> _ = nb.quant.quantize_(m, nb.quant.int8_weight_only())
    >>> m[0]
    QuantizedLinear(in_features=64, out_features=32, bias=True, mode=int8)
    """
    if not isinstance(config, CONFIGS):
        raise TypeError(f"quantize_: unsupported config {config!r}; use int8_weight_only(), "
                        "int4_weight_only(group_size=...) or int8_dynamic_activation_int8_weight()")
    if not isinstance(model, Module):
        raise TypeError(f"quantize_ needs an nn.Module, got {type(model).__name__}")
    keep = filter_fn or _default_filter
    chosen = []
    for fqn, m in model.named_modules():
        if not keep(m, fqn):
            continue
        if isinstance(m, QuantizedLinear):
            raise ValueError(f"layer '{fqn or '<root>'}' is already quantized ({m.mode}); "
                             "quantize the float model, or leave it out with filter_fn")
        if not isinstance(m, Linear):
            raise TypeError(f"quantize_ can only quantize nn.Linear layers; filter_fn selected "
                            f"'{fqn or '<root>'}' ({type(m).__name__})")
        w = m.weight
        if not isinstance(w, Tensor) or w.ndim != 2:
            raise ValueError(f"layer '{fqn or '<root>'}': weight must be 2-D, got shape "
                             f"{getattr(w, 'shape', None)}")
        if w.dtype.kind != "f":
            raise TypeError(f"layer '{fqn or '<root>'}': cannot quantize a {w.dtype} weight "
                            "(floating point weights only)")
        config.check(w.shape[0], w.shape[1], fqn)
        chosen.append(m)
    with autograd.no_grad():
        quantized = [QuantizedTensor.from_float(m.weight, config.bits,
                                                getattr(config, "group_size", None),
                                                getattr(config, "zero_point", False),
                                                _layout(config, m.weight))
                     for m in chosen]
        for m, qw in zip(chosen, quantized):
            bias = m._parameters.get("bias")
            del m._parameters["weight"]          # the float weight goes (freed when unreferenced)
            m.__class__ = QuantizedLinear
            m._init_quantized(qw, bias, config.mode)
    return model


def _layout(config, weight):
    """The config's layout; ``None`` (choose) for weights on the CPU, row-major elsewhere (only
    the CPU kernel reads another order)."""
    layout = getattr(config, "layout", None)
    if layout is None and config.bits == 4 and weight.device.type != "cpu":
        return "rows"
    return layout


def model_bytes(model: Module) -> int:
    """Bytes of a model's parameters, buffers and quantized weights (each stored tensor once)."""
    seen, total = set(), 0
    for t in list(model.parameters()) + list(model.buffers()):
        if id(t) not in seen:
            seen.add(id(t))
            total += t.nbytes
    for m in model.modules():
        w = m.__dict__.get("weight")
        if isinstance(w, QuantizedTensor):
            for t in w.tensors().values():
                if id(t) not in seen:
                    seen.add(id(t))
                    total += t.nbytes
    return total
