"""nb.export: one full graph, symbolic dims, every backend, module(), quantized and 2:4 weights.

Values are checked against the live model / function (and against nb.compile for fuzzer
programs, whose NumPy-vs-compiler differences are the compiler fuzz tests' business)."""
import sys

import numpy as np
import pytest

import nbaccel as nb
from nbaccel import nn
from nbaccel.export import Dim, ExportError

BACKENDS = ("eager", "numpy", "numba")


def tutorial_model():
    """The MLP of notebooks/04 (a regression on one feature)."""
    nb.manual_seed(0)
    return nn.Sequential(nn.Linear(1, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 1))


def close(a, b, tol=1e-5):
    a = a.numpy() if isinstance(a, nb.Tensor) else np.asarray(a)
    b = b.numpy() if isinstance(b, nb.Tensor) else np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("backend", BACKENDS)
def test_tutorial_model_round_trip_on_every_backend(backend):
    m = tutorial_model()
    x = nb.randn(32, 1)
    ep = nb.export(m, x, dynamic_shapes={"input": {0: Dim("batch", min=1, max=4096)}})
    for n in (32, 7, 2):
        xn = nb.randn(n, 1)
        y = ep.run(xn, backend=backend)
        assert isinstance(y, nb.Tensor)
        close(y, m(xn))


def test_print_graph_and_signature():
    ep = nb.export(tutorial_model(), nb.randn(8, 1), dynamic_shapes=({0: Dim("batch", max=512)},))
    text = str(ep)
    assert "input: f32[batch, 1]" in text and "2 <= batch <= 512" not in text
    assert "0 <= batch <= 512" in text
    assert "%0 = linear(input, 0.weight, 0.bias" in ep.graph
    assert ep.graph.splitlines()[-1] == "  return %4"
    assert "out0: f32[batch, 1]" in ep.signature
    assert ep.ops == ["linear", "gelu", "linear", "gelu", "linear"]
    assert ep.dynamic_dims == {"batch": (0, 512)}


def test_static_export_checks_every_dim_and_dtype():
    ep = nb.export(lambda x, w: (x * w).sum(axis=1), np.ones((4, 3), np.float32), np.ones(3, np.float32))
    np.testing.assert_array_equal(ep.run(np.ones((4, 3), np.float32), np.full(3, 2, np.float32)), [6.0] * 4)
    with pytest.raises(ExportError, match=r"input 'x' dim 0: expected size 4 \(static\), got 5"):
        ep.run(np.ones((5, 3), np.float32), np.ones(3, np.float32))
    with pytest.raises(ExportError, match="input 'w': expected dtype float32, got float64"):
        ep.run(np.ones((4, 3), np.float32), np.ones(3))
    with pytest.raises(ExportError, match="input 'x': expected 2 dims"):
        ep.run(np.ones(12, np.float32), np.ones(3, np.float32))
    with pytest.raises(ExportError, match="takes 2 arguments"):
        ep.run(np.ones((4, 3), np.float32))


def test_dynamic_dims_bounds_equal_names_and_symbolic_params():
    n = Dim("n", min=2, max=64)

    def f(x, y):
        flat = x.reshape(x.shape[0], -1)                   # reshape to (n, -1): a symbolic param
        return np.tanh(flat.sum(axis=1) / x.shape[0]) + y  # divide by n: a symbolic scalar

    x, y = np.ones((4, 3, 2), np.float32), np.ones(4, np.float32)
    ep = nb.export(f, x, y, dynamic_shapes={"x": {0: n}, "y": {0: n}})
    assert "reshape(x, shape=(n, -1))" in ep.graph and "divide(%1, n)" in ep.graph
    rng = np.random.default_rng(0)
    for size in (2, 5, 64):
        a, b = rng.random((size, 3, 2), np.float32), rng.random(size, np.float32)
        got = ep.run(a, b, backend="numpy")
        assert isinstance(got, np.ndarray)
        close(got, f(a, b))
    with pytest.raises(ExportError, match=r"input 'x' dim 0 \(n\) = 65 is outside its range: n must be in \[2, 64\]"):
        ep.run(np.ones((65, 3, 2), np.float32), np.ones(65, np.float32))
    with pytest.raises(ExportError, match=r"input 'y' dim 0 \(n\) = 6, but input 'x' dim 0 gives n = 5"):
        ep.run(np.ones((5, 3, 2), np.float32), np.ones(6, np.float32))


def test_product_of_two_dims_is_symbolic():
    b, t = Dim("b", max=100), Dim("t", max=100)
    ep = nb.export(lambda x: x.reshape(x.shape[0] * x.shape[1], x.shape[2]) * 2,
                   np.ones((3, 4, 5), np.float32), dynamic_shapes=({0: b, 1: t},))
    assert "shape=(b*t, 5)" in ep.graph
    a = np.arange(6 * 7 * 5, dtype=np.float32).reshape(6, 7, 5)
    close(ep.run(a), a.reshape(42, 5) * 2)


def test_bad_dynamic_shapes_are_clear_errors():
    x = np.ones((4, 3), np.float32)
    f = lambda x: x * 2  # noqa: E731
    with pytest.raises(ExportError, match="names 'z', which is not an argument"):
        nb.export(f, x, dynamic_shapes={"z": {0: Dim("n")}})
    with pytest.raises(ExportError, match="outside Dim 'n'"):
        nb.export(f, x, dynamic_shapes={"x": {0: Dim("n", min=8, max=16)}})
    with pytest.raises(ExportError, match="sizes 0 and 1 are specialised"):
        nb.export(f, np.ones((1, 3), np.float32), dynamic_shapes={"x": {0: Dim("n")}})
    with pytest.raises(ExportError, match="dim 5 is out of range"):
        nb.export(f, x, dynamic_shapes={"x": {5: Dim("n")}})
    with pytest.raises(ExportError, match="unpacked"):
        nb.export(f, (x,))
    with pytest.raises(ExportError, match="identifier"):
        Dim("not a name")


def test_shape_dependent_values_that_are_not_polynomials_are_refused():
    n = {"x": {0: Dim("n", max=100)}}
    with pytest.raises(ExportError, match=r"not a product or sum of dims"):
        nb.export(lambda x: x[: x.shape[0] // 2] * 2, np.ones((8, 2), np.float32), dynamic_shapes=n)
    with pytest.raises(ExportError, match=r"at n=9 it raised \w*Error: cannot reshape"):
        nb.export(lambda x: x.reshape(x.shape[0] // 2, -1), np.ones((8, 2), np.float32), dynamic_shapes=n)
    with pytest.raises(ExportError, match="float computed from a dynamic dim"):
        nb.export(lambda x: x * (1.0 / x.shape[0]), np.ones((8, 2), np.float32), dynamic_shapes=n)

    with pytest.raises(ExportError, match=r"the constant 'constant_0' has a shape that depends .*nb.arange"):
        nb.export(lambda x: x.T * np.arange(x.shape[0]), np.ones((8, 2)), dynamic_shapes=n)
    ep = nb.export(lambda x: x.T * nb.arange(x.shape[0]), np.ones((8, 2)), dynamic_shapes=n)
    np.testing.assert_array_equal(ep.run(np.ones((3, 2))), [[0, 1, 2]] * 2)

    def branchy(x):
        return np.tanh(x) if x.shape[0] < 9 else np.exp(x)
    with pytest.raises(ExportError, match="structure depends on the size of n"):
        nb.export(branchy, np.ones((8, 2), np.float32), dynamic_shapes=n)


def test_graph_break_inplace_and_random_are_errors_naming_the_line():
    def branch(x):
        if x.sum() > 0:          # data-dependent: a break
            return x
        return -x
    with pytest.raises(ExportError, match=r"graph break at .*test_export.py:\d+ \(`if x.sum\(\) > 0:"):
        nb.export(branch, nb.ones(3))

    def reads_input(x):
        return x * float(x[0])
    with pytest.raises(ExportError, match="graph break"):
        nb.export(reads_input, nb.ones(3))
    with pytest.raises(ExportError, match="graph break"):
        nb.export(lambda x: x * bool(x), nb.ones(()))

    def mutates(x):
        x += 1
        return x
    with pytest.raises(ExportError, match="updates x in place"):
        nb.export(mutates, nb.ones(3))
    with pytest.raises(ExportError, match="random"):
        nb.export(lambda x: x + nb.randn(3), nb.ones(3))
    with pytest.raises(ExportError, match="function or an nn.Module"):
        nb.export(3, nb.ones(3))


def test_outputs_keep_their_structure_and_kinds():
    def f(x, scale):
        return {"double": x * scale, "pair": (x.sum(), x), "n": 3}
    ep = nb.export(f, np.arange(4.0), 2.0)
    out = ep.run(np.ones(4), 2.0)
    assert set(out) == {"double", "pair", "n"} and out["n"] == 3
    np.testing.assert_array_equal(out["double"], [2.0] * 4)
    assert isinstance(out["pair"][0], np.float64) and out["pair"][0] == 4.0   # NumPy's scalar
    assert isinstance(out["pair"][1], np.ndarray)
    t = ep.run(nb.ones(4, dtype=nb.float64), 2.0)
    assert isinstance(t["double"], nb.Tensor)
    with pytest.raises(ExportError, match="exported as the constant 2.0"):
        ep.run(np.ones(4), 3.0)


def test_module_has_the_original_weight_names_and_reads_them():
    m = tutorial_model()
    ep = nb.export(m, nb.randn(4, 1), dynamic_shapes={"input": {0: Dim("batch")}})
    mod = ep.module()
    assert isinstance(mod, nn.Module)
    assert list(mod.state_dict()) == list(m.state_dict())
    x = nb.randn(9, 1)
    close(mod(x), m(x))
    with nb.no_grad():
        for p in m.parameters():
            p.mul_(0.5)
    assert not np.allclose(mod(x).numpy(), m(x).numpy())
    mod.load_state_dict(m.state_dict())           # the module reads its current weights
    close(mod(x), m(x))
    cm = nb.compile(mod, backend="numpy")         # and compiles as one graph
    close(cm(x), m(x))
    assert cm.report.graphs == 1 and not cm.report.graph_breaks


def test_exported_weights_are_a_snapshot():
    m = tutorial_model()
    x = nb.randn(4, 1)
    want = m(x).numpy()
    ep = nb.export(m, x)
    with nb.no_grad():
        m[0].weight.mul_(0)
    close(ep.run(x), want)


@pytest.mark.parametrize("kind", ["int8", "int4", "int8-dynamic", "2:4"])
def test_quantized_and_sparse_weights_export_save_and_load(kind, tmp_path):
    nb.manual_seed(0)
    m = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 32))
    if kind == "2:4":
        nb.sparse.apply_2_4_(m)
        op = "sparse24_linear"
    else:
        cfg = {"int8": nb.quant.int8_weight_only(), "int4": nb.quant.int4_weight_only(group_size=32),
               "int8-dynamic": nb.quant.int8_dynamic_activation_int8_weight()}[kind]
        nb.quant.quantize_(m, cfg)
        op = "quantized_linear"
    x = nb.randn(8, 64)
    ep = nb.export(m, x, dynamic_shapes={"input": {0: Dim("batch", max=256)}})
    assert ep.ops.count(op) == 2
    ep.save(tmp_path / "m")
    loaded = nb.load(tmp_path / "m")
    for backend in BACKENDS:
        xn = nb.randn(5, 64)
        close(loaded.run(xn, backend=backend), m(xn), tol=1e-4)


def _fuzz_programs(count):
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from fuzz.programs import generate
    out = []
    seed = 0
    while len(out) < count:
        p = generate(seed)
        seed += 1
        fn = p.function()
        try:
            with np.errstate(all="ignore"):
                fn(*p.arrays())
        except Exception:   # noqa: BLE001 - programs NumPy rejects are not exported
            continue
        out.append(p)
    return out


def test_fuzz_programs_export_and_run_like_the_compiled_function(tmp_path):
    """Random programs: exported (static), saved, loaded, and run on every backend, give what
    the live compiled function gives. Programs that read an input's value are refused."""
    import warnings
    from fuzz.check import compare
    exported = 0
    for p in _fuzz_programs(24):
        fn = p.function()
        try:
            ep = nb.export(fn, *p.arrays())
        except ExportError as e:
            assert "graph break" in str(e) or "in place" in str(e)
            continue
        ep.save(tmp_path / f"p{p.seed}")
        loaded = nb.load(tmp_path / f"p{p.seed}")
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = nb.compile(fn, backend="numpy")(*p.arrays())
            for backend in BACKENDS:
                got = loaded.run(*p.arrays(), backend=backend)
                outcome = compare(got, want)
                assert outcome.ok, f"{backend}: {outcome}\n{p.source()}"
        exported += 1
    assert exported >= 16


def test_fuzz_programs_with_a_dynamic_dim_run_at_new_sizes():
    """Dim 0 of the inputs that share the first input's size is made one dynamic Dim; the
    program then runs at another size like the live compiled function. Programs whose code
    fixes that size (a reshape to (2, 3)) are refused at export with an ExportError."""
    import warnings
    from fuzz.check import compare
    from fuzz.programs import FLOAT_GRID
    ran = refused = 0
    for p in _fuzz_programs(40):
        arrays = p.arrays()
        if not arrays[0].ndim or arrays[0].shape[0] < 2:
            continue
        n0 = arrays[0].shape[0]
        dyn = tuple({0: Dim("n", max=64)} if a.ndim and a.shape[0] == n0 else None for a in arrays)
        fn = p.function()
        try:
            ep = nb.export(fn, *arrays, dynamic_shapes=dyn)
        except ExportError:
            refused += 1
            continue
        rng = np.random.default_rng(p.seed)
        new = []
        for a, d in zip(arrays, dyn):
            shape = (n0 + 2,) + a.shape[1:] if d else a.shape
            v = (rng.choice(FLOAT_GRID, shape) if a.dtype.kind == "f" else
                 rng.integers(-3, 4, shape) if a.dtype.kind in "iu" else rng.random(shape) < 0.5)
            new.append(np.asarray(v, a.dtype))
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = nb.compile(fn, backend="numpy")(*[a.copy() for a in new])
            for backend in BACKENDS:
                outcome = compare(ep.run(*[a.copy() for a in new], backend=backend), want)
                assert outcome.ok, f"{backend}: {outcome}\n{p.source()}"
        ran += 1
    assert ran >= 10 and refused >= 1


def test_attention_block_with_two_dynamic_dims(tmp_path):
    """Embedding, LayerNorm, MultiheadAttention (the flash extern kernel) and a residual: the
    reshapes to (B, T, heads, head_dim) become symbolic in both dims."""
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(50, 32)
            self.ln = nn.LayerNorm(32)
            self.attn = nn.MultiheadAttention(32, 4, batch_first=True)
            self.out = nn.Linear(32, 50)

        def forward(self, idx):
            h = self.ln(self.emb(idx))
            a, _ = self.attn(h, h, h, need_weights=False)
            return self.out(h + a)

    block = Block().eval()
    B, T = Dim("B", max=16), Dim("T", max=128)
    ep = nb.export(block, nb.randint(0, 50, (2, 8)), dynamic_shapes={"idx": {0: B, 1: T}})
    assert "reshape(%8, shape=(B, T, 4, 8))" in ep.graph and "flash_attention" in ep.ops
    ep.save(tmp_path / "block")
    loaded = nb.load(tmp_path / "block")
    idx = nb.randint(0, 50, (3, 17))
    for backend in BACKENDS:
        close(loaded.run(idx, backend=backend), block(idx), tol=1e-5)
    with pytest.raises(ExportError, match=r"input 'idx': expected dtype int64, got int32"):
        loaded.run(idx.astype(nb.int32))


def test_sizes_the_graph_does_not_hold_for_are_errors_not_wrong_answers():
    ep = nb.export(lambda x: x[:10] * 2, np.ones((12, 3), np.float32),
                   dynamic_shapes=({0: Dim("n", max=100)},))
    assert ep.run(np.ones((50, 3), np.float32)).shape == (10, 3)
    with pytest.raises(ExportError, match=r"getitem from .* gives float32\[5, 3\] at n=5"):
        ep.run(np.ones((5, 3), np.float32))


def test_inputs_that_require_grad_get_gradients():
    m = tutorial_model()
    ep = nb.export(m, nb.randn(4, 1), dynamic_shapes={"input": {0: Dim("batch")}})
    x = nb.randn(6, 1, requires_grad=True)
    ep.run(x).sum().backward()
    x2 = x.detach().clone().requires_grad_()
    m(x2).sum().backward()
    close(x.grad, x2.grad)


def test_triton_backend_where_the_compiler_has_one():
    pytest.importorskip("triton")
    from nbaccel.compiler.api import BACKENDS as compiler_backends
    if "triton" not in compiler_backends:
        pytest.skip("this compiler has no triton backend")
    m = tutorial_model()
    ep = nb.export(m, nb.randn(4, 1), dynamic_shapes={"input": {0: Dim("batch", max=64)}})
    x = nb.randn(3, 1)                        # tiny: Triton's interpreter runs it on the CPU
    close(ep.run(x, backend="triton"), m(x), tol=1e-4)
