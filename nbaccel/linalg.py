"""``nbaccel.linalg``: the Array API ``linalg`` extension (2024.12, and 2025.12's ``eig`` and
``eigvals``), also reachable as ``np.linalg.*`` on Tensors through ``__array_function__``.

>>> import nbaccel as nb
>>> a = nb.tensor([[2.0, 1.0], [1.0, 3.0]])
>>> nb.linalg.solve(a, nb.tensor([3.0, 5.0]))
tensor([0.8, 1.4])

Every function here is an op (or an alias over ops) defined in ``nbaccel/ops/linalg.py``,
``nbaccel/ops/matrix.py`` and ``nbaccel/ops/array_api_additions.py`` (eig, eigvals); this
module only picks the Array API spellings. Singular matrices raise :class:`LinAlgError`, which
*is* ``numpy.linalg.LinAlgError``.
"""
from __future__ import annotations

from numpy.linalg import LinAlgError  # noqa: F401  (the same class NumPy raises)

from .ops.linalg import matmul as _matmul, tensordot as _tensordot, cross as _cross, \
    diagonal as _diagonal, _outer, _vecdot, _matrix_transpose
from .ops.matrix import (inv as _inv, det as _det, pinv as _pinv, matrix_rank as _matrix_rank,  # noqa: F401
                         vector_norm as _vector_norm, slogdet, solve, svd, svdvals, eigh,
                         eigvalsh, qr, _cholesky_front, _matrix_norm, _matrix_power, _norm,
                         SlogdetResult, SVDResult, EighResult, QRResult)
from .ops.array_api_additions import eig, eigvals, EigResult  # noqa: F401

__all__ = ["LinAlgError", "cholesky", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv",
           "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "norm",
           "outer", "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "trace",
           "vecdot", "vector_norm"]

matmul = _matmul.front
tensordot = _tensordot.front
inv = _inv.front
det = _det.front
pinv = _pinv.front
matrix_rank = _matrix_rank.front
vector_norm = _vector_norm.front
cholesky = _cholesky_front
matrix_norm = _matrix_norm
matrix_power = _matrix_power
matrix_transpose = _matrix_transpose
norm = _norm
outer = _outer
vecdot = _vecdot


def cross(x1, x2, /, *, axis=-1):
    """Cross product of 3-element vectors along ``axis``."""
    return _cross.front(x1, x2, axis=axis)


def diagonal(x, /, *, offset=0):
    """The diagonals of a stack of matrices (the last two axes)."""
    return _diagonal.front(x, offset, -2, -1)


def trace(x, /, *, offset=0, dtype=None):
    """Sum of the diagonals of a stack of matrices (the last two axes)."""
    return _diagonal.front(x, offset, -2, -1).sum(axis=-1, dtype=dtype)
