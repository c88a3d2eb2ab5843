"""PyTorch's top-level spellings that are not ops: dtype aliases (``long``, ``float``, ...),
the legacy typed constructors (``LongTensor``, ``FloatTensor``, ...), ``inference_mode``,
``_assert``, and the device namespaces ``accelerator``, ``cuda``, ``backends``,
``distributed`` and ``onnx``, which answer truthfully for the machine nbaccel runs on.

>>> import nbaccel as torch
>>> torch.zeros(2, dtype=torch.long).dtype
nbaccel.int64
>>> torch.LongTensor([1, 2]).dtype, torch.cuda.is_available() in (True, False)
(nbaccel.int64, True)

Names that need a GPU runtime or several processes raise ``NotImplementedError`` naming what
to use instead (see docs/pytorch.md).
"""
from __future__ import annotations

import builtins
import contextlib
import types

from . import autograd
from . import dtypes as D
from .amp import GradScaler, autocast, get_autocast_dtype, is_autocast_enabled
from .devices import cuda_available, device as _device
from .convert import tensor
from .tensor import Tensor
from .ops.creation import _full_front, generator, manual_seed

__all__ = ["long", "float", "double", "half", "int", "short", "cfloat", "cdouble",
           "complex32", "chalf", "uint", "get_default_dtype", "set_default_dtype",
           "is_floating_point", "is_tensor", "numel",
           "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor",
           "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor",
           "Generator", "inference_mode", "is_inference_mode_enabled", "_assert", "autocast",
           "is_autocast_enabled", "get_autocast_dtype",
           "accelerator", "cuda", "backends", "distributed", "onnx", "mps", "cpu"]

# ---- dtype aliases ----------------------------------------------------------------------------
long = D.int64
float = D.float32          # noqa: A001  (PyTorch's names; the builtins stay in ``builtins``)
double = D.float64
half = D.float16
int = D.int32              # noqa: A001
short = D.int16
cfloat = D.complex64
cdouble = D.complex128


class _Unsupported:
    """A dtype PyTorch has and nbaccel does not: using it raises a clear error."""

    def __init__(self, name, hint):
        self.name, self.hint = name, hint

    def __repr__(self):
        return f"<unsupported dtype {self.name}>"

    def __getattr__(self, attr):       # (AttributeError, so that hasattr() still works)
        raise AttributeError(f"nbaccel has no dtype {self.name}: {self.hint}")


complex32 = chalf = _Unsupported("complex32", "use nbaccel.complex64 (cfloat)")
uint = D.uint32


def get_default_dtype():
    """The default floating dtype of nbaccel's own namespace: float32 (as PyTorch's)."""
    return D.float32


def set_default_dtype(d):
    if D.dtype(d) is not D.float32:
        raise NotImplementedError("nbaccel's default float is float32; pass dtype= to the "
                                  "creation functions (or use nbaccel.numpy for float64 defaults)")


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def is_floating_point(t) -> bool:
    return t.dtype.kind == "f"


def numel(t) -> builtins.int:
    return t.numel()


# ---- legacy typed constructors: FloatTensor(data) / FloatTensor(*sizes) ----------------------

class _TypedTensorMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype is cls._dtype and obj.device.type == "cpu"


def _typed(name, dtype):
    def __new__(cls, *args, device=None):
        if len(args) == 1 and not isinstance(args[0], builtins.int):
            data = args[0]
            if isinstance(data, Tensor):
                return data.astype(dtype)
            return tensor(data, dtype=dtype, device=device)
        shape = tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
        return _full_front(tuple(builtins.int(s) for s in shape), 0, dtype=dtype, device=device)
    doc = (f"``{name}(data)`` is ``nbaccel.tensor(data, dtype={dtype.name})``; ``{name}(*sizes)`` "
           f"a zero-filled {dtype.name} tensor of that shape. ``isinstance(t, {name})`` checks "
           "the dtype.")
    return _TypedTensorMeta(name, (), {"__new__": __new__, "_dtype": dtype, "__doc__": doc})


FloatTensor = _typed("FloatTensor", D.float32)
DoubleTensor = _typed("DoubleTensor", D.float64)
HalfTensor = _typed("HalfTensor", D.float16)
BFloat16Tensor = _typed("BFloat16Tensor", D.bfloat16)
LongTensor = _typed("LongTensor", D.int64)
IntTensor = _typed("IntTensor", D.int32)
ShortTensor = _typed("ShortTensor", D.int16)
CharTensor = _typed("CharTensor", D.int8)
ByteTensor = _typed("ByteTensor", D.uint8)
BoolTensor = _typed("BoolTensor", D.bool_)


# ---- Generator --------------------------------------------------------------------------------

import numpy as _np  # noqa: E402


class Generator(_np.random.Generator):
    """PyTorch's ``torch.Generator`` as a NumPy ``Generator`` (PCG64) that can be re-seeded in
    place: ``g = Generator().manual_seed(0)``. Samplers, ``random_split``, ``multinomial``,
    the in-place fills and ``nn.init`` take it as ``generator=``. (Its numbers are NumPy's,
    not PyTorch's: the same seed gives the same draws in nbaccel, not the same as torch.)"""

    def __init__(self, device="cpu"):
        self._seed = _np.random.SeedSequence().entropy
        super().__init__(_np.random.PCG64(self._seed))
        self.device = _device(device)

    def manual_seed(self, seed):
        self._seed = builtins.int(seed)
        self.bit_generator.state = _np.random.PCG64(self._seed).state
        return self

    def seed(self):
        return self.manual_seed(_np.random.SeedSequence().entropy % (2 ** 63))._seed

    def initial_seed(self):
        return self._seed

    def get_state(self):
        return self.bit_generator.state

    def set_state(self, state):
        self.bit_generator.state = state
        return self


def default_generator():
    return generator()


# ---- inference_mode, _assert --------------------------------------------------------------------

_inference = [False]


class inference_mode(contextlib.ContextDecorator):
    """``no_grad`` under PyTorch's name: no autograd graph is recorded inside. (PyTorch also
    marks the results as inference tensors; nbaccel's are ordinary tensors without history.)
    ``inference_mode(False)`` leaves grad mode as it is."""

    def __init__(self, mode: bool = True):
        self.mode = bool(mode)
        self._prev = []

    def __enter__(self):
        ctx = autograd.set_grad_enabled(False) if self.mode else None
        if ctx is not None:
            ctx.__enter__()
        self._prev.append((ctx, _inference[0]))
        _inference[0] = _inference[0] or self.mode
        return self

    def __exit__(self, *exc):
        ctx, _inference[0] = self._prev.pop()
        if ctx is not None:
            ctx.__exit__(*exc)
        return False

    def __call__(self, fn=None):
        if isinstance(fn, builtins.bool):
            return inference_mode(fn)
        return super().__call__(fn)


def is_inference_mode_enabled() -> builtins.bool:
    return _inference[0]


def _assert(condition, message):
    """``assert condition, message`` as a function (what ``torch._assert`` is)."""
    if not condition:
        raise AssertionError(message)


# ---- device namespaces --------------------------------------------------------------------------

def _no_gpu(what, alternative="run on the CPU (device='cpu')"):
    def f(*args, **kwargs):
        raise NotImplementedError(f"{what} needs a CUDA device and none is available here "
                                  f"(CuPy and an NVIDIA GPU); {alternative}")
    f.__name__ = what.rsplit(".", 1)[-1]
    return f


def _cuda_count() -> builtins.int:
    if not cuda_available():
        return 0
    import cupy
    return builtins.int(cupy.cuda.runtime.getDeviceCount())


def _set_cuda_device(d):
    if not cuda_available():
        return _no_gpu("torch.cuda.set_device")()
    import cupy
    cupy.cuda.Device(_device(d if not isinstance(d, builtins.int) else f"cuda:{d}").index).use()


def _cuda_current_device() -> builtins.int:
    if not cuda_available():
        return _no_gpu("torch.cuda.current_device")()
    import cupy
    return builtins.int(cupy.cuda.runtime.getDevice())


def _synchronize(device=None):
    if cuda_available():
        import cupy
        cupy.cuda.Device().synchronize()


def _manual_seed(seed):
    manual_seed(seed)


cuda = types.SimpleNamespace(
    is_available=cuda_available, device_count=_cuda_count, set_device=_set_cuda_device,
    current_device=_cuda_current_device, synchronize=_synchronize,
    manual_seed=_manual_seed, manual_seed_all=_manual_seed,
    is_bf16_supported=lambda including_emulation=True: cuda_available(),
    empty_cache=lambda: None,
    amp=types.SimpleNamespace(GradScaler=GradScaler,
                              autocast=lambda *a, **k: autocast("cuda", *a, **k)),
)
cuda.__doc__ = "torch.cuda: answers for CuPy-backed CUDA devices (none without CuPy and a GPU)."


def _current_accelerator(check_available: builtins.bool = False):
    """``cuda`` when CuPy and a GPU are present, else None (the CPU is no accelerator)."""
    return _device("cuda") if cuda_available() else None


accelerator = types.SimpleNamespace(
    is_available=cuda_available, current_accelerator=_current_accelerator,
    device_count=_cuda_count, synchronize=_synchronize,
    current_device_index=lambda: _cuda_current_device() if cuda_available() else -1,
    set_device_index=_set_cuda_device,
)

mps = types.SimpleNamespace(is_available=lambda: False, is_built=lambda: False)
cpu = types.SimpleNamespace(
    is_available=lambda: True, device_count=lambda: 1, synchronize=lambda device=None: None,
    amp=types.SimpleNamespace(autocast=lambda *a, **k: autocast("cpu", *a, **k)))

# Flags that tune cuDNN / cuBLAS in PyTorch. nbaccel has neither, so they are plain settable
# attributes with no effect (code that sets them runs unchanged).
backends = types.SimpleNamespace(
    cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=False,
                                                            allow_fp16_reduced_precision_reduction=True,
                                                            allow_bf16_reduced_precision_reduction=True),
                               is_built=cuda_available),
    cudnn=types.SimpleNamespace(allow_tf32=True, benchmark=False, deterministic=False,
                                enabled=False, is_available=lambda: False),
    mps=mps,
    mkldnn=types.SimpleNamespace(enabled=False, is_available=lambda: False),
)

is_autocast_enabled = is_autocast_enabled
get_autocast_dtype = get_autocast_dtype


def _no_distributed(name):
    def f(*args, **kwargs):
        raise NotImplementedError(
            f"torch.distributed.{name}: nbaccel runs in one process and has no process groups. "
            "Train on one process (drop the DDP branch: it is taken only when the RANK "
            "environment variable is set), or spread NumPy work over processes with Dask.")
    f.__name__ = name
    return f


distributed = types.SimpleNamespace(
    is_available=lambda: False, is_initialized=lambda: False,
    get_rank=lambda group=None: 0, get_world_size=lambda group=None: 1,
    init_process_group=_no_distributed("init_process_group"),
    destroy_process_group=_no_distributed("destroy_process_group"),
    barrier=_no_distributed("barrier"), all_reduce=_no_distributed("all_reduce"),
)


def _onnx_export(*args, **kwargs):
    raise NotImplementedError("torch.onnx.export: nbaccel does not write ONNX. Use "
                              "nbaccel.export(fn, *args) for a portable program (see "
                              "docs/export.md), or save the weights with nbaccel.save.")


onnx = types.SimpleNamespace(export=_onnx_export)
