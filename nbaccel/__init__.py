"""nbaccel: an eager tensor engine with autograd and an optional compiler, for notebooks.

>>> import nbaccel as nb
>>> x = nb.randn(3, 4, requires_grad=True)
>>> (x * x).sum().backward()
>>> bool(((x.grad - 2 * x).abs() < 1e-6).all())
True

Most names here and most Tensor methods are made at import time from the op table
(``nbaccel/ops/``): the two lines that install them say so below, and each function's
docstring ends with the file and line of the ``defop`` (or ``defalias``) that defines it, so
``help(nb.sort)`` or ``help(nb.Tensor.sort)`` says which line to read.
"""
from . import thread_pools as _thread_pools

# numba's OpenMP workers sleep when idle, so they leave the cores to BLAS and the notebook
# (docs/threads.md); set before numba's first parallel launch, a user's own choice kept
_thread_pools.configure()
# freed arrays' memory stays in the heap for the next ones instead of being faulted in again
# every eager step (nbaccel/heap.py, docs/eager.md)
from . import heap as _heap  # noqa: E402
_heap.configure()

from . import dtypes  # noqa: E402
from .dtypes import (DType, bool_, int8, uint8, int16, int32, int64, float16, bfloat16,  # noqa: F401
                     float32, float64, result_type as _result_type)
from .dtypes import uint16, uint32, uint64, complex64, complex128  # noqa: F401,E402
from .devices import Device, device  # noqa: F401
from . import ops as _ops
from .tensor import Tensor, Parameter  # noqa: F401
from .convert import asarray, tensor, from_numpy, from_dlpack  # noqa: F401
# NumPy's protocols on Tensor (np.exp(t), np.concatenate([t, u])): numpy_routing sits above Tensor
# and installs them as soon as Tensor exists, before the rest of the package is imported
from . import numpy_routing as _numpy_routing  # noqa: E402
_numpy_routing.install(Tensor)
from . import autograd  # noqa: F401
from .autograd import no_grad, enable_grad, set_grad_enabled, is_grad_enabled  # noqa: F401
from .ops.creation import manual_seed, rand, randn, randint, randperm, rand_like, randn_like  # noqa: F401
from .dispatch import install_methods as _install_op_methods
from . import ndarray_methods as _ndarray_methods
from .array_api import (__array_api_version__, __array_namespace_info__, e, pi, inf, nan,  # noqa: F401
                        newaxis, isdtype, can_cast, finfo, iinfo, broadcast_shapes)

# nbaccel.<name> for every op and alias of the op table (ops.namespace(): each op's front under
# its name and NumPy names; the defining file:line ends each docstring)
globals().update({k: v for k, v in _ops.namespace().items() if k not in globals()})
# Tensor's op methods from the same table (dispatch.install_methods), then NumPy's meanings of
# ndarray methods inside a %%compile cell (ndarray_methods.install: sort in place, repeat(axis=))
_install_op_methods()
_ndarray_methods.install(Tensor)
from . import linalg  # noqa: E402,F401  (the Array API linalg extension)
from . import fft  # noqa: E402,F401  (the Array API fft extension)

bool = bool_  # noqa: A001  (Array API name; the builtin stays reachable as builtins.bool)
from .version import __version__  # noqa: E402,F401


def result_type(*arrays_and_dtypes):
    """Array API result_type: promote dtypes/tensors (Python scalars are weak)."""
    return _result_type(*arrays_and_dtypes)
from . import nn, optim  # noqa: E402,F401
from . import sparse  # noqa: E402,F401  (2:4 semi-structured sparsity)

from . import compiler  # noqa: E402,F401  (its call path, and so numba, loads on first use)
from .compiler import CompileReport, GraphBreakError  # noqa: E402,F401
from .compiler.cache import warmup as _numba_warmup  # noqa: E402  (threading and config only)
# the Dask bridge registers its handler for Dask arrays with the compiler, which does not import
# it (compiler/foreign.py); importing the package is cheap: no Dask, no bridge until a Dask call
from . import daskbridge  # noqa: E402,F401
_FROM_COMPILER = ("compile", "explain", "mark_dynamic", "config")  # config: strict, recompile_limit, ... (compiler/config.py)
from . import numpy_api as numpy  # noqa: E402  (nbaccel.numpy: the NumPy-compatible namespace)
import sys as _sys  # noqa: E402
_sys.modules.setdefault(__name__ + ".numpy", numpy)
from .magics import load_ipython_extension, unload_ipython_extension  # noqa: E402,F401
from . import quant  # noqa: E402,F401  (nbaccel.quant: int8 / int4 quantization)
from .serialization import save, load  # noqa: E402,F401
from . import func  # noqa: E402,F401  (nbaccel.func: grad, vmap, jacrev, ... as torch.func)
from . import export  # noqa: E402,F401  (nb.export(fn, *args, dynamic_shapes=...): see docs/export.md)
from . import amp  # noqa: E402,F401  (nb.amp.autocast, GradScaler: bfloat16 on the CPU)
from .torch_compat import *  # noqa: E402,F401,F403  (PyTorch spellings: long, LongTensor, cuda, ...)
from . import utils  # noqa: E402,F401  (nbaccel.utils.data: Dataset, DataLoader, samplers)
# nbaccel.distributed (checkpoint on zarr, DataParallel on Dask; both imported when used) takes
# the place of torch_compat's one-process torch.distributed namespace and keeps its answers
import importlib as _importlib  # noqa: E402
distributed = _importlib.import_module(".distributed", __name__)  # noqa: E402


def __getattr__(name):
    """``nb.compile``, ``nb.explain``, ``nb.mark_dynamic`` and ``nb.config`` import the
    compiler's call path (and numba) on first use, so that ``import nbaccel`` stays fast."""
    if name in _FROM_COMPILER:
        value = globals()[name] = getattr(compiler, name)
        if name == "compile":
            # numba will be needed: its import and set-up start now on a thread, so that the
            # first call's tracing, NumPy work and file reads overlap them (compiler/cache/warmup.py)
            _numba_warmup.start()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():      # tab completion lists the lazily loaded names too
    return sorted(set(globals()) | set(_FROM_COMPILER))
