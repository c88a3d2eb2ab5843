"""Differential testing: hypothesis builds random programs over the primitives (broadcasting,
dtypes, reductions, slicing, matmul); each runs eagerly and compiled on every CPU backend.
`make fuzz` runs thousands of examples; `make test` a few."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nbaccel as nb

# (rows, cols) domains: square ones (a (C,) vector could be read per row or per column) and
# single-column ones (element and row values have the same shape) are the tricky cases
DOMAINS = [(6, 5), (4, 4), (5, 1), (1, 3)]


def shapes_for(R, C):
    return [(R, C), (C,), (R, 1), (), (1, C), (R,)]
UNARY = [
    ("exp", lambda x: (x.clip(-10, 10)).exp()),
    ("tanh", lambda x: x.tanh()),
    ("neg", lambda x: -x),
    ("abs", lambda x: x.abs()),
    ("sqrt", lambda x: (x.abs() + 1).sqrt()),
    ("sin", lambda x: x.sin()),
    ("square", lambda x: x * x),
    ("scale", lambda x: x * 0.5 + 1),
]
BINARY = [
    ("add", lambda a, b: a + b),
    ("sub", lambda a, b: a - b),
    ("mul", lambda a, b: a * b),
    ("div", lambda a, b: a / (b.abs() + 1)),
    ("max", lambda a, b: nb.maximum(a, b)),
    ("min", lambda a, b: nb.minimum(a, b)),
    ("where", lambda a, b: nb.where(a > b, a, b)),
]
REDUCE = [
    ("sum-1", lambda x: x.sum(axis=-1, keepdims=True) if x.ndim else x),
    ("max-1", lambda x: x.amax(axis=-1, keepdims=True) if x.ndim else x),
    ("mean-1", lambda x: x.mean(axis=-1, keepdims=True) if x.ndim else x),
    ("sum0", lambda x: x.sum(axis=0) if x.ndim else x),
    ("sumall", lambda x: x.sum()),
]
MOVE = [
    ("T", lambda x: x.T),
    ("slice", lambda x: x[..., ::2] if x.ndim else x),
    ("rev", lambda x: x[::-1] if x.ndim else x),
    ("reshape", lambda x: x.reshape(-1)),
]


@st.composite
def programs(draw):
    n_in = draw(st.integers(1, 3))
    dtype = draw(st.sampled_from(["float32", "float64"]))
    R, C = draw(st.sampled_from(DOMAINS))
    shapes = [draw(st.sampled_from(shapes_for(R, C))) for _ in range(n_in)]
    steps = []
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["u", "u", "b", "b", "r", "m", "mm"]))
        table = {"u": UNARY, "b": BINARY, "r": REDUCE, "m": MOVE}.get(kind)
        op = draw(st.sampled_from(table)) if table else ("matmul", None)
        steps.append((kind, op[0], op[1], draw(st.integers(0, 100)), draw(st.integers(0, 100))))
    seed = draw(st.integers(0, 2**16))
    return dtype, shapes, steps, seed


def build(steps):
    def program(*xs):
        vals = list(xs)
        for kind, _, fn, i, j in steps:
            a = vals[i % len(vals)]
            if kind == "u" or kind == "r" or kind == "m":
                vals.append(fn(a))
            elif kind == "b":
                b = vals[j % len(vals)]
                try:
                    nb.ops.meta.broadcast_shapes(a.shape, b.shape)
                except ValueError:
                    continue
                vals.append(fn(a, b))
            elif kind == "mm":
                if a.ndim == 2:
                    w = nb.ones(a.shape[1], 3, dtype=a.dtype) * 0.25
                    vals.append(a @ w)
        return vals[len(xs):] or [vals[0] * 1]
    return program


def run_case(case, backend):
    dtype, shapes, steps, seed = case
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(-2, 2, s).astype(dtype) for s in shapes]
    prog = build(steps)
    want = prog(*(nb.tensor(a) for a in arrays))
    got = nb.compile(prog, backend=backend)(*(nb.tensor(a) for a in arrays))
    assert len(got) == len(want)
    tol = 2e-4 if dtype == "float32" else 1e-9
    for g, w, in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol,
                                   err_msg=f"{backend}: {[s[1] for s in steps]}")


@given(programs())
def test_random_programs_numpy_tier(case):
    run_case(case, "numpy")


@settings(max_examples=8)
@given(programs())
def test_random_programs_numba_tier(case):
    run_case(case, "numba")


@pytest.mark.fuzz
@given(programs())
def test_fuzz_all_backends(case):
    run_case(case, "numpy")
    run_case(case, "numba")
