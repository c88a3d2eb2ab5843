"""nb.compile and %%compile on Dask arrays (the threaded scheduler; the cluster tests are in
test_dask_cluster.py): compiled against plain Dask on the same arrays, for type, shape, dtype,
chunks and values; lazy stays lazy; what cannot be chunk work runs plainly with its reason."""
import subprocess
import sys

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
import dask  # noqa: E402

import nbaccel as nb  # noqa: E402
from nbaccel.daskbridge.report import task_count  # noqa: E402


@pytest.fixture(autouse=True)
def _threads():
    with dask.config.set(scheduler="threads", num_workers=2):
        yield


def _never_compute(dsk, keys, **kwargs):
    raise AssertionError("the call computed a Dask graph: lazy must stay lazy")


def _leaves(v):
    return list(v) if isinstance(v, (tuple, list)) else [v]


def check(f, *args, compiled_path=True, backend="numpy", **kwargs):
    """f compiled against f plain on the same Dask arrays; returns the compiled function."""
    cf = nb.compile(f, backend=backend)
    with dask.config.set(scheduler=_never_compute):
        got = cf(*args, **kwargs)
        want = f(*args, **kwargs)
    rep = cf.report
    if compiled_path:
        assert rep.fallback is None, rep.fallback
        assert rep.path == "dask"
    for g, w in zip(_leaves(got), _leaves(want), strict=True):
        assert type(g) is type(w), (type(g), type(w))
        if not isinstance(w, da.Array):
            assert g == w
            continue
        assert (g.shape, g.dtype, g.chunks) == (w.shape, w.dtype, w.chunks), (g, w, g.chunks, w.chunks)
        G, W = dask.compute(g, w)
        assert type(G) is type(W) and G.dtype == W.dtype and G.shape == W.shape
        if W.dtype.kind == "f":
            np.testing.assert_allclose(G, W, rtol=2e-5, atol=2e-6, equal_nan=True)
        else:
            np.testing.assert_array_equal(G, W)
    return cf


def rand(shape, chunks, dtype=np.float32, seed=0):
    g = np.random.default_rng(seed)
    a = g.standard_normal(shape)
    if np.dtype(dtype).kind in "iu":
        a = a * 10
    elif np.dtype(dtype).kind == "b":
        a = a > 0
    return da.from_array(a.astype(dtype), chunks=chunks)


def test_elementwise_chain_one_blockwise_stage():
    x = rand((60, 50), (25, 20))
    cf = check(lambda x: np.tanh(x * 2.0 + 1) * 0.5 - np.exp(-x), x)
    assert [k["kind"] for k in cf.report.kernels] == ["blockwise"]
    assert cf.report.kernels[0]["ops"][:2] == ["multiply", "add"]


def test_broadcast_between_differently_chunked_operands():
    x = rand((40, 30), (15, 7))
    w = rand((30,), (11,), seed=1)
    b = rand((40, 1), (9, 1), seed=2)
    check(lambda x, w, b: np.maximum(x * w, b) + w, x, w, b)


def test_numpy_operand_beside_a_dask_array():
    x = rand((40, 30), (15, 30))
    w = np.linspace(0, 1, 30, dtype=np.float32)
    check(lambda x, w: np.sqrt(np.abs(x * w)), x, w)


REDUCTIONS = {
    "sum": lambda x, ax, kd: x.sum(axis=ax, keepdims=kd),
    "prod": lambda x, ax, kd: (x * 0.1 + 1).prod(axis=ax, keepdims=kd),
    "max": lambda x, ax, kd: x.max(axis=ax, keepdims=kd),
    "min": lambda x, ax, kd: np.min(x, axis=ax, keepdims=kd),
    "any": lambda x, ax, kd: (x > 1.5).any(axis=ax, keepdims=kd),
    "all": lambda x, ax, kd: (x > -2.5).all(axis=ax, keepdims=kd),
    "mean": lambda x, ax, kd: x.mean(axis=ax, keepdims=kd),
    "var": lambda x, ax, kd: x.var(axis=ax, keepdims=kd),
    "std": lambda x, ax, kd: np.std(x, axis=ax, keepdims=kd, ddof=1),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("axis,keepdims", [(0, False), (1, True), (None, False), ((0, 1), True)])
def test_reductions_over_chunked_axes(name, axis, keepdims):
    x = rand((37, 23), (10, 8))                     # uneven chunks on both axes
    op = REDUCTIONS[name]
    cf = check(lambda x: op(np.tanh(x) * 2, axis, keepdims), x)
    assert [k["kind"] for k in cf.report.kernels][-1].startswith("reduction")


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [0, 1, None])
def test_arg_reductions_carry_the_chunk_offset(name, axis):
    x = rand((31, 17), (8, 5))
    fn = getattr(np, name)
    check(lambda x: fn(x * x, axis=axis), x)
    ties = da.from_array(np.tile(np.arange(6.0), (5, 3)), chunks=(2, 4))   # ties: the first wins
    check(lambda x: fn(x, axis=axis), ties)


def test_nan_data():
    a = np.random.default_rng(3).standard_normal((20, 12))
    a[3, 4] = a[15, 0] = np.nan
    x = da.from_array(a, chunks=(6, 5))
    for f in (lambda x: x.max(axis=0), lambda x: np.argmax(x, axis=0), lambda x: x.mean(axis=1),
              lambda x: np.argmin(x), lambda x: (x * 2).sum(), lambda x: x.std(0)):
        check(f, x)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.bool_, np.float64])
def test_int_and_bool_dtypes(dtype):
    x = rand((21, 13), (5, 6), dtype=dtype)
    check(lambda x: (x + x).sum(axis=0), x)
    check(lambda x: x.max(axis=1), x)
    check(lambda x: x.mean(axis=0), x)
    check(lambda x: np.argmax(x, axis=0), x)
    if dtype is not np.bool_:
        check(lambda x: x * 3 - 1, x)


def test_softmax_over_one_chunk_axis_then_column_sum_is_one_stage():
    x = rand((64, 40), (16, 40))

    def work(x):
        h = np.tanh(x * 0.5 + 0.1)
        e = np.exp(h - h.max(axis=1, keepdims=True))
        return (e / e.sum(axis=1, keepdims=True)).sum(axis=0)

    cf = check(work, x)
    assert len(cf.report.kernels) == 1          # one compiled kernel per chunk, then the combine
    rep = cf.report
    assert rep.dask["tasks"] * 3 <= rep.dask["plain_tasks"], rep.dask


def test_standardisation_is_two_stages_and_one_moments_pass():
    x = rand((50, 9), (12, 9))
    cf = check(lambda x: (x - x.mean(0)) / x.std(0), x)
    kinds = [k["kind"] for k in cf.report.kernels]
    assert kinds.count("blockwise") == 1 and len(kinds) == 2, kinds   # mean and std share a pass


def test_keywords_lists_and_scalars():
    x = rand((20, 10), (7, 10))
    y = rand((20, 10), (5, 5), seed=4)
    check(lambda xs, scale=1.0: (xs[0] * scale + xs[1]).sum(axis=1), [x, y], scale=3.0)
    check(lambda x, y: (x * y, x.shape[0], x), x, y=y)


def test_plain_on_dask_with_the_reason():
    x = rand((20, 10), (7, 10))
    cases = [
        (lambda x: np.sort(x, axis=0), "sort"),              # Dask has no sort: NumPy's, plainly
        (lambda x: x[x[:, 0] > 0], "not chunk work"),
        (lambda x: x * 2 if float(x.sum()) > 0 else x, "graph break"),
        (lambda x: np.exp(x - x.max(axis=0, keepdims=True)), None),       # compiled: two stages
    ]
    for f, why in cases:
        cf = nb.compile(f, backend="numpy")
        got, want = cf(x), f(x)
        assert type(got) is type(want)             # np.sort of a Dask array is NumPy's, plainly too
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
        if why is not None:
            assert why in cf.report.fallback, cf.report.fallback


def test_dask_own_ops_between_compiled_stages():
    x = rand((30, 20), (8, 20))
    y = rand((20, 12), (7, 5), seed=5)
    cases = [lambda x, y: np.tanh(x @ y * 2).sum(axis=0),
             lambda x, y: (np.cumsum(x * 2, axis=0)[::3, 1:] + 1).max(axis=1),
             lambda x, y: np.exp(x.T[:, :25]).reshape(500).mean(axis=0),
             lambda x, y: np.concatenate([x, x * 2], axis=0).std(axis=0),
             lambda x, y: np.einsum("ij,jk->ik", x, y) - np.tensordot(x, y, axes=1)]
    for f in cases:
        cf = check(f, x, y)
        kinds = [k["kind"] for k in cf.report.kernels]
        assert any(k.startswith("Dask's own") for k in kinds), kinds
        assert any(not k.startswith("Dask's own") for k in kinds), kinds


def test_bad_inputs_run_plainly():
    x = rand((20, 10), (7, 10))
    unknown = x[x[:, 0] > 0]                       # NaN chunks after boolean indexing
    cf = nb.compile(lambda a: (a * 2).sum(axis=0), backend="numpy")
    got = cf(unknown)
    assert "unknown size" in cf.report.fallback
    np.testing.assert_allclose(got.compute(), (unknown * 2).sum(axis=0).compute(), rtol=1e-5)
    obj = da.from_array(np.array([1, "a", None] * 4, dtype=object), chunks=5)
    cf = nb.compile(lambda a: a[:3], backend="numpy")
    assert list(cf(obj).compute()) == [1, "a", None] and "dtype object" in cf.report.fallback
    when = da.from_array(np.arange(6).astype("datetime64[D]"), chunks=4)
    cf = nb.compile(lambda a: a + np.timedelta64(1, "D"), backend="numpy")
    assert (cf(when).compute() == (when + np.timedelta64(1, "D")).compute()).all()
    assert "datetime64" in cf.report.fallback
    with pytest.raises(ValueError):               # plain Dask's own error, not nbaccel's
        nb.compile(lambda a, b: a + b, backend="numpy")(rand((4, 3), 2), rand((5, 3), 2))


def test_numba_kernels_per_chunk():
    x = rand((300, 64), (100, 64), dtype=np.float64)
    cf = check(lambda x: np.tanh(x * 3.0).sum(axis=0), x, backend="numba")
    assert "def stage(a0):" in cf.report.code


def test_importing_nbaccel_imports_no_dask():
    code = ("import sys, numpy as np, nbaccel as nb\n"
            "f = nb.compile(lambda x: (x * 2).sum(), backend='numpy')\n"
            "f(np.ones(4, np.float32))\n"
            "assert not any(m == 'dask' or m.startswith('dask.') or m == 'distributed' "
            "for m in sys.modules), 'dask imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_importing_nbaccel_registers_the_bridge_without_loading_it():
    # the compiler does not import the bridge: the bridge registers itself (compiler/foreign.py),
    # and import nbaccel must make that registration without loading bridge.py (the call path)
    code = ("import sys, numpy as np, nbaccel as nb\n"
            "from nbaccel.compiler import foreign\n"
            "from nbaccel.daskbridge import detect\n"
            "assert [p for p, _ in foreign._HANDLERS.values()] == [detect.holds_dask]\n"
            "assert 'nbaccel.daskbridge.bridge' not in sys.modules, 'bridge loaded at import'\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_task_count_counts_after_fusion():
    x = rand((40, 40), (10, 40))
    y = (x + 1) * 2
    assert task_count([y]) == 8          # 4 from_array getters + 4 tasks: both ops fused into one


# -- %%compile cells on Dask arrays (the contract: same names, types, values, output) -------------
@pytest.fixture
def ip():
    pytest.importorskip("IPython")
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython
    shell = start_ipython() or get_ipython()
    shell.run_line_magic("load_ext", "nbaccel")
    shell.user_ns.update(np=np)
    yield shell
    for k in ("x", "y", "z", "n", "s"):
        shell.user_ns.pop(k, None)


def _cell(ip, src, **ns):
    ip.user_ns.update(ns)
    with dask.config.set(scheduler=_never_compute):
        res = ip.run_cell("%%compile --report none\n" + src)
    assert res.success, res.error_in_exec
    return res


def test_cell_results_stay_lazy_and_match_the_plain_cell(ip, capsys):
    x = rand((40, 30), (15, 30))
    _cell(ip, "y = np.tanh(x * 2 + 1).sum(axis=0)\nz = x - x.mean(0)\nn = x.shape[0]\n", x=x)
    y, z, n = (ip.user_ns[k] for k in ("y", "z", "n"))
    assert isinstance(y, da.Array) and isinstance(z, da.Array) and n == 40 and type(n) is int
    np.testing.assert_allclose(y.compute(), np.tanh(x * 2 + 1).sum(axis=0).compute(), rtol=1e-5)
    np.testing.assert_allclose(z.compute(), (x - x.mean(0)).compute(), rtol=1e-5, atol=1e-6)
    assert z.chunks == (x - x.mean(0)).chunks
    ip.run_line_magic("nbaccel", "report")
    assert "Dask: 3 compiled stages" in capsys.readouterr().out


def test_a_cell_that_is_not_chunk_work_runs_as_the_plain_cell(ip, capsys):
    x = rand((40, 30), (15, 30))
    res = _cell(ip, "y = np.cumsum(x, axis=0)\nprint(type(y).__name__)\ny.shape\n", x=x)
    assert capsys.readouterr().out.count("Array") == 1      # printed once: by the plain run
    assert res.result == (40, 30)
    assert isinstance(ip.user_ns["y"], da.Array)
    np.testing.assert_allclose(ip.user_ns["y"].compute(), np.cumsum(x, axis=0).compute(), rtol=1e-5)
