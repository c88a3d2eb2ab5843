"""The CUDA device as seen from a machine without one: clear errors for every way of asking
for it, ``%%compile --device`` (cuda: a one-line UsageError; auto: stays on the CPU and says
why), the placement rule, and how kernels are labelled in the report. CuPy is made missing
(``sys.modules["cupy"] = None``) so these run the same on a GPU machine; the GPU side is
tests/test_gpu_cuda.py."""
import sys

import numpy as np
import pytest

import nbaccel as nb
from nbaccel.gpu import placement

INSTALL = r"pip install 'nbaccel\[gpu\]'"


@pytest.fixture
def no_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    placement._forget_for_tests()
    yield
    placement._forget_for_tests()


@pytest.fixture
def fake_gpu(monkeypatch):
    """placement believes a GPU exists (only the decision is tested; nothing runs on it)."""
    monkeypatch.setattr(placement, "gpu_available", lambda: (True, ""))


# -- tensors ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda: nb.tensor([1.0, 2.0], device="cuda"),
    lambda: nb.tensor([1.0, 2.0]).to("cuda"),
    lambda: nb.tensor([1.0, 2.0]).cuda(),
    lambda: nb.tensor([1.0, 2.0]).to(device="cuda:0"),
    lambda: nb.zeros(3, device="cuda"),
    lambda: nb.asarray(np.ones(2), device="cuda"),
])
def test_asking_for_cuda_without_cupy_says_what_to_install(no_cupy, make):
    with pytest.raises(RuntimeError, match=f"needs CuPy and an NVIDIA GPU.*{INSTALL}"):
        make()


def test_from_dlpack_of_a_gpu_array_without_cupy(no_cupy):
    class GpuCapsule:          # what a CUDA array announces through DLPack (kDLCUDA = 2)
        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, **kw):
            raise AssertionError("must not be read without CuPy")
    with pytest.raises(RuntimeError, match=INSTALL):
        nb.from_dlpack(GpuCapsule())


def test_cpu_stays_cpu_and_dlpack_on_the_cpu_works(no_cupy):
    t = nb.tensor([1.0, 2.0])
    assert t.cpu() is t or np.array_equal(t.cpu().numpy(), t.numpy())
    assert t.to("cpu").device == "cpu" and not t.is_cuda
    assert t.__dlpack_device__() == (1, 0)
    back = nb.from_dlpack(np.arange(3.0))
    assert back.device == "cpu" and back.tolist() == [0.0, 1.0, 2.0]
    assert np.from_dlpack(t).tolist() == [1.0, 2.0]
    assert not hasattr(t, "__cuda_array_interface__")      # only CUDA tensors have one


# -- placement ----------------------------------------------------------------------------------------
def test_placement_without_a_gpu(no_cupy):
    x = np.ones((4096, 4096), np.float32)
    assert placement.decide("cpu", [x]).device == "cpu"
    p = placement.decide("auto", [x])
    assert p.device == "cpu" and "no usable GPU" in p.reason and "CuPy" in p.reason
    with pytest.raises(RuntimeError, match=INSTALL):
        placement.decide("cuda", [x])
    with pytest.raises(ValueError):
        placement.decide("tpu", [x])


def test_auto_uses_the_documented_byte_threshold(fake_gpu, monkeypatch):
    limit = placement.AUTO_MIN_BYTES
    under = np.ones(limit // 4 - 1, np.float32)
    at = np.ones(limit // 4, np.float32)
    p = placement.decide("auto", [under])
    assert p.device == "cpu" and "too small to pay for the transfer" in p.reason and p.nbytes == under.nbytes
    assert placement.decide("auto", [at]).device == "cuda"
    half = np.ones(limit // 8, np.float32)
    assert placement.decide("auto", [half, half]).device == "cuda"          # the inputs together
    monkeypatch.setenv("NBACCEL_AUTO_GPU_BYTES", "1000")
    assert placement.decide("auto", [np.ones(250, np.float32)]).device == "cuda"
    assert placement.decide("auto", [np.ones(249, np.float32)]).device == "cpu"
    monkeypatch.setenv("NBACCEL_AUTO_GPU_BYTES", "lots")           # unreadable: the default
    assert placement.decide("auto", [under]).device == "cpu"
    assert placement.decide("cuda", [under]).device == "cuda"        # asked for: no threshold


def test_cuda_picks_triton_for_the_auto_backend(monkeypatch):
    pytest.importorskip("triton")
    assert placement.backend_for("auto", "cuda", ("auto", "numba", "triton")) == "triton"
    monkeypatch.setattr(placement, "_triton_installed", lambda: False)   # no Triton to pick
    assert placement.backend_for("auto", "cuda", ("auto", "numba", "triton")) == "auto"
    assert placement.backend_for("auto", "cuda", ("auto", "numba")) == "auto"
    assert placement.backend_for("numba", "cuda", ("auto", "numba", "triton")) == "numba"
    assert placement.backend_for("auto", "cpu", ("auto", "triton")) == "auto"


def test_kernel_labels_on_cuda():
    ks = [{"name": "k0", "device": "cpu", "backend": "triton"},
          {"name": "mm", "device": "cpu", "backend": "blas"},
          {"name": "at", "device": "cpu", "backend": "triton-flash"}]
    got = placement.label_kernels(ks, "cuda:0")
    assert [(k["device"], k["backend"]) for k in got] == [("cuda:0", "triton"), ("cuda:0", "cublas"),
                                                          ("cuda:0", "triton-flash")]
    assert ks[1]["backend"] == "blas"                     # the program's own list is untouched
    assert placement.label_kernels(ks, "cpu") is ks


def test_graph_device_reads_the_inputs():
    class G:
        sources = [nb.tensor([1.0])]
    assert placement.graph_device(G()) == "cpu"
    assert placement.graph_device(object()) == "cpu"


def test_a_compiled_call_on_the_cpu_reports_cpu_kernels():
    cf = nb.compile(lambda x, w: (x @ w).exp(), backend="numpy")
    x = nb.tensor(np.ones((4, 3), np.float32))
    cf(x, nb.tensor(np.ones((3, 2), np.float32)))
    rep = cf.report
    assert rep.device == "cpu" and rep.kernels and all(k["device"] == "cpu" for k in rep.kernels)
    assert any(k["backend"] == "blas" for k in rep.kernels)


# -- the report's rendering ---------------------------------------------------------------------------
def test_report_shows_transfer_time_and_the_device_decision():
    import nbaccel_ext
    d = {"name": "In[3]", "device": "cuda:0", "backend": "triton", "transfer_seconds": 0.0123,
         "device_note": "auto: ran on the GPU: the inputs (64.0 MiB) are at least 16.0 MiB",
         "kernels": [{"name": "k0", "ops": ["exp"], "device": "cuda:0", "backend": "triton"},
                     {"name": "mm", "ops": ["matmul"], "device": "cuda:0", "backend": "cublas"}]}
    text = nbaccel_ext.render_text(d)
    assert "transfer 12.3 ms" in text and "device: auto: ran on the GPU" in text
    assert "cuda:0/triton" in text and "cuda:0/cublas" in text
    assert "transfer" not in nbaccel_ext.render_text(d, stable=True)    # timings stay out of saved outputs
    html = nbaccel_ext.render_html(d)
    assert "transfer" in html and "auto: ran on the GPU" in html and "cublas" in html


# -- %%compile --device without a GPU ---------------------------------------------------------------
@pytest.fixture
def ip(no_cupy):
    pytest.importorskip("IPython")
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython
    shell = start_ipython() or get_ipython()
    shell.run_line_magic("load_ext", "nbaccel")
    shell.run_line_magic("nbaccel", "reset")
    shell.user_ns.pop("y", None)            # the shell is shared with other test files
    shell.user_ns.update(np=np, x=np.arange(6, dtype=np.float32).reshape(2, 3))
    yield shell
    for k in ("y", "rep"):
        shell.user_ns.pop(k, None)


def test_compile_device_cuda_without_a_gpu_is_a_usage_error(ip, capsys):
    from IPython.core.error import UsageError
    capsys.readouterr()
    res = ip.run_cell("%%compile --device cuda\ny = x * 2.0\n")
    assert isinstance(res.error_in_exec, UsageError)
    msg = str(res.error_in_exec)
    assert msg.startswith("%%compile --device cuda:") and "pip install 'nbaccel[gpu]'" in msg
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    assert "y" not in ip.user_ns


def test_compile_device_auto_without_a_gpu_stays_on_the_cpu_and_says_why(ip):
    res = ip.run_cell("%%compile --device auto --report none -o rep\ny = x * 2.0 + 1.0\n")
    assert res.error_in_exec is None
    y, rep = ip.user_ns["y"], ip.user_ns["rep"]
    assert type(y) is np.ndarray and np.array_equal(y, np.arange(6, dtype=np.float32).reshape(2, 3) * 2 + 1)
    assert rep.fallback is None and rep.device == "cpu" and rep.transfer_seconds is None
    assert "stayed on the CPU because there is no usable GPU" in rep.device_note


def test_the_default_device_says_nothing_on_a_cpu_machine(ip):
    """(auto is the default: without a GPU and without --device the report is as before)"""
    ip.run_cell("%%compile --report none -o rep\ny = x * 2.0\n")
    assert ip.user_ns["rep"].device_note is None and ip.user_ns["rep"].device == "cpu"


def test_compile_device_cpu_runs_on_the_cpu(ip):
    ip.run_cell("%%compile --device cpu --report none -o rep\ny = x - 1.0\n")
    assert ip.user_ns["rep"].device_note is None and type(ip.user_ns["y"]) is np.ndarray
