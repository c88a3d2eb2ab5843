"""NumPy's own first error for a ufunc that writes into an output (``t -= x``, ``np.subtract(t,
x, out=t)``), asked of NumPy only once nbaccel's op has failed.

A ufunc resolves its loop and checks the cast of its result into ``out`` before it broadcasts:
``bool_array -= int32_array`` of mismatched shapes is NumPy's UFuncTypeError (int32 can't be
cast to bool), not a shape error, and ``bool_array -= bool_array`` is NumPy's TypeError about
boolean subtract whatever the shapes. nbaccel's ops check shapes in their shape/dtype rule and
the cast when they write, so a NumPy value that fails takes its exception from here: NumPy's
class and message, in NumPy's order. Only the failing path pays."""
from __future__ import annotations

import numpy as np


_PY_SCALARS = (bool, int, float, complex)


def _plain_list(x):
    """A (nested) list or tuple of Python numbers as NumPy's array of it, else None (one that
    holds arrays or tensors is not converted here: a tracer's values are not to be read)."""
    def plain(v):
        return type(v) in _PY_SCALARS or (isinstance(v, (list, tuple)) and all(plain(u) for u in v))
    if not isinstance(x, (list, tuple)) or not plain(x):
        return None
    try:
        return np.asarray(x)
    except ValueError:            # ragged: NumPy's own call says so
        return None


def _empty_like(x):
    """A stand-in of ``x``'s dtype and rank with no elements (a Python scalar stays itself: it
    is weak in NumPy's promotion), or None for an operand this cannot stand in for."""
    if isinstance(x, (list, tuple)):
        x = _plain_list(x)
        return None if x is None else np.empty((0,) * x.ndim, x.dtype)
    if isinstance(x, np.generic):
        return np.empty(0, x.dtype)
    dtype = getattr(x, "dtype", None)
    if dtype is not None and hasattr(x, "ndim"):
        return np.empty((0,) * x.ndim, getattr(dtype, "np", dtype))
    return x if type(x) in (bool, int, float, complex) else None


def _shape_text(s) -> str:
    return "(" + ",".join(map(str, s)) + ("," if len(s) == 1 else "") + ")"


def _shape_error(ufunc, out, inputs):
    """NumPy's ValueError for the shapes of an elementwise ufunc into ``out``, or None: its
    iterator broadcasts the inputs together with the output, which it may not stretch."""
    if ufunc.signature is not None:       # a gufunc (matmul) words its core dimensions itself
        return None
    shapes = [tuple(x.shape) if hasattr(x, "shape") else np.shape(x)
              for x in inputs if hasattr(x, "shape") or isinstance(x, (list, tuple))]
    out_shape = tuple(out.shape)
    try:
        full = np.broadcast_shapes(*shapes, out_shape)
    except ValueError:
        return ValueError("operands could not be broadcast together with shapes "
                          + "".join(_shape_text(s) + " " for s in (*shapes, out_shape)))
    if full != out_shape:
        return ValueError(f"non-broadcastable output operand with shape {_shape_text(out_shape)} "
                          f"doesn't match the broadcast shape {_shape_text(full)}")
    return None


_MATMUL_WORK_CAP = 1 << 16     # (multiply-adds NumPy may do on stand-ins where it would not fail)
_TOO_BIG = object()


def _zeros_shaped(x, shape):
    """A stand-in of ``x``'s dtype and ``shape`` in one element's memory (strides 0)."""
    dtype = getattr(x, "dtype", None)
    dtype = getattr(dtype, "np", dtype) if dtype is not None else np.asarray(x).dtype
    return np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape, (0,) * len(shape))


def _matmul_inplace_error(t, other):
    """NumPy's error for the shapes of ``t @= other``, or None: ndarray's in-place matmul is
    ``np.matmul(t, other, out=t, axes=...)`` with the axes that keep ``t``'s rank, and words an
    AxisError of those axes as its own ValueError. NumPy checks every shape before it
    multiplies: its call on stand-ins of the real shapes in one element's memory raises what it
    raises, dtypes included, and multiplies only where it would not raise (capped: then
    ``_TOO_BIG``, and only the dtypes are asked)."""
    a, b = tuple(t.shape), tuple(np.shape(other))
    if int(np.prod(a, dtype=np.int64)) * max(b[-2:], default=1) > _MATMUL_WORK_CAP:
        return _TOO_BIG
    axes = [(-1,), (-2, -1), (-1,)] if len(a) == 1 else [(-2, -1)] * 3
    try:
        np.matmul(_zeros_shaped(t, a), _zeros_shaped(other, b), out=_zeros_shaped(t, a), axes=axes)
    except np.exceptions.AxisError:
        return ValueError("inplace matrix multiplication requires the first operand to have at "
                          "least one and the second at least two dimensions.")
    except (TypeError, ValueError) as e:     # (the axes come before the loop's dtypes, some of
        return e                             # the shapes after: the real call's order)
    except Exception:            # noqa: BLE001 - anything else is not a shape's word
        return None
    return None


def first_error(ufunc, out, inputs, casting="same_kind", inplace_operator=False):
    """The exception NumPy raises first for ``ufunc(*inputs, out=out)``, or None where NumPy
    would raise nothing this can see (the caller's own error then stands).

    The ufunc on empty stand-ins of the same dtypes and ranks raises exactly NumPy's type
    error (no loop, or an output it can't cast to); the shapes come after.
    ``inplace_operator``: ``out <op>= inputs[1]``, which NumPy's matmul words its own way."""
    if not isinstance(ufunc, np.ufunc):
        return None
    if inplace_operator and ufunc is np.matmul and len(inputs) == 2 and _empty_like(inputs[1]) is not None:
        worded = _matmul_inplace_error(out, inputs[1])
        if worded is not _TOO_BIG:
            return worded
    stand_ins = [_empty_like(x) for x in (*inputs, out)]
    if any(s is None for s in stand_ins):
        return None
    try:
        ufunc(*stand_ins[:-1], out=stand_ins[-1], casting=casting)
    except TypeError as e:
        return e
    except ValueError:            # a shape error of the empty stand-ins says nothing
        pass
    if inplace_operator and ufunc is np.matmul:
        return None                   # (too big to ask with real shapes: the dtypes were asked)
    return _shape_error(ufunc, out, inputs)
