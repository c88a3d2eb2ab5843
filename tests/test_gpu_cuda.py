"""On a real NVIDIA GPU with CuPy (marker ``gpu``: skipped cleanly anywhere else; run by
``pytest -m gpu`` and by bench/gpu_check.py). Nothing here has a fake: devices, DLPack,
cuBLAS, the CuPy driver for Triton and the autotuner's timing all run for real."""
import sys

import numpy as np
import pytest

import nbaccel as nb

pytestmark = pytest.mark.gpu


@pytest.fixture
def cp():
    import cupy
    return cupy


# -- the device ---------------------------------------------------------------------------------
def test_tensor_on_cuda_and_back(cp):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = nb.tensor(a, device="cuda")
    assert t.device == "cuda:0" and t.is_cuda and str(t.device) == "cuda:0"
    assert isinstance(t._data, cp.ndarray)
    back = t.cpu()
    assert back.device == "cpu" and isinstance(back._data, np.ndarray)
    np.testing.assert_array_equal(back.numpy(), a)
    for moved in (nb.tensor(a).to("cuda"), nb.tensor(a).cuda(), nb.tensor(a).to(device="cuda:0")):
        assert moved.device.type == "cuda" and isinstance(moved._data, cp.ndarray)
        np.testing.assert_array_equal(moved.cpu().numpy(), a)
    with pytest.raises(TypeError, match=r"\.cpu\(\)"):
        t.numpy()


def test_eager_ops_on_cuda_match_numpy(cp):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 32), dtype=np.float32)
    t = nb.tensor(x, device="cuda")
    got = (nb.exp(t) * 2 + t.sum(-1, keepdims=True)).cpu().numpy()
    np.testing.assert_allclose(got, np.exp(x) * 2 + x.sum(-1, keepdims=True), rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="same device"):
        t + nb.tensor(x)


def test_matmul_on_cuda_is_cublas_and_right(cp):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((128, 64), dtype=np.float32), rng.standard_normal((64, 96), dtype=np.float32)
    got = (nb.tensor(a, device="cuda") @ nb.tensor(b, device="cuda")).cpu().numpy()
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)


def test_dlpack_both_ways_without_copies(cp):
    c = cp.arange(10, dtype=cp.float32)
    t = nb.from_dlpack(c)
    assert t.device.type == "cuda"
    c[0] = 42.0                                       # shared memory: the tensor sees it
    assert float(t[0].item()) == 42.0
    back = cp.from_dlpack(t)
    assert back.data.ptr == c.data.ptr
    np.testing.assert_array_equal(cp.asnumpy(back), cp.asnumpy(c))
    assert nb.asarray(c).device.type == "cuda"        # __cuda_array_interface__, zero-copy
    assert cp.asarray(t).data.ptr == c.data.ptr       # ... and the tensor's own, the other way


# -- %%compile --device ---------------------------------------------------------------------------
@pytest.fixture
def ip():
    pytest.importorskip("IPython")
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython
    shell = start_ipython() or get_ipython()
    shell.run_line_magic("load_ext", "nbaccel")
    shell.run_line_magic("nbaccel", "reset")
    yield shell
    for k in ("x", "w", "y", "z", "rep"):
        shell.user_ns.pop(k, None)


def _run(ip, src):
    res = ip.run_cell(src)
    assert res.error_in_exec is None and res.error_before_exec is None, res.error_in_exec
    return res


def test_compile_cell_on_cuda_returns_numpy_with_transfer_time(ip):
    from nbaccel.compiler import api as capi
    capi.config["strict"] = False    # what a user gets (conftest restores it)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((256, 128), dtype=np.float32)
    w = rng.standard_normal((128, 64), dtype=np.float32)
    ip.user_ns.update(np=np, x=x, w=w)
    _run(ip, "%%compile --device cuda --report none -o rep\ny = np.tanh(x) * 2.0 + 1.0\nz = x @ w\n")
    y, z, rep = ip.user_ns["y"], ip.user_ns["z"], ip.user_ns["rep"]
    assert type(y) is np.ndarray and type(z) is np.ndarray
    np.testing.assert_allclose(y, np.tanh(x) * 2.0 + 1.0, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(z, x @ w, rtol=1e-4, atol=1e-4)
    if rep.fallback is None:                    # it ran compiled: the report says where
        assert rep.device == "cuda:0"
        assert rep.transfer_seconds is not None and rep.transfer_seconds > 0
        assert rep.kernels and all(k["device"] == "cuda:0" for k in rep.kernels)
        mm = [k for k in rep.kernels if "matmul" in k["ops"]]
        assert mm and all(k["backend"] == "cublas" for k in mm)


def test_auto_takes_the_gpu_for_large_inputs_only(ip):
    from nbaccel.compiler import api as capi
    from nbaccel.gpu import placement
    capi.config["strict"] = False
    small = np.ones((16, 16), np.float32)
    big = np.ones((placement.AUTO_MIN_BYTES // 4 // 1024 + 1, 1024), np.float32)
    ip.user_ns.update(np=np, x=small)
    _run(ip, "%%compile --device auto --report none -o rep\ny = x + 1.0\n")
    assert ip.user_ns["rep"].device == "cpu" and "too small" in ip.user_ns["rep"].device_note
    ip.user_ns["x"] = big
    _run(ip, "%%compile --device auto --report none -o rep\ny = x + 1.0\n")
    rep = ip.user_ns["rep"]
    assert type(ip.user_ns["y"]) is np.ndarray and float(ip.user_ns["y"][0, 0]) == 2.0
    if rep.fallback is None:
        assert rep.device == "cuda:0" and "GPU" in rep.device_note


# -- Triton through the CuPy driver ---------------------------------------------------------------
def _add_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)
    return add


def test_triton_kernel_on_cupy_arrays_and_cupys_stream(cp):
    pytest.importorskip("triton")
    from nbaccel.gpu import triton_driver as td
    drv = td.activate()
    assert td.activate() is drv and td.is_active()
    assert td.arch().startswith("sm_")
    add = _add_kernel()
    n = 100_003
    x, y = cp.arange(n, dtype=cp.float32), cp.ones(n, dtype=cp.float32)
    out = cp.empty_like(x)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:                                   # a non-default stream: the launch follows it
        assert td.current_stream() == stream.ptr
        add[(-(-n // 1024),)](td.kernel_arg(x), td.kernel_arg(y), td.kernel_arg(out), n, BLOCK=1024)
    stream.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(out), np.arange(n, dtype=np.float32) + 1)
    t = nb.tensor(np.ones(n, np.float32), device="cuda")
    add[(-(-n // 1024),)](td.kernel_arg(t), td.kernel_arg(y), td.kernel_arg(out), n, BLOCK=1024)
    assert float(out[-1]) == 2.0


def test_triton_driver_path_imports_no_torch():
    import subprocess
    code = ("import sys; from nbaccel.gpu import triton_driver as td; td.activate(); "
            "import cupy; a = cupy.ones(4, dtype=cupy.float32); td.kernel_arg(a); "
            "print('torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == "False"


def test_autotune_times_real_kernels(cp, tmp_path):
    pytest.importorskip("triton")
    from nbaccel.gpu import autotune, triton_driver as td
    td.activate()
    add = _add_kernel()
    n = 1 << 22
    x, y = cp.ones(n, dtype=cp.float32), cp.ones(n, dtype=cp.float32)
    out = cp.empty_like(x)
    args = [td.kernel_arg(a) for a in (x, y, out)]

    def launch(cfg):
        xb = cfg.block("XBLOCK")
        add[(-(-n // xb),)](*args, n, BLOCK=xb, num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    cands = autotune.candidates("pointwise", numel=n)
    autotune.clear_memory()
    best = autotune.choose("test-add", td.arch(), cands,
                           lambda cfg: autotune.median_seconds(lambda: launch(cfg)), shape=(n,),
                           cache_dir=str(tmp_path))
    assert best in cands
    launch(best)
    assert float(out.sum()) == 2.0 * n
    assert list((tmp_path / td.arch()).iterdir())      # the choice is on disk, per arch


def test_bench_returns_positive_gpu_times(cp):
    from nbaccel.gpu import triton_driver as td
    a = cp.ones(1 << 20, dtype=cp.float32)
    ts = td.bench(lambda: a * 2, warmup=1, rounds=5)
    assert len(ts) == 5 and all(t > 0 for t in ts) and ts == sorted(ts)


# -- backend="triton" on CUDA tensors, against NumPy ------------------------------------------------
def _programs():
    import nbaccel.nn.functional as F
    return {
        "elementwise": (lambda x: nb.tanh(x) * 0.5 + x * x, lambda x: np.tanh(x) * 0.5 + x * x),
        "row sum": (lambda x: (x * 2.0).sum(dim=-1), lambda x: (x * 2.0).sum(-1)),
        "column max": (lambda x: nb.exp(x).amax(dim=0), lambda x: np.exp(x).max(0)),
        "softmax": (lambda x: F.softmax(x, dim=-1),
                    lambda x: np.exp(x - x.max(-1, keepdims=True)) / np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True)),
        "argmax": (lambda x: (x - 1.0).argmax(dim=-1), lambda x: (x - 1.0).argmax(-1)),
    }


@pytest.mark.parametrize("name", list(_programs()))
@pytest.mark.parametrize("shape", [(1000, 37), (4096, 4096), (3, 70_001)])
def test_triton_backend_on_cuda_matches_numpy(cp, name, shape):
    from nbaccel.compiler import api as capi
    if "triton" not in capi.BACKENDS:
        pytest.skip("this build has no Triton backend")
    fn, ref = _programs()[name]
    x = np.random.default_rng(3).standard_normal(shape, dtype=np.float32)
    cf = nb.compile(fn, backend="triton")
    got = cf(nb.tensor(x, device="cuda"))
    assert got.device.type == "cuda"
    want = ref(x)
    got = got.cpu().numpy()
    if want.dtype.kind == "f":
        # (float32 sums of 70 001 terms in another order: a wrong kernel is off by far more)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(want).max())))
    else:
        np.testing.assert_array_equal(got, want)
    ks = cf.report.kernels
    assert ks and all(k["device"] == "cuda:0" for k in ks)
    assert any(k["backend"] == "triton" for k in ks)


def test_triton_backend_float16_on_cuda(cp):
    from nbaccel.compiler import api as capi
    if "triton" not in capi.BACKENDS:
        pytest.skip("this build has no Triton backend")
    x = np.random.default_rng(4).standard_normal((513, 257)).astype(np.float16)
    cf = nb.compile(lambda t: (t * t + 1.0).sum(dim=-1), backend="triton")
    got = cf(nb.tensor(x, device="cuda")).cpu().numpy()
    want = (x.astype(np.float32) * x.astype(np.float32) + 1.0).sum(-1)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-3, atol=0.5)


def test_the_eager_baseline_of_a_cuda_graph_runs(cp):
    """The report's eager baseline runs the captured graph through the reference interpreter
    (compiler/runtime/runtime.py interpret), which must take CuPy arrays (np.asarray of one raises)."""
    from nbaccel.compiler import api as capi
    if "triton" not in capi.BACKENDS:
        pytest.skip("this build has no Triton backend")
    cf = nb.compile(lambda x: nb.exp(x) + 1.0, backend="triton")
    cf(nb.tensor(np.ones((64, 64), np.float32), device="cuda"))
    rep = cf.report                     # raises here (strict) if it cannot
    assert rep.eager_seconds is not None and rep.eager_seconds > 0
