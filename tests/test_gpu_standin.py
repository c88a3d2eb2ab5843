"""tests/test_gpu_cuda.py's device and magic tests once more, on a NumPy-backed stand-in for
CuPy (tests/_fake_cupy.py: a fake, since no GPU exists here). They check nbaccel's own device
plumbing (moves, eager ops on another array module, DLPack, %%compile --device) on every
machine; the GPU run of the same tests is the evidence for CuPy itself."""
import pytest

from nbaccel.gpu import placement
from tests import _fake_cupy
from tests.test_gpu_cuda import (ip, test_auto_takes_the_gpu_for_large_inputs_only,  # noqa: F401
                                 test_compile_cell_on_cuda_returns_numpy_with_transfer_time,
                                 test_dlpack_both_ways_without_copies, test_eager_ops_on_cuda_match_numpy,
                                 test_matmul_on_cuda_is_cublas_and_right, test_tensor_on_cuda_and_back)


@pytest.fixture(autouse=True)
def cp(monkeypatch):
    _fake_cupy.skip_if_real_cupy()
    fake = _fake_cupy.install(monkeypatch)
    placement._forget_for_tests()
    yield fake
    placement._forget_for_tests()
