"""The differential fuzzer's own tests: the generator is deterministic and covers every
construct, and the checker catches each kind of mismatch (a checker that passes everything
would make the fuzz tests unable to fail)."""
import collections

import numpy as np
import pytest

from fuzz import check as check_mod
from fuzz.check import check, compare, normalise
from fuzz.programs import Input, Program, Statement, generate
from fuzz.rules import RULES, WEIGHTS
from fuzz.shrink import shrink

PROGRAMS = [generate(s) for s in range(400)]


def test_generation_is_deterministic():
    for seed in (0, 7, 12345):
        a, b = generate(seed), generate(seed)
        assert a.source() == b.source()
        for x, y in zip(a.arrays(), b.arrays()):
            assert x.dtype == y.dtype and np.array_equal(x, y)


def test_every_rule_appears_and_weights_cover_rules():
    assert set(WEIGHTS) == set(RULES)
    seen = collections.Counter(s.rule for p in PROGRAMS for s in p.statements)
    assert set(seen) == set(RULES), set(RULES) - set(seen)


def test_programs_cover_shapes_dtypes_and_outcomes():
    inputs = [i for p in PROGRAMS for i in p.inputs]
    assert {len(i.shape) for i in inputs} >= {0, 1, 2, 3, 4}
    assert any(0 in i.shape for i in inputs) and any(1 in i.shape for i in inputs)
    assert {i.dtype for i in inputs} == {"float32", "float64", "int32", "int64", "bool"}
    raised = collections.Counter()
    for p in PROGRAMS:
        _, exc = check_mod._call(p.function(), p.arrays())
        raised[type(exc).__name__ if exc else None] += 1
    assert raised[None] > 0.85 * len(PROGRAMS)          # most programs run
    assert len(raised) >= 3                              # some end on NumPy's exception
    assert any(len(p.outputs) > 1 for p in PROGRAMS)
    assert any(p.single for p in PROGRAMS)


def test_rule_weights_switch_constructs_off():
    only = {k: (1 if k == "reduce" else 0) for k in WEIGHTS}
    for seed in range(30):
        assert {s.rule for s in generate(seed, only).statements} <= {"reduce"}
    with pytest.raises(ValueError):
        generate(0, {k: 0 for k in WEIGHTS})


def test_programs_never_mutate_inputs():
    for p in PROGRAMS[:200]:
        arrays = p.arrays()
        check_mod._call(p.function(), arrays)
        for before, after in zip(p.arrays(), arrays):
            assert np.array_equal(before, after, equal_nan=True)


def test_reproducer_is_a_runnable_script():
    p = next(p for p in PROGRAMS if len(p.inputs) >= 2 and any(0 in i.shape for i in p.inputs))
    script = p.reproducer("numpy")
    assert script.rstrip().endswith(f"backend='numpy')({', '.join(i.name for i in p.inputs)}))")
    body = "\n".join(line for line in script.splitlines() if not line.startswith("print("))
    namespace = {}
    exec(compile(body, "<repro>", "exec"), namespace)
    for i, a in zip(p.inputs, p.arrays()):
        assert namespace[i.name].shape == i.shape and namespace[i.name].dtype == i.dtype
        assert np.array_equal(namespace[i.name], a, equal_nan=True)
    assert callable(namespace["program"])


@pytest.mark.parametrize("got, want, klass", [
    (np.ones(3, np.float32), np.ones(3, np.float64), "wrong dtype"),
    (np.ones((3, 1)), np.ones(3), "wrong shape"),
    (np.float64(1.0), np.array(1.0), "wrong type"),
    (np.array([1.0, 2.0]), np.array([1.0, 2.5]), "wrong value"),
    (np.array([1.0, np.nan]), np.array([1.0, 1.0]), "wrong value"),
    (np.array([np.inf]), np.array([-np.inf]), "wrong value"),
    (np.array([1, 2]), np.array([1, 3]), "wrong value"),
    ((np.ones(2),), (np.ones(2), np.ones(2)), "wrong number"),
    ([np.ones(2)], (np.ones(2),), "wrong type"),
    (np.int64(1), np.int8(1), "wrong dtype"),
])
def test_compare_catches_each_mismatch(got, want, klass):
    outcome = compare(got, want)
    assert not outcome.ok and outcome.klass.startswith(klass), outcome


def test_compare_accepts_equal_results_within_tolerance():
    assert compare((np.float32(1.0), np.array([np.nan, 1.0])),
                   (np.float32(1.0), np.array([np.nan, 1.0]))).ok
    assert compare(np.array([1.0 + 1e-6], np.float32), np.array([1.0], np.float32)).ok
    assert not compare(np.array([1.0 + 1e-6]), np.array([1.0])).ok     # float64 is tighter


def test_a_float64_result_computed_in_float32_has_float32s_tolerance():
    # NumPy's own float32 var of one array in C and in F order differs in the last bit (its sums
    # follow the layout): a float64 result made from it is only as exact as float32
    a = np.array([-0.75, -1.25, 0.5, 0.25, -0.5, -2.0, 0.75, -1.25, -1.25, -0.25, -0.5, -1.0],
                 np.float32).reshape(4, 3)
    c, f = np.var(a, axis=(1, 0)), np.var(np.asfortranarray(a), axis=(1, 0))
    got, want = c - np.array([1.5]), f - np.array([1.5])
    assert c != f and not compare(got, want).ok
    through_f32 = _program(["t0 = np.var(a0, axis=(1, 0))"], [Input("a0", (4, 3), "float32", 5)], ["t0"])
    assert compare(got, want, floor=check_mod._float32_floor(through_f32)).ok
    in_f64 = _program(["t0 = np.var(a0)"], [Input("a0", (4, 3), "float64", 5)], ["t0"])
    assert check_mod._float32_floor(in_f64) == 0.0


def _program(code_lines, inputs, outputs):
    stmts = tuple(Statement(c, "test") for c in code_lines)
    return Program(1, tuple(inputs), stmts, tuple(outputs))


def test_check_catches_a_wrong_backend(monkeypatch):
    """A fake nb.compile that gets a value wrong, drops an exception or raises another type."""
    import nbaccel as nb
    p = _program(["t0 = a0 * 2"], [Input("a0", (3,), "float64", 5)], ["t0"])
    monkeypatch.setattr(nb, "compile", lambda fn, backend: lambda *a: (a[0] * 3,))
    assert check(p, "numpy").klass.startswith("wrong value")
    bad = _program(["t0 = a0.max(axis=0)"], [Input("a0", (0,), "float64", 5)], ["t0"])
    monkeypatch.setattr(nb, "compile", lambda fn, backend: lambda *a: (a[0],))
    assert check(bad, "numpy").klass.startswith("returned where NumPy raised ValueError")

    def raises(*a):
        raise TypeError("nope 3")
    monkeypatch.setattr(nb, "compile", lambda fn, backend: raises)
    assert check(bad, "numpy").klass == "raised TypeError where NumPy raised ValueError: nope N"
    assert check(p, "numpy").klass == "TypeError: nope N"

    def mutates(*a):
        a[0][...] = 0
        return (a[0] * 2,)
    monkeypatch.setattr(nb, "compile", lambda fn, backend: mutates)
    assert check(p, "numpy").klass == "mutated an input"


def test_failure_classes_strip_names_and_shapes():
    a = normalise(AssertionError("internal: <Node %8 subtract f32[3, 2, 4]> cannot start: input %6 of shape (3, 1, 4)"))
    b = normalise(AssertionError("internal: <Node %2 add f64[5, 4]> cannot start: input a0 of shape (5,)"))
    assert a == b
    assert normalise(NameError("name 'o0' is not defined")) == normalise(NameError("name 'o12' is not defined"))


def test_shrink_keeps_the_failure_class(monkeypatch):
    import nbaccel as nb

    def wrong_on_sum(fn):
        def run(*a):
            out = fn(*a)
            return tuple(o + 1 if "sum" in fn.__code__.co_names else o for o in out)
        return run
    monkeypatch.setattr(nb, "compile", lambda fn, backend: wrong_on_sum(fn))
    p = _program(["t0 = a0 + 1", "t1 = t0 * 2", "t2 = a0.sum(axis=0)", "t3 = t1 - 1"],
                 [Input("a0", (3, 4), "float64", 2)], ["t3", "t2"])
    klass = check(p, "numpy").klass
    assert klass.startswith("wrong value")
    small = shrink(p, "numpy", klass)
    assert [s.code for s in small.statements] == ["t2 = a0.sum(axis=0)"]
    assert small.outputs == ("t2",) and small.inputs[0].shape == (1, 1)


def test_check_wants_numpys_read_only_message(monkeypatch):
    """Where NumPy refuses a write into a read-only view, its very words are the contract."""
    import nbaccel as nb
    p = _program(["t0 = np.broadcast_to(a0, (2, 3))", "t0[0] = 1"], [Input("a0", (3,), "float64", 5)], ["t0"])

    def worded(msg):
        def run(*a):
            raise ValueError(msg)
        return lambda fn, backend: run
    monkeypatch.setattr(nb, "compile", worded("output array is read-only"))
    assert check(p, "numpy").klass.startswith("worded otherwise than NumPy")
    monkeypatch.setattr(nb, "compile", worded("assignment destination is read-only"))
    assert check(p, "numpy").ok
