"""The loop-nest scheduler: kernel structure (counts, ranges) for N-D broadcasting, reductions
over any axes and folded movement ops, plus DCE/CSE and the layout algebra."""
import numpy as np
import pytest

import nbaccel as nb
from nbaccel.compiler.schedule.loops import Layout

BACKENDS = ["numpy", "numba", "triton"]
rng = np.random.default_rng(0)


def run(fn, *args, backend="numpy"):
    cf = nb.compile(fn, backend=backend)
    out = cf(*args)
    ref = fn(*args)
    outs, refs = (out, ref) if isinstance(ref, tuple) else ((out,), (ref,))
    for o, r in zip(outs, refs):
        assert type(o) is type(r) and o.dtype == r.dtype and o.shape == r.shape
        np.testing.assert_allclose(o, r, rtol=2e-5, atol=1e-5)
    return [k for k in cf.report.kernels if k["backend"] != "blas"], cf.report


@pytest.mark.parametrize("backend", BACKENDS)
def test_pairwise_distances_are_one_kernel(backend):
    X = rng.random((300, 8), dtype=np.float32)
    C = rng.random((16, 8), dtype=np.float32)
    ks, _ = run(lambda X, C: ((X[:, None, :] - C[None, :, :]) ** 2).sum(-1), X, C, backend=backend)
    assert len(ks) == 1 and ks[0]["ranges"] == "(300, 16 | 8)"


@pytest.mark.parametrize("backend", BACKENDS)
def test_column_standardisation_and_axis0_softmax_are_one_kernel(backend):
    x = rng.random((64, 40), dtype=np.float32)
    ks, _ = run(lambda x: (x - x.mean(0)) / x.std(0), x, backend=backend)
    assert len(ks) == 1 and ks[0]["ranges"] == "(40 | 64)"

    def softmax0(x):
        e = np.exp(x - x.max(axis=0, keepdims=True))
        return e / e.sum(axis=0, keepdims=True)
    ks, _ = run(softmax0, x, backend=backend)
    assert len(ks) == 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("axes", [(0,), (1,), (2,), (0, 2), (1, 2), (0, 1, 2)])
def test_reductions_over_any_axes_fuse_with_producers(backend, axes):
    x = rng.random((5, 6, 7)).astype(np.float32)
    ks, _ = run(lambda x: (np.exp(x) * 2).sum(axis=axes), x, backend=backend)
    assert len(ks) == 1
    ks, _ = run(lambda x: x - x.max(axis=axes, keepdims=True), x, backend=backend)
    assert len(ks) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_movement_ops_fold_into_loads(backend):
    x = rng.random((12, 10), dtype=np.float32)
    ks, _ = run(lambda x: x[::-2, 1::3].T * 2 + x[1::2, 9:0:-3].T + x[None, 0, :3, None], x, backend=backend)
    assert len(ks) == 1
    ks, _ = run(lambda x: np.swapaxes(x.reshape(3, 4, 10), 0, 2) + 1, x, backend=backend)
    assert len(ks) == 1 and ks[0]["ranges"] == "(10, 4, 3)"


@pytest.mark.parametrize("backend", BACKENDS)
def test_unused_values_make_no_kernel_and_repeats_are_computed_once(backend):
    x = rng.random((8, 9), dtype=np.float32)

    def f(x):
        unused = np.sin(x) * 3        # noqa: F841
        return np.tanh(x * 2 + 1) + np.tanh(x * 2 + 1)
    ks, rep = run(f, x, backend=backend)
    assert len(ks) == 1 and ks[0]["ops"].count("tanh") == 1 and "sin" not in ks[0]["ops"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_several_outputs_and_reductions_over_other_axes_split_with_reasons(backend):
    x = rng.random((6, 7), dtype=np.float32)
    ks, rep = run(lambda x: (x.sum(0), x.sum(1), x * 2), x, backend=backend)
    assert 1 <= len(ks) <= 2
    ks, rep = run(lambda x: x.sum(0) + x.sum(1)[:, None], x, backend=backend)
    assert len(ks) >= 2 and rep.refused_fusions


def test_layout_algebra():
    lay = Layout.contiguous((4, 6))
    assert lay.permute((1, 0)).strides == (1, 6)
    s = lay.slice(((3, -1, -1), (1, 6, 2)))
    assert s.shape == (4, 3) and s.strides == (-6, 2) and s.offset == 19
    assert lay.reshape((2, 2, 6)).strides == (12, 6, 1)
    assert lay.permute((1, 0)).reshape((24,)) is None      # a transpose cannot flatten
    assert lay.broadcast_to((3, 4, 6)).strides == (0, 6, 1)
    assert lay.slice(((0, 4, 1), (0, 6, 2))).reshape((2, 2, 3)).strides == (12, 6, 2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
def test_argmax_and_argmin_fuse_and_match_numpy_ties_and_nans(backend, dtype):
    x = rng.integers(0, 3, (7, 9, 5)).astype(dtype)
    if dtype == "float32":
        x[2, 3, 1] = np.nan
    fns = [lambda x: np.argmax(x, axis=0), lambda x: np.argmin(x, axis=1), lambda x: np.argmax(x),
           lambda x: np.argmin(x * 2, axis=-1) + 1, lambda x: x.argmax(axis=1, keepdims=True)]
    for fn in fns:
        cf = nb.compile(fn, backend=backend)
        out, ref = cf(x), fn(x)
        assert out.dtype == ref.dtype and out.shape == ref.shape and np.array_equal(out, ref)
        assert len(cf.report.kernels) == 1


def test_kernel_passes_plan_the_reductions():
    """The reduction plan is a property of the kernel (kernel_passes.py), not of a renderer:
    equal reductions are one pass, softmax over axis 0 pairs its max with its sum of exp, the
    centred sum of squares pairs with the sum it is centred on."""
    from nbaccel.compiler.codegen import kernel_passes as kp
    from nbaccel.compiler.schedule.schedule import schedule

    def kernel(fn, *args):
        cf = nb.compile(fn, backend="numpy")
        cf(*args)
        entry = next(iter(cf.cache.entries.values()))
        prog = next(iter(entry.programs.values()))
        (k,) = [s for s in schedule(prog.graph).steps if hasattr(s, "reductions")]
        return k

    x = rng.random((6, 8), dtype=np.float32)
    k = kernel(lambda x: ((x - x.mean(0)) / x.std(0), x.mean(0)), x)
    plan = kp.reduction_plan(k)
    assert [s.kind for s in plan] == ["shifted_moments", "same"], plan
    assert len(kp.duplicates(k)) == 1 and [s.kind for s in kp.reduction_plan(k, pairs=False)].count("same") == 1
    k = kernel(lambda x: np.exp(x - x.max(0)) / np.exp(x - x.max(0)).sum(0), x)
    assert [s.kind for s in kp.reduction_plan(k)] == ["online_softmax"]
    assert [len(g) for g in kp.phases(k)] == [1, 1]
    dims = kp.merge_dims(k, [lay for lay in (leaf.layout for leaf in k.loads())])
    assert dims.sizes == [6, 8] and dims.red == [True, False]


@pytest.mark.parametrize("backend", BACKENDS)
def test_equal_reductions_are_computed_once_on_every_tier(backend):
    """x.mean(0) and the mean inside x.std(0) are one sum in the generated code of each tier."""
    x = rng.random((6, 8), dtype=np.float32)
    fn = lambda x: ((x - x.mean(0)) / x.std(0), x.mean(0))      # noqa: E731
    ks, _ = run(fn, x, backend=backend)
    cf = nb.compile(fn, backend=backend)
    cf(x)
    entry = next(iter(cf.cache.entries.values()))
    prog = next(iter(entry.programs.values()))
    (slot,) = prog.slots.values()
    assert len(slot.k.reductions) == 3
    spelled = {"numpy": "np.add.reduce(", "triton": "tl.sum(", "numba": "+= "}[backend]
    src = slot.np_source if backend == "numpy" else slot.source
    assert src.count(spelled) == 2, src
