"""A numba compile runs on nbaccel's compile thread while the notebook's thread goes on. Nothing
it does may touch the warnings state the notebook is using: ``warnings.catch_warnings()`` on
that thread swapped the process-wide filters and ``showwarning`` and, on leaving, put back its
own copy, so a warning the cell was recording at that moment vanished (CI's intermittent
"DID NOT WARN" in the DataParallel resume test)."""
import threading
import warnings

from nbaccel.compiler.runtime import runtime


def test_a_background_compile_leaves_the_notebooks_warning_capture_alone(monkeypatch):
    entered, release = threading.Event(), threading.Event()

    def slow_compile(self, signature):        # the real build, held open at its midpoint
        entered.set()
        release.wait(10)
        self.fn, self.state = None, "failed"
    monkeypatch.setattr(runtime.NumbaKernel, "_compile", slow_compile)
    kernel = runtime.NumbaKernel("def kernel():\n    pass\n")
    worker = threading.Thread(target=kernel.compile, args=((),))
    worker.start()
    assert entered.wait(10)
    with warnings.catch_warnings(record=True) as caught:   # the cell starts recording mid-compile
        warnings.simplefilter("always")
        release.set()
        worker.join(10)                                     # the compile ends while it records
        warnings.warn("the cell's own warning", RuntimeWarning)
    assert [str(w.message) for w in caught] == ["the cell's own warning"]


def test_numba_ir_noise_is_still_filtered():
    from numba.core.errors import NumbaIRAssumptionWarning
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()        # (pytest's own filters go in front of any set earlier)
        runtime._quiet_numba_ir_warnings()
        warnings.warn("x", NumbaIRAssumptionWarning)
        warnings.warn("y", RuntimeWarning)
    assert [str(w.message) for w in caught] == ["y"]


def test_numba_typing_on_a_compile_thread_never_swaps_the_warnings_state():
    """numba's type inference enters ``catch_warnings(record=True)`` per typing constraint; on
    a thread nbaccel compiles on (kernels/_numba_warnings.py) it enters nothing, so while real
    numba compiles run there the process's filter list and ``showwarning`` never change, and a
    warning the main thread records always arrives (before: about 1 in 10,000 vanished, and the
    filter list was swapped several times per compile)."""
    import time

    import numba
    import numpy as np

    from nbaccel_kernels import _numba_warnings

    done, compiles = threading.Event(), []

    def compile_on_a_marked_thread():
        _numba_warnings.quiet_this_thread()
        for i in range(6):
            ns = {}
            exec(f"def f{i}(a, b):\n    s = 0.0\n    for k in range(a.shape[0]):\n"
                 f"        s += a[k] * b + {i}\n    return s\n", ns)
            numba.njit(ns[f"f{i}"])(np.ones(3), 2.0)
            compiles.append(i)
        done.set()

    filters, show = warnings.filters, warnings._showwarnmsg_impl
    worker = threading.Thread(target=compile_on_a_marked_thread)
    worker.start()
    swaps = lost = 0
    deadline = time.monotonic() + 60
    while not done.is_set() and time.monotonic() < deadline:
        swaps += warnings.filters is not filters or warnings._showwarnmsg_impl is not show
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warnings.warn("the cell's own warning", RuntimeWarning)
        lost += len(caught) != 1
    worker.join(60)
    assert len(compiles) == 6
    assert swaps == 0 and lost == 0


def test_an_exiting_process_waits_a_bounded_time_for_queued_compiles():
    """At exit the queued compiles fill the disk cache for the next session, but for at most
    config['exit_compile_wait'] seconds: the ones not started by then are dropped (a long
    session's exit once waited minutes)."""
    import time

    worker = runtime._CompileThread("test-exit-wait")
    release = threading.Event()
    first = worker.submit(release.wait, 5)          # in flight, as a compile would be
    queued = [worker.submit(time.sleep, 0) for _ in range(3)]
    t0 = time.monotonic()
    worker.wait(cache_fills_only=True, timeout=0.2)
    assert time.monotonic() - t0 < 2
    assert all(f.cancelled() for f in queued) and not first.cancelled()
    release.set()
    assert first.result(5) is True
