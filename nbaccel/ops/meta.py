"""Shape and dtype rules shared by the kinds of ops (the `infer` defaults of the op table)."""
from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..tensor_meta import TensorMetadata as _Tensor   # (every Tensor is one; inline isinstance: hot path)


def shape_of(a) -> tuple:
    return a.shape if isinstance(a, _Tensor) else ()


def default_float(args) -> D.DType:
    """float64 when the computation came from NumPy code (NumPy-flavoured tensors), else float32."""
    for a in args:
        if getattr(a, "_np", False):
            return D.float64
    return D.float32


class ShapeError(ValueError, RuntimeError):
    """A shape or size mismatch: caught by ``except ValueError`` (what NumPy raises) and by
    ``except RuntimeError`` (what PyTorch raises). The one error class where the two disagree;
    its text is NumPy's for NumPy-flavoured inputs and PyTorch's otherwise (``shape_error``)."""


def numpy_scalar(t) -> bool:
    """Whether NumPy holds this traced 0-d value as a NumPy scalar (a reduction's or a ufunc's
    result), not a 0-d array: the trace's graph knows (a concrete tensor is an array)."""
    node = t._node
    return not t.shape and node is not None and getattr(node.graph, "numpy_scalar", lambda _: False)(t)


def numpy_flavoured(args) -> bool:
    """Whether any input came from NumPy code (a NumPy-flavoured tensor): errors then read as
    NumPy's."""
    return any(getattr(a, "_np", False) for a in args)


def shape_error(args, numpy_msg, torch_msg) -> ShapeError:
    """The ShapeError of a mismatch among ``args``: NumPy's wording when any input is
    NumPy-flavoured, PyTorch's otherwise (the messages may be callables, built on demand)."""
    msg = numpy_msg if numpy_flavoured(args) else torch_msg
    return ShapeError(msg() if callable(msg) else msg)


def np_shape(s) -> str:
    """A shape as NumPy's messages print it: ``(3,4)``, ``(5,)``, ``()``."""
    s = tuple(s)
    return "(" + ",".join(map(str, s)) + ("," if len(s) == 1 else "") + ")"


def torch_broadcast_message(*shapes) -> str:
    """PyTorch's text for operands that don't broadcast (the rightmost clash, as ATen's
    ``infer_size`` finds it)."""
    ndim = max(len(s) for s in shapes)
    for i in range(ndim - 1, -1, -1):
        size, first = 1, None
        for s in shapes:
            k = i - (ndim - len(s))
            if k >= 0 and s[k] != 1:
                if size != 1 and s[k] != size:
                    return (f"The size of tensor a ({first}) must match the size of tensor b "
                            f"({s[k]}) at non-singleton dimension {i}")
                size, first = s[k], s[k]
    return "shapes " + " ".join(str(tuple(s)) for s in shapes) + " don't broadcast"


def broadcast_shapes(*shapes) -> tuple:
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(-ndim, 0):
        size = 1
        for s in shapes:
            if -i <= len(s):
                d = s[i]
                if d != 1:
                    if size != 1 and d != size:
                        raise ShapeError("operands could not be broadcast together with shapes "
                                         + " ".join(np_shape(s) for s in shapes) + " ")
                    size = d
        out.append(size)
    return tuple(out)


def broadcast_args(args, shapes) -> tuple:
    """``broadcast_shapes`` of the inputs ``args``: a clash reads as NumPy's or PyTorch's."""
    try:
        return broadcast_shapes(*shapes)
    except ShapeError as e:
        if numpy_flavoured(args):
            raise
        raise ShapeError(torch_broadcast_message(*shapes)) from None


def normalize_axis(axis, ndim: int, name: str = "axis") -> tuple | None:
    """None -> None; int or sequence -> sorted tuple of non-negative axes, range-checked."""
    if axis is None:
        return None
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = []
    for a in axes:
        a = int(a)
        if not -max(ndim, 1) <= a < max(ndim, 1):
            raise np.exceptions.AxisError(f"{name} {a} is out of bounds for a tensor of dimension {ndim}")
        a = a % ndim if ndim else 0
        if a in out:
            raise ValueError(f"duplicate value in {name}: {axes}")
        out.append(a)
    return tuple(sorted(out))


def reduced_shape(shape, axis, keepdims) -> tuple:
    if axis is None:
        axis = tuple(range(len(shape)))
    if keepdims:
        return tuple(1 if i in axis else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axis)


def apply_dtype_rule(rule: str, dt: D.DType, args) -> D.DType:
    if rule in ("promote", "same"):
        return dt
    if rule == "bool":
        return D.bool_
    if rule == "float":
        return dt if dt.kind in "fc" else default_float(args)
    if rule == "real":  # abs: the magnitude of a complex number is real (complex64 -> float32)
        return D.real_of(dt)
    if rule == "realfloat":  # var/std: float results, real for complex input
        return D.real_of(dt) if dt.kind in "fc" else default_float(args)
    if rule == "int64":
        return D.int64
    if rule == "sum":  # sum/prod/cumsum: bool and signed ints accumulate in int64, unsigned in
        # uint64 (NumPy; PyTorch has no uint64 and gives int64)
        return D.int64 if dt.kind in "bi" else D.uint64 if dt.kind == "u" else dt
    if rule == "nobool":
        if dt.kind == "b":
            raise TypeError("this op is not defined for bool tensors")
        return dt
    if rule == "ufloat":  # NumPy's float loops: the smallest float that holds the input
        if dt.kind in "fc":
            return dt
        return D._promote(dt, D.float16) if default_float(args) is D.float64 else D.float32
    if rule in ("integer", "shift"):  # bitwise ops: bool and integers only
        if dt.kind in "fc":
            raise TypeError(f"this op is only defined for integer and bool tensors, got {dt}")
        return D.int8 if rule == "shift" and dt.kind == "b" else dt
    if rule == "int8bool":  # NumPy has no bool loop for these: bool computes as int8
        return D.int8 if dt.kind == "b" else dt
    raise ValueError(f"unknown dtype rule {rule!r}")


def check_weak_ints(args, dt: D.DType):
    """NumPy 2 (NEP 50): a Python int operand of an arithmetic ufunc with an integer result is
    converted to that dtype, and one outside its range raises OverflowError whatever the data
    (``int32_array * 2**40``). Comparisons and ``where`` take any int and are not checked."""
    info = None
    for a in args:
        if type(a) is int:
            info = info or np.iinfo(dt.np)
            if not info.min <= a <= info.max:
                raise OverflowError(f"Python integer {a} out of bounds for {dt.np}")


def cast_weak_int(v: int, dt: D.DType) -> int:
    """A Python int operand of ``where`` as NumPy converts it to the result dtype ``dt``: to
    int64 (uint64 where only that holds it), then cast, keeping the low bits for an integer
    dtype (``np.where(c, 2**40, int32_array)`` picks 0, where ``int32_array + 2**40`` raises)."""
    if dt.kind not in "iu" or np.iinfo(dt.np).min <= v <= np.iinfo(dt.np).max:
        return v                                       # (a float takes any int)
    if not -2**63 <= v < 2**64:
        raise OverflowError("Python int too large to convert to C long")
    return int(np.array(v).astype(dt.np))


def _no_loop_error(ufunc, dtypes) -> TypeError:
    """NumPy's own error for a ufunc without a loop for these dtypes (a UFuncTypeError; the
    class is private to NumPy, so a plain TypeError where it is missing)."""
    cls = getattr(getattr(getattr(np, "_core", None), "_exceptions", None), "_UFuncNoLoopError", None)
    if cls is None:
        return TypeError(f"ufunc {ufunc.__name__!r} did not contain a loop with signature "
                         f"matching types {dtypes}")
    return cls(ufunc, tuple(np.dtype(d) for d in dtypes))


def no_bool_loop(op, ufunc_name: str):
    """Make ``op`` refuse bool operands as NumPy's ufunc ``ufunc_name`` does: it has no bool loop
    and no message of its own (positive, sign), so the error is NumPy's UFuncTypeError. Wraps the
    op's dtype rule (eager calls and tracing refuse alike). Returns the op."""
    inner = op.infer
    ufunc = getattr(np, ufunc_name)

    def infer(args, params):
        for a in args:
            if isinstance(a, _Tensor) and a.dtype.kind == "b":
                raise _no_loop_error(ufunc, [a.dtype.np for a in args if isinstance(a, _Tensor)])
        return inner(args, params)
    op.infer = infer
    return op


def real_only(op):
    """Make ``op`` refuse complex operands with NumPy's TypeError (floor, remainder, atan2,
    ...: NumPy has no complex loop for them). Wraps the op's dtype rule, so eager calls and
    tracing both refuse. Returns the op."""
    inner = op.infer

    def infer(args, params):
        for a in args:
            if (isinstance(a, _Tensor) and a.dtype.kind == "c") or isinstance(a, complex):
                raise TypeError(f"{op.name} is not defined for complex operands "
                                f"(NumPy has no complex loop for it)")
        return inner(args, params)
    op.infer = infer
    return op


_MEMO: dict = {}
_MEMO_KINDS = ("unary", "binary", "ternary", "reduce")


def _int_class(v: int) -> tuple:
    """A Python int's part of a memo key: its sign and bit length, which decide which integer
    dtypes hold it (``check_weak_ints`` raises for some values of the same type)."""
    return (int, v < 0, (v if v >= 0 else ~v).bit_length())


def infer(op, args, params):
    """``op.infer`` memoised on the argument *metadata* for the elementwise and reduction kinds
    (their rules read only shapes, dtypes, flavours and scalar types). Tracing calls this for
    every op, so it must be cheap."""
    if op.kind not in _MEMO_KINDS:
        return op.infer(args, params)
    try:
        key = (op.name, tuple((a.shape, a.dtype, a._np) if isinstance(a, _Tensor) else
                              _int_class(a) if type(a) is int else type(a)
                              for a in args), tuple(params.items()) if params else ())
        hit = _MEMO.get(key)
    except TypeError:                      # an unhashable param: no memo
        return op.infer(args, params)
    if hit is None:
        hit = op.infer(args, params)
        if len(_MEMO) > 100_000:
            _MEMO.clear()
        _MEMO[key] = hit
    return hit


def default_infer(kind: str, rule: str):
    if kind == "unary":
        def infer(args, params):
            x = args[0]
            return x.shape, apply_dtype_rule(rule, x.dtype, args)
    elif kind in ("binary", "ternary"):
        def infer(args, params):
            vals = args[1:] if kind == "ternary" else args  # where(cond, a, b): cond does not promote
            # NumPy picks the loop (a TypeError for operands it has none for) before it
            # broadcasts, so the dtype rule runs first
            dt = apply_dtype_rule(rule, D.result_type(*vals, default_float=default_float(args)), args)
            if kind == "binary" and dt.kind in "iu":
                check_weak_ints(args, dt)
            return broadcast_args(args, [shape_of(a) for a in args]), dt
    elif kind == "reduce":
        def infer(args, params):
            x = args[0]
            shape = reduced_shape(x.shape, params.get("axis"), params.get("keepdims", False))
            dt = params.get("dtype")
            if dt is not None and rule in ("sum", "float", "same"):
                return shape, D.dtype(dt)   # an explicit accumulator dtype is the result's (NumPy)
            return shape, apply_dtype_rule(rule, D.dtype(dt or x.dtype), args)
    else:
        infer = None  # these kinds must give their own
    return infer


class DataDependentShape(RuntimeError):
    """An op's output shape depends on the values of its inputs (boolean masks, nonzero), so
    it cannot be inferred from shapes alone; the compiler turns this into a graph break."""
