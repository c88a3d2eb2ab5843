"""The shape arithmetic every convolution implementation shares.

A convolution is described by its input (N, C, H, W), its weight (O, C // groups, KH, KW),
``stride`` (sh, sw), ``padding`` ((top, bottom), (left, right)), ``dilation`` (dh, dw) and
``groups``. Output row ``oh`` reads input rows ``oh * sh - top + i * dh`` for kernel rows
``i``; rows outside [0, H) are zeros.

>>> g = Conv2dGeometry((1, 3, 8, 8), (4, 3, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 1)
>>> g.out_shape
(1, 4, 8, 8)
"""
from __future__ import annotations


def output_size(size: int, kernel: int, stride: int, pad_lo: int, pad_hi: int, dilation: int) -> int:
    """Output length along one axis: floor((size + pads - dilation * (kernel - 1) - 1) / stride) + 1."""
    return (size + pad_lo + pad_hi - dilation * (kernel - 1) - 1) // stride + 1


class Conv2dGeometry:
    """Validated sizes of one 2-D convolution (raises ValueError naming what does not fit)."""
    __slots__ = ("n", "c", "h", "w", "o", "cg", "og", "kh", "kw", "sh", "sw", "pt", "pb",
                 "pl", "pr", "dh", "dw", "groups", "oh", "ow")

    def __init__(self, x_shape, w_shape, stride, padding, dilation, groups):
        self.n, self.c, self.h, self.w = (int(s) for s in x_shape)
        self.o, self.cg, self.kh, self.kw = (int(s) for s in w_shape)
        self.sh, self.sw = (int(s) for s in stride)
        (self.pt, self.pb), (self.pl, self.pr) = ((int(a), int(b)) for a, b in padding)
        self.dh, self.dw = (int(d) for d in dilation)
        self.groups = int(groups)
        if min(self.sh, self.sw, self.dh, self.dw, self.groups) < 1:
            raise ValueError("convolution: stride, dilation and groups must be positive")
        if min(self.pt, self.pb, self.pl, self.pr) < 0:
            raise ValueError("convolution: padding must be non-negative")
        if self.c != self.cg * self.groups:
            raise ValueError(f"convolution: input has {self.c} channels, the weight expects "
                             f"{self.cg} per group x {self.groups} groups = {self.cg * self.groups}")
        if self.o % self.groups:
            raise ValueError(f"convolution: {self.o} output channels are not divisible by "
                             f"groups={self.groups}")
        self.og = self.o // self.groups
        self.oh = output_size(self.h, self.kh, self.sh, self.pt, self.pb, self.dh)
        self.ow = output_size(self.w, self.kw, self.sw, self.pl, self.pr, self.dw)
        if self.oh < 1 or self.ow < 1:
            raise ValueError(
                f"convolution: the kernel ({self.kh}x{self.kw}, dilation {self.dh}x{self.dw}) is "
                f"larger than the padded input ({self.h + self.pt + self.pb}x"
                f"{self.w + self.pl + self.pr})")

    @property
    def out_shape(self):
        return (self.n, self.o, self.oh, self.ow)

    @property
    def x_shape(self):
        return (self.n, self.c, self.h, self.w)

    @property
    def w_shape(self):
        return (self.o, self.cg, self.kh, self.kw)

    @property
    def padded_hw(self):
        return (self.h + self.pt + self.pb, self.w + self.pl + self.pr)

    def scalars(self):
        """The sizes as a flat tuple of ints (the argument list of the loop kernels)."""
        return (self.n, self.c, self.h, self.w, self.o, self.cg, self.og, self.kh, self.kw,
                self.sh, self.sw, self.pt, self.pl, self.dh, self.dw, self.oh, self.ow)
