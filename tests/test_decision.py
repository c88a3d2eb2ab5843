"""The one decision (nbaccel/compiler/replay/decision.py): plain or compiled from measured runs of the
user's own code, and the verdict's arithmetic. Times are given, not measured."""
import pytest

from nbaccel.compiler.replay.decision import (COMPILE_ESTIMATE, PLAIN_WINDOW, PROBES,
                                              RESOLUTION_SECONDS, Decision, fmt_ratio)


def run(d, plain, compiled, compile_seconds=0.02, n=20, recompiles=False, steady=True):
    """Drive ``d`` for ``n`` runs with fixed plain/compiled times; the first compiled run compiles
    (``recompiles``: every one does). ``steady=False``: no compiled run is a median sample (its
    machine code still compiling in the background)."""
    paths = []
    for _ in range(n):
        path = d.next_path()
        paths.append(path)
        if path == "plain":
            d.record("plain", plain)
        else:
            c = compile_seconds if recompiles or not d.has_compiled else 0.0
            d.record("compiled", compiled + c, compile_seconds=c, steady=steady)
    return paths


def test_a_cell_runs_plainly_until_its_runs_have_cost_a_compile():
    d = Decision(first="plain", compile_estimate=0.010)
    paths = run(d, plain=0.003, compiled=0.001, n=5)
    # 3 + 3 + 3 ms < 10 ms: plain; after the 4th (12 ms) it compiles
    assert paths[:4] == ["plain"] * 4 and paths[4] == "compiled"


def test_a_tiny_cell_never_compiles():
    d = Decision(first="plain")
    paths = run(d, plain=2e-6, compiled=1e-6, n=200)
    assert set(paths) == {"plain"}
    v = d.verdict()
    assert v.path == v.choice == "plain" and "not compiled yet" in v.headline
    assert v.saved_seconds == 0.0 and v.compile_seconds == 0.0        # nothing paid, nothing saved


def test_first_compiled_compiles_at_once_then_measures_and_decides():
    d = Decision(first="compiled")
    paths = run(d, plain=0.010, compiled=0.002, n=10)
    assert paths[0] == "compiled"
    assert paths.count("plain") == PROBES           # only the probes ran plainly
    assert d.choice == "compiled" and paths[-1] == "compiled"
    v = d.verdict()
    assert v.ratio == pytest.approx(5.0) and v.headline == "5.00× faster than the plain cell"
    assert v.plain_seconds == 0.010 and v.compiled_seconds == 0.002


def test_a_compiled_choice_times_the_plain_side_again_ever_more_rarely():
    """The plain median is of recent runs: plain runs once after 8, 16, 32, ... compiled runs,
    and a cold first plain run (one-time costs) is left out of the median."""
    d = Decision(first="plain", compile_estimate=0.015)
    d.record("plain", 0.050)                        # cold: rent paid, not a median sample
    paths = run(d, plain=0.010, compiled=0.002, n=80)
    assert d.choice == "compiled"
    assert d.verdict().plain_seconds == pytest.approx(0.010)
    runs, retimed = 0, []
    for p in paths:
        runs += p == "compiled"
        if p == "plain" and runs >= 8:
            retimed.append(runs)
    assert retimed == [8, 8, 16, 16, 32, 32, 64, 64]     # twice each: the first only warms up
    kept = Decision(first="compiled")
    kept.keep_compiled("the plain function returns other types")
    assert set(run(kept, plain=0.010, compiled=0.002, n=40)) == {"compiled"}


def test_the_plain_median_leaves_the_probes_behind_as_retimed_runs_arrive():
    """The probes, made right after a compile, can be slow (a 2048² cell: 330-370 ms, then 230
    ms a few runs later); the plain median is of the last PLAIN_WINDOW plain runs, so the
    retimed runs replace them and the headline follows the plain cell as it runs now."""
    d = Decision(first="compiled")
    plain_times = iter([0.37, 0.33, 0.24] + [0.23] * 10)
    for _ in range(40):
        if d.next_path() == "plain":
            d.record("plain", next(plain_times))
        else:
            c = 0.5 if not d.has_compiled else 0.0
            d.record("compiled", 0.015 + c, compile_seconds=c)
    assert d.choice == "compiled"
    assert d.verdict().plain_seconds == pytest.approx(0.23)
    assert d.verdict().ratio == pytest.approx(0.23 / 0.015)
    assert len(d.plain) == PLAIN_WINDOW


def test_a_retimes_first_plain_run_is_not_a_sample():
    """The first plain run after a streak of compiled runs is cold (a 2048² Game of Life's took
    273 ms against 133-138 ms for the next ones): a retime runs the plain side twice and
    samples the second only, as the probes, made alternately, were."""
    d = Decision(first="compiled")
    run(d, plain=0.135, compiled=0.010, n=10)
    assert d.choice == "compiled"
    n = 0
    while d.next_path() == "compiled":
        d.record("compiled", 0.010)
        n += 1
        assert n < 100
    d.record("plain", 0.273)                          # the cold one
    assert d.next_path() == "plain"
    d.record("plain", 0.133)
    assert d.next_path() == "compiled"
    assert 0.273 not in d.plain and d.verdict().plain_seconds == pytest.approx(0.135)
    assert d.plain_runs == 3 + 2                       # both runs counted as the plain cell's time


def test_slower_compiled_code_runs_plainly_and_says_so():
    d = Decision(first="compiled", what="function")
    run(d, plain=0.001, compiled=0.004, n=9)      # (the compiled side is timed again after 8 plain runs)
    assert d.choice == "plain" and d.next_path() == "plain"
    v = d.verdict()
    assert v.ratio == pytest.approx(0.25) and "slower than the plain function" in v.headline
    assert "runs plainly" in v.headline and "runs plainly" in v.why


def test_the_choice_flips_when_the_compiled_side_falls_behind_and_the_run_says_why():
    d = Decision(first="compiled")
    run(d, plain=0.010, compiled=0.002, n=10)
    assert d.choice == "compiled"
    changed = None
    for _ in range(10):
        d.record("compiled", 0.02)
        changed = changed or d.verdict().changed
    assert d.choice == "plain" and "became slower" in changed
    assert d.verdict().changed is None or d.verdict().changed == changed


def test_within_noise_and_too_short_have_no_ratio():
    d = Decision(first="compiled")
    for p, c in ((1.00e-3, 1.02e-3), (1.10e-3, 0.95e-3), (0.95e-3, 1.08e-3), (1.0e-3, 1.0e-3)):
        d.record("compiled", c)
        d.record("plain", p)
    v = d.verdict()
    assert v.ratio is None and v.note.startswith("within noise") and "same speed" in v.headline
    d = Decision(first="compiled")
    run(d, plain=5e-6, compiled=2e-6, compile_seconds=0.0, n=12)
    v = d.verdict()
    assert max(v.plain_seconds, v.compiled_seconds) < RESOLUTION_SECONDS
    assert v.ratio is None and v.note.startswith("too short to measure")


def test_too_short_is_only_for_runs_under_the_resolution():
    d = Decision(first="compiled")
    run(d, plain=0.060, compiled=0.049, compile_seconds=0.0, n=12)
    assert d.verdict().ratio == pytest.approx(0.060 / 0.049)


def test_time_saved_is_measured_runs_minus_compiles_and_never_more_than_the_plain_time():
    d = Decision(first="compiled")
    run(d, plain=0.010, compiled=0.002, compile_seconds=0.030, n=20)
    v = d.verdict()
    n = v.runs["compiled"]
    assert v.saved_seconds == pytest.approx(n * 0.010 - n * 0.002 - 0.030)
    # what was saved is at most what the compiled runs would have cost plainly
    assert v.saved_seconds <= n * v.plain_seconds
    assert v.compile_seconds == pytest.approx(0.030)


def test_a_failed_compile_runs_plainly():
    d = Decision(first="compiled")
    d.compile_failed("too many graph breaks")
    assert d.next_path() == "plain" and d.verdict().why == "too many graph breaks"


def test_the_default_compile_estimate_and_formatting():
    assert Decision().compile_estimate == COMPILE_ESTIMATE
    assert fmt_ratio(12.34) == "12.3×" and fmt_ratio(0.043) == "0.043×" and fmt_ratio(1.5) == "1.50×"
    with pytest.raises(ValueError):
        Decision(first="eager")


def test_the_report_display_is_not_part_of_a_compiled_runs_time():
    """A plain run made by the magic shows a report too (its display is in the magic's overhead,
    taken out); a compiled run's display is taken out as well (cell_clock.py)."""
    from nbaccel.magics.cell_clock import CellClock

    class Shell:
        class events:
            @staticmethod
            def register(*args):
                pass
    clock = CellClock(Shell())
    d = Decision(first="compiled")
    d.record("compiled", 0.05, compile_seconds=0.05)
    d.record("compiled", 0.002)
    clock.pre()
    clock.note(d, "compiled", 0.002, 0.002)
    clock.shown(0.5)                                # a slow widget display
    clock.post()
    assert d.compiled[-1] < 0.1


def _unsettled(d, plain, compiled, n, compile_seconds=0.5, recompiles=True):
    """Drive ``d`` where no compiled run is a sample: each re-traces (``recompiles``: compiles
    again) or its machine code is still compiling in the background."""
    return run(d, plain, compiled, compile_seconds, n, recompiles=recompiles, steady=False)


def test_a_compiled_side_that_never_settles_and_costs_more_than_a_compile_is_given_up():
    # a cell that reads the clock re-traces every run: 70 s compiled against 1 s plainly
    d = Decision(first="plain", compile_estimate=0.5)
    paths = _unsettled(d, plain=1.0, compiled=70.0, n=8)
    first = paths.index("compiled")
    assert paths[first + 1:] == ["plain"] * (len(paths) - first - 1)   # one compiled run, then plain
    v = d.verdict()
    assert v.choice == "plain" and "did not settle" in v.why and "runs plainly" in v.why
    assert d.unsettled_excess == pytest.approx(69.0)


def test_unsettled_runs_that_cost_less_than_a_compile_keep_measuring():
    # the first runs while the machine code compiles in the background: a little slower than
    # plain, by less than the compile cost in all: the compiled side is still measured
    d = Decision(first="plain", compile_estimate=0.5)
    paths = _unsettled(d, plain=0.10, compiled=0.12, n=12, compile_seconds=0.6, recompiles=False)
    assert d.choice is None and paths[-1] == "compiled"
    assert d.unsettled_excess < 0.6


def test_a_compiled_side_that_recompiles_every_run_pays_its_recompiles():
    # every run compiles again (0.4 s) and runs at 0.05 s against 0.1 s plainly: faster, but
    # the recompiles are what the compiled side costs; after two of them it runs plainly
    d = Decision(first="plain", compile_estimate=0.5)
    paths = _unsettled(d, plain=0.10, compiled=0.05, n=12, compile_seconds=0.4)
    assert d.choice == "plain" and paths.count("compiled") == 3 and paths[-1] == "plain"


def test_unsettled_runs_faster_than_plain_cost_nothing():
    d = Decision(first="plain", compile_estimate=0.1)
    _unsettled(d, plain=1.0, compiled=0.2, n=30)
    assert d.unsettled_excess == 0.0 and d.choice != "plain"


def test_a_plain_choice_from_noisy_probes_is_timed_again_and_turns_compiled():
    """Three probes of the compiled side that a busy machine slowed chose plain; the compiled
    side is timed again after RECHECK_AFTER plain runs (twice, the first run cold and not a
    sample), turns compiled when faster, and the verdict says why."""
    from nbaccel.compiler.replay.decision import RECHECK_AFTER
    d = Decision(first="compiled")
    noisy = iter([0.010, 0.012, 0.011])              # the probes: spikes, 10 ms against 1 ms
    paths = []
    while d.choice is None:
        path = d.next_path()
        paths.append(path)
        if path == "plain":
            d.record("plain", 0.001)
        elif not d.has_compiled:
            d.record("compiled", 0.5, compile_seconds=0.49)
        else:
            d.record("compiled", next(noisy))
    assert d.choice == "plain" and d._recheck_at == max(RECHECK_AFTER, 2 * d.plain_runs)
    runs = []
    for _ in range(40):
        path = d.next_path()
        runs.append(path)
        d.record(path, 0.001 if path == "plain" else 0.0003)
        if d.choice == "compiled":
            break
    assert runs[-2:] == ["compiled", "compiled"] and runs.count("compiled") == 2
    v = d.verdict()
    assert v.choice == "compiled" and "timed again" in v.why and v.changed
    assert list(d.compiled) == [0.0003]               # the stale probes are gone


def test_a_plain_choice_that_stays_slower_is_rechecked_at_doubling_intervals():
    d = Decision(first="compiled")
    run(d, plain=0.001, compiled=0.002, n=8)
    assert d.choice == "plain"
    first = d._recheck_at
    paths = run(d, plain=0.001, compiled=0.002, n=4 * first)
    assert d.choice == "plain"
    # two compiled runs at each recheck: after `first` plain runs, then after twice as many
    assert paths.count("compiled") == 4 and d._recheck_at == 4 * first


def test_a_plain_choices_headline_holds_still_until_it_is_re_examined():
    """The headline of a plain choice shows the runs it was decided on: the plain runs that
    follow, noisy as they are (one in three at 40x its median here), do not move it. A recheck
    re-examines it, and only then may its figures change."""
    d = Decision(first="compiled")
    run(d, plain=0.0005, compiled=0.001, n=8)
    assert d.choice == "plain"
    decided = d.verdict()
    heads = set()
    for i in range(d._recheck_at - d.plain_runs):
        assert d.next_path() == "plain"
        d.record("plain", 0.020 if i % 3 == 0 else 0.0004 + 1e-5 * i)
        v = d.verdict()
        heads.add(v.headline)
        assert (v.plain_seconds, v.plain_spread) == (decided.plain_seconds, decided.plain_spread)
    assert heads == {decided.headline} and "0.50× slower" in decided.headline
    for _ in range(2):                               # the recheck: two compiled runs, one sampled
        assert d.next_path() == "compiled"
        d.record("compiled", 0.0011)
    v = d.verdict()
    assert d.choice == "plain" and v.plain_seconds != decided.plain_seconds


def test_a_compiled_side_given_up_is_not_timed_again():
    d = Decision(first="plain", compile_estimate=0.5)
    _unsettled(d, plain=1.0, compiled=70.0, n=8)
    assert d.choice == "plain" and d._recheck_at is None
    assert set(run(d, plain=1.0, compiled=0.1, n=100)) == {"plain"}
    d = Decision(first="compiled")
    d.compile_failed("a capture error")
    assert set(run(d, plain=1.0, compiled=0.1, n=100)) == {"plain"}
