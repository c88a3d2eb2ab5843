"""``QuantizedTensor``: a 2-D weight held as int8 / packed int4 codes plus scales.

>>> import nbaccel as nb
>>> w = nb.randn(16, 64)
>>> qw = nb.quant.QuantizedTensor.from_float(w, bits=4, group_size=32)
>>> qw
QuantizedTensor(int4, shape=(16, 64), group_size=32, zero_point=False)
>>> bool((qw.dequantize() - w).abs().max() < 0.5)
True
"""
from __future__ import annotations

import numpy as np

from nbaccel_kernels.quant import packing

from .. import dtypes as D
from ..ops.quantized import dequantize_weight
from ..tensor import Tensor, asarray

_MODES = {8: "int8", 4: "int4"}


class QuantizedTensor:
    """Quantized storage of a ``[out_features, in_features]`` weight.

    * ``bits=8``: ``qdata`` int8 ``[N, K]``, ``scale`` float32 ``[N]`` (one per output channel).
    * ``bits=4``: ``qdata`` uint8 ``[N, K // 2]`` (two codes per byte), ``scale`` float32
      ``[N, K // group_size]`` and, when ``zero_point`` is true, ``zero_point`` uint8 of the
      same shape. ``w = (code - zero) * scale``; the zero is 8 without a zero point.

    It is not a Tensor (it has no arithmetic); ``dequantize()`` gives the float32 weight.
    """

    __slots__ = ("bits", "group_size", "shape", "qdata", "scale", "zero_point")
    __nbaccel_state__ = True      # load_state_dict copies it with copy_ (see nn/module.py)

    def __init__(self, bits, qdata, scale, zero_point=None, group_size=None, shape=None):
        if bits not in _MODES:
            raise ValueError(f"QuantizedTensor: bits must be 8 or 4, got {bits!r}")
        self.bits = bits
        self.qdata = qdata if isinstance(qdata, Tensor) else asarray(np.asarray(qdata), _np=False)
        self.scale = scale if isinstance(scale, Tensor) else asarray(np.asarray(scale), _np=False)
        self.zero_point = None if zero_point is None else (
            zero_point if isinstance(zero_point, Tensor) else asarray(np.asarray(zero_point), _np=False))
        n, k = self.qdata.shape
        self.shape = tuple(shape) if shape is not None else ((n, 2 * k) if bits == 4 else (n, k))
        self.group_size = group_size if bits == 4 else None
        self._validate()

    def _validate(self):
        n, k = self.shape
        want = {"qdata": (D.int8, (n, k)), "scale": (D.float32, (n,))} if self.bits == 8 else \
            {"qdata": (D.uint8, (n, k // 2)), "scale": (D.float32, (n, k // (self.group_size or 1)))}
        if self.bits == 4:
            if self.group_size is None or k % self.group_size:
                raise ValueError(f"QuantizedTensor: int4 needs a group_size dividing {k}, "
                                 f"got {self.group_size!r}")
            if self.zero_point is not None:
                want["zero_point"] = (D.uint8, want["scale"][1])
        elif self.zero_point is not None:
            raise ValueError("QuantizedTensor: int8 is symmetric (no zero_point)")
        for name, (dt, shape) in want.items():
            t = getattr(self, name)
            if t.dtype != dt or tuple(t.shape) != shape:
                raise ValueError(f"QuantizedTensor: {name} must be {dt} of shape {shape}, "
                                 f"got {t.dtype} of shape {tuple(t.shape)}")

    # -- construction -----------------------------------------------------------------------------
    @classmethod
    def from_float(cls, weight, bits=8, group_size=128, zero_point=False):
        """Quantize a float 2-D weight: int8 per output channel, or int4 in groups of
        ``group_size`` (32, 64 or 128) along ``in_features``, optionally with a zero point."""
        w = weight.detach() if isinstance(weight, Tensor) else weight
        if isinstance(w, Tensor):
            if w.dtype.kind != "f":
                raise TypeError(f"can only quantize floating point weights, got {w.dtype}")
            arr = np.asarray(w.numpy(force=True), dtype=np.float32)
        else:
            arr = np.asarray(w)
            if arr.dtype.kind != "f":
                raise TypeError(f"can only quantize floating point weights, got {arr.dtype}")
            arr = arr.astype(np.float32)
        if arr.ndim != 2:
            raise ValueError(f"can only quantize a 2-D weight [out_features, in_features], "
                             f"got shape {arr.shape}")
        if bits == 8:
            if zero_point:
                raise ValueError("int8 quantization is symmetric: zero_point is not supported")
            q, s = packing.quantize_int8(arr)
            return cls(8, q, s)
        if bits == 4:
            p, s, z = packing.quantize_int4(arr, group_size, zero_point)
            return cls(4, p, s, z, group_size)
        raise ValueError(f"bits must be 8 or 4, got {bits!r}")

    # -- views of the data ----------------------------------------------------------------------------
    @property
    def nbytes(self) -> int:
        """Bytes of the packed codes, scales and zero points."""
        return sum(t.nbytes for t in self.tensors().values())

    def tensors(self) -> dict:
        """The stored tensors by name (what ``nb.save`` writes)."""
        out = {"qdata": self.qdata, "scale": self.scale}
        if self.zero_point is not None:
            out["zero_point"] = self.zero_point
        return out

    def metadata(self) -> dict:
        return {"bits": self.bits, "group_size": self.group_size, "shape": list(self.shape)}

    @classmethod
    def from_parts(cls, metadata, tensors):
        """Rebuild from :meth:`metadata` and :meth:`tensors` (used by ``nb.load``)."""
        return cls(int(metadata["bits"]), tensors["qdata"], tensors["scale"],
                   tensors.get("zero_point"), metadata.get("group_size"), metadata.get("shape"))

    @property
    def dtype(self):
        """The dtype of the dequantized weight."""
        return D.float32

    @property
    def device(self):
        return self.qdata.device

    def dequantize(self) -> Tensor:
        """The float32 weight (a new tensor of shape ``self.shape``)."""
        return dequantize_weight.front(self.qdata, self.scale, self.zero_point, mode=_MODES[self.bits],
                                 group_size=self.group_size)

    def copy_(self, other: "QuantizedTensor"):
        """Copy another QuantizedTensor's data in place (what ``load_state_dict`` does)."""
        if not isinstance(other, QuantizedTensor) or other.metadata() != self.metadata() \
                or (other.zero_point is None) != (self.zero_point is None):
            raise ValueError(f"cannot copy {other!r} into {self!r}: the formats differ")
        for name, t in self.tensors().items():
            t.copy_(other.tensors()[name])
        return self

    def detach(self):
        return self

    def __repr__(self):
        extra = f", group_size={self.group_size}, zero_point={self.zero_point is not None}" \
            if self.bits == 4 else ""
        return f"QuantizedTensor(int{self.bits}, shape={self.shape}{extra})"
