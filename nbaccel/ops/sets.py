"""Set and search ops of the Array API: unique_{values,counts,inverse,all} and searchsorted
(nonzero is in indexing.py).

unique_* have data-dependent output shapes: they run eagerly, and their
``infer`` raises :class:`DataDependentShape` on traced input, which the compiler turns into a
graph break. None of them is differentiable.
"""
from __future__ import annotations

from collections import namedtuple

from .. import dtypes as D
from .fronts import apply, as_tensor
from .meta import DataDependentShape
from .registry import defalias, defop
from ..tensor_meta import is_traced


def _concrete(args, name):
    if any(is_traced(a) for a in args):
        raise DataDependentShape(f"the output shape of {name} depends on the data")


# ---- unique: one op, one part per call ------------------------------------------------------

_PARTS = ("values", "indices", "inverse_indices", "counts")


def _unique_impl(xp, x, part):
    flat = x.reshape(-1)
    values, index, inverse, counts = xp.unique(flat, return_index=True, return_inverse=True,
                                               return_counts=True, equal_nan=False)
    if part == "values":
        return values
    if part == "indices":
        return index
    if part == "inverse_indices":
        return inverse.reshape(x.shape)
    return counts


def _unique_infer(args, p):
    _concrete(args, "unique")
    x = args[0]
    return None, (x.dtype if p["part"] == "values" else D.int64)


_unique = defop("unique", kind="other", differentiable=False, impl=_unique_impl,
                infer=_unique_infer, front=lambda x: unique_values(x))

UniqueAllResult = namedtuple("UniqueAllResult", ["values", "indices", "inverse_indices", "counts"])
UniqueCountsResult = namedtuple("UniqueCountsResult", ["values", "counts"])
UniqueInverseResult = namedtuple("UniqueInverseResult", ["values", "inverse_indices"])


def _parts(x, names):
    x = as_tensor(x)
    return [apply(_unique, (x,), {"part": n}) for n in names]


def unique_values(x):
    """The sorted distinct values of x (flattened)."""
    return _parts(x, ("values",))[0]


def unique_counts(x):
    """(values, counts) of the distinct values of x."""
    return UniqueCountsResult(*_parts(x, ("values", "counts")))


def unique_inverse(x):
    """(values, inverse_indices): values[inverse_indices] == x, inverse shaped like x."""
    return UniqueInverseResult(*_parts(x, ("values", "inverse_indices")))


def unique_all(x):
    """(values, indices of first occurrences, inverse_indices, counts)."""
    return UniqueAllResult(*_parts(x, _PARTS))


defalias("unique_values", unique_values, numpy="unique_values")
defalias("unique_counts", unique_counts, numpy="unique_counts")
defalias("unique_inverse", unique_inverse, numpy="unique_inverse")
defalias("unique_all", unique_all, numpy="unique_all")


# ---- searchsorted -----------------------------------------------------------------------------

def _searchsorted_infer(args, p):
    x1, x2 = args[0], args[1]
    if x1.ndim != 1:
        raise ValueError(f"searchsorted: x1 must be 1-D, got shape {tuple(x1.shape)}")
    if len(args) == 3 and tuple(args[2].shape) != tuple(x1.shape):
        raise ValueError(f"searchsorted: sorter shape {tuple(args[2].shape)} does not match x1 "
                         f"shape {tuple(x1.shape)}")
    return tuple(getattr(x2, "shape", ())), D.int64


def _searchsorted_impl(xp, x1, x2, *sorter, side):
    return xp.searchsorted(x1, x2, side=side, sorter=sorter[0] if sorter else None)


def _searchsorted_front(x1, x2, side="left", sorter=None, *, right=None):
    if right is not None:
        side = "right" if right else "left"
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    args = (as_tensor(x1), as_tensor(x2)) + ((as_tensor(sorter),) if sorter is not None else ())
    return apply(searchsorted, args, {"side": side})


searchsorted = defop("searchsorted", kind="other", differentiable=False,
                     impl=_searchsorted_impl, infer=_searchsorted_infer,
                     front=_searchsorted_front, numpy="searchsorted")
