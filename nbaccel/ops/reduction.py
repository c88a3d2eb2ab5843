"""Reductions over axes and scans along one axis.

Primitives: sum, prod, amax, amin, argmax, argmin, any, all, cumsum, cumprod. Composites:
mean, var, std, logsumexp, count_nonzero. ``max``/``min`` are aliases: values (NumPy) or,
for a PyTorch-style ``dim`` on a non-NumPy tensor, ``(values, indices)``.

Empty reductions follow NumPy: sum -> 0, prod -> 1, any -> False, all -> True,
mean/var -> nan, logsumexp -> -inf, max/min/argmax/argmin -> ValueError. Sums, products and
scans of bool and signed integers accumulate in int64, of unsigned integers in uint64 (NumPy).
Complex input: sum/prod/mean/cumsum/cumprod stay complex; var/std are real (the mean squared
magnitude, as NumPy); max/min/argmax/argmin order lexicographically (NumPy); logsumexp raises.
"""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from .. import dtypes as D, ops
from .batching import axis_param_rule
from .fronts import apply, as_tensor, reduce_params
from .meta import default_float, normalize_axis, real_only, reduced_shape, default_infer
from .registry import ReduceRule, constant, defalias, defop, highest, lowest
from ..tensor_meta import is_tensor


def _expand_back(g, x, axis, keepdims):
    """Broadcast a reduced gradient back to the input's shape."""
    if not keepdims and axis is not None:
        shape = list(x.shape)
        for a in axis:
            shape[a] = 1
        g = g.reshape(tuple(shape))
    elif not keepdims:
        g = g.reshape((1,) * x.ndim)
    return g.broadcast_to(x.shape)


def _count(shape, axis):
    return math.prod(shape[a] for a in (range(len(shape)) if axis is None else axis))


def _np_dtype(dtype):
    return None if dtype is None else dtype.np


_add_reduce = np.add.reduce


# ---- sum and prod ----------------------------------------------------------------------------

sum_ = defop("sum", kind="reduce", dtype_rule="sum", reduce=ReduceRule("add", constant(0)),
             impl=lambda xp, x, axis, keepdims, dtype=None: (
                 # ndarray.sum is np.add.reduce behind a Python wrapper (numpy/_core/_methods.py),
                 # xp.sum behind two: the ufunc's method directly on NumPy arrays
                 _add_reduce(x, axis, None if dtype is None else dtype.np, None, keepdims)
                 if type(x) is np.ndarray
                 else x.sum(axis=axis, keepdims=keepdims, dtype=_np_dtype(dtype))),
             grad=lambda g, out, x, axis, keepdims, dtype=None: (_expand_back(g, x, axis, keepdims),),
             methods="sum", numpy="sum")


def _prod_grad(g, out, x, axis, keepdims, dtype=None):
    # d prod / d x_i = product of the others, exact with zeros: no zero -> out / x_i; one
    # zero -> the product of the non-zeros at the zero, 0 elsewhere; more -> 0
    zero = ops.equal(x, 0)
    ones = ops.where(zero, 1, x)
    nonzero_prod = ops.prod(ones, axis=axis, keepdims=True)
    nzeros = ops.sum(zero, axis=axis, keepdims=True)
    others = ops.where(ops.equal(nzeros, 0), nonzero_prod / ones,
                       ops.where(ops.logical_and(ops.equal(nzeros, 1), zero), nonzero_prod, 0))
    return (_expand_back(g, x, axis, keepdims) * others,)


prod = defop("prod", kind="reduce", dtype_rule="sum", grad=_prod_grad,
             reduce=ReduceRule("multiply", constant(1)),
             impl=lambda xp, x, axis, keepdims, dtype=None: xp.prod(
                 x, axis=axis, keepdims=keepdims, dtype=_np_dtype(dtype)),
             methods="prod", numpy="prod")

# ---- max, min and their indices ---------------------------------------------------------------


def _no_identity(ufunc):
    """NumPy's message for a max/min over an empty range (compiled kernels raise it)."""
    return f"zero-size array to reduction operation {ufunc} which has no identity"


def _check_nonempty(name, x, axis):
    if x.size == 0 and (axis is None or any(x.shape[a] == 0 for a in axis)):
        raise ValueError(f"{name} of an empty tensor (shape {tuple(x.shape)}) along a zero-size "
                         "axis: the operation has no identity")


def _nonempty_infer(name, rule):
    """The shape rule of a reduction without identity: an empty reduction raises while tracing,
    as NumPy raises whatever the data (so a compiled function raises even if the result is
    never used)."""
    base = default_infer("reduce", rule)

    def infer(args, params):
        x = args[0]
        if hasattr(x, "shape"):
            axis = params.get("axis")
            size = 1
            for d in x.shape:
                size *= d
            if size == 0 and (axis is None or any(x.shape[a] == 0 for a in axis)):
                raise ValueError(f"{name} of an empty tensor (shape {tuple(x.shape)}) along a "
                                 "zero-size axis: the operation has no identity")
        return base(args, params)
    return infer


def _minmax_grad(g, out, x, axis, keepdims):
    # ties share the gradient evenly (PyTorch's amax/amin)
    o = _expand_back(out, x, axis, keepdims)
    mask = ops.equal(x, o).astype(g.dtype)
    count = ops.sum(mask, axis=axis, keepdims=True)
    return (_expand_back(g, x, axis, keepdims) * mask / count,)


def _reducer(name):
    def impl(xp, x, axis, keepdims):
        _check_nonempty(name, x, axis)
        return getattr(xp, name)(x, axis=axis, keepdims=keepdims)
    return impl


amax = defop("amax", kind="reduce", impl=_reducer("max"), grad=_minmax_grad, dtype_rule="same",
             infer=_nonempty_infer("max", "same"),
             reduce=ReduceRule("maximum", lowest, selects=True, empty_error=_no_identity("maximum")),
             methods="amax", numpy="amax")
amin = defop("amin", kind="reduce", impl=_reducer("min"), grad=_minmax_grad, dtype_rule="same",
             infer=_nonempty_infer("min", "same"),
             reduce=ReduceRule("minimum", highest, selects=True, empty_error=_no_identity("minimum")),
             methods="amin", numpy="amin")


def _arg_front(name):
    def front(x, axis=None, out=None, *, keepdims=False, dim=None, keepdim=None):
        x = as_tensor(x)
        if isinstance(out, bool):  # PyTorch's positional keepdim: argmax(x, dim, keepdim)
            keepdims, out = out, None
        if out is not None:
            raise TypeError(f"{name}: out= is not supported")
        ax = dim if dim is not None else axis
        if ax is not None and not hasattr(ax, "__index__"):
            raise TypeError(f"{name}: axis must be an integer or None, got {ax!r}")
        ax = None if ax is None else int(ax)
        return apply(ARGS[name], (x,), reduce_params(x, ax, keepdims, None, keepdim))
    front.__doc__ = f"Index of the {name[3:]}imum: flat when axis is None (NumPy, PyTorch)."
    return front


def _arg_impl(name):
    def impl(xp, x, axis, keepdims):
        _check_nonempty(name, x, axis)
        return getattr(xp, name)(x, axis=None if axis is None else axis[0], keepdims=keepdims)
    return impl


ARGS = {name: defop(name, kind="reduce", impl=_arg_impl(name), dtype_rule="int64",
                    infer=_nonempty_infer(name, "int64"),
                    reduce=ReduceRule(combine, identity, arg=True,
                                      empty_error=f"attempt to get {name} of an empty sequence"),
                    differentiable=False, methods=name, numpy=name, 
                    front=_arg_front(name))
        for name, combine, identity in (("argmax", "maximum", lowest), ("argmin", "minimum", highest))}
argmax, argmin = ARGS["argmax"], ARGS["argmin"]

_MISSING = object()


def _values_or_pair(name, values_op, index_op, elementwise):
    """``max``/``min``: NumPy semantics (values) except a PyTorch-style reduction along one
    ``dim`` of a non-NumPy tensor, which returns the namedtuple ``(values, indices)``;
    ``max(a, b)`` with a tensor ``b`` is PyTorch's elementwise maximum."""
    pair = namedtuple(name, ["values", "indices"])

    def front(x, *args, axis=_MISSING, dim=None, keepdims=None, keepdim=None, out=None,
              initial=None, where=None):
        if args and is_tensor(args[0]):
            return elementwise(x, args[0])
        x = as_tensor(x)
        if out is not None or initial is not None or where is not None:
            raise TypeError(f"{name}: out=, initial= and where= are not supported")
        positional = args[0] if args else None
        if len(args) > 1:   # NumPy: (axis, out, keepdims); PyTorch: (dim, keepdim)
            keepdim = args[1] if isinstance(args[1], bool) else (args[2] if len(args) > 2 else keepdim)
        torch_style = dim is not None or (isinstance(positional, int) and not x._np)
        ax = dim if dim is not None else (positional if axis is _MISSING else axis)
        kd = bool(keepdim if keepdim is not None else (keepdims or False))
        if not torch_style:
            return apply(values_op, (x,), reduce_params(x, ax, kd))
        if not isinstance(ax, int):
            raise TypeError(f"{name}(dim=...) takes one dimension, got {ax!r}; use "
                            f"a{name} for several")
        params = reduce_params(x, ax, kd)
        return pair(apply(values_op, (x,), params), apply(index_op, (x,), params))
    front.__doc__ = _values_or_pair.__doc__
    return front


defalias("max", _values_or_pair("max", amax, argmax, lambda a, b: ops.maximum(a, b)),
         numpy="max", methods="max")
defalias("min", _values_or_pair("min", amin, argmin, lambda a, b: ops.minimum(a, b)),
         numpy="min", methods="min")

# ---- any, all, count_nonzero --------------------------------------------------------------------

any_ = defop("any", kind="reduce", dtype_rule="bool", differentiable=False,
             reduce=ReduceRule("logical_or", constant(False), truth=True),
             impl=lambda xp, x, axis, keepdims: xp.any(x, axis=axis, keepdims=keepdims),
             methods="any", numpy="any")
all_ = defop("all", kind="reduce", dtype_rule="bool", differentiable=False,
             reduce=ReduceRule("logical_and", constant(True), truth=True),
             impl=lambda xp, x, axis, keepdims: xp.all(x, axis=axis, keepdims=keepdims),
             methods="all", numpy="all")

count_nonzero = defop(
    "count_nonzero", kind="reduce", dtype_rule="int64", differentiable=False,
    decomp=lambda x, axis, keepdims: ops.sum(ops.not_equal(x, 0), axis=axis, keepdims=keepdims),
    impl=lambda xp, x, axis, keepdims: xp.count_nonzero(x, axis=axis, keepdims=keepdims),
    methods="count_nonzero", numpy="count_nonzero")

# ---- mean, var, std, logsumexp --------------------------------------------------------------------


def _as_float(x, dtype=None):
    if dtype is not None:
        return x.astype(dtype)
    return x if x.dtype.kind in "fc" else x.astype(default_float([x]))


def _mean(x, axis=None, keepdims=False, dtype=None):
    n = _count(x.shape, axis)
    s = ops.sum(_as_float(x, dtype), axis=axis, keepdims=keepdims)
    return s / n if n else s * float("nan")


def _mean_front(x, axis=None, keepdims=False, *, dim=None, keepdim=None, dtype=None, out=None):
    """The mean over axes (None: all). NumPy counts the elements along the axes first, so a
    0-d array takes no axis (``reduce_params(counts=True)``)."""
    x = as_tensor(x)
    if out is not None:
        raise TypeError("mean: out= is not supported")
    return apply(mean, (x,), reduce_params(x, axis, keepdims, dim, keepdim, dtype, counts=True))


mean = defop("mean", kind="reduce", decomp=_mean, dtype_rule="float", front=_mean_front,
             impl=lambda xp, x, axis, keepdims, dtype=None: x.mean(
                 axis=axis, keepdims=keepdims, dtype=_np_dtype(dtype)),
             grad=lambda g, out, x, axis, keepdims, dtype=None: (
                 _expand_back(g, x, axis, keepdims) / max(_count(x.shape, axis), 1),),
             methods="mean", numpy="mean")


def _var(x, axis=None, keepdims=False, correction=0.0):
    xf = _as_float(x)
    d = xf - ops.mean(xf, axis=axis, keepdims=True)
    if d.dtype.kind == "c":              # |d|^2, real
        d2 = ops.real(d) * ops.real(d) + ops.imag(d) * ops.imag(d)
    else:
        d2 = d * d
    return ops.sum(d2, axis=axis, keepdims=keepdims) / max(_count(x.shape, axis) - correction, 0)


def _var_grad(g, out, x, axis, keepdims, correction=0.0):
    d = x - ops.mean(x, axis=axis, keepdims=True)
    return (_expand_back(g, x, axis, keepdims) * d * (2 / max(_count(x.shape, axis) - correction, 0)),)


def _var_impl(xp, x, axis, keepdims, correction=0.0):
    import numpy as np
    with np.errstate(divide="ignore", invalid="ignore"):
        return xp.var(x, axis=axis, keepdims=keepdims, ddof=correction)


def _var_front(x, axis=None, *args, dtype=None, out=None, ddof=None, keepdims=False,
               correction=None, unbiased=None, dim=None, keepdim=None, mean=None):
    """Variance: the Array API's ``var(x, /, *, axis, correction, keepdims)``, NumPy's
    ``(a, axis, dtype, out, ddof, keepdims)`` and PyTorch's ``(input, dim, unbiased, keepdim)``."""
    return _spread_front(var, x, axis, *args, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims,
                         correction=correction, unbiased=unbiased, dim=dim, keepdim=keepdim, mean=mean)


def _std_front(x, axis=None, *args, dtype=None, out=None, ddof=None, keepdims=False,
               correction=None, unbiased=None, dim=None, keepdim=None, mean=None):
    """Standard deviation, with the spellings of ``var``."""
    return _spread_front(std, x, axis, *args, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims,
                         correction=correction, unbiased=unbiased, dim=dim, keepdim=keepdim, mean=mean)


var = defop("var", kind="reduce", decomp=_var, impl=_var_impl, grad=_var_grad, dtype_rule="realfloat",
            front=_var_front, methods="var", numpy="var")
std = defop("std", kind="reduce", dtype_rule="realfloat",
            decomp=lambda x, **p: ops.sqrt(_var(x, **p)),
            impl=lambda xp, x, **p: xp.sqrt(_var_impl(xp, x, **p)),
            grad=lambda g, out, x, **p: _var_grad(g / (2 * out), out, x, **p),
            front=_std_front, methods="std", numpy="std")


def _spread_front(op, x, axis=None, *args, dtype=None, out=None, ddof=None, keepdims=False,
                  correction=None, unbiased=None, dim=None, keepdim=None, mean=None):
    """var/std: NumPy's ``ddof`` / Array API ``correction`` / PyTorch's ``unbiased``.
    The default correction is 0 on NumPy-flavoured tensors (NumPy) and 1 otherwise (PyTorch);
    ``x.var(1, True)`` is PyTorch's positional ``unbiased``."""
    x = as_tensor(x)
    if out is not None or mean is not None:
        raise TypeError(f"{op.name}: out= and mean= are not supported")
    if args:   # NumPy: (axis, dtype, out, ddof, keepdims); PyTorch: (dim, unbiased, keepdim)
        if isinstance(args[0], bool):
            unbiased = args[0]
            keepdim = args[1] if len(args) > 1 else keepdim
        else:
            dtype = args[0]
            if len(args) > 1 and args[1] is not None:
                raise TypeError(f"{op.name}: out= is not supported")
            ddof = args[2] if len(args) > 2 else ddof
            keepdims = args[3] if len(args) > 3 else keepdims
    given = [c for c in (ddof, correction) if c is not None]
    if len(given) + (unbiased is not None) > 1:
        raise TypeError(f"{op.name}: give only one of ddof, correction and unbiased")
    if unbiased is not None:
        corr = 1.0 if unbiased else 0.0
    elif given:
        corr = float(given[0])
    else:
        corr = 0.0 if x._np else 1.0
    if dtype is not None:
        x = x.astype(dtype)
    params = reduce_params(x, axis, keepdims, dim, keepdim, counts=True)
    params["correction"] = corr
    return apply(op, (x,), params)


def _logsumexp(x, axis=None, keepdims=False):
    # subtract the (finite) max so exp cannot overflow; an empty reduction is log(0) = -inf
    xf = _as_float(x)
    if _count(x.shape, axis) == 0:
        return ops.full_like(ops.sum(xf, axis=axis, keepdims=keepdims), float("-inf"))
    m = ops.amax(xf, axis=axis, keepdims=True)
    m = ops.where(ops.isfinite(m), m, 0)
    s = ops.sum(ops.exp(xf - m), axis=axis, keepdims=True)
    out = ops.log(s) + m
    return out if keepdims else out.reshape(reduced_shape(x.shape, axis, False))


def _logsumexp_impl(xp, x, axis, keepdims):
    import numpy as np
    shape = reduced_shape(x.shape, axis, keepdims)
    xf = x if x.dtype.kind == "f" else x.astype(np.float32 if D.is_bfloat16(x.dtype) else np.float64)
    if _count(x.shape, axis) == 0:
        return xp.full(shape, -np.inf, dtype=xf.dtype)
    m = xp.max(xf, axis=axis, keepdims=True)
    m = xp.where(xp.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):
        out = xp.log(xp.sum(xp.exp(xf - m), axis=axis, keepdims=True)) + m
    return xp.reshape(out, shape)


logsumexp = defop(
    "logsumexp", kind="reduce", decomp=_logsumexp, impl=_logsumexp_impl, dtype_rule="float",
    grad=lambda g, out, x, axis, keepdims: (
        _expand_back(g, x, axis, keepdims) * ops.exp(x - _expand_back(out, x, axis, keepdims)),),
    methods="logsumexp")
real_only(logsumexp)

# ---- scans ----------------------------------------------------------------------------------------


def _scan_infer(args, params):
    x = args[0]
    dt = params["dtype"] or x.dtype
    if params["dtype"] is None and dt.kind in "biu":
        dt = D.uint64 if dt.kind == "u" else D.int64
    shape = (math.prod(x.shape),) if params["axis"] is None else tuple(x.shape)
    return shape, dt


def _scan_impl(name):
    def impl(xp, x, axis, dtype):
        if x.ndim == 0 and axis is not None:   # PyTorch: a 0-d scan is the value
            return xp.reshape(x, ()).copy()
        return getattr(xp, name)(x, axis=axis, dtype=_np_dtype(dtype))
    return impl


def _scan_front(name):
    def front(x, axis=None, dtype=None, out=None, *, dim=None, include_initial=False):
        x = as_tensor(x)
        if out is not None:
            raise TypeError(f"{name}: out= is not supported")
        ax = dim if dim is not None else axis
        if ax is not None:
            ax = normalize_axis(int(ax), x.ndim)[0]
        r = apply(SCANS[name], (x,), {"axis": ax, "dtype": None if dtype is None else D.dtype(dtype)})
        if include_initial:   # the Array API's (and np.cumulative_*'s) leading identity
            at = 0 if ax is None else ax
            shape = tuple(1 if i == at else n for i, n in enumerate(r.shape))
            start = ops.full(shape, 0 if name == "cumsum" else 1, dtype=r.dtype)
            r = ops.concatenate((start, r), axis=at)
        return r
    return front


def _rev_cumsum(g, axis):
    """sum over j >= i of g[j], along axis."""
    return ops.sum(g, axis=axis, keepdims=True) - ops.cumsum(g, axis=axis) + g


def _flat(g, x, axis):
    return (g.reshape((-1,)), 0) if axis is None else (g, axis)


def _cumsum_grad(g, out, x, axis, dtype):
    g, ax = _flat(g, x, axis)
    return (_rev_cumsum(g, ax).reshape(x.shape),)


def _cumprod_grad(g, out, x, axis, dtype):
    # before the first zero: revcumsum(g * out) / x; at the first zero: revcumsum(g * out')
    # with that zero replaced by 1; after it: 0 (every later product holds that zero)
    g, ax = _flat(g, x, axis)
    xs, _ = _flat(x, x, axis)
    o, _ = _flat(out, x, axis)
    zero = ops.equal(xs, 0)
    seen = ops.cumsum(zero, axis=ax)
    before = ops.equal(seen, 0)
    first = ops.logical_and(zero, ops.equal(seen, 1))
    plain = _rev_cumsum(g * o, ax) / ops.where(before, xs, 1)
    at_zero = _rev_cumsum(g * ops.cumprod(ops.where(first, 1, xs), axis=ax), ax)
    gx = ops.where(before, plain, ops.where(first, at_zero, 0))
    return (gx.reshape(x.shape),)


SCANS = {}
for _name, _grad, _sym in (("cumsum", _cumsum_grad, "+"), ("cumprod", _cumprod_grad, "*")):
    SCANS[_name] = defop(_name, kind="other", impl=_scan_impl(_name), infer=_scan_infer,
                         grad=_grad, front=_scan_front(_name), batch_rule=axis_param_rule(_name),
                         methods=_name, numpy=(_name, _name.replace("cum", "cumulative_")))
