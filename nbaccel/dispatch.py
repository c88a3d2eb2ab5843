"""The one path every op application takes (``apply``), the tracing context, and the Tensor
methods derived from the op table.

How the generated methods are made (:func:`install_methods`, run once by ``import nbaccel``):
for every op, each name in its ``methods`` becomes ``setattr(Tensor, name, op.front)``, the
same function as ``nbaccel.<name>``; ``__radd__``-style names get a wrapper that swaps the
operands, and an ``inplace`` op also gets ``add_`` / ``__iadd__`` that write the result back.
Every one of them ends its docstring with the file and line of the op's ``defop`` (``op table:
nbaccel/ops/sorting.py:<line>``), so ``help(nb.Tensor.sort)`` says where to read.
"""
from __future__ import annotations

import keyword
import sys
import threading

import numpy as np

from . import autograd
from .devices import array_module, cpu
from .ops import fronts
from .ops.meta import infer
from .ops.registry import ALIAS_METHODS, OPS, document_sites, documented
from .ops.ufunc_errors import first_error
from .convert import is_passthrough

_new = object.__new__
_Node = autograd.Node
# The Tensor class, handed in by tensor.py when it is made (tensor.py imports this module): a
# module global, so the hot path's `type(a) is Tensor` stays one dictionary read
Tensor = None

# The one tracing context: while the compiler runs a function, in-place updates of concrete
# tensors are deferred into the trace (so they happen after the graph reads the old values).
class _Trace(threading.local):
    graph = None      # each thread's default: no trace (a plain attribute read on the hot path)


_trace = _Trace()
# how many threads have a trace now (set_active_trace keeps it): while none does, apply reads no
# thread-local state for it (a thread-local read costs about 0.04 us more than a global's)
_TRACING = 0
_TRACING_LOCK = threading.Lock()


# set by ``nbaccel.amp.autocast`` while it is on: ``AUTOCAST(op, args) -> args`` casts the
# inputs of the ops that autocast runs in low precision (or in float32)
AUTOCAST = None


def active_trace():
    """The graph of the compiled function being traced on this thread, or None."""
    return _trace.graph


def set_active_trace(graph):
    global _TRACING
    with _TRACING_LOCK:
        prev = _trace.graph
        _trace.graph = graph
        _TRACING += (graph is not None) - (prev is not None)
    return prev


def _outranks(g, graph):
    """A vmap level (``nbaccel.func``) takes an op before the compiler's trace and before an
    outer vmap: the innermost transform interprets it first and hands the rest down."""
    return g is not graph and getattr(g, "level", 0) > getattr(graph, "level", 0)


def apply(op, args, params):
    """Run ``op`` on ``args`` (Tensors and Python scalars): trace, or execute eagerly, and
    record autograd when any input requires grad.

    The common eager call, one or two plain concrete tensors on one device with an op whose
    shape/dtype rule may be memoised (``OpDef.infer_memo``; two tensors of a ``linalg`` op
    without params: matmul), runs here in one frame: the memo key, the op's ``impl``, the
    result Tensor and its autograd record are inline (issue 36: each Python call saved is
    about 0.1 us of a 2-5 us op). Everything else takes ``_short`` (any number of arguments,
    scalars) or ``_general`` (traces, autocast, shells, decompositions), which decide it."""
    if AUTOCAST is not None or (_TRACING and _trace.graph is not None) or op.impl is None:
        return _general(op, args, params)
    n = len(args)
    if n == 2:
        a, b = args
        if (type(b) is not Tensor or type(a) is not Tensor or b._node is not None
                or a._node is not None or a._saved_version is not None
                or b._saved_version is not None or a.device is not b.device):
            return _short_or_general(op, args, params)
        if params or (op.infer_memo is not True and op.kind != "linalg"):
            return _short_or_general(op, args, params)
        grad = a.requires_grad or b.requires_grad
        if grad:
            grad = op.differentiable and (not autograd.GRAD_OFF or autograd._state.enabled)
            if grad and op.grad is None:
                return _general(op, args, params)    # differentiated through its decomposition
        da = a._data
        db = b._data
        key = (op, da.shape, id(a.dtype), a._np, db.shape, id(b.dtype), b._np)
        hit = _INFER.get(key)
        if hit is None:
            hit = _remember(key, infer(op, args, params))
        dev = a.device
        xp = np if dev is cpu or dev.type == "cpu" else array_module(dev)
        data = op.impl(xp, da, db)
        npflag = True if a._np or b._np else False
    elif n == 1:
        a = args[0]
        if (type(a) is not Tensor or a._node is not None or a._saved_version is not None
                or not op.infer_memo or op is _TO_DEVICE):
            return _short_or_general(op, args, params)
        grad = a.requires_grad
        if grad:
            grad = op.differentiable and (not autograd.GRAD_OFF or autograd._state.enabled)
            if grad and op.grad is None:
                return _general(op, args, params)
        da = a._data
        dev = a.device
        xp = np if dev is cpu or dev.type == "cpu" else array_module(dev)
        if params:
            try:
                key = (op, da.shape, id(a.dtype), a._np, tuple(params.items()))
                hit = _INFER.get(key)
            except TypeError:      # an unhashable param: worked out each time
                hit = infer(op, args, params)
                data = op.impl(xp, da, **params)
            else:
                if hit is None:
                    hit = _remember(key, _with_caller(infer(op, args, params), params))
                data = hit[2](op.impl, xp, da, params)   # the impl, its params as keywords
        else:
            key = (op, da.shape, id(a.dtype), a._np)
            hit = _INFER.get(key)
            if hit is None:
                hit = _remember(key, infer(op, args, params))
            data = op.impl(xp, da)
        npflag = True if a._np else False
    else:
        return _short_or_general(op, args, params)
    # the result as ``_run_impl`` makes it (Tensor._wrap's fields, inline); a NumPy scalar (a
    # full reduction's) is tested for first
    if type(data) is not np.ndarray and (isinstance(data, np.generic) or not hasattr(data, "dtype")
                                         or not hasattr(data, "shape")):
        data = xp.asarray(data)
    dt = hit[1]
    want = dt.np
    got = data.dtype
    if got is not want and got != want:
        data = data.astype(want)
    version = None
    if op.view:
        base = data.base
        if base is not None and (base is da or base is da.base):
            version = a._version     # views share the version counter with their base
    if version is None:
        version = [0]
    out = _new(Tensor)
    out._data = data
    out._node = None
    out.dtype = dt
    out.device = dev
    out.grad = None
    out._version = version
    out._np = npflag
    out._origin = None
    out._saved_version = None
    out._retains_grad = False
    if grad:
        if dt.kind == "c":
            _refuse_complex_grad(op, out)
        # autograd.attach's record of concrete inputs, inline: each input kept as itself with
        # the state its grad rule must see, the output as the state to make its shell from (the
        # Node's fields set here as Node.__init__ sets them: a call less per recorded op)
        node = _new(_Node)
        node.op = op
        node._args = args if type(args) is tuple else tuple(args)
        node._saved = ((a.grad_fn, a._version[0], da, a.requires_grad),) if n == 1 else (
            (a.grad_fn, a._version[0], da, a.requires_grad),
            (b.grad_fn, b._version[0], db, b.requires_grad))
        node.params = params
        node._out = (data, dt, dev, npflag, version, version[0])
        node.backward_fn = None
        node.name = op.name
        out.requires_grad = True
        out.grad_fn = node
    else:
        out.requires_grad = False
        out.grad_fn = None
    return out


def _short_or_general(op, args, params):
    out = _short(op, args, params)
    return out if out is not None else _general(op, args, params)


def _short(op, args, params):
    """The common case in one pass (issue 36): concrete tensors on one device and Python
    scalars, no trace, no autocast. The inputs are scanned once, and what the scan reads is
    the signature under which the op's shape/dtype rule is memoised (``_INFER``); anything
    else (a tracer, a stale autograd shell, two devices, a device move, a grad rule given only
    by a decomposition) returns None and takes the general path, which decides it."""
    sig = [op]
    xs = []
    dev = None
    grad = npflag = False
    for a in args:
        if isinstance(a, Tensor):
            if a._node is not None or (a._saved_version is not None   # (a shell: a rule's out)
                                       and a._saved_version != a._version[0]):
                return None
            d = a.device
            if d is not dev:
                if dev is not None:
                    return None
                dev = d
            if a.requires_grad:
                grad = True
            data = a._data
            xs.append(data)
            if a._np:
                npflag = True
            sig += (data.shape, id(a.dtype), a._np)
        else:
            xs.append(a)
            sig.append(type(a))
    if dev is None or op is _TO_DEVICE:
        return None
    if grad:
        grad = op.differentiable and autograd._state.enabled
        if grad and op.grad is None:
            return None             # differentiated through its decomposition
    memo = op.infer_memo
    if (memo is True or (memo and len(xs) == 1)
            or (op.kind == "linalg" and len(xs) == 2 and not params)):
        hit = _memoised(op, sig, args, params)
    else:
        hit = infer(op, args, params)
    out = _run_impl(op, args, xs, params, hit[1], dev, npflag)
    if grad:
        if out.dtype.kind == "c":
            _refuse_complex_grad(op, out)
        autograd.attach(op, args, params, out)
    return out


def _general(op, args, params):
    if AUTOCAST is not None:       # inside nbaccel.autocast: some ops take other input dtypes
        args = AUTOCAST(op, args)
    graph = None
    needs_grad = False
    npflag = False
    dev = None
    for a in args:
        if isinstance(a, Tensor):
            if a._node is not None and (graph is None or _outranks(a._node.graph, graph)):
                graph = a._node.graph
            if a.requires_grad:
                needs_grad = True
            if a._np:
                npflag = True
            d = a.device
            if dev is None:
                dev = d
            elif d is not dev and d != dev:   # (devices are shared objects)
                raise RuntimeError(f"Expected all tensors to be on the same device, but found at "
                                   f"least two devices, {dev} and {d} (op {op.name})")
    if graph is None:
        graph = _trace.graph   # inside a compiled function every op is captured
    if needs_grad:    # (grad mode is read only when an input requires grad)
        needs_grad = op.differentiable and autograd.is_grad_enabled()
        if needs_grad and op.grad is None:
            return op.decomp(*args, **params)  # differentiate through the decomposition
    if graph is not None:
        args = graph.lift_args(args)   # concrete tensors become graph inputs (also on the tape)
        out = graph.record(op, args, params)
    elif op.impl is None:
        return op.decomp(*args, **params)   # a composite defined only by its decomposition
    else:
        # a device move's result lives on its target (its input's device picks the source side)
        if op.name == "to_device":
            target = params["device"]
        else:
            target = dev or (params.get("device") if params else None) or cpu
        out = _eager(op, args, params, target, npflag)
    if needs_grad:
        if type(out) is not Tensor or out.dtype.kind == "c":   # (one real Tensor: nothing to refuse)
            _refuse_complex_grad(op, out)
        autograd.attach(op, args, params, out)
    return out


def _refuse_complex_grad(op, out):
    """nbaccel has no complex autograd: a complex result of an input that requires grad
    raises here rather than giving a gradient that silently misses the complex path."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    if any(isinstance(o, Tensor) and o.dtype.kind == "c" for o in outs):
        raise NotImplementedError(
            f"{op.name}: autograd through complex tensors is not supported (an input requires "
            "grad and the result is complex). Compute it under nbaccel.no_grad() or on "
            ".detach()ed inputs.")


_INFER: dict = {}
# the device move, which the short path leaves to the general one (its result's device is a
# param): bound by install_methods, once every family has registered
_TO_DEVICE = None


def _infer_concrete(op, args, params):
    """``infer`` for concrete arguments, memoised on a key that is cheap to build: the op,
    each array's shape, dtype singleton and flavour, each scalar's type. (The general memo in
    ops/meta.py hashes the same facts through Python-level ``__hash__`` methods.)"""
    pair = not params and len(args) == 2 and type(args[0]) is Tensor and type(args[1]) is Tensor
    memo = op.infer_memo
    if not (memo is True or (memo and len(args) == 1)) and not (pair and op.kind == "linalg"):
        return infer(op, args, params)   # (two plain tensors of a linalg op: matmul's shape rule)
    if pair:
        a, b = args      # the most common call, a binary op on two plain tensors: the same key
        key = (op, a._data.shape, id(a.dtype), a._np, b._data.shape, id(b.dtype), b._np)
        hit = _INFER.get(key)
        if hit is None:
            hit = _remember(key, infer(op, args, params))
        return hit
    key = [op]
    for a in args:
        if isinstance(a, Tensor):
            key += (a._data.shape, id(a.dtype), a._np)
        else:
            key.append(type(a))
    return _memoised(op, key, args, params)


def _memoised(op, key, args, params):
    """``infer`` under ``key`` (a list: the op, then what a scan of the inputs read), with the
    params appended: remembered, or worked out and remembered; a call with an unhashable
    param is worked out each time."""
    if params:
        key.append(tuple(params.items()))
    try:
        key = tuple(key)
        hit = _INFER.get(key)
    except TypeError:
        return infer(op, args, params)
    if hit is None:
        hit = infer(op, args, params)
        hit = _remember(key, _with_caller(hit, params) if params else hit)
    return hit


# What a memo entry of a call with params holds after (shape, dtype): a function that calls an
# impl with those params as keywords written out, ``caller(impl, xp, x, params)``. CPython's
# ``impl(xp, x, **params)`` costs about 0.2 us more than a call with the keywords spelled out,
# on every op with params (sum, reshape/view, permute, getitem, softmax, ...); one caller is
# made per set of names, the first time it is seen (issue 36).
_CALLERS: dict = {}


def _with_caller(hit, params):
    names = tuple(params)
    caller = _CALLERS.get(names)
    if caller is None:
        if all(isinstance(n, str) and n.isidentifier() and not keyword.iskeyword(n) for n in names):
            spelled = ", ".join(f"{n}=p[{n!r}]" for n in names)
            caller = eval(f"lambda impl, xp, x, p: impl(xp, x, {spelled})")  # noqa: S307 - names checked above
        else:
            caller = _double_star
        _CALLERS[names] = caller
    return (hit[0], hit[1], caller)


def _double_star(impl, xp, x, p):
    return impl(xp, x, **p)


def _remember(key, hit):
    if len(_INFER) > 50_000:
        _INFER.clear()
    _INFER[key] = hit
    return hit


def _eager(op, args, params, dev, npflag):
    # concrete tensors' arrays are read directly (``_value`` for tracers and autograd shells,
    # which check versions)
    xs = [(a._data if a._node is None and a._saved_version is None else a._value())
          if isinstance(a, Tensor) else a for a in args]
    return _run_impl(op, args, xs, params, _infer_concrete(op, args, params)[1], dev, npflag)


def _run_impl(op, args, xs, params, dt, dev, npflag):
    """The op's ``impl`` on the arrays ``xs``, its result as a Tensor of dtype ``dt``."""
    xp = np if dev is cpu or dev.type == "cpu" else array_module(dev)
    data = op.impl(xp, *xs, **params) if params else op.impl(xp, *xs)
    if type(data) is not np.ndarray and (not hasattr(data, "dtype") or not hasattr(data, "shape")
                                         or isinstance(data, np.generic)):
        data = xp.asarray(data)
    want = dt.np
    got = data.dtype
    if got is not want and got != want:    # (NumPy's built-in dtypes are singletons)
        data = data.astype(want)
    version = None
    if op.view and xs and isinstance(args[0], Tensor):
        base = xs[0]
        if data.base is not None and (data.base is base or data.base is base.base):
            version = args[0]._version  # views share the version counter with their base
    return Tensor._wrap(data, dt, dev, npflag, version)


# ---- methods from the op table ----------------------------------------------------------------

_PLAIN = (int, float, bool, complex, np.ndarray)     # never passed through to NumPy


def _reflected(front):
    def method(self, other):
        if type(other) not in _PLAIN and is_passthrough(other):
            return NotImplemented
        return front(other, self)
    return documented(method, front, "``other <op> t``, the reflected form: ``front(other, t)`` of")


def _binary_dunder(front):
    """``t <op> other``: a masked array or matrix on the other side handles the operation
    itself (NotImplemented sends Python to its reflected method, as ndarray does)."""
    def method(self, other, *args, **kwargs):
        if type(other) is not Tensor and type(other) not in _PLAIN and is_passthrough(other):
            return NotImplemented
        if args or kwargs:
            return front(self, other, *args, **kwargs)
        return front(self, other)   # (an operator's call: a plain call, not the * / ** one, 0.17 us less)
    method.__doc__ = front.__doc__
    return method


def _inplace(front):
    def method(self, *args, **kwargs):
        return self._assign(front(self, *args, **kwargs))
    return documented(method, front, "In place: the tensor is overwritten with the result of")


def _inplace_operator(front, op):
    """``t += x``. A NumPy scalar has no in-place operators, so Python rebinds ``s **= 2`` to
    ``s ** 2`` (no cast to s's dtype): a traced NumPy value that NumPy gives as a scalar (a
    reduction's, a ufunc's) does the same; its graph says which."""
    def method(self, *args, **kwargs):
        if self._read_only():    # NumPy refuses before it computes (a shape error comes after)
            raise ValueError("output array is read-only")
        node = self._node
        if self._np and node is not None and not self.shape and \
                getattr(node.graph, "numpy_scalar", lambda t: False)(self):
            return front(self, *args, **kwargs)      # (no output: its errors are the op's own)
        try:
            return self._assign(front(self, *args, **kwargs))
        except (TypeError, ValueError) as e:
            # NumPy's order: a missing loop or an uncastable result before the shapes; on
            # NumPy values the error raised is NumPy's own (only the failing path pays)
            first = first_error(getattr(np, op.numpy[0], None), self, (self, *args),
                                inplace_operator=True) if self._np and op.numpy and not kwargs else None
            if first is None or str(first) == str(e):
                raise
            if isinstance(first, ValueError) and isinstance(e, ValueError):
                first = type(e)(str(first))          # a ShapeError stays one
            raise first from None
    return documented(method, front, "``t <op>= x``: the tensor is overwritten with the result of")


def install_methods():
    """Give Tensor one method per name that ops list in ``methods`` (the module docstring says
    how), each documented with the file and line of its op-table entry."""
    global _TO_DEVICE
    _TO_DEVICE = OPS.get("to_device")
    document_sites()
    for op in OPS.values():
        for m in op.methods:
            if m.startswith("__r") and "__" + m[3:] in op.methods:
                setattr(Tensor, m, _reflected(op.front))
                continue
            binary_dunder = m.startswith("__") and op.kind in ("binary", "linalg")
            setattr(Tensor, m, _binary_dunder(op.front) if binary_dunder else op.front)
            if op.inplace:
                if m.startswith("__"):  # reflected forms were handled above (__rshift__ is not one)
                    setattr(Tensor, "__i" + m[2:], _inplace_operator(op.front, op))
                elif not m.startswith("__"):
                    setattr(Tensor, m + "_", _inplace(op.front))
    for m, front in ALIAS_METHODS.items():
        setattr(Tensor, m, front)
    _bind_fronts_apply()


def _bind_fronts_apply():
    """The op modules' fronts call ``fronts.apply``, which forwards here: they cannot import
    this module when they load (it imports them). Once every family is registered, each op
    module's ``apply`` is rebound to this one, a Python call less on every op (about 0.1 us
    of a 2-5 us small op; issue 36); ``fronts.apply`` too, so a module loaded later imports
    this one."""
    forward = fronts.apply
    for name, module in list(sys.modules.items()):
        if name.startswith("nbaccel.") and getattr(module, "apply", None) is forward:
            module.apply = apply
