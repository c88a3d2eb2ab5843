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

from .. import dtypes as D, serialization
from ..ops.quantized import dequantize_weight
from ..convert import asarray
from ..tensor import Tensor
from . import layout as L

_MODES = {8: "int8", 4: "int4"}


class QuantizedTensor:
    """Quantized storage of a ``[out_features, in_features]`` weight.

    * ``bits=8``: ``qdata`` int8 ``[N, K]``, ``scale`` float32 ``[N]`` (one per output channel).
    * ``bits=4``: ``qdata`` uint8 ``[N, K // 2]`` (two codes per byte), ``scale`` float32
      ``[N, K // group_size]`` and, when ``zero_point`` is true, ``zero_point`` uint8 of the
      same shape. ``w = (code - zero) * scale``; the zero is 8 without a zero point.
      ``layout`` is the codes' byte order: ``"rows"`` (row-major) or ``"rows4x64"`` (4-row
      blocks interleaved for the CPU's SIMD GEMV; :mod:`.layout` says when it is chosen).

    It is not a Tensor (it has no arithmetic); ``dequantize()`` gives the float32 weight.
    """

    __slots__ = ("bits", "group_size", "shape", "qdata", "scale", "zero_point", "layout")
    __nbaccel_state__ = True      # load_state_dict copies it with copy_ (see nn/module.py)

    def __init__(self, bits, qdata, scale, zero_point=None, group_size=None, shape=None,
                 layout="rows"):
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
        self.layout = layout
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
            try:
                L.check(self.layout, n, k)
            except ValueError as e:
                raise ValueError(f"QuantizedTensor: {e}") from None
        elif self.zero_point is not None:
            raise ValueError("QuantizedTensor: int8 is symmetric (no zero_point)")
        elif self.layout != "rows":
            raise ValueError(f"QuantizedTensor: int8 codes are row-major, got layout={self.layout!r}")
        for name, (dt, shape) in want.items():
            t = getattr(self, name)
            if t.dtype != dt or tuple(t.shape) != shape:
                raise ValueError(f"QuantizedTensor: {name} must be {dt} of shape {shape}, "
                                 f"got {t.dtype} of shape {tuple(t.shape)}")

    # -- construction -----------------------------------------------------------------------------
    @classmethod
    def from_float(cls, weight, bits=8, group_size=128, zero_point=False, layout=None):
        """Quantize a float 2-D weight: int8 per output channel, or int4 in groups of
        ``group_size`` (32, 64 or 128) along ``in_features``, optionally with a zero point.
        ``layout`` (int4): ``None`` chooses (:func:`.layout.choose`: interleaved where this
        CPU's SIMD GEMV reads it faster), or ``"rows"`` / ``"rows4x64"``."""
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
            if layout not in (None, "rows"):
                raise ValueError(f"int8 codes are row-major, got layout={layout!r}")
            q, s = packing.quantize_int8(arr)
            return cls(8, q, s)
        if bits == 4:
            n, k = arr.shape
            if layout is None:
                layout = L.choose(n, k, group_size)
            else:
                L.check(layout, n, k)
            p, s, z = packing.quantize_int4(arr, group_size, zero_point)
            return cls(4, L.convert(p, "rows", layout), s, z, group_size, layout=layout)
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
        """What, beside the stored tensors, rebuilds it (``nb.save`` writes it). The layout is
        named only when it is not row-major: metadata without one (every file written before
        layouts existed) means row-major, and row-major metadata stays as it was."""
        meta = {"bits": self.bits, "group_size": self.group_size, "shape": list(self.shape)}
        if self.layout != "rows":
            meta["layout"] = self.layout
        return meta

    @classmethod
    def from_parts(cls, metadata, tensors):
        """Rebuild from :meth:`metadata` and :meth:`tensors` (used by ``nb.load``). Off the CPU
        the codes are made row-major: only the CPU kernel reads another layout."""
        layout = metadata.get("layout", "rows")
        out = cls(int(metadata["bits"]), tensors["qdata"], tensors["scale"],
                  tensors.get("zero_point"), metadata.get("group_size"), metadata.get("shape"),
                  layout)
        return out if out.device.type == "cpu" else out.with_layout("rows")

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
                                 group_size=self.group_size, layout=self.layout)

    def with_layout(self, layout: str) -> "QuantizedTensor":
        """The same weight with its int4 codes in ``layout`` (``self`` when it already is):
        scales and zero points are shared, the codes are reordered into a new tensor."""
        if layout == self.layout:
            return self
        if self.bits != 4:
            raise ValueError(f"int8 codes are row-major, got layout={layout!r}")
        L.check(layout, *self.shape)
        codes = L.convert(self.qdata.numpy(force=True), self.layout, layout)
        qdata = asarray(codes, device=self.device, _np=False)
        return QuantizedTensor(4, qdata, self.scale, self.zero_point, self.group_size, self.shape,
                               layout)

    def to(self, device) -> "QuantizedTensor":
        """A copy on ``device`` (``self`` when it is there already). Off the CPU the codes are
        row-major (the Triton kernel's order); on the CPU they keep their layout."""
        parts = {name: t.to(device) for name, t in self.tensors().items()}
        if all(parts[name] is t for name, t in self.tensors().items()):
            return self
        out = QuantizedTensor(self.bits, parts["qdata"], parts["scale"], parts.get("zero_point"),
                              self.group_size, self.shape, self.layout)
        return out if out.device.type == "cpu" else out.with_layout("rows")

    def _same_format(self, other) -> bool:
        """Same bits, group size, shape and zero-point flag; the layouts may differ."""
        mine, theirs = dict(self.metadata()), dict(other.metadata())
        mine.pop("layout", None), theirs.pop("layout", None)
        return mine == theirs and (other.zero_point is None) == (self.zero_point is None)

    def copy_(self, other: "QuantizedTensor"):
        """Copy another QuantizedTensor's data in place (what ``load_state_dict`` does). Its
        codes are reordered into this tensor's layout when the two differ (a file saved where
        another layout was chosen loads into a model quantized here)."""
        if not isinstance(other, QuantizedTensor) or not self._same_format(other):
            raise ValueError(f"cannot copy {other!r} into {self!r}: the formats differ")
        other = other.with_layout(self.layout)
        for name, t in self.tensors().items():
            t.copy_(other.tensors()[name])
        return self

    def detach(self):
        return self

    def __repr__(self):
        extra = f", group_size={self.group_size}, zero_point={self.zero_point is not None}" \
            if self.bits == 4 else ""
        if self.layout != "rows":
            extra += f", layout={self.layout}"
        return f"QuantizedTensor(int{self.bits}, shape={self.shape}{extra})"


# nb.save / nb.load keep a QuantizedTensor as its parts and metadata (the layout in it); the
# saver sits in the engine below this package and knows the type only through this entry
serialization.register_parted("quantized", QuantizedTensor, lambda q: (q.tensors(), q.metadata()),
                              QuantizedTensor.from_parts)
