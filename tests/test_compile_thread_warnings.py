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
