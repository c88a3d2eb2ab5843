"""Neural-network ops: activations, the softmax family, normalisation, linear, dropout and
embedding. Losses and attention live in :mod:`nbaccel.ops.nn_losses` (imported below).

Every op here is a *composite*: ``decomp`` spells it in primitives (so the compiler can fuse
softmax into one max-reduce / subtract / exp / sum-reduce / divide kernel), ``impl`` is the
fast eager path and ``grad`` is the analytic derivative (cheaper than differentiating the
decomposition). Optional tensor arguments (a bias, a weight) are only passed when present;
a params flag says which are there, so ``params`` stay hashable and args stay tensors.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as D, ops
from .kernel_modules import fused_extern, fused_for as _fused, rows as _rows
from .linalg import matmul_rows
from .batching import leading_dims_rule
from .fronts import apply, as_tensor, override
from .meta import ShapeError, broadcast_shapes, default_float, normalize_axis  # noqa: F401
from .registry import OPS, defop
from ..autograd import needs_input_grad as need
from ..convert import asarray
from ..tensor_meta import TensorMetadata
from . import creation


def _float_input(x, name):
    """nn ops compute in floating point: ints and bools become the default float."""
    x = as_tensor(x)
    if x.dtype.kind != "f":
        x = x.astype(default_float([x]))
    return x


def _float_infer(args, params):
    x = args[0]
    return x.shape, x.dtype if x.dtype.kind == "f" else default_float(args)


def _erf_impl(xp, x):
    if "erf" in OPS:
        return OPS["erf"].impl(xp, x)
    # no erf op yet: the exact per-element math.erf
    return np.vectorize(math.erf, otypes=[x.dtype])(x)


def _grad_infer(args, params):
    """The gradient ops' rule: the shape of their first argument, the float result dtype."""
    dt = D.result_type(*args)
    return args[0].shape, dt if dt.kind == "f" else default_float(args)


def _split(rest, flags):
    """Optional args -> one entry per flag (None where the flag is off)."""
    it = iter(rest)
    return [next(it) if f else None for f in flags]


# ---- activations ------------------------------------------------------------------------

def _inplace_front(op, **fixed):
    resolved = []          # the op, once its defop has run (a call of ``op`` less per op)

    def front(input, inplace=False):
        x = input if isinstance(input, TensorMetadata) else as_tensor(input)
        out = apply(resolved[0] if resolved else resolved.append(op()) or resolved[0], (x,),
                    dict(fixed) if fixed else {})
        return x._assign(out) if inplace else out
    return front


_ZEROS: dict = {}    # a NumPy dtype -> its zero scalar


def _relu_impl(xp, x):
    if type(x) is np.ndarray:
        # the zero of x's own dtype: the operand NumPy makes of a Python 0 here (so the same
        # bits), without converting the Python int on every call (about 0.1 us of 0.6)
        zero = _ZEROS.get(x.dtype)
        if zero is None:
            zero = _ZEROS[x.dtype] = x.dtype.type(0)
        return np.maximum(x, zero)
    return xp.maximum(x, 0)


relu = defop("relu", kind="unary", dtype_rule="nobool",
             decomp=lambda x: ops.where(x > 0, x, 0),
             impl=_relu_impl,
             grad=lambda g, out, x: (OPS["relu_backward"].front(g, out),),   # (activation_grads)
             front=_inplace_front(lambda: relu), methods="relu", inplace=True,
             doc="max(x, 0), elementwise (``F.relu``).")

_K_TANH = math.sqrt(2.0 / math.pi)
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _gelu_decomp(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1 + ops.tanh(_K_TANH * (x + 0.044715 * x * x * x)))
    return 0.5 * x * (1 + ops.erf(x * _INV_SQRT2))


# The erf form runs one numba pass eagerly (40-60x NumPy's erf, which is built from float64
# array operations; float32 through a fitted erfc, float64 math.erf); the tanh form too in
# float32 (x * sigmoid(2u) with a vectorised float32 exp: 4x NumPy's expression), in float64 it
# stays on NumPy, whose SIMD tanh beats a scalar libm tanh per element (0.1x as a kernel).

def _gelu_kernels(xp, x, approximate, *more):
    k = _fused(xp, x, *more)
    return None if approximate == "tanh" and x.dtype != np.float32 else k


def _gelu_impl(xp, x, approximate="none"):
    k = _gelu_kernels(xp, x, approximate)
    if k is not None:
        out = np.empty(x.shape, x.dtype)
        run = k.gelu_tanh_forward if approximate == "tanh" else k.gelu_forward
        run(np.ascontiguousarray(x).reshape(-1), out.reshape(-1))
        return out
    if approximate == "tanh":
        return 0.5 * x * (1 + xp.tanh(_K_TANH * (x + 0.044715 * x * x * x)))
    return 0.5 * x * (1 + _erf_impl(xp, x * _INV_SQRT2))


def _gelu_backward_impl(m, g, x, approximate="none", is_xp=True):
    """g * gelu'(x), written against an array namespace (NumPy/CuPy, or nbaccel's ops for the
    decomposition)."""
    if approximate == "tanh":
        t = m.tanh(_K_TANH * (x + 0.044715 * x * x * x))
        d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _K_TANH * (1 + 3 * 0.044715 * x * x)
    else:
        e = _erf_impl(m, x * _INV_SQRT2) if is_xp else m.erf(x * _INV_SQRT2)
        d = 0.5 * (1 + e) + x * m.exp(-0.5 * x * x) * _INV_SQRT_2PI
    return g * d


def _gelu_backward_eager(xp, g, x, approximate="none"):
    k = _gelu_kernels(xp, x, approximate, g) if g.shape == x.shape else None
    if k is not None:
        out = np.empty(x.shape, x.dtype)
        run = k.gelu_tanh_backward if approximate == "tanh" else k.gelu_backward
        run(np.ascontiguousarray(g).reshape(-1), np.ascontiguousarray(x).reshape(-1),
            out.reshape(-1))
        return out
    return _gelu_backward_impl(xp, g, x, approximate)


def _gelu_extern(params):
    """Compiled graphs keep GELU's erf form whole (its fused kernel); the tanh form, whose
    eager kernel is float32 only, decomposes into the generated kernels."""
    return None if params.get("approximate") == "tanh" else fused_extern(params)


gelu_backward = defop(
    "gelu_backward", kind="nn", infer=_grad_infer, impl=_gelu_backward_eager,
    extern_backend=_gelu_extern,
    decomp=lambda g, x, approximate="none": _gelu_backward_impl(ops, g, x, approximate, False),
    front=lambda g, x, approximate="none": apply(gelu_backward, (g, x),
                                                 {"approximate": approximate}),
    doc="GELU's gradient ``g * gelu'(x)``: one fused pass eagerly (``nbaccel_kernels.fused``); "
        "its own gradient goes through the decomposition.")


def _gelu_grad(g, out, x, approximate="none"):
    return (gelu_backward.front(g, x, approximate),)


def _gelu_front(input, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return apply(gelu, (as_tensor(input),), {"approximate": approximate})


gelu = defop("gelu", kind="unary", dtype_rule="float", decomp=_gelu_decomp, impl=_gelu_impl,
             grad=_gelu_grad, front=_gelu_front, extern_backend=_gelu_extern,
             doc="Gaussian error linear unit: x * Phi(x) (``approximate='tanh'``: the tanh form).")


def _silu_grad(g, out, x):
    s = ops.sigmoid(x)
    return (g * s * (1 + x * (1 - s)),)


silu = defop("silu", kind="unary", dtype_rule="float",
             decomp=lambda x: x * ops.sigmoid(x),
             impl=lambda xp, x: x / (1 + xp.exp(-x)),
             grad=_silu_grad, front=_inplace_front(lambda: silu),
             doc="x * sigmoid(x) (a.k.a. swish).")


def _log1p(x):
    return ops.log1p(x) if "log1p" in OPS else ops.log(1 + x)


def _softplus_decomp(x, beta=1.0, threshold=20.0):
    bx = x * beta
    soft = _log1p(ops.exp(ops.minimum(bx, threshold))) / beta
    return ops.where(bx > threshold, x, soft)


def _softplus_impl(xp, x, beta=1.0, threshold=20.0):
    bx = x * beta
    return xp.where(bx > threshold, x, xp.log1p(xp.exp(xp.minimum(bx, threshold))) / beta)


def _softplus_front(input, beta=1.0, threshold=20.0):
    return apply(softplus, (as_tensor(input),), {"beta": float(beta), "threshold": float(threshold)})


softplus = defop("softplus", kind="unary", dtype_rule="float", decomp=_softplus_decomp,
                 impl=_softplus_impl, front=_softplus_front,
                 grad=lambda g, out, x, beta=1.0, threshold=20.0: (
                     ops.where(x * beta > threshold, g, g * ops.sigmoid(x * beta)),),
                 doc="log(1 + exp(beta x)) / beta, linear above ``threshold``.")


# ---- softmax family -----------------------------------------------------------------------

def _softmax_axis(x, dim, axis, name):
    if dim is not None and axis is not None:
        raise TypeError(f"{name}: give axis or dim, not both")
    a = dim if dim is not None else axis
    if a is None:
        if x.ndim > 1:
            raise TypeError(f"{name}: pass dim= (the axis to normalise over) for a "
                            f"{x.ndim}-d tensor")
        a = -1
    return normalize_axis(int(a), x.ndim, "dim")[0]


def _softmax_front_for(name):
    def front(input, dim=None, _stacklevel=3, dtype=None, *, axis=None):
        x = input if isinstance(input, TensorMetadata) else as_tensor(input)
        if dtype is not None:
            x = x.astype(dtype)
        if x.dtype.kind != "f":
            x = _float_input(x, name)
        nd = x._data.ndim if x._node is None else len(x.shape)
        if nd == 0:
            return front(x.reshape((1,)), 0).reshape(())
        if type(dim) is int and axis is None and -nd <= dim < nd:
            return apply(OPS[name], (x,), {"axis": dim % nd})   # (what _softmax_axis gives)
        return apply(OPS[name], (x,), {"axis": _softmax_axis(x, dim, axis, name)})
    return front


def _softmax_decomp(x, axis):
    e = ops.exp(x - ops.amax(x, axis=axis, keepdims=True))
    return e / ops.sum(e, axis=axis, keepdims=True)


# The forward softmaxes stay NumPy expressions (with their temporaries reused): a numba row
# kernel, even with a vectorisable exp, ran 0.7x NumPy's SIMD exp and max (measured); their
# backward is one row pass (softmax_backward) and one op instead of four.

def _softmax_impl(xp, x, axis):
    if x.size == 0:
        return x.copy()
    if type(x) is np.ndarray:      # the ufuncs' reductions directly (the methods are Python wrappers)
        e = np.subtract(x, np.maximum.reduce(x, axis, None, None, True))
        np.exp(e, e)
        return np.true_divide(e, np.add.reduce(e, axis, None, None, True), e)
    e = x - x.max(axis=axis, keepdims=True)    # (array methods: xp.max's wrapper costs ~1 us)
    xp.exp(e, out=e)
    e /= e.sum(axis=axis, keepdims=True)
    return e


def _softmax_backward_impl(m, g, y, axis, log):
    """The gradient of softmax (``log``: log_softmax) from its output ``y``, written against an
    array namespace (NumPy/CuPy, or nbaccel's ops for the decomposition)."""
    if log:
        return g - m.exp(y) * m.sum(g, axis=axis, keepdims=True)
    return y * (g - m.sum(g * y, axis=axis, keepdims=True))


def _softmax_backward_eager(xp, g, y, axis, log):
    if axis == y.ndim - 1 and y.size and g.shape == y.shape:
        k = _fused(xp, g, y)
        if k is not None:
            out = np.empty(y.shape, y.dtype)
            n = y.shape[-1]
            k.softmax_backward(_rows(g, n), _rows(y, n), out.reshape(-1, n), log)
            return out
    return _softmax_backward_impl(xp, g, y, axis, log)


softmax_backward = defop(
    "softmax_backward", kind="nn", infer=_grad_infer, impl=_softmax_backward_eager,
    extern_backend=fused_extern,
    decomp=lambda g, y, axis, log: _softmax_backward_impl(ops, g, y, axis, log),
    front=lambda g, y, axis, log=False: apply(softmax_backward, (g, y),
                                              {"axis": int(axis), "log": bool(log)}),
    doc="The gradient of softmax (``log=True``: of log_softmax) along ``axis`` from its output: "
        "one fused pass per row eagerly; its own gradient goes through the decomposition.")


softmax = defop("softmax", kind="nn", infer=_float_infer, infer_memo=True, decomp=_softmax_decomp,
                impl=_softmax_impl, front=_softmax_front_for("softmax"), methods="softmax",
                grad=lambda g, out, x, axis: (softmax_backward.front(g, out, axis),),
                doc="exp(x) / sum(exp(x)) along ``dim``, computed stably (max subtracted).")


def _log_softmax_decomp(x, axis):
    s = x - ops.amax(x, axis=axis, keepdims=True)
    return s - ops.log(ops.sum(ops.exp(s), axis=axis, keepdims=True))


def _log_softmax_impl(xp, x, axis):
    if x.size == 0:
        return x.copy()
    s = x - xp.max(x, axis=axis, keepdims=True)
    s -= xp.log(xp.sum(xp.exp(s), axis=axis, keepdims=True))
    return s


log_softmax = defop(
    "log_softmax", kind="nn", infer=_float_infer, infer_memo=True, decomp=_log_softmax_decomp,
    impl=_log_softmax_impl, front=_softmax_front_for("log_softmax"), methods="log_softmax",
    grad=lambda g, out, x, axis: (softmax_backward.front(g, out, axis, True),),
    doc="log(softmax(x)) along ``dim``, computed stably.")


# ---- linear ------------------------------------------------------------------------------------

def _linear_infer(args, params):
    x, w = args[0], args[1]
    if w.ndim != 2 or x.ndim < 1 or x.shape[-1] != w.shape[1]:
        rows = math.prod(x.shape[:-1]) if x.ndim else 1
        raise ShapeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x"
                         f"{x.shape[-1] if x.ndim else 1} and {'x'.join(map(str, w.shape[::-1]))})"
                         f" (linear: input of shape {tuple(x.shape)}, weight of shape "
                         f"{tuple(w.shape)}; need input [*, in] and weight [out, in])")
    if len(args) > 2 and tuple(args[2].shape) not in ((w.shape[0],), ()):
        raise ShapeError(f"linear: bias of shape {tuple(args[2].shape)} doesn't match "
                         f"{w.shape[0]} output features")
    dt = D.result_type(*args)
    if dt.kind != "f":
        raise TypeError(f"linear needs floating point tensors, got {x.dtype} and {w.dtype}")
    return tuple(x.shape[:-1]) + (w.shape[0],), dt


def _linear_grad(g, out, x, w, *b, bias):
    n_out, n_in = w.shape
    rows = math.prod(x.shape[:-1])
    g2 = g.reshape((rows, n_out))
    gw = g2.T @ x.reshape((rows, n_in)) if need(1) else None
    grads = (g @ w if need(0) else None, gw)      # (no matmul for an input that needs no grad)
    return grads + ((g2.sum(axis=0) if need(2) else None,) if b else ())


def _linear_impl(xp, x, w, b=None):
    out = matmul_rows(xp, x, w.T)
    if b is None:
        return out
    if b.dtype == out.dtype and out.ndim:
        out += b            # the product is a fresh array: add the bias in place (no temporary)
        return out
    return out + b


def _linear_front(input, weight, bias=None):
    res = override(linear.front, (input, weight, bias))
    if res is not NotImplemented:
        return res
    args = (as_tensor(input), as_tensor(weight)) + (() if bias is None else (as_tensor(bias),))
    return apply(linear, args, {"bias": bias is not None})


linear = defop("linear", kind="nn", infer=_linear_infer, grad=_linear_grad, front=_linear_front,
               decomp=lambda x, w, *b, bias: x @ w.T + b[0] if b else x @ w.T,
               impl=lambda xp, x, w, *b, bias: _linear_impl(xp, x, w, *b),
               doc="x @ weight.T + bias (``F.linear``).")


# ---- dropout -------------------------------------------------------------------------------------

def keep_mask(shape, p, device):
    """A bool mask, True with probability 1 - p, drawn eagerly from nbaccel's seeded generator.

    Drawn with the (static) shape of the input, even when the input is a tracer, so a compiled
    graph receives the mask as an input and stays deterministic given it."""
    sample = lambda s: creation.generator().random(tuple(s)) >= p   # noqa: E731
    make = lambda data: asarray(data, device=device, _np=False)     # noqa: E731
    if creation.vmap_random_hook is not None:   # inside vmap: randomness= decides
        return creation.vmap_random_hook(sample, tuple(shape), make)
    return make(sample(shape))


def _dropout_front(input, p=0.5, training=True, inplace=False):
    x = as_tensor(input)
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return x
    mask = keep_mask(x.shape, p, x.device)
    out = apply(dropout, (x, mask), {"scale": 0.0 if p == 1.0 else 1.0 / (1.0 - p)})
    return x._assign(out) if inplace else out


dropout = defop("dropout", kind="binary", dtype_rule="float",
                infer=lambda args, p: (args[0].shape, _float_infer(args, p)[1]),
                decomp=lambda x, mask, scale: ops.where(mask, x * scale, 0),
                impl=lambda xp, x, mask, scale: xp.where(mask, x * scale, 0),
                grad=lambda g, out, x, mask, scale: (ops.where(mask, g * scale, 0), None),
                front=_dropout_front,
                doc="Zero each element with probability p and scale the rest by 1/(1-p) "
                    "(identity when ``training`` is False).")


# ---- embedding -------------------------------------------------------------------------------------

def _check_indices(xp, idx, n):
    if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= n):
        bad = int(idx.min()) if int(idx.min()) < 0 else int(idx.max())
        raise IndexError(f"embedding: index {bad} is out of range for {n} embeddings")


def _embedding_impl(xp, w, idx, padding_idx):
    _check_indices(xp, idx, w.shape[0])
    return xp.take(w, idx, axis=0)


def _embedding_backward_impl(xp, g, idx, num, padding_idx):
    dim = g.shape[-1]
    out = xp.zeros((num, dim), dtype=g.dtype)
    k = _fused(xp, g) if g.size else None
    if k is not None:      # one pass (NumPy's add.at is a slow per-element loop)
        k.embedding_backward(np.ascontiguousarray(g).reshape(-1, dim),
                             np.ascontiguousarray(idx, np.int64).reshape(-1), out)
    else:
        xp.add.at(out, idx.reshape(-1), g.reshape(-1, dim))
    if padding_idx >= 0:
        out[padding_idx] = 0
    return out


def _pad_zeroed(x, idx, padding_idx):
    if padding_idx < 0:
        return x
    return ops.where((idx != padding_idx).reshape(tuple(idx.shape) + (1,)), x, 0)


embedding_backward = defop(
    "embedding_backward", kind="index", impl=_embedding_backward_impl,
    infer=lambda args, p: ((p["num"], args[0].shape[-1]), args[0].dtype),
    grad=lambda g, out, gy, idx, num, padding_idx: (
        _pad_zeroed(embedding.front(idx, g), idx, padding_idx), None),
    front=lambda g, idx, num, padding_idx=-1: apply(
        embedding_backward, (g, idx), {"num": int(num), "padding_idx": int(padding_idx)}),
    doc="The weight gradient of embedding: rows of ``g`` index-added at ``idx``.")


def _embedding_front(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
                     scale_grad_by_freq=False, sparse=False):
    idx, w = as_tensor(input), as_tensor(weight)
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: max_norm, scale_grad_by_freq and sparse are not "
                                  "supported")
    if idx.dtype.kind not in "iu":
        raise TypeError(f"embedding: indices must be an integer tensor, got {idx.dtype}")
    if w.ndim != 2:
        raise ShapeError(f"embedding: weight must be 2-D [num_embeddings, dim], got {tuple(w.shape)}")
    pad = -1
    if padding_idx is not None:
        n = w.shape[0]
        if not -n <= padding_idx < n:
            raise ValueError(f"embedding: padding_idx {padding_idx} must be within num_embeddings {n}")
        pad = padding_idx % n
    return apply(embedding, (w, idx), {"padding_idx": pad})


embedding = defop(
    "embedding", kind="index", impl=_embedding_impl,
    batch_rule=leading_dims_rule("embedding", 1),   # a batched index, the same table
    infer=lambda args, p: (tuple(args[1].shape) + (args[0].shape[1],), args[0].dtype),
    grad=lambda g, out, w, idx, padding_idx: (
        embedding_backward.front(g, idx, w.shape[0], padding_idx), None),
    front=_embedding_front,
    doc="Rows of ``weight`` picked by integer ``input`` (``F.embedding``); the gradient is an "
        "index-add, zero at ``padding_idx``.")
