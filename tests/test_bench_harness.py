"""The benchmark harness's logic: ratio and spread math, verdicts, round interleaving, the peer
worker's protocol and the shape of results.json / results.md. No wall-clock assertions: every
time here is either made up or only checked to be a positive number."""
import io
import json

import numpy as np
import pytest

from bench import report, rounds, run, threads, timing
from bench.peer_worker import PeerWorker, serve


# -- ratio and spread math -------------------------------------------------------------------------
def test_quantile_interpolates_between_order_statistics():
    assert timing.quantile([3, 1, 2], 0.5) == 2
    assert timing.quantile([1, 2, 3, 4], 0.5) == 2.5
    assert timing.quantile([1, 2, 3, 4, 5], 0.25) == 2
    assert timing.quantile([10], 0.75) == 10
    with pytest.raises(ValueError):
        timing.quantile([], 0.5)


def test_ratio_stats_pairs_rounds_not_medians():
    # drift: both slow down 10x in the last rounds; the per-round ratio stays exactly 2
    base = [2.0, 2.0, 20.0, 20.0, 20.0]
    fast = [1.0, 1.0, 10.0, 10.0, 10.0]
    st = timing.ratio_stats(base, fast)
    assert st["median"] == 2.0 and st["min"] == st["max"] == 2.0
    assert st["spread"] == 0.0 and st["rounds"] == 5
    # the ratio of the medians says 10 / 1 = 10 here; round by round the two were mostly even
    st = timing.ratio_stats([1, 1, 10, 10, 10], [1, 1, 1, 10, 10])
    assert st["median"] == 1 and st["min"] == 1 and st["max"] == 10


def test_ratio_stats_spread_is_iqr_over_median():
    st = timing.ratio_stats([1, 2, 3, 4, 5], [1, 1, 1, 1, 1])
    assert (st["q1"], st["median"], st["q3"]) == (2, 3, 4)
    assert st["spread"] == pytest.approx(2 / 3)


@pytest.mark.parametrize("base,other", [([], [1.0]), ([1.0], []), ([1.0, 2.0], [1.0]), ([1.0], [0.0])])
def test_ratio_stats_none_without_usable_rounds(base, other):
    assert timing.ratio_stats(base, other) is None


def test_time_stats():
    st = timing.time_stats([0.3, 0.1, 0.2, 0.4, 0.5])
    assert (st["min"], st["median"], st["max"], st["runs"]) == (0.1, 0.3, 0.5, 5)
    assert st["q1"] == pytest.approx(0.2) and st["q3"] == pytest.approx(0.4)


# -- verdicts --------------------------------------------------------------------------------------
def _st(median, spread):
    return {"median": median, "spread": spread}


@pytest.mark.parametrize("st,need,state,met", [
    (_st(3.5, 0.05), 3.0, "met", True),
    (_st(2.5, 0.05), 3.0, "short", False),
    (_st(3.0, 0.0), 3.0, "met", True),              # the target is "at least"
    (_st(3.5, 0.20), 3.0, "too wide", True),        # the limit itself is too wide
    (_st(2.0, 0.50), 3.0, "too wide", False),       # a wide short one is not judged either
    (None, 3.0, "not measured", None),
])
def test_verdict_uses_the_median_and_refuses_a_wide_spread(st, need, state, met):
    v = timing.verdict(st, need)
    assert v["state"] == state and v["met"] is met


# -- rounds -------------------------------------------------------------------------------------------
class FakeTimer:
    def __init__(self, name, log, seconds=1.0):
        self.name, self.log, self.seconds = name, log, seconds

    def __call__(self, keep_last):
        self.log.append(self.name)
        return self.seconds


def test_rounds_interleave_and_rotate():
    log = []
    timers = {n: FakeTimer(n, log) for n in "abc"}
    times = rounds.run_rounds(timers, rounds=3, keep_last=False, warmup=1)
    assert log == list("abc" "bca" "cab" "abc")      # warm-up round first, then rotating starts
    assert all(times[n] == [1.0, 1.0, 1.0] for n in "abc")


def test_local_timer_keeps_the_previous_output_alive_only_in_fresh_mode():
    seen = []
    state = {"n": 0}

    def fn():
        state["n"] += 1
        seen.append(t.last)      # what the timer holds while the call runs
        return np.full(4, state["n"])
    t = rounds.Local(fn)
    assert t(keep_last=True) >= 0 and t(keep_last=True) >= 0
    assert seen[0] is None and seen[1][0] == 1       # output 1 alive during call 2
    t(keep_last=False)
    assert seen[2] is None and t.last is None        # dropped before and after the call
    assert rounds.KEEP_LAST == {"fresh": True, "reused": False}


def test_run_modes_switches_every_worker_and_goes_back_to_fresh():
    class W:
        def __init__(self):
            self.modes = []

        def set_alloc_mode(self, m):
            self.modes.append(m)
            return True
    w = W()
    res = rounds.run_modes({"a": FakeTimer("a", [])}, 2, workers=[w])
    assert list(res["times"]) == ["fresh", "reused"] and res["times"]["reused"]["a"] == [1.0, 1.0]
    assert w.modes == ["fresh", "reused", "fresh"]


def test_alloc_modes():
    with pytest.raises(ValueError):
        threads.set_alloc_mode("warm")
    for m in ("reused", "fresh"):
        assert threads.set_alloc_mode(m) in (True, False)


def test_pin_env_sets_every_library_variable():
    env = {}
    threads.pin_env(3, env)
    assert {env[k] for k in threads.THREAD_ENV} == {"3"}
    assert "NUMBA_NUM_THREADS" in env and "OPENBLAS_NUM_THREADS" in env and "OMP_NUM_THREADS" in env


# -- the worker protocol ----------------------------------------------------------------------------
def _serve(*requests, monkeypatch):
    monkeypatch.setenv("NBACCEL_BENCH_NO_TORCH", "1")
    out = io.StringIO()
    serve(io.StringIO("".join(json.dumps(r) + "\n" for r in requests)), out, None)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_worker_protocol_in_process(monkeypatch):
    cfg = {"rows": 8, "cols": 4}
    replies = _serve({"op": "prepare", "impl": "numpy eager", "workload": "selftest", "config": cfg},
                     {"op": "call", "impl": "numpy eager", "keep_last": True},
                     {"op": "alloc", "mode": "reused"},
                     {"op": "call", "impl": "numpy eager", "keep_last": False},
                     {"op": "alloc", "mode": "fresh"},
                     {"op": "prepare", "impl": "jax", "workload": "selftest", "config": cfg},
                     {"op": "prepare", "impl": "numpy eager", "workload": "zz", "config": cfg},
                     {"op": "call", "impl": "never prepared"},
                     {"op": "frobnicate"},
                     {"op": "quit"},
                     {"op": "call", "impl": "numpy eager"},      # after quit: never answered
                     monkeypatch=monkeypatch)
    hello, prep, c1, a1, c2, a2, bad_impl, bad_wl, bad_call, bad_op, bye = replies
    assert hello["ready"] and hello["torch"] is None and "env" in hello["threads"]
    assert prep == {"ok": True, "info": {}}
    assert c1["seconds"] > 0 and c2["seconds"] > 0
    assert a1["ok"] in (True, False) and "ok" in a2
    for r in (bad_impl, bad_wl, bad_call, bad_op):
        assert r["ok"] is False and r["failed"] and r["status"].startswith("error")
    assert "jax" in bad_impl["status"]
    assert bye == {"ok": True}


def test_worker_reports_a_wrong_result(monkeypatch):
    from bench import workloads
    wl = workloads.SELFTEST
    monkeypatch.setattr(wl, "numpy_fn", lambda x: x + 1)
    calls = {"n": 0}

    def sometimes_wrong(x):
        calls["n"] += 1
        return x + (1 if calls["n"] > 1 else 2)     # the reference call is right, the checked one not
    monkeypatch.setattr(wl, "numpy_fn", sometimes_wrong)
    (_, prep, _) = _serve({"op": "prepare", "impl": "numpy eager", "workload": "selftest",
                           "config": {"rows": 4, "cols": 4}}, {"op": "quit"}, monkeypatch=monkeypatch)
    assert prep["ok"] is False and prep["status"].startswith("WRONG RESULT")


def test_worker_process_round_trip():
    """A real worker process: thread counts pinned in its environment, rounds driven over the pipe."""
    with PeerWorker(1, torch=False) as w:
        assert w.hello["ready"] and w.hello["threads"]["env"]["NUMBA_NUM_THREADS"] == "1"
        assert w.hello["pid"] != __import__("os").getpid()
        assert w.prepare("numpy eager", "selftest", {"rows": 16, "cols": 16}) == {"ok": True, "info": {}}
        timers = {"remote": w.remote("numpy eager"), "local": rounds.Local(lambda: np.ones(3))}
        res = rounds.run_modes(timers, 2, workers=[w])
        assert all(len(res["times"][m]["remote"]) == 2 and min(res["times"][m]["remote"]) > 0
                   for m in ("fresh", "reused"))
        assert w.prepare("torch eager", "selftest", {"rows": 4, "cols": 4})["ok"] is False
        w.release()
    assert w.proc.poll() is not None


# -- results.json / results.md ----------------------------------------------------------------------
def _variant(times_fresh, times_reused=None, **extra):
    modes = {"fresh": dict(timing.time_stats(times_fresh), times=times_fresh),
             "reused": dict(timing.time_stats(times_reused or times_fresh), times=times_reused or times_fresh)}
    return dict({"modes": modes, "median": modes["fresh"]["median"], "min": min(times_fresh),
                 "max": max(times_fresh), "runs": len(times_fresh)}, **extra)


def _results(judged_times):
    variants = {"numpy eager": _variant([10.0] * 5),
                "nbaccel eager": _variant([9.0] * 5),
                "nbaccel numba tier": _variant(judged_times, [2.0] * 5, kernels=1, first_call=0.5),
                "torch eager": {"status": "not installed"},
                "torch.compile": _variant([5.0] * 5)}
    report.add_ratios(variants)
    res = {"machine": {"cpu": "test", "cores": 2, "numpy": "x", "numba": "y", "torch": "z", "env": {},
                       "threads": {"numba": 2, "torch": 2, "blas": 2}, "peer_worker_pid": 1},
           "config": {"rounds": 5, "threads": 2, "shape_note": "test"},
           "workloads": {"b": {"title": "row softmax", "variants": variants, "max_kernels": 1}},
           "suites": {}, "failures": []}
    res["targets"] = report.targets(res)
    return res


def test_ratios_per_mode_and_the_judged_mode():
    res = _results([2.5] * 5)
    v = res["workloads"]["b"]["variants"]["nbaccel numba tier"]
    assert v["ratios"]["fresh"]["vs_numpy"]["median"] == 4.0
    assert v["ratios"]["reused"]["vs_numpy"]["median"] == 5.0
    assert v["vs_numpy"] == 4.0 and v["vs_torch_compile"] == 2.0 and v["vs_torch_eager"] is None
    assert res["workloads"]["b"]["variants"]["torch eager"] == {"status": "not installed"}


def test_targets_judge_the_median_ratio():
    ts = _results([2.5] * 5)["targets"]
    by = {t["target"]: t for t in ts}
    assert by[">= 3.0x NumPy eager"]["state"] == "met" and by[">= 3.0x NumPy eager"]["measured"] == 4.0
    assert by[">= 1.2x torch.compile"]["met"] is True
    assert by[">= 3.0x NumPy eager"]["other_modes"] == {"reused": 5.0}
    assert by["<= 1 kernel"]["met"] is True


def test_results_md_says_when_the_spread_is_too_wide():
    res = _results([1.0, 2.0, 5.0, 9.0, 10.0])
    t = next(t for t in res["targets"] if t["target"] == ">= 3.0x NumPy eager")
    assert t["state"] == "too wide" and t["spread"] >= timing.SPREAD_LIMIT
    md = report.markdown(res)
    assert "spread too wide to judge (median" in md
    assert "median of the per-round ratios" in md and "2 thread(s)" in md
    json.loads(json.dumps(res))        # results.json is plain JSON
    good = report.markdown(_results([2.5] * 5))
    assert "spread too wide" not in good.split("### Steady")[0].split("### Targets")[1]
    assert "**yes**" in good


def test_steady_table_has_both_modes_and_spread():
    md = report.steady_table(_results([2.5] * 5))
    assert "reused outputs: median ms" in md
    assert "4.00x (0%)" in md           # vs NumPy, with its spread
    assert "not installed" in md


def test_suite_hooks():
    for name in ("step", "small_cells", "export", "func", "gpu_check", "attention", "cells"):
        assert name in run.SUITES and name in run.DEFAULT_ONLY
    assert run.suite_available("attention")
    assert not run.suite_available("no_such_suite_here")


def test_render_appends_suites_and_skips():
    res = _results([2.5] * 5)
    res["suites"] = {"step": {"skipped": "bench/step.py is not in this checkout"}}
    md = run.render(res)
    assert md.startswith(report.markdown(res)) and "## step" in md and "skipped: bench/step.py" in md



def test_plain_process_column_has_no_thread_settings_and_reads_the_model_bytes(monkeypatch):
    from bench import plain
    from nbaccel.quant import model_bytes
    # (no NUMBA_NUM_THREADS here: numba re-reads its variables and refuses a change once running)
    for k in ("OMP_WAIT_POLICY", "NUMBA_DISABLE_PERFORMANCE_WARNINGS", "OPENBLAS_NUM_THREADS",
              "MKL_NUM_THREADS"):
        monkeypatch.setenv(k, "1")
    env = plain.plain_env()
    assert not [k for k in env if k.startswith(plain.SCRUBBED)] and plain.ROOT in env["PYTHONPATH"]
    # the bandwidth line reads exactly the bytes the model's layers hold
    for kind in ("float32", "int8", "int4", "2:4", "int8-dynamic"):
        m = plain._convert(plain._models(2, 256, 0), kind)
        assert type(m[0]).__name__ == {"float32": "Linear", "2:4": "SparseSemiStructuredLinear"}.get(
            kind, "QuantizedLinear"), kind
        assert sum(a.nbytes for a in plain._weights(m)) == model_bytes(m), kind



def test_plain_process_pauses_before_every_timed_kind(monkeypatch):
    """Each kind's timed calls start SETTLE_S after the previous kind's: without the pause the
    kind after float32 ran inside OpenBLAS's spin (int8 decode 2x slower than 0.3 s later)."""
    from bench import plain
    events = []
    monkeypatch.setattr(plain.time, "sleep", lambda s: events.append(("sleep", s)))
    real = plain.time.perf_counter
    monkeypatch.setattr(plain.time, "perf_counter", lambda: events.append(("t",)) or real())
    out = plain.child({"layers": 1, "dim": 128, "batch": 4, "rounds": 2, "calls": 1})
    timed = 2 * (2 * 4 + 2 * 3)      # rounds x (models and their bandwidth reads) per part
    assert events.count(("sleep", plain.SETTLE_S)) == timed
    # every timing starts right after a pause: (sleep, t-start, t-stop)
    starts = [i for i, e in enumerate(events) if e == ("sleep", plain.SETTLE_S)]
    assert all(events[i + 1] == ("t",) and events[i + 2] == ("t",) for i in starts)
    assert out["decode"]["seconds"]["int8"]["rounds"] == 2


def test_eager_suite_ops_agree_and_render():
    """bench/eager.py: each per-op workload computes the same values in nbaccel and NumPy,
    and a results dict renders (made-up times: no wall-clock assertion)."""
    import nbaccel as nb
    from bench import eager
    for name in eager.OPS:
        xa, ya = eager._inputs("numpy", np, False)
        x, y = eager._inputs("nbaccel", nb, True)
        got, want = eager.op_fn(name, "nbaccel")(x, y), eager.op_fn(name, "numpy")(xa, ya)
        np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-5, atol=1e-6)
    st = {"median": 1e-5, "q1": 1e-5, "q3": 1e-5, "min": 1e-5, "max": 1e-5, "runs": 3}
    ratio = {"median": 1.5, "q1": 1.4, "q3": 1.6, "min": 1.3, "max": 1.7, "spread": 0.13,
             "rounds": 3}
    row = {"nbaccel": st, "torch": st, "numpy": st, "ratio_vs_torch": ratio}
    ops = {n: row for n in eager.OPS + ("chain100",)}
    res = {"threads": 2, "rounds": 3, "inner": 20, "quick": True, "torch": "x",
           "load_average": (1.0, 1.0, 1.0),
           "per_op": {"no_grad": {"ops": ops, "geomean_vs_torch": 1.5},
                      "autograd": {"ops": ops, "geomean_vs_torch": 1.5}},
           "steps": {k: dict(row, config={}) for k in ("mlp", "cnn", "gpt")},
           "notebook11": dict(row, batches=2)}
    res["targets"] = eager._targets(res)
    md = eager.markdown(res)
    assert "1.50x (1.40-1.60, spread 13%)" in md and "| softmax | 10.0 |" in md
    assert res["targets"]["GPT step"]["met"] and "eager" in run.SUITES
    part = {k: v for k, v in res.items() if k not in ("per_op", "notebook11", "targets")}
    part["steps"] = {"cnn": res["steps"]["cnn"]}          # what `--only cnn` leaves
    assert list(eager._targets(part)) == ["CNN step"]
    assert "not run (--only)" in eager.markdown(part) and "softmax" not in eager.markdown(part)


def test_eager_one_thread_mode_times_cpu_not_waiting(monkeypatch):
    """bench.eager --one-thread: a timer of process CPU time, so a step descheduled by another
    process's load is not charged for the wait (a sleep stands in for it), and says so."""
    import time
    from bench import eager
    monkeypatch.setattr(eager, "ONE_THREAD", True)
    timer = eager._timer(lambda: time.sleep(0.05))
    # (process CPU time counts every thread: OpenBLAS's workers spin ~0.1 s after an earlier
    # test's matmul, and a background compile may run, so wait for both and keep the least
    # disturbed of three readings)
    from nbaccel.compiler.runtime.compile_thread import _COMPILER
    _COMPILER.wait()
    time.sleep(0.3)
    assert isinstance(timer, eager._CpuTime) and min(timer(False) for _ in range(3)) < 0.02
    assert eager._threads() == 1
    monkeypatch.setattr(eager, "ONE_THREAD", False)
    assert eager._timer(lambda: time.sleep(0.05))(False) >= 0.05
    res = {"threads": 1, "cpu_time": True, "rounds": 3, "inner": 20, "quick": True,
           "torch": None, "load_average": (1.0, 1.0, 1.0), "steps": {}}
    assert "(1 threads, process CPU time, 3 interleaved rounds" in eager.markdown(res)


def test_first_run_and_headline_suites_render_their_figures():
    from bench import first_run, headline
    assert "first_run" in run.SUITES and "headline" in run.SUITES
    assert first_run._plain_cell("%%compile --now\ny = x + 1\n%nbaccel status\n") == "y = x + 1\n"
    assert first_run._plain_cell("%load_ext nbaccel\n") is None
    cells = first_run.notebook_cells("01-quickstart")
    assert cells and not any(line.lstrip().startswith("%") for c in cells for line in c.splitlines())
    t = {"median": 1.0, "min": 0.9, "max": 1.2}
    nb = {"cells": 3, "rounds": 3, "plain1": t, "plain2": t, "comp1": dict(t, median=1.1), "comp2": t,
          "first_ratio": 1.1, "second_ratio": 1.0}
    md = first_run.markdown({"policy": "plain", "notebooks": {"01": nb},
                             "total": {"first_ratio": 1.1, "second_ratio": 1.0, "plain1": 1.0, "comp1": 1.1,
                                       "plain2": 1.0, "comp2": 1.0}})
    assert "| 01 | 3 |" in md and "**1.10×**" in md and "<= 1.25x" in md
    cell = {"cell": "life", "n": 256, "plain_median": 2e-3, "compiled_median": 1e-3, "outside_ratio": 2.0,
            "outside_spread": [1.5, 2.5], "headline": "2.20× faster than the plain cell", "agreement": 1.1,
            "kernels": 1}
    md = headline.markdown({"rounds": 5, "cells": [cell]})
    assert "| life 256² | 2.00 ms | 1.00 ms | 2.00× (1.50–2.50) | 2.20× faster than the plain cell | 1.10 | 1 |" in md
