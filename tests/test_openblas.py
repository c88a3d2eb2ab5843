"""nbaccel_kernels._openblas: the accumulating strided GEMM against np.matmul, its NumPy
fallback, and the per-thread single-threaded block."""
import ctypes

import numpy as np
import pytest

from nbaccel_kernels import _openblas


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("blas", [True, False])
def test_gemm_on_windows_of_a_buffer(dtype, trans_b, blas, monkeypatch):
    if not blas:
        monkeypatch.setattr(_openblas, "_cblas", lambda dt: None)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 7)).astype(dtype)
    buf = rng.standard_normal((9 if trans_b else 7, 40)).astype(dtype)
    b = buf[:, 3:10] if trans_b else buf[:, 3:12]          # rows 40 apart, a window of columns
    want = a @ (b.T if trans_b else b)
    c = np.ones(want.shape, dtype)
    _openblas.gemm(a, b, c, trans_b=trans_b)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(c, want, rtol=tol, atol=tol)
    _openblas.gemm(a, b, c, accumulate=True, trans_b=trans_b)
    np.testing.assert_allclose(c, 2 * want, rtol=tol, atol=tol)


def test_gemm_refuses_shapes_that_do_not_fit():
    if _openblas._cblas(np.dtype(np.float32)) is None:
        pytest.skip("no OpenBLAS CBLAS here (the np.matmul fallback raises its own error)")
    a, b = np.ones((3, 4), np.float32), np.ones((5, 6), np.float32)
    with pytest.raises(ValueError, match="gemm: shapes"):
        _openblas.gemm(a, b, np.empty((3, 6), np.float32))


def test_single_threaded_sets_and_restores_this_threads_blas():
    lib = _openblas.library()
    fn = getattr(lib, "openblas_set_num_threads_local", None)
    if fn is None:
        pytest.skip("OpenBLAS without openblas_set_num_threads_local")
    fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
    outside = fn(2)
    fn(outside)
    with _openblas.single_threaded():
        inside = fn(1)                  # returns the value in effect: 1
        assert inside == 1
    assert fn(outside) == outside       # restored



def test_single_threaded_sets_only_a_count_not_in_effect(monkeypatch):
    """Setting OpenBLAS's count can wait for its server's lock (ms): the kernels' threads and
    the caller set 1 around every task run, so a count already in effect is not set again."""
    state = {"count": 1}
    sets = []

    def fake_set(n):
        sets.append(n)
        before, state["count"] = state["count"], n
        return before
    monkeypatch.setattr(_openblas, "_SET_LOCAL", fake_set)
    monkeypatch.setattr(_openblas, "_GET", lambda: state["count"])
    with _openblas.single_threaded():
        assert _openblas.single_threaded_blas()
    assert sets == []
    state["count"] = 2
    with _openblas.single_threaded():
        assert state["count"] == 1
    assert sets == [1, 2] and state["count"] == 2

@pytest.mark.parametrize("single_is_faster", [True, False])
def test_step_threads_keeps_the_faster_mode(single_is_faster, monkeypatch):
    import contextlib
    import time
    state = {"single": False}

    @contextlib.contextmanager
    def fake_single():
        state["single"] = True
        yield
        state["single"] = False
    monkeypatch.setattr(_openblas, "single_threaded", fake_single)
    threads, modes = _openblas.StepThreads(), []
    for _ in range(12):
        with threads.step():
            modes.append(state["single"])
            time.sleep(0.004 if state["single"] != single_is_faster else 0)
    trials = 2 * _openblas.StepThreads.TRIALS
    assert modes[:trials].count(True) == modes[:trials].count(False) == _openblas.StepThreads.TRIALS
    assert threads.choice is single_is_faster
    assert set(modes[trials:]) == {single_is_faster}


def test_run_tasks_runs_each_task_once_and_nests_without_deadlock():
    from nbaccel_kernels import _tasks
    done, inner = [], []

    def work(t, state):
        state.setdefault("seen", 0)
        state["seen"] += 1
        done.append(t)
        if t == 0:          # a kernel that calls another pooled kernel from a worker
            _tasks.run_tasks(range(3), lambda u, s: inner.append(u), threads=2)
    _tasks.run_tasks(range(10), work, threads=2)
    assert sorted(done) == list(range(10)) and sorted(inner) == [0, 1, 2]


def test_run_tasks_leaves_the_process_blas_threads_as_they_were():
    # the workers run BLAS single-threaded; afterwards the calling thread's matmuls get the
    # count they had before (NumPy's OpenBLAS keeps the per-thread count process-wide, so a
    # worker's 1 stayed every thread's: the eager matmuls after a convolution ran on one core)
    from nbaccel_kernels import _tasks
    if _openblas._set_local() is None or _openblas._in_effect() is None:
        pytest.skip("OpenBLAS without openblas_set_num_threads_local / openblas_get_num_threads")
    before = _openblas._in_effect()
    seen = []
    for _ in range(3):
        _tasks.run_tasks(range(8), lambda t, s: seen.append(_openblas._in_effect()), threads=2)
        assert _openblas._in_effect() == before
    assert set(seen) == {1}                 # inside, every task ran single-threaded BLAS


def test_openblas_is_the_library_threadpoolctl_finds():
    from threadpoolctl import ThreadpoolController
    libs = ThreadpoolController().select(internal_api="openblas").lib_controllers
    if not libs:
        pytest.skip("NumPy without OpenBLAS")
    assert _openblas.library() is not None
    assert _openblas.library()._name in {c.filepath for c in libs}
    assert _openblas._cblas(np.float32) is not None and _openblas._cblas(np.float64) is not None


def test_no_omp_wait_policy_is_set_by_nbaccel():
    from nbaccel import thread_pools
    env = {}
    thread_pools.configure(env)
    assert "OMP_WAIT_POLICY" not in env


def test_thread_count_calls_keep_the_gil():
    """The thread-count calls do not release the GIL (ctypes.PYFUNCTYPE): taking it back
    waited for the kernels' threads, up to 11 ms for a 1 us call."""
    _openblas._in_effect()
    for fn in (_openblas._set_local(), _openblas._GET):
        if not fn:
            pytest.skip("OpenBLAS without the thread-count functions")
        assert fn._flags_ & ctypes._FUNCFLAG_PYTHONAPI
