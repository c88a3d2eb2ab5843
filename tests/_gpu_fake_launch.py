"""Run by tests/test_gpu_driver.py in a fresh process (no GPU here): nbaccel's CuPy driver is
activated with a *fake* `cupy` module and *fake* stand-ins for Triton's compiled C helper and
launcher (the two things that need libcuda and a device), then a real @triton.jit kernel is
launched. Everything between is Triton's own: JITFunction.run, argument specialisation, the
compile to an sm_90 cubin with the bundled ptxas, and CompiledKernel's handle loading. It prints
one JSON line with what the fakes saw; importing torch is made to fail."""
import importlib.abc
import json
import os
import sys
import types

os.environ["TRITON_INTERPRET"] = "0"


class _NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is blocked in this test")
        return None


sys.meta_path.insert(0, _NoTorch())

import numpy as np  # noqa: E402

calls = []
cupy = types.ModuleType("cupy")


class _Stream:
    ptr = 0xABC0                      # a non-default stream: the launch must use it


class _Device:
    def __init__(self, i):
        self.id = i
        self.compute_capability = "90"


class _Mem:
    ptr = 0x9000_0000


cupy.cuda = types.SimpleNamespace(
    runtime=types.SimpleNamespace(getDevice=lambda: 0, setDevice=lambda d: calls.append(("setDevice", d)),
                                  getDeviceCount=lambda: 1, deviceSynchronize=lambda: None),
    get_current_stream=lambda device_id=-1: calls.append(("stream", device_id)) or _Stream(),
    Device=_Device, alloc=lambda n: _Mem())
sys.modules["cupy"] = cupy


class FakeCudaArray:                   # only what the interface promises
    def __init__(self, ptr, dtype, n):
        self.dtype = np.dtype(dtype)
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": self.dtype.str, "data": (ptr, False),
                                         "version": 3, "strides": None}


class FakeUtils:
    def get_device_capability(self, dev):
        return (9, 0)

    def get_device_properties(self, dev):
        return {"max_shared_mem": 232448, "multiprocessor_count": 132, "max_num_regs": 65536,
                "warpSize": 32, "sm_clock_rate": 1980000, "mem_clock_rate": 2619000, "mem_bus_width": 6144}

    def load_binary(self, name, kernel, shared, device):
        calls.append(("load_binary", name, device))
        return (1, 2, 32, 0, 1024)

    def unload_module(self, m):
        pass


launches = []


class FakeLauncher:
    def __init__(self, src, metadata):
        self.n = len(src.signature)

    def __call__(self, gx, gy, gz, stream, function, *rest):
        args = rest[-self.n:]
        launches.append({"grid": [gx, gy, gz], "stream": stream,
                         "args": [a.data_ptr() if hasattr(a, "data_ptr") else a for a in args]})


import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from nbaccel.gpu import triton_driver  # noqa: E402

drv = triton_driver.activate(_utils_factory=FakeUtils, _launcher_cls=FakeLauncher)
again = triton_driver.activate()


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


arrays = [FakeCudaArray(0x7000_0000 + 4096 * i, "float32", 8000) for i in range(3)]
k = add_kernel[(8,)](*[triton_driver.kernel_arg(a) for a in arrays], 8000, BLOCK=1024)
print(json.dumps({"target": str(drv.get_current_target()), "same_driver": drv is again,
                  "active": triton_driver.is_active(), "launches": launches,
                  "loaded": [c for c in calls if c[0] == "load_binary"],
                  "asm": sorted(k.asm.keys()), "torch": "torch" in sys.modules}))
