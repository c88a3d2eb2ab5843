"""Running the Triton tier: kernel slots, the graph program on the inputs' array module, and
the choice between a GPU and Triton's interpreter.

``backend="triton"`` runs every fused kernel as a generated ``@triton.jit`` kernel:

* on an NVIDIA GPU with CuPy, on CuPy arrays (buffers are allocated with CuPy, and
  ``nbaccel.gpu.triton_driver.activate()`` makes Triton launch on CuPy's current device
  and stream; nothing on this path imports PyTorch);
* on the CPU through Triton's interpreter when ``NBACCEL_TRITON_INTERPRET=1``
  (``config["triton_interpret"]``; slow: about 1.5 ms per program; for tests), on NumPy
  arrays, zero-copy;
* otherwise not at all: :func:`run_mode` raises a clear error naming what to install.

Triton reads ``TRITON_INTERPRET`` whenever it decorates a function, its own library included,
so interpreter mode switches it on for the whole process before triton is first imported
(generated modules import triton when they load), and says so if triton came first.
"""
from __future__ import annotations

import os
import sys
import threading
import time

import numpy as np

from ..cache import cache
from ..codegen.common import array_module, inputs_array_module
from ..codegen.triton import TritonUnsupported, render_kernel  # noqa: F401 - re-exported
from ..schedule.loops import Kernel
from ..config import config
from .runtime import Program, empty_reduction_error

INSTALL_HINT = "pip install 'nbaccel[gpu]'"
_MODULES: dict[str, object] = {}
_LOCK = threading.Lock()


def interpret_requested() -> bool:
    """``config["triton_interpret"]`` (from $NBACCEL_TRITON_INTERPRET)."""
    return bool(config.get("triton_interpret"))


def gpu_present() -> tuple[bool, str]:
    """(True, device name) when CuPy sees a CUDA GPU, else (False, why not)."""
    import importlib.util
    if importlib.util.find_spec("cupy") is None:
        return False, "CuPy is not installed"
    try:
        import cupy
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:      # noqa: BLE001 - a broken CUDA install is "no GPU", with its reason
        return False, f"CuPy finds no CUDA device ({type(e).__name__}: {e})"
    if n < 1:
        return False, "CuPy finds no CUDA device"
    try:
        name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
    except Exception:           # noqa: BLE001
        name = "CUDA device 0"
    return True, name


def run_mode() -> str:
    """'gpu' or 'interpret'; raises RuntimeError when Triton kernels cannot run here."""
    import importlib.util
    if importlib.util.find_spec("triton") is None:
        raise RuntimeError(f"backend='triton' needs Triton, which is not installed ({INSTALL_HINT})")
    if interpret_requested():
        _interpreter_on()
        return "interpret"
    ok, why = gpu_present()
    if not ok:
        raise RuntimeError(f"backend='triton' needs an NVIDIA GPU with CuPy ({why}): {INSTALL_HINT} on a "
                           "machine with a GPU, or set NBACCEL_TRITON_INTERPRET=1 (nb.config['triton_interpret']) "
                           "to run the kernels "
                           "through Triton's interpreter on the CPU (slow; meant for tests)")
    return "gpu"


def _interpreter_on():
    """Switch Triton's interpreter on for this process. Triton reads TRITON_INTERPRET when it
    decorates a function, its own library included, so it must be on before ``import triton``."""
    if os.environ.get("TRITON_INTERPRET", "") in ("", "0") and "triton" in sys.modules:
        raise RuntimeError("NBACCEL_TRITON_INTERPRET=1 needs Triton's interpreter, but triton was imported "
                           "before it was switched on: set NBACCEL_TRITON_INTERPRET=1 (or TRITON_INTERPRET=1) "
                           "before anything imports triton")
    os.environ["TRITON_INTERPRET"] = "1"


def _gpu_launch_args():
    """Make Triton launch through CuPy (the gpu package's driver; idempotent) and return how
    a CuPy array becomes a launch argument."""
    try:
        from ...gpu import triton_driver  # optional: not in every build (the except below)
    except ImportError:          # not in this build: Triton's own CUDA driver launches
        return DeviceBuffer
    triton_driver.activate()
    return triton_driver.kernel_arg


class HostBuffer:
    """A NumPy buffer as Triton's interpreter takes it: a pointer and a dtype, plus the few
    tensor methods its host-copy step calls. Host and "device" are the same memory here, so
    every copy is the buffer itself (zero-copy: the kernel writes the NumPy array)."""

    __slots__ = ("array", "dtype")

    def __init__(self, array):
        self.array = array
        self.dtype = array.dtype

    def data_ptr(self):
        return self.array.__array_interface__["data"][0]

    def untyped_storage(self):
        return self

    def cpu(self):
        return self

    def copy_(self, other):
        if other.data_ptr() != self.data_ptr():     # never: both sides are this memory
            np.copyto(self.array, other.array)
        return self

    def new_empty(self, *args, **kwargs):
        return self

    def set_(self, *args):
        return self

    def storage_offset(self):
        return 0

    def size(self):
        return self.array.shape

    def stride(self):
        return (1,)


class DeviceBuffer:
    """A CuPy buffer as Triton's launcher takes it: ``data_ptr()`` and a NumPy dtype."""

    __slots__ = ("array", "dtype")

    def __init__(self, array):
        self.array = array
        self.dtype = array.dtype

    def data_ptr(self):
        return self.array.data.ptr


def _load(source: str, mode: str):
    """The generated module's kernel, decorated once per process and source."""
    h = cache.source_hash(source)
    with _LOCK:
        fn = _MODULES.get((h, mode))
        if fn is None:
            path, _ = cache.module_file(source)
            fn = _MODULES[(h, mode)] = cache.load_module(path).kernel
    return fn


class TritonSlot:
    """One fused kernel as a Triton kernel, launched on whole flat buffers."""

    def __init__(self, k: Kernel, name: str, mode: str, autotune: bool = False):
        self.k = k
        self.autotune = autotune and mode == "gpu"    # search launch configurations on first call
        self.tune_note = ""
        self.name = name
        self.mode = mode
        t0 = time.perf_counter()
        self.rendered = render_kernel(k, "kernel", interpret=mode == "interpret")
        self.fn = _load(self.rendered.source, mode)
        self.load_seconds = time.perf_counter() - t0
        self.grid, self.blocks, self.num_warps = self.rendered.blocks(mode == "interpret")
        self._default = dict(self.blocks, num_warps=self.num_warps)
        self.empty_error = empty_reduction_error(k)
        self.num_stages = None
        self.seconds = 0.0
        self.backend = "triton"

    @property
    def source(self):
        return self.rendered.source

    def note(self):
        return "Triton interpreter" if self.mode == "interpret" else self.tune_note

    def candidates(self):
        """A small pruned launch space for an autotuner (at most 12): flat dicts of BLOCK_O
        (and BLOCK_R where the kernel loops over its reduction range), num_warps and
        num_stages. A one-block kernel keeps its BLOCK_R: the whole range is one block."""
        br = self.blocks.get("BLOCK_R")
        if br is None or self.rendered.single:
            brs, sizes = [br], (1024, 2048, 4096, 8192)
        elif self.rendered.column:                    # across memory: few rows, many columns
            brs, sizes = [16, 64], (1024, 2048, 4096)
        else:
            brs, sizes = [1024, 4096], (1024, 4096, 8192)
        out = []
        for b_r in brs:
            for elems in sizes:
                for warps in (4, 8):
                    cfg = {"BLOCK_O": max(1, elems // (b_r or 1)), "num_warps": warps,
                           "num_stages": 1 if self.rendered.single else 2}
                    if b_r is not None:
                        cfg["BLOCK_R"] = b_r
                    if cfg not in out:
                        out.append(cfg)
        return out[:12]

    def configure(self, BLOCK_O, BLOCK_R=None, num_warps=4, num_stages=None):   # noqa: N803 - Triton's names
        """Launch with these block sizes from now on (an autotuner's choice)."""
        if BLOCK_R is not None and self.rendered.single and BLOCK_R < self.rendered.n_red:
            raise ValueError("a one-block kernel needs BLOCK_R >= its reduction range")
        self.blocks = {"BLOCK_O": BLOCK_O} if "BLOCK_R" not in self.blocks else \
            {"BLOCK_O": BLOCK_O, "BLOCK_R": BLOCK_R or self.blocks["BLOCK_R"]}
        self.grid = (-(-self.rendered.n_out // BLOCK_O),)
        self.num_warps = num_warps
        self.num_stages = num_stages

    def __call__(self, *arrays):
        t0 = time.perf_counter()
        if self.empty_error is not None:
            raise ValueError(self.empty_error)
        if self.grid[0] > 0:
            wrap = HostBuffer if self.mode == "interpret" else _gpu_launch_args()
            if self.autotune:
                self._tune(arrays)
            args = [wrap(a.view(np.uint8) if a.dtype == np.bool_ else a) for a in arrays]
            err = None
            if self.rendered.errors:      # a flag the kernel sets where NumPy would raise
                err = array_module(arrays[0]).zeros(1, np.int32) if arrays else np.zeros(1, np.int32)
                args.append(wrap(err))
            if self.mode == "interpret":
                # the interpreter computes with NumPy: its warnings (x / 0) are not the user's
                with np.errstate(all="ignore"):
                    self.fn[self.grid](*args, *self.rendered.values, **self.blocks)
            else:
                extra = {"num_stages": self.num_stages} if self.num_stages else {}
                self.fn[self.grid](*args, *self.rendered.values, **self.blocks, num_warps=self.num_warps, **extra)
            if err is not None and int(err[0]):
                raise ValueError(self.rendered.errors[int(err[0]) - 1])
        self.seconds = time.perf_counter() - t0

    def _tune(self, arrays):
        """mode="max-autotune": the gpu package's search over :meth:`candidates`, once (its
        trials call this slot again, so it is switched off first)."""
        self.autotune = False
        try:
            from ...gpu import autotune  # optional: not in every build (the except below)
            best = autotune.tune(self, *arrays, cache_dir=cache.autotune_dir())
            self.tune_note = f"autotuned: {best}"
        except ImportError:
            self.tune_note = "no autotuner in this build"
        except Exception as e:     # noqa: BLE001 - a failed search keeps the default launch
            self.tune_note = f"autotune failed ({type(e).__name__}: {e}); default launch"
            self.configure(**self._default)


class TritonTier:
    """The Triton tier of a :class:`~nbaccel.compiler.runtime.runtime.Program`: every fused kernel a
    Triton kernel, on a GPU through CuPy or on the CPU through Triton's interpreter."""

    label = "triton"

    def __init__(self, mode: str):
        self.run = run_mode()          # raises, naming what to install, where Triton cannot run
        self.autotune = mode == "max-autotune"
        self.device = "cpu (triton interpreter)" if self.run == "interpret" else "cuda:0"

    def slot(self, k: Kernel, name: str, dynamic: bool):
        return TritonSlot(k, name, self.run, autotune=self.autotune)

    def on_inputs(self, arrays, pool):
        """NumPy inputs on a GPU go to the device and, when every input was a NumPy array, the
        results come back (the caller gets what the plain function would give)."""
        host = [isinstance(a, np.ndarray) for a in arrays]
        if self.device == "cuda:0" and any(host):
            import cupy
            pool.use(cupy)
            arrays = [cupy.asarray(a) if h else a for a, h in zip(arrays, host)]
            if not all(host):
                return arrays, None
            return arrays, lambda out: [cupy.asnumpy(o) if array_module(o) is cupy else o for o in out]
        pool.use(inputs_array_module(arrays))
        return arrays, None

    def load_seconds(self, slots):
        return sum(s.load_seconds for s in slots.values())

    def name(self, slots):
        return "triton"

    def wait(self, slots, timeout):
        pass

    def pending(self, slots):
        return False

    def jit_total(self, slots, jit_seconds):
        return jit_seconds

    def jit_split(self, slots):
        """Triton compiles lazily at the first launch, inside jit_total: no numba split."""
        return {}

    def cache_state(self, slots):
        return None

    def report_device(self, device):
        return "cuda:0" if self.device == "cuda:0" else device


class TritonProgram(Program):
    """A scheduled graph whose kernels all run on Triton (see the module docstring)."""

    def __init__(self, graph, backend: str, mode: str, dynamic: bool):
        super().__init__(graph, backend, mode, dynamic, tier=TritonTier(mode))
