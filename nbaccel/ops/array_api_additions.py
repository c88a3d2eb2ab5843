"""The Array API's 2024.12 and 2025.12 additions that no other family had: ``diff``,
``nextafter`` and ``isin`` (2025.12), and ``linalg.eig`` / ``linalg.eigvals`` (2025.12).
(``reciprocal``, ``take_along_axis``, ``count_nonzero``, ``cumulative_prod`` and
``searchsorted`` live with their families; ``broadcast_shapes`` in ``nbaccel/array_api.py``.)

``diff`` is a spelling over slicing, ``concat`` and ``subtract``. ``nextafter``, ``isin``,
``eig`` and ``eigvals`` are ops of kind ``other`` / ``linalg``: NumPy's function computes them
(``numpy.nextafter``, ``numpy.isin``, ``numpy.linalg.eig``), none is differentiable.

>>> import nbaccel as nb
>>> nb.diff(nb.asarray([1, 4, 9, 16]))
tensor([3, 5, 7])
"""
from __future__ import annotations

import operator
from collections import namedtuple

import numpy as np

from .. import dtypes as D, ops
from ..tensor_meta import is_tensor
from .batching import leading_dims_rule, logical_ndim, pad_batched
from .fronts import apply, as_tensor
from .matrix import _lapack, _square
from .meta import broadcast_shapes
from .movement import axis_index
from .registry import defalias, defop


def _pair(x1, x2):
    """Two operands, at least one a tensor; a Python scalar takes the tensor's dtype (weak)."""
    if not is_tensor(x1) and not is_tensor(x2):
        x1 = as_tensor(x1)
    if not is_tensor(x1):
        x1 = as_tensor(x1, like=x2)
    if not is_tensor(x2):
        x2 = as_tensor(x2, like=x1)
    return x1, x2


# ---- diff -------------------------------------------------------------------------------------

def _edge(v, x, axis, name):
    """A prepend/append value as a tensor along ``axis``: a scalar (or 0-d) becomes one slice."""
    v = v if is_tensor(v) else as_tensor(v, like=x)
    if v.ndim == 0:
        shape = list(x.shape)
        shape[axis] = 1
        v = v.astype(x.dtype).reshape((1,) * x.ndim).broadcast_to(tuple(shape))
    elif v.ndim != x.ndim:
        raise ValueError(f"diff: {name} must have the dimension of x ({x.ndim}), got shape "
                         f"{tuple(v.shape)}")
    return v


def _diff(x, n=1, axis=-1, prepend=None, append=None):
    """The n-th forward difference along ``axis``: ``out[i] = x[i+1] - x[i]`` applied n times,
    after ``prepend`` / ``append`` are joined to x along ``axis`` (the Array API 2024.12's
    ``diff(x, /, *, axis=-1, n=1, prepend=None, append=None)``, NumPy's positional
    ``diff(a, n, axis, prepend, append)`` too). Booleans differ by ``not_equal``, as in NumPy."""
    x = as_tensor(x)
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"diff: order n must be non-negative, got {n}")
    if x.ndim == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    axis = axis_index(axis, x.ndim)
    if prepend is not None or append is not None:
        parts = ([_edge(prepend, x, axis, "prepend")] if prepend is not None else []) + [x] + \
                ([_edge(append, x, axis, "append")] if append is not None else [])
        x = ops.concat(parts, axis=axis)
    head = (slice(None),) * axis
    for _ in range(n):
        if x.shape[axis] == 0:
            break
        later, earlier = x[head + (slice(1, None),)], x[head + (slice(None, -1),)]
        x = ops.not_equal(later, earlier) if x.dtype is D.bool_ else later - earlier
    return x


defalias("diff", _diff)


# ---- nextafter --------------------------------------------------------------------------------

def _nextafter_infer(args, p):
    a, b = args
    dt = D.result_type(a.dtype, b.dtype)
    if dt.kind != "f":
        raise TypeError(f"nextafter: needs real floating-point operands, got {a.dtype} and {b.dtype}")
    return broadcast_shapes(tuple(a.shape), tuple(b.shape)), dt


def _nextafter_impl(xp, a, b):
    dt = np.result_type(a, b)
    return xp.nextafter(a.astype(dt, copy=False), b.astype(dt, copy=False))


def _nextafter_front(x1, x2, /):
    """The next representable value after ``x1`` towards ``x2``, elementwise (real floating
    dtypes; a Python float operand takes the other's dtype)."""
    return apply(nextafter, _pair(x1, x2), {})


def _nextafter_batch(args, batched, params, size):
    """vmap: elementwise, so each batched operand gets the result's logical rank."""
    n = max(logical_ndim(a, b) for a, b in zip(args, batched))
    return apply(nextafter, tuple(pad_batched(a, n) if b else a for a, b in zip(args, batched)), params)


nextafter = defop("nextafter", kind="other", differentiable=False, impl=_nextafter_impl,
                  infer=_nextafter_infer, front=_nextafter_front, batch_rule=_nextafter_batch)


# ---- isin -------------------------------------------------------------------------------------

def _isin_infer(args, p):
    return tuple(args[0].shape), D.bool_


def _isin_impl(xp, a, b, invert):
    return xp.isin(a, b, invert=invert)


def _isin_front(x1, x2, /, *, invert=False):
    """For each element of ``x1``: does it equal some element of ``x2`` (any shape)? ``invert``
    negates the answer. Booleans of x1's shape (the Array API 2025.12 ``isin``)."""
    x1, x2 = _pair(x1, x2)
    return apply(isin, (x1, x2), {"invert": bool(invert)})


# vmap: a batched x1 is one bigger x1 (a batched x2 runs once per example)
isin = defop("isin", kind="other", differentiable=False, impl=_isin_impl, infer=_isin_infer,
             front=_isin_front, batch_rule=leading_dims_rule("isin"))


# ---- eig, eigvals -----------------------------------------------------------------------------

def _complex_dtype(x, args):
    if x.dtype.kind == "c":
        return x.dtype
    if x.dtype.kind == "f":
        return D.complex128 if x.dtype is D.float64 else D.complex64
    raise TypeError(f"eig: needs a floating-point tensor, got {x.dtype}")


def _eig_infer(args, p):
    x = args[0]
    _square(x, "eig")
    shape = tuple(x.shape[:-1]) if p["part"] == "eigenvalues" else tuple(x.shape)
    return shape, _complex_dtype(x, args)


def _eig_impl(xp, x, part):
    want = np.complex128 if x.dtype in (np.float64, np.complex128) else np.complex64
    vals, vecs = xp.linalg.eig(_lapack(x))
    return (vals if part == "eigenvalues" else vecs).astype(want, copy=False)


EigResult = namedtuple("EigResult", ["eigenvalues", "eigenvectors"])


def eig(x, /):
    """Eigenvalues and right eigenvectors of a stack of general square matrices, always complex
    (complex64 for float32, complex128 for float64); the columns of ``eigenvectors`` have unit
    norm. Their order and the vectors' phases are LAPACK's (the standard leaves them open)."""
    x = as_tensor(x)
    return EigResult(apply(_eig, (x,), {"part": "eigenvalues"}),
                     apply(_eig, (x,), {"part": "eigenvectors"}))


def eigvals(x, /):
    """Eigenvalues of a stack of general square matrices (complex, as for ``eig``)."""
    return apply(_eig, (as_tensor(x),), {"part": "eigenvalues"})


_eig = defop("eig", kind="linalg", differentiable=False, infer=_eig_infer, impl=_eig_impl, front=eig,
             batch_rule=leading_dims_rule("eig"))
defalias("eigvals", eigvals)
