"""A Dask cluster closes cleanly while nbaccel compiles in the background on its workers
(issue 37, item 8). A worker that is closed exits at once: the numba compile in flight and
those queued do not hold its process, so the nanny never has to kill it ("Worker process still
alive after 4.0 seconds, killing" in the notebook's output). The notebook's own process still
waits for its queued compiles at exit (they fill the disk cache for the next session)."""
import logging
import os
import subprocess
import sys
import textwrap

import pytest

distributed = pytest.importorskip("distributed")


def _busy_compiler():
    """On a worker: a compile in flight for a long time and one queued behind it."""
    import time
    from nbaccel.compiler.runtime import runtime
    runtime._COMPILER.submit(time.sleep, 60)
    runtime._COMPILER.submit(time.sleep, 60)
    return True


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_closing_a_cluster_does_not_wait_for_background_compiles():
    records = _Records()
    loggers = [logging.getLogger(n) for n in ("distributed.nanny", "distributed.deploy.spec")]
    for lg in loggers:
        lg.addHandler(records)
    try:
        cl = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                      dashboard_address=None, memory_limit="1GiB")
        client = distributed.Client(cl, set_as_default=False)
        assert list(client.run(_busy_compiler).values()) == [True]
        client.close()
        cl.close()
    finally:
        for lg in loggers:
            lg.removeHandler(records)
    assert not [m for m in records.messages if "still alive" in m or "killing" in m], records.messages


def test_a_notebook_process_still_waits_for_its_queued_compiles(tmp_path):
    """Outside a managed worker the exit waits, so the disk cache is filled (the compile here
    writes a file after the main thread has finished)."""
    done = tmp_path / "done"
    script = textwrap.dedent(f"""
        import time
        from nbaccel.compiler.runtime import runtime
        def compile_():
            time.sleep(0.5)
            open({str(done)!r}, "w").write("ok")
        runtime._COMPILER.submit(time.sleep, 0.2)
        runtime._COMPILER.submit(compile_)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120, env=env)
    assert done.read_text() == "ok"


def _busy_and_compiled():
    """On a worker: a compiled function whose numba kernels compile in the background, and a
    long compile queued behind them (the notebooks' case: a cell's kernels still compiling on
    the workers when the cluster is scaled down or stopped)."""
    import time
    import numpy as np
    import nbaccel as nb
    from nbaccel.compiler.runtime import runtime
    f = nb.compile(lambda x: np.tanh(x * 2 + 1).sum(axis=0), backend="auto")
    f(np.ones((64, 8)))
    runtime._COMPILER.submit(time.sleep, 60)
    return True


def test_nbaccel_cluster_start_status_scale_stop_without_a_killed_worker():
    from nbaccel.daskbridge import cluster
    records = _Records()
    logger = logging.getLogger("distributed.nanny")
    logger.addHandler(records)
    try:
        client = cluster.start(workers=2, threads=1)
        st = cluster.status()
        assert len(st.workers) == 2 and st.threads == 2 and st.kind == "LocalCluster"
        assert repr(st) == cluster.describe() and "2 workers, 2 threads" in repr(st)
        html = st._repr_html_()
        assert html.count("<tr>") == 3 and st.address in html      # a header and a row per worker
        assert all(client.run(_busy_and_compiled).values())
        assert len(cluster.scale(1).workers) == 1                     # the retired worker has left
        assert all(client.run(_busy_and_compiled).values())
        cluster.stop()
    finally:
        logger.removeHandler(records)
        cluster.stop()
    assert cluster.status() is None
    assert not [m for m in records.messages if "still alive" in m or "killing" in m], records.messages
