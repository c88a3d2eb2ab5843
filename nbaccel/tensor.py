"""The eager Tensor: its fields, construction, autograd, in-place writes and its protocols.

Its op methods (``exp``, ``sum``, ``sort``, ``add_``, ``__add__``, ...) are not written here:
``import nbaccel`` installs them from the op table (``dispatch.install_methods``), then NumPy's
protocols ``__array_ufunc__``/``__array_function__`` (``numpy_routing.install``) and NumPy's
meanings of ndarray methods inside a ``%%compile`` cell (``ndarray_methods.install``); each op
method's docstring ends with the file and line of its ``defop`` (``help(nb.Tensor.sort)``). What
it says about itself (shape, size, flags) is in its base class ``tensor_meta.TensorMetadata``,
and its conversions to Python and NumPy values (``numpy()``, ``float()``, printing) in
``tensor_values.TensorValues``; conversions into tensors live in ``convert.py``, the one
dispatch path in ``dispatch.py``.

The engine's arrows point down to this module's imports: ``convert``, ``dispatch`` and
``autograd`` sit below Tensor and import nothing of it; they are handed the class when it is made
(its last lines). The modules that install methods sit above it."""
from __future__ import annotations

import weakref

import numpy as np

from . import autograd, convert, dispatch
from . import dtypes as D
from .convert import asarray
from .dispatch import active_trace
from .devices import Device, array_module, device as _device
from .ops import fronts
from .ops.registry import OPS
from .ops.meta import broadcast_shapes
from .tensor_meta import TensorMetadata, _Size  # noqa: F401 - _Size: importable here too
from .tensor_values import TensorValues
import nbaccel

_SCALARS = (bool, int, float, complex)


def _inplace_cast_error(src, dst, what):
    """NumPy's own exception for an in-place result it cannot cast (a UFuncTypeError, so code
    that catches NumPy's type catches ours), with NumPy's message."""
    try:
        np.add(np.zeros(1, dst.np), np.zeros(1, src.np), out=np.zeros(1, dst.np), casting="same_kind")
    except TypeError as e:
        return e
    return TypeError(f"result type {src} can't be cast to the desired output type {dst} in an {what}")


# ``Tensor._np`` is falsy for nbaccel's own tensors and truthy for NumPy-flavoured ones (a
# %%compile cell's values). A 0-d NumPy value is a scalar (ufuncs, reductions) or a 0-d ndarray
# (reshape, copy, an array written in place); a traced value knows which from the op that made
# it, and a tracer that outlives its trace keeps the answer here.
NP_ARRAY_0D = 2


# NumPy's message for a write into a read-only array, by ``_assign``'s ``what`` (the default, an
# in-place operator or a ufunc's ``out=``, is "output array is read-only")
_READ_ONLY = {
    "setitem": "assignment destination is read-only",
    "real part write": "assignment destination is read-only",
    "imaginary part write": "assignment destination is read-only",
    "copy_": "assignment destination is read-only",          # np.copyto
    "ndarray.fill": "assignment destination is read-only",
    "ndarray.flat write": "underlying array is read-only",
    "ndarray.sort": "sort array is read-only",
    "ndarray.partition": "partition array is read-only",
    "ndarray.put": "put: output array is read-only",
    "ndarray.byteswap": "array to be byte-swapped is read-only",
}


class Tensor(TensorMetadata, TensorValues):
    """An n-dimensional array with dtype, device and autograd.

    >>> import nbaccel as nb
    >>> x = nb.tensor([1.0, 2.0], requires_grad=True)
    >>> (x * x).sum().backward(); x.grad
    tensor([2., 4.])
    """

    __slots__ = ("_data", "_node", "dtype", "device", "requires_grad", "grad", "grad_fn",
                 "_version", "_np", "_origin", "_saved_version", "_retains_grad", "__weakref__")
    __array_priority__ = 1000

    # -- construction -------------------------------------------------------------------
    def __init__(self, data=None, dtype=None, device=None, requires_grad=False):
        t = asarray(data, dtype=dtype, device=device) if data is not None else asarray([], dtype=dtype or D.float32)
        self._init(t._data, t.dtype, t.device, t._np)
        if requires_grad:
            self.requires_grad_(True)

    def _init(self, data, dtype, device, npflag=False, node=None, version=None):
        self._data = data
        self._node = node
        self.dtype = dtype
        self.device = device
        self.requires_grad = False
        self.grad = None
        self.grad_fn = None
        self._version = version if version is not None else [0]
        self._np = npflag
        self._origin = None          # shells point at the tensor they stand for
        self._saved_version = None
        self._retains_grad = False

    @classmethod
    def _wrap(cls, data, dtype, device, npflag=False, version=None):
        # every eager op result is made here: the fields are set inline (as in ``_init``)
        t = object.__new__(Tensor)
        t._data = data
        t._node = None
        t.dtype = dtype
        t.device = device
        t.requires_grad = False
        t.grad = None
        t.grad_fn = None
        t._version = version if version is not None else [0]
        t._np = npflag
        t._origin = None
        t._saved_version = None
        t._retains_grad = False
        return t

    @classmethod
    def _tracer(cls, node, dtype, device, npflag=False, data=None):
        t = object.__new__(Tensor)
        t._init(data, dtype, device, npflag, node)
        return t

    def _shell(self):
        """A stand-in saved on the autograd tape: same data, same grad_fn, remembers the version."""
        s = object.__new__(Tensor)      # (fields set inline: every recorded op makes shells)
        s._data = self._data
        s._node = self._node
        s.dtype = self.dtype
        s.device = self.device
        s.requires_grad = self.requires_grad
        s.grad = None
        s.grad_fn = self.grad_fn
        s._version = self._version
        s._np = self._np
        s._origin = self._origin if self._origin is not None else self
        s._saved_version = self._version[0]
        s._retains_grad = False
        if self._node is not None:
            # a tape must not keep traced intermediates alive (the compiler would have to
            # compute them); traced leaves (graph inputs) are held by the trace itself
            if not self._node.is_placeholder and s._origin is self:
                s._origin = weakref.ref(self)
            self._node.graph.track(s)
        return s

    def _value(self, reason="a concrete value is needed"):
        """The backing array; on a tracer this is a graph break."""
        if self._saved_version is not None and self._saved_version != self._version[0]:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: a tensor of shape {tuple(self.shape)} and dtype {self.dtype} "
                f"is at version {self._version[0]}, expected version {self._saved_version}. "
                "Use an out-of-place op (x = x + 1 instead of x += 1) or .clone() it first.")
        if self._node is not None:
            return self._node.graph.realize(self, reason)
        return self._data

    # -- metadata (the rest: tensor_meta.py) ---------------------------------------------
    @property
    def real(self):
        """The real part: a view of a complex tensor, the tensor itself when real (NumPy)."""
        return OPS["real"].front(self)

    @real.setter
    def real(self, value):
        if self.dtype.kind == "c":
            self._assign(OPS["complex"].front(value, OPS["imag"].front(self)), "real part write")
        else:
            self._assign(value if isinstance(value, Tensor) else asarray(value, dtype=self.dtype,
                                                                           device=self.device))

    @property
    def imag(self):
        """The imaginary part: a view of a complex tensor, zeros for a real one (NumPy)."""
        return OPS["imag"].front(self)

    @imag.setter
    def imag(self, value):
        if self.dtype.kind != "c":
            raise TypeError("array does not have imaginary part to set")
        self._assign(OPS["complex"].front(OPS["real"].front(self), value), "imaginary part write")

    @property
    def data(self):
        return self.detach()

    @data.setter
    def data(self, other):
        self._data = other._data if isinstance(other, Tensor) else np.asarray(other)
        self.dtype = D.dtype(self._data.dtype)

    __hash__ = object.__hash__

    # -- conversion (the rest: tensor_values.py) -----------------------------------------
    # item is Tensor's own: ndarray_methods wraps Tensor.__dict__['item'] with NumPy's meaning
    def item(self):
        return self._scalar(".item()")

    def to(self, *args, dtype=None, device=None, copy=False, non_blocking=False):
        for a in args:
            if isinstance(a, (Device, str)) and not (isinstance(a, str) and a in D._BY_NAME):
                device = a
            elif isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            else:
                dtype = a
        t = self
        if dtype is not None and D.dtype(dtype) is not t.dtype:
            t = t.astype(dtype)
        if device is not None and _device(device) != t.device:
            t = OPS["to_device"].front(t, _device(device))
        if copy and t is self:
            t = t.clone()
        return t

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else f"cuda:{device}")

    # -- autograd -------------------------------------------------------------------------
    def requires_grad_(self, requires_grad=True):
        if requires_grad and self.dtype.kind == "c":
            raise RuntimeError("complex tensors cannot require gradients: nbaccel has no complex "
                               "autograd")
        if requires_grad and self.dtype.kind != "f":
            raise RuntimeError(f"only floating point tensors can require gradients, got {self.dtype}")
        if self.grad_fn is not None and not requires_grad:
            raise RuntimeError("you can only change requires_grad of leaf tensors")
        self.requires_grad = bool(requires_grad)
        return self

    def retain_grad(self):
        if self.grad_fn is not None:
            self._retains_grad = True

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        autograd.backward(self, gradient, retain_graph, create_graph, inputs)

    def detach(self):
        if self._node is not None:
            return OPS["detach"].front(self)
        return Tensor._wrap(self._data, self.dtype, self.device, self._np, self._version)

    def detach_(self):
        self.grad_fn = None
        self.requires_grad = False
        return self

    # -- in-place ---------------------------------------------------------------------------
    def _read_only(self) -> bool:
        """Whether NumPy's array of this tensor is read-only (a broadcast view, traced or not)."""
        read_only = getattr(self._node.graph, "read_only", None) if self._node is not None else None
        if read_only is not None:
            return read_only(self)
        return isinstance(self._data, np.ndarray) and not self._data.flags.writeable

    def _assign(self, new, what="in-place operation"):
        """Write ``new`` (a Tensor result) into self: the one place in-place semantics live."""
        if not isinstance(new, Tensor):
            new = asarray(new, dtype=self.dtype, device=self.device)
        if self._read_only():
            # (NumPy checks it before the dtypes, and words it by what writes)
            raise ValueError(_READ_ONLY.get(what, "output array is read-only"))
        if D._promote(self.dtype, new.dtype) is not self.dtype and \
                "buifc".index(new.dtype.kind) > "buifc".index(self.dtype.kind):
            # NumPy's (and PyTorch's) same_kind casting: a wider result of the same kind (or an
            # earlier one of bool < uint < int < float < complex) may be written, int64 into
            # int32, float64 into float32; float into int or complex into real never
            raise _inplace_cast_error(new.dtype, self.dtype, what)
        if tuple(new.shape) != tuple(self.shape):
            if broadcast_shapes(new.shape, self.shape) != tuple(self.shape):
                raise ValueError(f"output with shape {tuple(self.shape)} doesn't match the "
                                 f"broadcast shape {broadcast_shapes(new.shape, self.shape)}")
        if autograd.is_grad_enabled() and self.requires_grad and self.grad_fn is None:
            raise RuntimeError("a leaf tensor that requires grad is being used in an in-place "
                               "operation; wrap it in `with nbaccel.no_grad():` or use an "
                               "out-of-place op")
        if self._node is not None or new._node is not None or active_trace() is not None:
            graph = (self._node or new._node).graph if (self._node or new._node) else active_trace()
            graph.assign(self, new)
        else:
            self._value()
            xp = array_module(self.device)
            xp.copyto(self._data, new._data, casting="unsafe")
        self._version[0] += 1
        if new.requires_grad and autograd.is_grad_enabled():
            self.requires_grad = True
            self.grad_fn = new.grad_fn
        return self

    def copy_(self, src):
        src = src if isinstance(src, Tensor) else asarray(src)
        if src.device != self.device:
            src = src.to(self.device)
        return self._assign(src.astype(self.dtype) if src.dtype is not self.dtype else src, "copy_")

    def zero_(self):
        return self._assign(OPS["full_like"].front(self, 0))

    def fill_(self, value):
        return self._assign(OPS["full_like"].front(self, value))

    def __setitem__(self, index, value):
        OPS["setitem"].front(self, index, value)

    # __getitem__ is getitem's front (its op-table entry lists the method)

    # -- protocols ----------------------------------------------------------------------------
    def __array_namespace__(self, *, api_version=None):
        if api_version is not None and api_version not in nbaccel.array_api.SUPPORTED_VERSIONS:
            raise ValueError(f"unsupported Array API version {api_version!r}")
        return nbaccel

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        a = self._value("DLPack export")
        if self.dtype is D.bfloat16:
            raise BufferError("bfloat16 cannot be exported through NumPy's DLPack")
        kw = {} if max_version is None else {"max_version": max_version}
        if stream is not None:
            kw["stream"] = stream
        try:
            return a.__dlpack__(**kw)
        except TypeError:
            return a.__dlpack__()

    def __dlpack_device__(self):
        return (1, 0) if self.device.type == "cpu" else (2, self.device.index)

    @property
    def __cuda_array_interface__(self):
        """A CUDA tensor's memory as its CuPy array describes it (``cupy.asarray(t)`` and other
        CUDA libraries share it without a copy). CPU tensors have none: AttributeError, so
        ``hasattr`` is False and NumPy's own protocols apply."""
        if self.device.type != "cuda":
            raise AttributeError("a CPU tensor has no __cuda_array_interface__ (it has __array__ and DLPack)")
        return self._value("its device memory is needed (__cuda_array_interface__)").__cuda_array_interface__

    # __array_ufunc__ and __array_function__, how NumPy's own functions reach the op table, are
    # numpy_routing.py's (it sits above Tensor and installs them: numpy_routing.install)

    def __reduce__(self):
        return (_rebuild, (np.asarray(self.cpu()._value()), self.dtype.name, str(self.device), self.requires_grad))

    def __deepcopy__(self, memo):
        t = self.detach().clone()
        if self.requires_grad:
            t.requires_grad_(True)
        memo[id(self)] = t
        return t


def _rebuild(data, dtype, device, requires_grad):
    return Tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)


class Parameter(Tensor):
    """A Tensor that a Module registers as a parameter; requires grad by default."""

    __slots__ = ()

    def __init__(self, data=None, requires_grad=True):
        t = data if isinstance(data, Tensor) else asarray(data if data is not None else [])
        self._init(t._value(), t.dtype, t.device, False)
        if requires_grad:
            self.requires_grad_(True)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    # copies of a module keep Parameters Parameters (so they stay registered as such)
    def __deepcopy__(self, memo):
        p = Parameter(self.detach().clone(), self.requires_grad)
        memo[id(self)] = p
        return p

    def __reduce__(self):
        return (_rebuild_parameter, Tensor.__reduce__(self)[1])


def _rebuild_parameter(data, dtype, device, requires_grad):
    return Parameter(_rebuild(data, dtype, device, False), requires_grad)


# The modules below Tensor make and recognise tensors by this class but cannot import it (this
# module imports them): it is handed to each of them once, here, and the op fronts get the engine
# they call the same way
autograd.Tensor = convert.Tensor = dispatch.Tensor = Tensor
fronts.bind(Tensor=Tensor, apply=dispatch.apply, asarray=asarray, active_trace=active_trace)
