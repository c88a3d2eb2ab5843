"""A NumPy-backed stand-in for CuPy, for tests on machines without a GPU (a fake: it checks
nbaccel's device plumbing, never a GPU result).

What it keeps of CuPy's contract: its arrays are not ``np.ndarray``; NumPy refuses to convert
them implicitly (``__array__`` raises TypeError, as CuPy's does), so any code path that would
hand a device array to NumPy fails here as it would on a GPU; ``.get()``/``cupy.asnumpy`` copy
to the host; they carry ``__cuda_array_interface__``, ``.data.ptr``, ``.device.id`` and DLPack
device (2, 0); NumPy functions and ufuncs applied to them dispatch back to the module (NEP 13/18),
as CuPy's do. Its "device memory" is host memory.
"""
from __future__ import annotations

import importlib.machinery
import operator
import types

import numpy as np

__all__ = ["install", "FakeCudaArray"]


def _unwrap(x):
    if isinstance(x, FakeCudaArray):
        return x._a
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(v) for v in x)
    if isinstance(x, dict):
        return {k: _unwrap(v) for k, v in x.items()}
    return x


def _wrap(x):
    if isinstance(x, np.ndarray):
        return FakeCudaArray(x)
    if isinstance(x, tuple):
        return tuple(_wrap(v) for v in x)
    if isinstance(x, list):
        return [_wrap(v) for v in x]
    return x


class _Fn:
    """A NumPy function or ufunc seen through the stand-in (results become device arrays)."""
    __slots__ = ("f",)

    def __init__(self, f):
        self.f = f

    def __call__(self, *args, **kw):
        return _wrap(self.f(*_unwrap(args), **_unwrap(kw)))

    def __getattr__(self, name):        # ufunc.reduce, .outer, ...
        return _attr(getattr(self.f, name))


def _attr(v):
    if isinstance(v, types.ModuleType):
        return _Module(v)
    if isinstance(v, type):              # dtypes and classes stay NumPy's (cupy.float32 is too)
        return v
    if callable(v):
        return _Fn(v)
    return v


class _Module:
    def __init__(self, mod):
        self._mod = mod

    def __getattr__(self, name):
        return _attr(getattr(self._mod, name))


class _Data:
    __slots__ = ("ptr",)

    def __init__(self, ptr):
        self.ptr = ptr


class FakeCudaArray:
    """A device array of the stand-in: a NumPy array NumPy itself may not convert."""
    __slots__ = ("_a",)
    __module__ = "cupy"                  # how nbaccel tells a CuPy array (devices.device_of_array)

    def __init__(self, a):
        self._a = a

    # what CuPy arrays have
    def get(self, stream=None):
        return self._a.copy()

    @property
    def device(self):
        return types.SimpleNamespace(id=0)

    @property
    def data(self):
        return _Data(self._a.__array_interface__["data"][0])

    @property
    def __cuda_array_interface__(self):
        d = dict(self._a.__array_interface__)
        d["version"] = 3
        d.setdefault("strides", None)
        return d

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None, **kw):
        return self._a.__dlpack__()

    def __array__(self, *a, **kw):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use `.get()` "
                        "to construct a NumPy array explicitly.")

    def __array_ufunc__(self, ufunc, method, *inputs, **kw):
        return _wrap(getattr(ufunc, method)(*_unwrap(inputs), **_unwrap(kw)))

    def __array_function__(self, func, types_, args, kwargs):
        return _wrap(func(*_unwrap(args), **_unwrap(kwargs)))

    # everything else: NumPy's, with device arrays in and out
    def __getattr__(self, name):
        return _attr(getattr(self._a, name)) if callable(getattr(self._a, name)) else \
            _wrap(getattr(self._a, name))

    def __getitem__(self, k):
        return _wrap(self._a[_unwrap(k)])

    def __setitem__(self, k, v):
        self._a[_unwrap(k)] = _unwrap(v)

    def __len__(self):
        return len(self._a)

    def __bool__(self):
        return bool(self._a)

    def __float__(self):
        return float(self._a)

    def __int__(self):
        return int(self._a)

    def __index__(self):
        return operator.index(self._a)

    def __repr__(self):
        return f"fake_cupy.array({self._a!r})"

    @property
    def T(self):
        return FakeCudaArray(self._a.T)


def _binary(name):
    def method(self, *other):
        return _wrap(getattr(self._a, name)(*_unwrap(other)))
    method.__name__ = name
    return method


for _n in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
           "lshift", "rshift"):
    for _p in ("__%s__", "__r%s__", "__i%s__"):
        setattr(FakeCudaArray, _p % _n, _binary(_p % _n))
for _n in ("lt", "le", "eq", "ne", "gt", "ge", "neg", "pos", "abs", "invert"):
    setattr(FakeCudaArray, f"__{_n}__", _binary(f"__{_n}__"))


def _from_dlpack(x):
    if isinstance(x, FakeCudaArray):
        return x
    capsule = x.__dlpack__()

    class _Host:                         # the capsule holds host memory: let NumPy read it
        def __dlpack__(self, **kw):
            return capsule

        def __dlpack_device__(self):
            return (1, 0)
    return FakeCudaArray(np.from_dlpack(_Host()))


def _asarray(obj, dtype=None, **kw):
    if isinstance(obj, FakeCudaArray):
        return obj if dtype is None else obj.astype(dtype)
    iface = getattr(obj, "__cuda_array_interface__", None)
    if iface is not None:                # e.g. an nbaccel CUDA tensor: share its memory
        holder = types.SimpleNamespace(__array_interface__={k: v for k, v in iface.items() if k != "mask"})
        a = np.asarray(holder)
    else:
        a = np.array(_unwrap(obj), copy=True)   # host data is copied to the "device"
    return FakeCudaArray(a if dtype is None else a.astype(dtype))


class _DeviceCtx:
    def __init__(self, i=0):
        self.id = int(i)
        self.compute_capability = "90"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def skip_if_real_cupy():
    """Where a real CuPy is installed the stand-in must not be used: a Triton kernel launched on
    a real GPU with the stand-in's host pointers would corrupt the CUDA context for every test
    after it (and tests/test_gpu_cuda.py runs the real thing there)."""
    import importlib.util
    import sys

    import pytest
    mod = sys.modules.get("cupy", False)
    if mod is False:                     # not imported yet: is one installed?
        real = importlib.util.find_spec("cupy") is not None
    else:                                # None: a test has blocked it; else a stand-in or the real one
        real = mod is not None and not str(getattr(mod, "__version__", "")).endswith("stand-in")
    if real:
        pytest.skip("a real CuPy is installed: the GPU tests run on it instead of this stand-in")


def install(monkeypatch):
    """Put the stand-in at ``sys.modules["cupy"]`` for one test (monkeypatch undoes it)."""
    import sys
    mod = types.ModuleType("cupy")
    mod.__spec__ = importlib.machinery.ModuleSpec("cupy", None)
    mod.__version__ = "0+numpy-stand-in"
    mod.ndarray = FakeCudaArray
    mod.asarray = _asarray
    mod.array = lambda obj, dtype=None, copy=True, **kw: _asarray(obj, dtype)
    mod.asnumpy = lambda a: a.get() if isinstance(a, FakeCudaArray) else np.asarray(a)
    mod.from_dlpack = _from_dlpack
    mod.cuda = types.SimpleNamespace(
        runtime=types.SimpleNamespace(getDeviceCount=lambda: 1, getDevice=lambda: 0, setDevice=lambda i: None,
                                      deviceSynchronize=lambda: None),
        Device=_DeviceCtx)
    np_mod = _Module(np)
    mod.__getattr__ = lambda name: getattr(np_mod, name)    # every other function: NumPy's
    monkeypatch.setitem(sys.modules, "cupy", mod)
    return mod
