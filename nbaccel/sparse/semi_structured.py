"""``SparseSemiStructuredTensor``: a 2:4 weight kept compressed, and the conversion into it.

The tensor holds two ordinary nbaccel Tensors, ``values`` (the kept half of the entries) and
``meta`` (their 2-bit positions, packed in uint8), and takes part in ``F.linear`` and ``@``
through the ``__nbaccel_function__`` protocol: ``F.linear(x, s)``, ``x @ s.t()`` and ``s @ x``
run the ``sparse24_linear`` op (an extern kernel under ``nbaccel.compile``); any other use goes
through ``to_dense()``, which is correct but reads the dense weight.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..ops import OPS
from ..ops import sparse as sparse_ops
from ..convert import asarray
from ..tensor import Tensor

_FLOATS = (D.float32, D.float64)


def _kernels(device):
    return sparse_ops.kernels_for(device.type == "cpu")


class SparseSemiStructuredTensor:
    """A 2-D tensor with at most two non-zeros in every group of four along its rows, stored
    compressed: half the values plus 2 bits of position each (0.53 of a dense float32 weight).

    >>> import nbaccel as nb
    >>> w = nb.sparse.prune_2_4(nb.tensor([[1.0, -3.0, 2.0, 0.5], [0.0, 4.0, 0.0, 0.0]]))
    >>> s = nb.sparse.to_sparse_semi_structured(w)
    >>> s
    SparseSemiStructuredTensor(shape=(2, 4), dtype=float32, density=0.375, 2:4)
    >>> s.to_dense()
    tensor([[ 0., -3.,  2.,  0.],
            [ 0.,  4.,  0.,  0.]])
    >>> (nb.ones(1, 4) @ s.t()).tolist()
    [[-1.0, 4.0]]
    """

    __slots__ = ("values", "meta", "_cols", "_transposed")
    __array_ufunc__ = None     # ndarray @ s defers to s.__rmatmul__

    def __init__(self, values: Tensor, meta: Tensor, cols: int, transposed: bool = False):
        self.values = values
        self.meta = meta
        self._cols = int(cols)
        self._transposed = transposed

    # -- metadata ---------------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        s = (self.values.shape[0], self._cols)
        return s[::-1] if self._transposed else s

    @property
    def ndim(self):
        return 2

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def device(self):
        return self.values.device

    @property
    def requires_grad(self):
        return self.values.requires_grad

    def requires_grad_(self, requires_grad=True):
        self.values.requires_grad_(requires_grad)
        return self

    @property
    def grad(self):
        """The weight's gradient as a dense tensor, zero at the pruned positions (None before
        a backward pass); the compressed one is ``values.grad``."""
        g = self.values.grad
        if g is None:
            return None
        dense = sparse_ops.to_dense.front(g, self.meta, self._cols)
        return dense.T if self._transposed else dense

    def numel(self) -> int:
        return self.values.shape[0] * self._cols

    @property
    def nbytes(self) -> int:
        """Bytes stored: the kept values and the metadata."""
        return self.values.nbytes + self.meta.nbytes

    def density(self) -> float:
        """Fraction of the entries that are non-zero (at most 0.5)."""
        n = self.numel()
        return float(np.count_nonzero(np.asarray(self.values.detach().cpu()))) / n if n else 0.0

    def __repr__(self):
        extra = ", transposed" if self._transposed else ""
        grad = ", requires_grad=True" if self.requires_grad else ""
        dev = f", device='{self.device}'" if self.device.type != "cpu" else ""
        return (f"SparseSemiStructuredTensor(shape={self.shape}, dtype={self.dtype.name}"
                f"{dev}, density={self.density():.4g}, 2:4{extra}{grad})")

    # -- conversions ----------------------------------------------------------------------------
    def to_dense(self) -> Tensor:
        """The dense tensor (differentiable with respect to ``values``)."""
        dense = sparse_ops.to_dense.front(self.values, self.meta, self._cols)
        return dense.T if self._transposed else dense

    def t(self) -> "SparseSemiStructuredTensor":
        """The transpose (no copy): ``x @ s.t()`` is ``F.linear(x, s)``."""
        return SparseSemiStructuredTensor(self.values, self.meta, self._cols, not self._transposed)

    T = mT = property(t)

    def detach(self):
        return SparseSemiStructuredTensor(self.values.detach(), self.meta, self._cols, self._transposed)

    def to(self, *args, dtype=None, device=None):
        """Move (device) or cast (float dtype) the values; the metadata follows the device."""
        values = self.values.to(*args, dtype=dtype, device=device)
        return SparseSemiStructuredTensor(values, self.meta.to(device=values.device), self._cols,
                                          self._transposed)

    def cpu(self):
        return self.to("cpu")

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.to_dense().detach().cpu(), dtype=dtype)

    # -- products ----------------------------------------------------------------------------------
    def _linear(self, x, bias=None):
        """x @ W.T (+ bias) for the untransposed 2:4 weight W: the sparse kernel."""
        return sparse_ops.linear.front(_as_tensor(x), self.values, self.meta,
                                       None if bias is None else _as_tensor(bias), cols=self._cols)

    def __nbaccel_function__(self, func, args):
        if func is OPS["linear"].front:
            x, w, b = args
            if w is self and not self._transposed and not isinstance(x, SparseSemiStructuredTensor):
                return self._linear(x, b)
        elif func is OPS["matmul"].front:
            a, b = args
            if b is self and self._transposed and not isinstance(a, SparseSemiStructuredTensor):
                return self._linear(a)                                   # a @ W.T
            if a is self and not self._transposed and not isinstance(b, SparseSemiStructuredTensor):
                b = _as_tensor(b)                                        # W @ b = (b.T @ W.T).T
                if b.ndim == 1:
                    return self._linear(b)
                return self._linear(b.swapaxes(-1, -2)).swapaxes(-1, -2)
        # any other combination: correct, through the dense weight
        dense = tuple(a.to_dense() if isinstance(a, SparseSemiStructuredTensor) else a for a in args)
        return func(*dense)

    def __matmul__(self, other):
        return OPS["matmul"].front(self, other)

    def __rmatmul__(self, other):
        return OPS["matmul"].front(other, self)


def _as_tensor(x):
    return x if isinstance(x, Tensor) else asarray(x)


def _check(t, what):
    if t.ndim != 2:
        raise ValueError(f"{what}: 2:4 sparsity needs a 2-D tensor, got shape {tuple(t.shape)}")
    if t.dtype not in _FLOATS:
        raise TypeError(f"{what}: 2:4 sparsity supports float32 and float64 tensors, got "
                        f"{t.dtype}")
    if t.shape[1] % 4:
        raise ValueError(f"{what}: the last dim must be a multiple of 4 for 2:4 sparsity, got "
                         f"shape {tuple(t.shape)}")


def compress_meta(t: Tensor) -> Tensor:
    """The packed metadata of ``t``'s two largest magnitudes per group of four (computed
    eagerly: the pattern is data, not part of a traced graph)."""
    data = t.detach()._value("2:4 compression needs the tensor's values")
    _, meta = _kernels(t.device).compress(data)
    return asarray(meta, device=t.device)


def to_sparse_semi_structured(original) -> SparseSemiStructuredTensor:
    """Compress a 2-D tensor that is already 2:4 sparse (at most two non-zeros in every group
    of four consecutive entries of a row) into a :class:`SparseSemiStructuredTensor`.

    A tensor that is not 2:4 is an error naming its first offending group; prune it first with
    :func:`nbaccel.sparse.prune_2_4`. Gradients flow from the result's values back to
    ``original``.

    >>> import nbaccel as nb
    >>> nb.sparse.to_sparse_semi_structured(nb.ones(2, 4))
    Traceback (most recent call last):
    ...
    ValueError: to_sparse_semi_structured: the tensor is not 2:4 sparse: row 0, columns 0..3 hold 4 non-zeros [1, 1, 1, 1] (at most 2 of every 4 may be non-zero); prune it first with nbaccel.sparse.prune_2_4
    """
    if isinstance(original, SparseSemiStructuredTensor):
        return original
    t = _as_tensor(original)
    _check(t, "to_sparse_semi_structured")
    host = np.asarray(t.detach().cpu()._value("2:4 compression needs the tensor's values"))
    rows, cols = host.shape
    nnz = np.count_nonzero(host.reshape(rows, cols // 4, 4), axis=-1)
    if (nnz > 2).any():
        r, g = np.unravel_index(int(np.argmax(nnz > 2)), nnz.shape)
        group = "[" + ", ".join(f"{v:g}" for v in host[r, 4 * g:4 * g + 4].tolist()) + "]"
        raise ValueError(f"to_sparse_semi_structured: the tensor is not 2:4 sparse: row {r}, "
                         f"columns {4 * g}..{4 * g + 3} hold {nnz[r, g]} non-zeros {group} (at "
                         "most 2 of every 4 may be non-zero); prune it first with "
                         "nbaccel.sparse.prune_2_4")
    meta = compress_meta(t)
    return SparseSemiStructuredTensor(sparse_ops.gather.front(t, meta), meta, cols)
