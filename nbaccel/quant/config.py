"""Quantization configurations (torchao's names): what ``quantize_`` does to each Linear."""
from __future__ import annotations

from dataclasses import dataclass

from nbaccel_kernels.quant.packing import INT4_GROUP_SIZES, INT4_LAYOUTS, int4_interleavable


@dataclass(frozen=True)
class Int8WeightOnlyConfig:
    """int8 weights with one scale per output channel; activations stay float."""
    mode = "int8"
    bits = 8

    def check(self, out_features, in_features, fqn):
        pass


@dataclass(frozen=True)
class Int4WeightOnlyConfig:
    """4-bit weights packed two per byte, one scale (and optionally one zero point) per group
    of ``group_size`` consecutive input features; activations stay float. ``layout``: the
    codes' byte order, ``None`` to choose per layer (docs/quantization.md, "Weight
    layouts"), or ``"rows"`` / ``"rows4x64"`` for every layer."""
    group_size: int = 128
    zero_point: bool = False
    layout: str | None = None
    mode = "int4"
    bits = 4

    def __post_init__(self):
        if self.group_size not in INT4_GROUP_SIZES:
            raise ValueError(f"int4_weight_only: group_size must be one of {INT4_GROUP_SIZES}, "
                             f"got {self.group_size!r}")
        if self.layout is not None and self.layout not in INT4_LAYOUTS:
            raise ValueError(f"int4_weight_only: layout must be None or one of {INT4_LAYOUTS}, "
                             f"got {self.layout!r}")

    def check(self, out_features, in_features, fqn):
        if in_features % self.group_size:
            raise ValueError(
                f"cannot quantize layer '{fqn or '<root>'}' to int4: in_features={in_features} "
                f"is not a multiple of group_size={self.group_size} (choose a smaller "
                "group_size, or leave the layer out with filter_fn)")
        if self.layout == "rows4x64" and not int4_interleavable(out_features, in_features):
            raise ValueError(
                f"cannot quantize layer '{fqn or '<root>'}' to int4 in the rows4x64 layout: it "
                f"needs out_features % 4 == 0 and in_features % 128 == 0, got "
                f"[{out_features}, {in_features}] (use layout=None to choose per layer)")


@dataclass(frozen=True)
class Int8DynamicActivationInt8WeightConfig:
    """int8 weights per output channel, and activations quantized to int8 per token at run
    time: the matmul runs on int8 x int8 products summed in int32."""
    mode = "int8-dynamic"
    bits = 8

    def check(self, out_features, in_features, fqn):
        pass


def int8_weight_only() -> Int8WeightOnlyConfig:
    """Weight-only int8 (per-output-channel scale): a quarter of float32's weight bytes."""
    return Int8WeightOnlyConfig()


def int4_weight_only(group_size: int = 128, zero_point: bool = False,
                     layout: str | None = None) -> Int4WeightOnlyConfig:
    """Weight-only int4, group-wise scales (group_size 32, 64 or 128): an eighth of float32's
    weight bytes (plus a scale per group). ``layout=None`` lets each layer take the byte order
    its CPU kernel reads fastest (see ``nbaccel.quant.layout``)."""
    return Int4WeightOnlyConfig(group_size, zero_point, layout)


def int8_dynamic_activation_int8_weight() -> Int8DynamicActivationInt8WeightConfig:
    """int8 weights and per-token dynamically quantized int8 activations."""
    return Int8DynamicActivationInt8WeightConfig()


CONFIGS = (Int8WeightOnlyConfig, Int4WeightOnlyConfig, Int8DynamicActivationInt8WeightConfig)
