"""Triton kernels launched on CuPy's current device and stream, with CuPy's memory, and
without PyTorch.

Triton 3.9's ``CudaDriver`` takes the device, the stream and the device capability from
``torch.cuda`` when PyTorch is imported, and otherwise launches on the legacy default stream.
:func:`activate` installs a subclass whose answers come from CuPy instead (so a kernel runs on
the stream CuPy's own ops use, in order with them), plus the torch.cuda-shaped pieces that
``triton.testing.do_bench`` and the autotuner reach for, a CuPy-backed allocator for kernels
that need global scratch memory, and nothing that imports PyTorch.

The renderer's launcher calls, once per launch::

    from nbaccel.gpu import triton_driver
    triton_driver.activate()                       # idempotent, cheap after the first call
    kernel[grid](*[triton_driver.kernel_arg(a) for a in args], BLOCK=...)

:func:`kernel_arg` turns a CuPy array, an nbaccel CUDA tensor or anything with
``__cuda_array_interface__`` into an object Triton's launcher accepts as a pointer
(``data_ptr()`` and a NumPy ``dtype``); Python scalars pass through unchanged.

Without CuPy or a GPU every entry point raises :class:`CudaUnavailable`, a ``RuntimeError``
whose message says what is missing and what to install.
"""
from __future__ import annotations

import threading

import numpy as np

from ..tensor import Tensor

__all__ = ["CudaUnavailable", "activate", "is_active", "kernel_arg", "DevicePointer", "current_stream",
           "device_capability", "arch", "synchronize", "bench", "availability"]

INSTALL_HINT = "pip install 'nbaccel[gpu]' (CuPy for CUDA 12: cupy-cuda12x, and triton)"


class CudaUnavailable(RuntimeError):
    """CuPy, Triton or an NVIDIA GPU is missing; the message says which and how to fix it."""


_lock = threading.Lock()
_driver = None           # the installed driver (one per process)


# -- CuPy, imported lazily -----------------------------------------------------------------------
def _cupy():
    try:
        import cupy
    except ImportError as e:
        raise CudaUnavailable(f"running Triton kernels on a GPU needs CuPy, which is not installed "
                              f"({e}): {INSTALL_HINT}") from None
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:        # CuPy without a driver or device raises a CUDARuntimeError
        raise CudaUnavailable(f"running Triton kernels on a GPU needs an NVIDIA GPU, and CuPy found "
                              f"none ({type(e).__name__}: {e})") from None
    if n < 1:
        raise CudaUnavailable("running Triton kernels on a GPU needs an NVIDIA GPU, and CuPy found none")
    return cupy


def availability() -> tuple[bool, str]:
    """(True, "") when CuPy, a GPU and Triton are all there; else (False, why), never raising."""
    try:
        _cupy()
    except CudaUnavailable as e:
        return False, str(e)
    try:
        import triton  # noqa: F401
        import triton.backends.nvidia.driver  # noqa: F401
    except Exception as e:
        return False, f"Triton's NVIDIA backend cannot be imported ({type(e).__name__}: {e}): {INSTALL_HINT}"
    return True, ""


def current_stream(device: int | None = None) -> int:
    """The raw handle of CuPy's current stream on ``device`` (0: the legacy default stream)."""
    cp = _cupy()
    try:                                   # CuPy >= 13 takes a device id (-1: the current one)
        s = cp.cuda.get_current_stream(-1 if device is None else int(device))
    except TypeError:
        s = cp.cuda.get_current_stream()
    return int(s.ptr)


def current_device() -> int:
    return int(_cupy().cuda.runtime.getDevice())


def device_capability(device: int | None = None) -> tuple[int, int]:
    """(major, minor) of ``device`` (default: CuPy's current one), e.g. (9, 0) for an H100/H200."""
    cp = _cupy()
    dev = cp.cuda.Device(current_device() if device is None else int(device))
    cc = str(dev.compute_capability)       # CuPy spells 9.0 as '90' and 10.0 as '100'
    if "." in cc:
        major, minor = cc.split(".", 1)
        return int(major), int(minor)
    return int(cc[:-1]), int(cc[-1])


def arch(device: int | None = None) -> str:
    """``sm_90``-style name of the device's architecture (the autotune cache is kept per arch)."""
    major, minor = device_capability(device)
    return f"sm_{major}{minor}"


def synchronize():
    _cupy().cuda.runtime.deviceSynchronize()


# -- kernel arguments ---------------------------------------------------------------------------
class DevicePointer:
    """What Triton's launcher needs of a pointer argument: ``data_ptr()`` (an int) and a NumPy
    ``dtype`` (Triton reads ``str(dtype)``: 'float32', 'bfloat16', ...). ``base`` keeps the
    array alive for as long as the argument exists. The three methods at the end are what
    Triton's autotuner calls on arguments it resets or restores between trials."""

    __slots__ = ("ptr", "dtype", "base")

    def __init__(self, ptr: int, dtype, base=None):
        self.ptr = int(ptr)
        self.dtype = np.dtype(dtype)
        self.base = base

    def data_ptr(self) -> int:
        return self.ptr

    def __repr__(self):
        return f"DevicePointer(0x{self.ptr:x}, {self.dtype})"

    def zero_(self):
        self._array().fill(0)
        return self

    def clone(self):
        return kernel_arg(self._array().copy())

    def copy_(self, other):
        self._array()[...] = other._array() if isinstance(other, DevicePointer) else other
        return self

    def _array(self):
        if self.base is None or not hasattr(self.base, "fill"):
            raise TypeError("this DevicePointer has no array behind it (made from a raw address)")
        return self.base


def _dtype_of(x, iface):
    """The element type: the array's own NumPy dtype where it has one (CuPy's is; an ml_dtypes
    bfloat16 has no typestr of its own), else the interface's typestr."""
    dt = getattr(x, "dtype", None)
    if isinstance(dt, np.dtype):
        return dt
    ts = iface.get("typestr")
    try:
        if not isinstance(ts, str):          # (np.dtype(None) would be float64)
            raise TypeError(f"typestr {ts!r}")
        return np.dtype(ts)
    except TypeError as e:
        raise TypeError(f"cannot tell the element type of {type(x).__name__} from its "
                        f"__cuda_array_interface__ ({e})") from None


def kernel_arg(x):
    """``x`` as a Triton launch argument: device arrays become :class:`DevicePointer`; objects
    that already have ``data_ptr()`` and Python scalars pass through. A host array is an error
    (it would hand the GPU a host address)."""
    if isinstance(x, DevicePointer) or isinstance(x, (bool, int, float)) or x is None:
        return x
    if isinstance(x, Tensor):
        if x.device.type != "cuda":
            raise TypeError(f"a {x.device} tensor was passed to a GPU kernel: move it with .cuda() first")
        return kernel_arg(x._value("a GPU kernel reads it"))
    iface = getattr(x, "__cuda_array_interface__", None)
    if iface is not None:
        if iface.get("mask") is not None:
            raise TypeError("masked arrays cannot be passed to a GPU kernel")
        ptr = iface["data"][0]
        return DevicePointer(ptr, _dtype_of(x, iface), x)
    if isinstance(x, np.ndarray):
        raise TypeError("a NumPy (host) array was passed to a GPU kernel: copy it to the device "
                        "first (cupy.asarray(a), or nb.tensor(a, device='cuda'))")
    if isinstance(x, np.generic):
        return x.item()
    if hasattr(x, "data_ptr"):
        return x
    return x


# -- timing -------------------------------------------------------------------------------------
def bench(fn, *, warmup: int = 3, rounds: int = 20, min_seconds: float = 0.0) -> list[float]:
    """Run ``fn`` ``warmup`` times, then time each of ``rounds`` runs with CUDA events on the
    current stream; returns the per-run seconds (sorted). ``min_seconds``: keep running
    (up to 10 × rounds) until that much GPU time has been measured."""
    cp = _cupy()
    for _ in range(max(warmup, 0)):
        fn()
    synchronize()
    times, total = [], 0.0
    while len(times) < rounds or (total < min_seconds and len(times) < 10 * rounds):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        t = cp.cuda.get_elapsed_time(start, end) / 1e3
        times.append(t)
        total += t
    return sorted(times)


# -- the driver ---------------------------------------------------------------------------------
class _Event:
    """torch.cuda.Event's shape over a CuPy event (``elapsed_time`` in milliseconds)."""

    def __init__(self, enable_timing: bool = False):
        self._ev = _cupy().cuda.Event(disable_timing=not enable_timing)

    def record(self, stream=None):
        self._ev.record(stream)

    def synchronize(self):
        self._ev.synchronize()

    def elapsed_time(self, end: "_Event") -> float:
        return _cupy().cuda.get_elapsed_time(self._ev, end._ev)


class CupyDeviceInterface:
    """The parts of ``torch.cuda`` that triton.testing.do_bench and the autotuner call."""
    Event = _Event

    @staticmethod
    def synchronize(device=None):
        synchronize()

    @staticmethod
    def current_device() -> int:
        return current_device()

    @staticmethod
    def set_device(device):
        _cupy().cuda.runtime.setDevice(int(device))

    @staticmethod
    def current_stream(device=None):
        cp = _cupy()
        try:
            return cp.cuda.get_current_stream(-1 if device is None else int(device))
        except TypeError:
            return cp.cuda.get_current_stream()

    @staticmethod
    def default_stream(device=None):
        return _cupy().cuda.Stream.null

    @staticmethod
    def stream(s):        # torch.cuda.stream(s) is a context manager; so is a CuPy stream
        return s

    @staticmethod
    def ExternalStream(ptr, device=None):
        return _cupy().cuda.ExternalStream(int(ptr))


class _Scratch:
    """A CuPy allocation handed to Triton (which reads ``data_ptr()``); keeps it alive."""
    __slots__ = ("mem", "ptr")

    def __init__(self, mem, ptr):
        self.mem, self.ptr = mem, ptr

    def data_ptr(self) -> int:
        return self.ptr


def allocate(size: int, alignment: int, stream=None) -> _Scratch:
    """Triton's allocator protocol on CuPy's memory pool (global scratch, profile scratch)."""
    mem = _cupy().cuda.alloc(int(size) + int(alignment))
    align = max(int(alignment), 1)
    return _Scratch(mem, (int(mem.ptr) + align - 1) // align * align)


_classes: dict = {}


def driver_class(utils_factory=None, launcher_cls=None):
    """The CudaDriver subclass (built on first use: Triton is imported only here).
    ``utils_factory``/``launcher_cls`` replace Triton's compiled C helper and launcher; the
    tests use that to run the whole launch path against fakes on a machine without a GPU."""
    key = (utils_factory, launcher_cls)
    if key in _classes:
        return _classes[key]
    try:
        from triton.backends.nvidia.driver import CudaDriver, CudaLauncher, CudaUtils
    except Exception as e:
        raise CudaUnavailable(f"Triton's NVIDIA backend cannot be imported ({type(e).__name__}: {e}): "
                              f"{INSTALL_HINT}") from None
    make_utils = utils_factory or CudaUtils
    launcher = launcher_cls or CudaLauncher

    class CupyCudaDriver(CudaDriver):
        """Triton's CUDA driver with CuPy's current device and stream; never imports torch."""

        def __init__(self):
            # CudaDriver.__init__ is not called: with torch imported it would bind torch.cuda's
            # device and stream getters (GPUDriver.__init__) instead of CuPy's.
            self.utils = make_utils()      # Triton's C helper (driver.c, compiled once, cached)
            self.launcher_cls = launcher

        # JITFunction.run asks these once per launch: CuPy's notion of "current"
        def get_current_device(self):
            return current_device()

        def set_current_device(self, device):
            _cupy().cuda.runtime.setDevice(int(device))

        def get_current_stream(self, device=None):
            return current_stream(device)

        def get_device_capability(self, device=None):
            return device_capability(device)

        @staticmethod
        def is_active():
            return availability()[0]

        # the torch-typed hooks of CudaDriver / GPUDriver, on CuPy
        def get_active_torch_device(self):
            return self.get_current_device()

        def get_device_interface(self):
            return CupyDeviceInterface

        def get_empty_cache_for_benchmark(self):
            # do_bench writes this 256 MB buffer before each timed run to flush the L2 cache
            return _cupy().empty(256 * 1024 * 1024 // 4, dtype=np.int32)

        def clear_cache(self, cache):
            cache.fill(0)

        def allocate_default_profile_scratch(self, size, alignment, stream):
            return allocate(size, alignment, stream)

    _classes[key] = CupyCudaDriver
    return CupyCudaDriver


def _active_of(rt):
    """Triton's active driver without creating the default one (3.9 keeps it in ``_active``
    behind a property; older releases in a plain ``active`` attribute)."""
    attrs = vars(rt)
    return attrs["_active"] if "_active" in attrs else attrs.get("active")


def is_active() -> bool:
    """Is nbaccel's CuPy driver Triton's active driver (in this process)?"""
    if _driver is None:
        return False
    from triton.runtime import driver as rt
    return _active_of(rt) is _driver


def activate(*, _utils_factory=None, _launcher_cls=None):
    """Make Triton launch through CuPy (device, stream, memory); returns the driver.

    Idempotent and cheap after the first call (the renderer's launcher calls it before every
    launch). It also sets Triton's allocator on the calling thread (a context variable in
    Triton), so kernels launched from a new thread find it. Raises :class:`CudaUnavailable`
    with the fix when CuPy, a GPU or Triton is missing."""
    global _driver
    if _driver is None or not is_active():
        _cupy()                             # the clear error before Triton's own
        with _lock:
            if _driver is None:
                _driver = driver_class(_utils_factory, _launcher_cls)()
            from triton.runtime import driver as rt
            rt.set_active(_driver)
    try:
        from triton.runtime import _allocation
        current = _allocation._allocator.get()
    except (ImportError, AttributeError):      # a Triton without a context-variable allocator
        current = None
    if current is not allocate:
        import triton
        if hasattr(triton, "set_allocator"):
            triton.set_allocator(allocate)
    return _driver
