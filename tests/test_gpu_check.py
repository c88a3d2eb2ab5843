"""bench/gpu_check.py without a GPU: its command line, the no-GPU path (says "no GPU", exits
3, still writes both files), the verdict, the markdown writer, stage guarding, and one run of
every stage's plumbing against a NumPy-backed stand-in for CuPy (a fake: no GPU exists here;
it checks the script's own logic end to end, not any GPU figure)."""
import json
import os
import pathlib
import subprocess
import sys
import time
import types

import numpy as np
import pytest

from bench import gpu_check as gc

ROOT = pathlib.Path(__file__).resolve().parent.parent

# run the module with CuPy made unimportable, whatever this machine has
NO_CUPY = ("import sys, runpy; sys.modules['cupy'] = None; sys.argv = ['gpu_check'] + sys.argv[1:]; "
           "runpy.run_module('bench.gpu_check', run_name='__main__')")


def _run_cli(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", NO_CUPY, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def test_without_cupy_it_says_no_gpu_and_exits_3(tmp_path):
    r = _run_cli("--out", str(tmp_path / "o"))
    assert r.returncode == gc.EXIT_NO_GPU == 3, r.stderr[-2000:]
    assert "no GPU" in r.stdout and "CuPy is not installed" in r.stdout
    res = json.loads((tmp_path / "o" / "gpu_check.json").read_text())
    assert res["gpu"] is False and "CuPy" in res["no_gpu_reason"] and res["stages"] == []
    md = (tmp_path / "o" / "gpu_check.md").read_text()
    assert "**no GPU**" in md and "Nothing was run on a GPU" in md


def test_command_line_errors_exit_2(tmp_path):
    r = _run_cli()
    assert r.returncode == 2 and "--out" in r.stderr
    r = _run_cli("--out", str(tmp_path), "--size", "0")
    assert r.returncode == 2 and "--size" in r.stderr
    r = _run_cli("--help")
    assert r.returncode == 0 and "--quick" in r.stdout and "--no-tests" in r.stdout


def test_a_failing_stage_is_recorded_and_the_next_still_runs():
    res = {"stages": []}
    assert gc.guarded(res, "boom", lambda: 1 / 0) is None
    assert gc.guarded(res, "fine", lambda: {"x": 1}) == {"x": 1}
    boom, fine = res["stages"]
    assert not boom["ok"] and boom["error"].startswith("ZeroDivisionError") and "1 / 0" in boom["traceback"]
    assert fine["ok"] and fine["result"] == {"x": 1}


def _results(correct=True, tests_ok=True):
    t = {"median": 1e-3, "min": 9e-4, "max": 1.2e-3, "rounds": 3, "copy_fraction": 0.9}
    return {"gpu": True, "when": "now", "host": "h", "size": 8192, "rounds": 3, "triton_api": gc.TRITON_API,
            "stages": [
                {"name": "environment", "ok": True, "result": {"gpu": "NVIDIA H200", "arch": "sm_90"}},
                {"name": "tests", "ok": True, "result": {"returncode": 0 if tests_ok else 1, "ok": tests_ok,
                                                          "counts": {"tests": 9, "failures": 0 if tests_ok else 2}}},
                {"name": "copy", "ok": True, "result": dict(t, bytes=2 ** 29, gb_per_s=3900.0)},
                {"name": "workloads", "ok": True, "result": {"a": {
                    "title": "gelu", "notes": ["PyTorch with CUDA is not installed"], "triton_ran": True, "impls": {
                        "cupy": {"correct": True, "time": t},
                        "nbaccel triton (default)": {"correct": correct, "max_abs_error": 0.5 if not correct else 1e-7,
                                                     "time": t, "vs_torch_compile": 1.25,
                                                     "kernels": [{"name": "k0", "device": "cuda:0",
                                                                  "backend": "triton"}]}}},
                    "b": {"title": "softmax", "skipped": "time budget spent"}}},
                {"name": "attention", "ok": False, "error": "RuntimeError: no", "traceback": "Traceback..."}]}


def test_markdown_and_verdict_of_a_full_run():
    res = _results()
    md = gc.markdown(res)
    assert "NVIDIA H200" in md and "3900 GB/s" in md
    assert "| (a) gelu | nbaccel triton (default) | 1.000 ms (0.900–1.200) | 90% | 1.25x | – |  | yes | cuda:0/triton |" in md
    assert "skipped: time budget spent" in md and "PyTorch with CUDA is not installed" in md
    assert "## Failed stages" in md and "### attention: RuntimeError: no" in md
    assert "85%" in md                                             # the target is stated
    assert "- (a) nbaccel triton (default): copy bandwidth 90% (met), vs torch.compile 1.25x (met)" in md
    assert gc.problems(res) == ["stage attention failed: RuntimeError: no"]
    assert gc.exit_code(res) == gc.EXIT_FAILED
    res["stages"].pop()
    assert gc.problems(res) == [] and gc.exit_code(res) == gc.EXIT_OK
    assert "verdict: all right" in gc.markdown(res)


def test_wrong_results_and_failed_tests_fail_the_check():
    bad = gc.problems(_results(correct=False, tests_ok=False))
    assert any("GPU tests failed" in p for p in bad)
    assert any("(a) nbaccel triton (default): wrong result" in p and "0.5" in p for p in bad)
    assert gc.exit_code({"gpu": False}) == gc.EXIT_NO_GPU
    peer = _results()
    peer["stages"][3]["result"]["a"]["impls"]["torch.compile"] = {"correct": False, "error": "InductorError"}
    peer["stages"].pop()
    assert gc.problems(peer) == []                  # a peer's failure is reported, not failed on
    assert "InductorError" in gc.markdown(peer)
    skipped = _results()
    skipped["stages"][1]["result"]["counts"] = {"tests": 9, "failures": 0, "skipped": 9}
    assert any("every GPU test was skipped" in p for p in gc.problems(skipped))


def test_the_gpu_subset_is_the_files_that_mark_gpu_tests():
    files = gc.gpu_test_files()
    assert "tests/test_gpu_cuda.py" in [f.replace(os.sep, "/") for f in files]
    assert all(f.startswith("tests") and f.endswith(".py") for f in files)


def test_write_puts_json_and_markdown_in_the_directory(tmp_path):
    jp, mp = gc.write(_results(), str(tmp_path / "new"))
    assert json.loads(open(jp).read())["size"] == 8192 and open(mp).read().startswith("# nbaccel GPU check")


# -- every stage once, on a NumPy stand-in for CuPy -------------------------------------------------
class _Event:
    def record(self, stream=None):
        self.t = time.perf_counter()

    def synchronize(self):
        pass


class _FakeCupy(types.ModuleType):
    """Array functions are NumPy's; the CUDA parts answer as one idle GPU would."""

    def __getattr__(self, name):
        return getattr(np, name)


@pytest.fixture
def numpy_as_cupy(monkeypatch):
    from tests._fake_cupy import skip_if_real_cupy
    skip_if_real_cupy()          # (its host pointers must never reach a real GPU's kernels)
    from nbaccel.gpu import placement
    fake = _FakeCupy("cupy")
    fake.__version__ = "0+numpy-stand-in"
    fake.asnumpy = np.asarray
    fake.get_default_memory_pool = lambda: types.SimpleNamespace(free_all_blocks=lambda: None)
    fake.cuda = types.SimpleNamespace(
        runtime=types.SimpleNamespace(getDeviceCount=lambda: 1, getDevice=lambda: 0,
                                      getDeviceProperties=lambda d: {"name": b"Stand-in GPU"},
                                      runtimeGetVersion=lambda: 12040, driverGetVersion=lambda: 12040,
                                      deviceSynchronize=lambda: None),
        Device=lambda *a: types.SimpleNamespace(compute_capability="90", mem_info=(1 << 30, 1 << 31)),
        Event=_Event, get_elapsed_time=lambda a, b: (b.t - a.t) * 1e3)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    placement._forget_for_tests()
    yield fake
    placement._forget_for_tests()


def test_every_stage_runs_through_on_a_stand_in(numpy_as_cupy, tmp_path):
    res = gc.run(quick=True, size=64, tests=False, budget=120, attention_shape=(1, 2, 32, 16))
    assert res["gpu"] is True
    stages = {s["name"]: s for s in res["stages"]}
    assert list(stages) == ["environment", "copy", "workloads", "attention"]
    for s in stages.values():
        assert s["ok"], s.get("traceback")
    env = stages["environment"]["result"]
    assert env["gpu"] == "Stand-in GPU" and env["arch"] == "sm_90"
    assert stages["copy"]["result"]["gb_per_s"] > 0
    w = stages["workloads"]["result"]
    assert sorted(w) == ["a", "b", "c"]
    for rec in w.values():
        assert rec["impls"]["cupy"]["correct"], rec
        assert rec["impls"]["nbaccel eager (CuPy)"]["correct"], rec
        assert rec["impls"]["cupy"]["time"]["rounds"] == 5
        assert rec["impls"]["cupy"]["time"]["copy_fraction"] > 0
        assert rec["impls"]["cupy"]["call_time"]["rounds"] == 5
    if not any(n.startswith("nbaccel triton") for rec in w.values() for n in rec["impls"]):
        assert any("Triton backend did not run" in p for p in gc.problems(res))   # never silently missing
    att = stages["attention"]["result"]
    assert att["float32"]["correct"], att["float32"]
    md = gc.markdown(res)
    assert "## Workloads (a)–(c)" in md and "## Attention" in md and "Stand-in GPU" in md
    gc.write(res, str(tmp_path))
    assert json.loads((tmp_path / "gpu_check.json").read_text())["stages"]


def test_a_bare_checkout_is_made_runnable_without_an_install(tmp_path, monkeypatch):
    """(a lent GPU machine cannot reach a package index: no platformdirs, no editable install)"""
    import importlib.util
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "__init__.py").write_text("")
    monkeypatch.setattr(gc, "ROOT", str(tmp_path))
    monkeypatch.delenv("NBACCEL_CACHE_DIR", raising=False)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "nbaccel_kernels" else real(name, *a))
    monkeypatch.setattr(sys, "path", list(sys.path))
    notes = gc.prepare_environment()
    assert os.path.isdir(os.environ["NBACCEL_CACHE_DIR"]) and "nbaccel-gpu-check-" in os.environ["NBACCEL_CACHE_DIR"]
    assert os.readlink(tmp_path / "nbaccel_kernels") == "kernels"
    assert len(notes) == 2 and str(tmp_path) == sys.path[0]
    import shutil
    shutil.rmtree(os.environ["NBACCEL_CACHE_DIR"])
