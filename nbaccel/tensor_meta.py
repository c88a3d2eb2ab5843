"""A tensor's metadata, read from its fields: shape, ndim, size, numel, itemsize, nbytes, the
device and dtype flags, ``T``/``mT``, ``len`` and iteration.

``TensorMetadata`` is a base class of ``Tensor`` (``tensor.py``): it reads ``_data``, ``_node``,
``dtype``, ``device`` and ``grad_fn`` and calls the op methods ``permute``, ``swapaxes`` and
``__getitem__``, and imports nothing of the engine, so the class that owns the fields stays
the one place they are set.

Because every Tensor is a TensorMetadata and this module imports nothing, it is also where the
modules below ``tensor.py`` (the op table) test for a tensor: :func:`is_tensor`, an
``isinstance``, instead of probing for a ``_node`` attribute.
"""
from __future__ import annotations


class _Size(int):
    """``t.size`` is NumPy's element count *and* callable like PyTorch's ``t.size(dim)``."""

    def __new__(cls, n, shape):
        self = super().__new__(cls, n)
        self._shape = shape
        return self

    def __call__(self, dim=None):
        return tuple(self._shape) if dim is None else self._shape[dim]


class TensorMetadata:
    """What a tensor says about itself without computing anything (a base class of Tensor)."""

    __slots__ = ()      # Tensor's fields are its own slots: no instance dict

    @property
    def shape(self) -> tuple:
        return self._data.shape if self._node is None else self._node.shape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    dim = ndimension = lambda self: self.ndim

    @property
    def size(self):
        n = 1
        for s in self.shape:
            n *= s
        return _Size(n, self.shape)

    def numel(self) -> int:
        return int(self.size)

    nelement = numel

    @property
    def itemsize(self):
        return self.dtype.itemsize

    def element_size(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return self.numel() * self.dtype.itemsize

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    @property
    def is_cpu(self):
        return self.device.type == "cpu"

    @property
    def is_xpu(self):           # PyTorch's Intel-GPU and Apple-GPU flags: never, here
        return False

    is_mps = is_xpu

    def is_floating_point(self):
        return self.dtype.kind == "f"

    def is_complex(self):
        return self.dtype.kind == "c"

    @property
    def T(self):
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self):
        if self.ndim < 2:
            raise ValueError(f"mT needs at least 2 dimensions, got a tensor of shape {self.shape}")
        return self.swapaxes(-1, -2)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))


def is_tensor(x) -> bool:
    """Whether ``x`` is an nbaccel Tensor (a tracer included), for the modules that cannot import
    the class: every Tensor is a TensorMetadata, and nothing else is."""
    return isinstance(x, TensorMetadata)


def is_traced(x) -> bool:
    """Whether ``x`` is a tensor without a concrete value of its own: a tracer of the compiler
    or a batched tensor of ``nbaccel.func.vmap``, both a Tensor whose ``_node`` is set (the
    tracing protocol: ``ops/registry.py``)."""
    return isinstance(x, TensorMetadata) and x._node is not None
