"""The Dask bridge on a real distributed.LocalCluster of worker processes (2 workers, 1 thread
each, started once for this module, with an empty kernel cache of their own): results, what
travels to the workers, a killed worker, and %nbaccel cluster connect / start / stop."""
import contextlib
import os
import pickle
import signal
import time

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
import dask  # noqa: E402

import nbaccel as nb  # noqa: E402
from nbaccel.daskbridge import cluster as nbcluster  # noqa: E402


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    cache = tmp_path_factory.mktemp("worker-kernel-cache")
    cl = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, memory_limit="2GiB",
                                  env={"NBACCEL_CACHE_DIR": str(cache)})
    c = distributed.Client(cl)
    c.cache_dir = cache
    yield c
    c.close()
    with contextlib.suppress(KeyError, RuntimeError, OSError, TimeoutError):
        cl.close()      # (distributed's close can race a worker a test killed: it is gone anyway)


def _array(shape, chunks, seed=0, dtype=np.float64):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return a, da.from_array(a, chunks=chunks)


def work(x, w):
    h = np.tanh(x * w + 0.5)
    e = np.exp(h - h.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).sum(axis=0), (x - x.mean(0)) / x.std(0), np.argmax(x, axis=0)


def test_results_on_the_cluster(client):
    a, x = _array((203, 48), ((50, 50, 50, 53), 48))            # uneven row chunks
    wa, w = _array((48,), 13, seed=1)                           # chunked differently
    cf = nb.compile(work, backend="numpy")
    outs = cf(x, w)
    assert all(isinstance(o, da.Array) for o in outs)
    got = dask.compute(*outs)                                    # the default client: the cluster
    want = work(a, wa)
    for g, v in zip(got, want):
        np.testing.assert_allclose(g, v, rtol=1e-9, atol=1e-12)
    rep = cf.report
    # w's chunks split the rows' axis too: max and sum over it, the column sum, one moments
    # pass for mean and std, the standardisation, argmax
    assert rep.fallback is None and len(rep.kernels) == 6, rep.kernels


def test_workers_compile_numba_kernels_into_their_own_empty_cache(client):
    files = lambda: {f for _, _, fs in os.walk(client.cache_dir) for f in fs}  # noqa: E731
    before = files()                  # empty unless another test of this module compiled first
    a, x = _array((64, 16), (16, 16), seed=4)
    y = nb.compile(lambda x: (x * 2.0 + 1.0625).sum(axis=1), backend="numba")(x)   # a new kernel
    np.testing.assert_allclose(y.compute(), (a * 2.0 + 1.0625).sum(axis=1), rtol=1e-12)
    assert files() - before, "the workers wrote no kernels to their cache"


def test_only_source_and_keys_travel(client):
    _, x = _array((40, 8), (10, 8))
    y = nb.compile(lambda x: np.sin(x * 2).sum(axis=0), backend="numpy")(x)
    blob = pickle.dumps(dict(y.__dask_graph__()))
    assert b"nbaccel.daskbridge.worker" in blob and b"def stage(" in blob
    for internal in (b"nbaccel.compiler", b"nbaccel.tensor", b"nbaccel.ops"):
        assert internal not in blob, internal


def test_a_killed_worker_is_retried(client):
    a, x = _array((2400, 32), (25, 32), seed=2)                 # 96 chunks
    y = nb.compile(lambda x: np.sqrt(np.abs(np.tanh(x) * 3.0)).sum(axis=0), backend="numpy")(x)
    pids = client.run(os.getpid)
    fut = client.compute(y)
    deadline = time.time() + 30
    while not any(client.processing().values()) and time.time() < deadline:
        time.sleep(0.05)
    victim = sorted(pids.values())[0]
    os.kill(victim, signal.SIGKILL)
    got = fut.result(timeout=120)
    np.testing.assert_allclose(got, np.sqrt(np.abs(np.tanh(a) * 3.0)).sum(axis=0), rtol=1e-9)
    client.wait_for_workers(2, timeout=60)


@pytest.fixture
def ip():
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython
    shell = start_ipython() or get_ipython()
    shell.run_line_magic("load_ext", "nbaccel")
    return shell


def test_cluster_connect_and_a_cluster_that_does_not_answer(client, ip, capsys):
    from IPython.core.error import UsageError
    ip.run_line_magic("nbaccel", f"cluster connect {client.scheduler.address}")
    out = capsys.readouterr().out
    assert "2 workers" in out and client.scheduler.address in out
    nbcluster._state["client"].close()
    nbcluster._state["client"] = None
    client.as_current()
    t0 = time.time()
    with pytest.raises(UsageError, match="no Dask scheduler answered at tcp://127.0.0.1:9"):
        ip.run_line_magic("nbaccel", "cluster connect tcp://127.0.0.1:9 --timeout 2")
    assert time.time() - t0 < 30
    with pytest.raises(UsageError, match="expected start, connect"):
        ip.run_line_magic("nbaccel", "cluster launch")
    with pytest.raises(UsageError, match="whole number"):
        ip.run_line_magic("nbaccel", "cluster start --workers zero")


def test_compiled_cell_on_the_cluster(client, ip):
    a, x = _array((120, 30), (40, 30), seed=3)
    ip.user_ns.update(np=np, x=x)
    assert ip.run_cell("%%compile\ny = np.tanh(x * 2 + 1).sum(axis=0)\n").success
    y = ip.user_ns["y"]
    assert isinstance(y, da.Array)
    np.testing.assert_allclose(y.compute(), np.tanh(a * 2 + 1).sum(axis=0), rtol=1e-9)


def test_a_worker_without_nbaccel_gives_one_clear_error(client):
    workers = sorted(client.scheduler_info()["workers"])
    hide = "import sys; sys._nbaccel_saved = sys.modules['nbaccel']; sys.modules['nbaccel'] = None"
    client.run(exec, hide, workers=workers[:1])       # that worker can no longer import nbaccel
    nbcluster._checked.clear()
    try:
        _, x = _array((20, 4), (5, 4))
        with pytest.raises(nbcluster.ClusterError, match=f"Dask worker {workers[0]}: .*pip install"):
            nb.compile(lambda x: (x * 2).sum(axis=0), backend="numpy")(x)
    finally:
        client.run(exec, "import sys; sys.modules['nbaccel'] = sys._nbaccel_saved", workers=workers[:1])
        nbcluster._checked.clear()
