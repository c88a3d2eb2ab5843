"""nbaccel.gpu.triton_driver on a machine without a GPU: the pieces that can run for real here
(argument and pointer handling through ``__cuda_array_interface__``, the errors without CuPy),
and the whole launch path of a real @triton.jit kernel against fakes of exactly the parts that
need libcuda and a device (a fake ``cupy`` module, Triton's C helper, its launcher). The GPU
itself is tested by tests/test_gpu_cuda.py (marker ``gpu``) and bench/gpu_check.py."""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import nbaccel as nb
from nbaccel.gpu import triton_driver as td

ROOT = pathlib.Path(__file__).resolve().parent.parent


class CudaArrayLike:
    """An object that speaks ``__cuda_array_interface__`` v3 and nothing else (stands in for a
    device array: no device memory exists here, and the pointer is never dereferenced)."""

    def __init__(self, ptr, typestr, shape=(4,), mask=None, dtype=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                         "version": 3, "strides": None, "mask": mask}
        if dtype is not None:
            self.dtype = dtype


@pytest.fixture
def no_cupy(monkeypatch):
    """Importing cupy fails, as on a machine without it (None in sys.modules: ImportError)."""
    monkeypatch.setitem(sys.modules, "cupy", None)


def test_cuda_array_interface_becomes_a_pointer_with_its_dtype():
    a = CudaArrayLike(0x7F00_1000, "<f4")
    p = td.kernel_arg(a)
    assert isinstance(p, td.DevicePointer)
    assert p.data_ptr() == 0x7F00_1000 and p.dtype == np.float32 and p.base is a
    assert str(td.kernel_arg(CudaArrayLike(64, "<f2")).dtype) == "float16"   # what Triton reads
    assert td.kernel_arg(CudaArrayLike(64, "<i8")).dtype == np.int64


def test_an_array_dtype_attribute_wins_over_typestr():
    """bfloat16 has no typestr of its own ('<V2'): the array's NumPy dtype says what it is."""
    bf16 = np.dtype(nb.bfloat16.np)
    p = td.kernel_arg(CudaArrayLike(128, "<V2", dtype=bf16))
    assert str(p.dtype) == "bfloat16"


def test_triton_specialises_the_pointer_like_a_torch_tensor():
    pytest.importorskip("triton")
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend
    for typestr, want in (("<f4", "*fp32"), ("<f2", "*fp16"), ("<i4", "*i32"), ("|u1", "*u8")):
        ty, _ = native_specialize_impl(BaseBackend, td.kernel_arg(CudaArrayLike(4096, typestr)), False, True, True)
        assert ty == want, typestr


def test_scalars_and_pointer_objects_pass_through():
    assert td.kernel_arg(3) == 3 and td.kernel_arg(2.5) == 2.5 and td.kernel_arg(None) is None
    assert td.kernel_arg(np.int32(7)) == 7 and isinstance(td.kernel_arg(np.float32(1.5)), float)

    class HasPtr:
        dtype = np.dtype("float32")

        def data_ptr(self):
            return 1

    h = HasPtr()
    assert td.kernel_arg(h) is h
    p = td.DevicePointer(16, "float32")
    assert td.kernel_arg(p) is p


def test_host_arrays_and_cpu_tensors_are_refused_with_the_fix():
    with pytest.raises(TypeError, match="host.*cupy.asarray"):
        td.kernel_arg(np.zeros(3, np.float32))
    with pytest.raises(TypeError, match=r"cpu tensor.*\.cuda\(\)"):
        td.kernel_arg(nb.tensor([1.0, 2.0]))
    with pytest.raises(TypeError, match="masked"):
        td.kernel_arg(CudaArrayLike(8, "<f4", mask=object()))
    with pytest.raises(TypeError, match="element type"):
        td.kernel_arg(CudaArrayLike(8, None))


def test_pointer_without_array_cannot_be_reset():
    with pytest.raises(TypeError, match="no array behind it"):
        td.DevicePointer(16, "float32").zero_()


def test_pointer_reset_and_restore_use_the_array():
    """The autotuner's reset_to_zero / restore_value hooks, on an array-like with fill/copy."""
    class Arr(np.ndarray):
        @property
        def __cuda_array_interface__(self):
            return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ctypes.data, False),
                    "version": 3, "strides": None}
    a = np.arange(4, dtype=np.float32).view(Arr)
    p = td.kernel_arg(a)
    c = p.clone()
    assert c.data_ptr() != p.data_ptr() and np.array_equal(c.base, a)
    p.zero_()
    assert not a.any()
    p.copy_(c)
    assert np.array_equal(a, [0, 1, 2, 3])


def test_without_cupy_every_entry_point_says_what_to_install(no_cupy):
    for call in (td.activate, td.current_stream, td.arch, td.synchronize, lambda: td.bench(lambda: None)):
        with pytest.raises(td.CudaUnavailable, match=r"needs CuPy.*pip install 'nbaccel\[gpu\]'"):
            call()
    ok, why = td.availability()
    assert not ok and "CuPy" in why
    assert isinstance(td.CudaUnavailable("x"), RuntimeError)


def test_cupy_without_a_gpu_is_a_clear_error(monkeypatch):
    import types

    def no_device():
        raise RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
    fake = types.ModuleType("cupy")
    fake.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=no_device))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    with pytest.raises(td.CudaUnavailable, match="needs an NVIDIA GPU, and CuPy found none.*cudaErrorNoDevice"):
        td.activate()


def test_the_driver_class_builds_on_triton_without_a_gpu():
    pytest.importorskip("triton")
    from triton.backends.nvidia.driver import CudaDriver
    cls = td.driver_class(utils_factory=lambda: None)
    assert issubclass(cls, CudaDriver)
    drv = cls()
    assert drv.get_device_interface() is td.CupyDeviceInterface
    assert td.driver_class(utils_factory=None) is td.driver_class(utils_factory=None)   # built once


def test_launch_path_compiles_for_sm90_on_cupys_stream_without_torch():
    """A real kernel through Triton's JIT, compiler and CompiledKernel, against fakes of the
    device-only parts (see tests/_gpu_fake_launch.py); in a fresh process with torch blocked."""
    pytest.importorskip("triton")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("TRITON_INTERPRET", None)
    r = subprocess.run([sys.executable, str(ROOT / "tests" / "_gpu_fake_launch.py")], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["target"] == "GPUTarget(backend='cuda', arch=90, warp_size=32)"
    assert out["same_driver"] and out["active"]          # activate() is idempotent
    assert "cubin" in out["asm"]
    (launch,) = out["launches"]
    assert launch["stream"] == 0xABC0                    # CuPy's current stream, not stream 0
    assert launch["grid"] == [8, 1, 1]
    assert launch["args"][:4] == [0x7000_0000, 0x7000_1000, 0x7000_2000, 8000]
    assert out["loaded"] == [["load_binary", "add_kernel", 0]]
    assert out["torch"] is False
