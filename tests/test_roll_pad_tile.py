"""np.roll, np.pad (constant, edge, wrap; reflect/symmetric gather) and np.tile: eager and
compiled against NumPy, and compiled as index arithmetic (wrapped, clamped or masked loads),
not concatenations: a Game of Life written with np.roll is one kernel."""
import numpy as np
import pytest

import nbaccel as nb
from nbaccel.compiler.schedule.loops import Layout

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_, np.uint8]


def sample(shape, dtype, seed=0):
    g = np.random.default_rng(seed)
    if dtype == np.bool_:
        return g.random(shape) < 0.5
    return (g.standard_normal(shape) * 10).astype(dtype)


def check(fn, x, backend="numpy", kernels=None):
    """fn compiled (NumPy in, NumPy out), fn on a Tensor and fn on the array: equal."""
    want = fn(x)
    cf = nb.compile(fn, backend=backend)
    got = cf(x)
    assert isinstance(got, np.ndarray) and got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    eager = np.asarray(fn(nb.asarray(x)))
    np.testing.assert_array_equal(eager, want)
    assert eager.dtype == want.dtype
    if kernels is not None:
        ks = cf.report.kernels
        assert len(ks) == kernels, [k["name"] for k in ks]
        assert not any("concat" in k["name"] for k in ks)
    return cf


# ---- roll ----------------------------------------------------------------------------------------

ROLLS = [
    (3, None), (-2, None), (17, None), (1, 0), (-1, 1), (-7, -1), (9, 1),
    ((1, -2), (0, 1)), ((2, 3), (1, 1)), ((-1,), (0,)), (2, (0, 1)), ((1, 1), 0), (0, 0),
]


@pytest.mark.parametrize("shift, axis", ROLLS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_roll_matches_numpy(shift, axis, dtype):
    x = sample((4, 6), dtype)
    fn = lambda a: np.roll(a, shift, axis) * 1 if dtype != np.bool_ else ~np.roll(a, shift, axis)  # noqa: E731
    check(fn, x)


@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4), (1, 5), (0, 3)])
def test_roll_shapes_and_views_around_it(shape):
    x = sample(shape, np.float32)
    check(lambda a: np.roll(a, 2, -1) + 1, x)
    if len(shape) > 1:
        check(lambda a: np.roll(a, (1, -3), (0, -1)).T[::-1] * 2, x)
        check(lambda a: np.roll(np.roll(a, 2, -1), 5, -1)[..., ::2] - 1, x)


def test_roll_fuses_into_one_kernel_with_reductions():
    x = sample((8, 16), np.float64)
    check(lambda a: np.roll(a, 3, 1) - a, x, kernels=1)
    check(lambda a: (np.roll(a, 1, 0) * a).sum(axis=1), x, kernels=1)
    check(lambda a: np.roll(a.sum(0), 2) + 1, x)            # a reduced value, rolled


# ---- tile ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("reps", [2, (2,), (1, 3), (2, 1, 2), (3, 2), (1, 1), (0, 2), (2, 2, 1, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_tile_matches_numpy(reps, dtype):
    x = sample((3, 4), dtype)
    check(lambda a: np.tile(a, reps) == np.tile(a, reps), x)
    check(lambda a: np.tile(a, reps), x)


def test_tile_is_one_kernel_and_composes_with_roll():
    x = sample((5, 6), np.float32)
    check(lambda a: np.tile(a, (2, 3)) * 2, x, kernels=1)
    check(lambda a: np.tile(np.roll(a, 2, 1), (1, 2)) + 1, x, kernels=1)
    check(lambda a: np.tile(a[:, :1], 4) + 0, x)              # a size-1 axis: a broadcast
    # PyTorch's Tensor.repeat is NumPy's tile, eagerly and compiled on a Tensor (an array handed
    # to a compiled function has ndarray's repeat, which repeats elements, as plainly)
    t = nb.from_numpy(x)
    np.testing.assert_array_equal(np.asarray(t.repeat(2, 1)), np.tile(x, (2, 1)))
    got = nb.compile(lambda a: a.repeat(2, 1) * 1, backend="numpy")(t)
    np.testing.assert_array_equal(np.asarray(got), np.tile(x, (2, 1)))


# ---- pad -----------------------------------------------------------------------------------------

WIDTHS = [1, (2,), (1, 2), ((0, 0), (3, 1)), ((2, 1), (0, 4)), ((5, 6), (7, 9))]


@pytest.mark.parametrize("mode", ["constant", "edge", "wrap", "reflect", "symmetric"])
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_pad_matches_numpy(mode, width, dtype):
    x = sample((3, 4), dtype)
    check(lambda a: np.pad(a, width, mode=mode), x)


@pytest.mark.parametrize("values", [0, 2.5, (7,), (1, -2), ((1, 2), (3, 4)), ((5, 5), (5, 6))])
@pytest.mark.parametrize("dtype", [np.float64, np.int16, np.uint8])
def test_pad_constant_values(values, dtype):
    x = sample((4, 3), dtype)
    check(lambda a: np.pad(a, ((1, 2), (2, 1)), constant_values=values), x)


def test_pad_modes_fuse_into_one_kernel():
    x = sample((6, 5), np.float32)
    for mode in ("constant", "edge", "wrap"):
        check(lambda a: np.pad(a, ((1, 2), (3, 1)), mode=mode) * 2 + 1, x, kernels=1)
    # the fill is the padded value, not exp(fill): the expression is stored first
    check(lambda a: np.pad(a * 2, 1, constant_values=3) + 1, x)
    check(lambda a: np.pad(np.pad(a, 1) + 1, 2, constant_values=4), x)
    check(lambda a: np.pad(a, 2, mode="wrap")[1:-1, ::-1] - 1, x)


@pytest.mark.parametrize("mode", ["maximum", "minimum", "mean"])
@pytest.mark.parametrize("stat_length", [None, 2, ((1, 2), (3, 1))])
@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_pad_statistic_modes(mode, stat_length, dtype):
    x = sample((3, 4), dtype)
    kw = {} if stat_length is None else {"stat_length": stat_length}
    check(lambda a: np.pad(a, ((2, 1), (0, 3)), mode=mode, **kw), x)


@pytest.mark.parametrize("mode, kw", [("median", {}), ("linear_ramp", {"end_values": (1, 5)})])
def test_pad_other_modes_run_numpy_on_concrete_values(mode, kw):
    x = sample((3, 4), np.float64)
    want = np.pad(x * 2, ((1, 2), (2, 0)), mode=mode, **kw) + 1
    cf = nb.compile(lambda a: np.pad(a * 2, ((1, 2), (2, 0)), mode=mode, **kw) + 1)
    np.testing.assert_allclose(cf(x), want)
    assert cf.report.graph_breaks          # NumPy ran np.pad on the concrete value


def test_pad_of_empty_axes():
    x = np.zeros((0, 3), np.float32)
    check(lambda a: np.pad(a, 1, constant_values=2), x)
    with pytest.raises(ValueError):
        np.pad(nb.asarray(x), 1, mode="edge")


# ---- the loop IR ---------------------------------------------------------------------------------

def test_layouts_compose_index_maps():
    lay = Layout.contiguous((4, 6))
    r = lay.roll((1, 0)).roll((2, 0))
    assert r.maps[0] == ("wrap", 1, 1, 4) and r.maps[1] is None     # (i - 3) mod 4
    assert lay.roll((4, 6)) == lay                                     # a whole turn
    s = lay.roll((0, 2)).slice([(0, 4, 1), (5, -7, -1)])
    assert s.maps[1] == ("wrap", -1, 3, 6)
    assert lay.roll((1, 0)).reshape((24,)) is None                     # a wrap is never merged
    assert lay.roll((0, 1)).reshape((4, 2, 3)) is None                 # nor split
    assert lay.roll((1, 0)).reshape((4, 2, 3)).maps[0] == ("wrap", 1, 3, 4)
    assert lay.roll((1, 0)).reshape((1, 4, 6)).maps[1] == ("wrap", 1, 3, 4)
    assert lay.tile((2, 1)).shape == (8, 6)
    p = lay.pad(((1, 1), (0, 0)), "constant", 5)
    assert p.maps[0] == ("mask", 1, -1, 4) and p.fill == 5
    assert p.pad(((0, 0), (1, 1)), "constant", 6) is None              # one fill per load
    assert lay.pad(((1, 0), (0, 0)), "edge", 0).roll((1, 0)) is None   # a roll of a clamp: stored
    assert p.slice([(0, 1, 1), (0, 6, 1)]) is None                     # only fill: stored
    b = Layout((4, 6), (0, 1)).roll((1, 1))
    assert b.maps[0] is None and b.maps[1] is not None                 # a broadcast axis rolls freely


# ---- the Game of Life ----------------------------------------------------------------------------

def life(Z):
    N = sum(np.roll(np.roll(Z, i, 0), j, 1) for i in (-1, 0, 1) for j in (-1, 0, 1) if (i != 0 or j != 0))
    return ((N == 3) | ((Z == 1) & (N == 2))).astype(Z.dtype)


def board(n, dtype=np.int64):
    return (np.random.default_rng(3).random((n, n)) < 0.3).astype(dtype)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_game_of_life_is_one_kernel(backend):
    Z = board(64)
    cf = check(life, Z, backend=backend, kernels=1)
    assert cf.report.kernels[0]["ranges"] == "(64, 64)"
    Zt = nb.asarray(board(32, np.int8))
    got = nb.compile(life, backend=backend)(Zt)
    np.testing.assert_array_equal(np.asarray(got), life(board(32, np.int8)))


def test_game_of_life_goes_dynamic_over_board_sizes():
    """The shifts are params as written, not reduced mod n: a new size is a dynamic dim, and
    one numba kernel serves every board (its shifts and sizes arrive in P)."""
    cf = nb.compile(life, backend="numba")
    for n in (16, 32, 48, 20):
        Z = board(n)[:, :n - 3].copy()
        np.testing.assert_array_equal(cf(Z), life(Z))
    assert cf.stats["compiles"] == 2 and cf.stats["cache_hits"] == 2
    assert len(cf.report.kernels) == 1


def test_game_of_life_on_triton():
    pytest.importorskip("triton")
    check(life, board(16), backend="triton", kernels=1)


def test_game_of_life_cell_is_one_kernel():
    pytest.importorskip("IPython")
    from IPython.testing.globalipapp import start_ipython
    from IPython import get_ipython
    ip = start_ipython() or get_ipython()
    ip.run_line_magic("load_ext", "nbaccel")
    ip.run_line_magic("nbaccel", "reset")
    Z = board(256)
    ip.user_ns.update(np=np, Z=Z)
    cell = ("%%compile --backend numpy -o golrep\n"
            "N = sum(np.roll(np.roll(Z, i, 0), j, 1) for i in (-1, 0, 1) for j in (-1, 0, 1) if (i != 0 or j != 0))\n"
            "Z2 = ((N == 3) | ((Z == 1) & (N == 2))).astype(Z.dtype)\n")
    try:
        assert ip.run_cell(cell).success
        np.testing.assert_array_equal(ip.user_ns["Z2"], life(Z))
        rep = ip.user_ns["golrep"]
        assert rep.path == "compiled", rep.path_reason
        assert 1 <= len(rep.kernels) <= 2, [k["name"] for k in rep.kernels]
        assert not any("concat" in k["name"] for k in rep.kernels)
    finally:
        for k in ("Z", "Z2", "N", "golrep"):
            ip.user_ns.pop(k, None)


# ---- gradients -----------------------------------------------------------------------------------

@pytest.mark.parametrize("fn, adjoint", [
    (lambda t: nb.roll(t, (1, -2), (0, 1)), lambda w: np.roll(w, (-1, 2), (0, 1))),
    (lambda t: nb.tile(t, (2, 3)), lambda w: w.reshape(2, 3, 3, 4).sum((0, 2))),
    (lambda t: np.pad(t, ((1, 2), (0, 1))), lambda w: w[1:4, 0:4]),
])
def test_gradients_are_the_adjoint(fn, adjoint):
    x = sample((3, 4), np.float64)
    t = nb.tensor(x, requires_grad=True)
    out = fn(t)
    w = sample(tuple(out.shape), np.float64, seed=5)
    (out * nb.asarray(w)).sum().backward()
    np.testing.assert_allclose(np.asarray(t.grad), adjoint(w))


@pytest.mark.parametrize("mode", ["edge", "wrap"])
def test_pad_gradient_adds_up_the_copies(mode):
    x = sample((3, 4), np.float64)
    t = nb.tensor(x, requires_grad=True)
    out = np.pad(t, ((2, 1), (5, 0)), mode=mode)
    w = sample(tuple(out.shape), np.float64, seed=2)
    (out * nb.asarray(w)).sum().backward()
    rows = np.pad(np.arange(3), (2, 1), mode)
    cols = np.pad(np.arange(4), (5, 0), mode)
    want = np.zeros_like(x)
    np.add.at(want, (rows[:, None], cols[None, :]), w)
    np.testing.assert_allclose(np.asarray(t.grad), want)


# ---- the loop tiers: numba and Triton render the same index arithmetic ---------------------------

PROGRAMS = [
    lambda a: np.roll(a, (1, -9), (0, 1)) * 2,
    lambda a: np.roll(a, 2, 1)[:, ::-2] + 1,
    lambda a: np.tile(a, (2, 3)) + 1,
    lambda a: np.pad(a, ((1, 2), (3, 0)), constant_values=((1, 2), (3, 4))) * 1,
    lambda a: np.pad(a, ((1, 2), (3, 9)), mode="edge") - a.sum(),
    lambda a: np.pad(a, ((1, 12), (3, 9)), mode="wrap") - 1,
    lambda a: (np.roll(a, 1, 0) * a).sum(axis=0) + np.pad(a, 1).sum(),
    lambda a: np.roll(a, 4),
]


@pytest.mark.parametrize("backend", ["numba", "triton"])
@pytest.mark.parametrize("k", range(len(PROGRAMS)))
def test_loop_tiers_render_wrapped_clamped_and_masked_loads(backend, k):
    if backend == "triton":
        pytest.importorskip("triton")
    x = sample((5, 7), np.int64)
    check(PROGRAMS[k], x, backend=backend)


def test_vmap_and_pytorch_spellings():
    from nbaccel import func
    x = sample((3, 4, 5), np.float64)
    cases = [(lambda t: nb.roll(t, (1, -2), (0, 1)), lambda a: np.roll(a, (1, -2), (0, 1))),
             (lambda t: nb.tile(t, (2, 1)), lambda a: np.tile(a, (2, 1))),
             (lambda t: nb.pad(t, ((1, 0), (2, 1)), mode="wrap"), lambda a: np.pad(a, ((1, 0), (2, 1)), mode="wrap")),
             (lambda t: nb.pad(t, 1, constant_values=3.0), lambda a: np.pad(a, 1, constant_values=3.0))]
    for fn, ref in cases:
        np.testing.assert_array_equal(np.asarray(func.vmap(fn)(nb.asarray(x))), np.stack([ref(a) for a in x]))
    t = nb.asarray(x)
    np.testing.assert_array_equal(np.asarray(t.roll(shifts=(1, 2), dims=(0, 2))), np.roll(x, (1, 2), (0, 2)))
    np.testing.assert_array_equal(np.asarray(t.roll(shifts=3)), np.roll(x, 3))
    np.testing.assert_array_equal(np.asarray(t.repeat(1, 2, 1, 3)), np.tile(x, (1, 2, 1, 3)))
    with pytest.raises(RuntimeError):
        t.repeat(2, 2)
