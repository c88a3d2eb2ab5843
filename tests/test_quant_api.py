"""nbaccel.quant: quantize_, QuantizedTensor, QuantizedLinear eagerly and compiled, bad input,
model bytes, and nb.save / nb.load."""
import numpy as np
import pytest

import nbaccel as nb
from nbaccel import nn
from nbaccel.quant import (QuantizedLinear, QuantizedTensor, int4_weight_only,
                           int8_dynamic_activation_int8_weight, int8_weight_only, model_bytes,
                           quantize_)
from nbaccel_kernels.quant import packing as P, reference as R, simd

CONFIGS = {
    "int8": int8_weight_only(),
    "int4": int4_weight_only(group_size=32),
    "int4-zp": int4_weight_only(group_size=64, zero_point=True),
    "int8-dynamic": int8_dynamic_activation_int8_weight(),
}


def _mlp(bias=True):
    nb.manual_seed(3)
    return nn.Sequential(nn.Linear(128, 64, bias=bias), nn.GELU(), nn.Linear(64, 10, bias=bias))


def _expected(layer_w, layer_b, x, name):
    """What the quantized layer must compute: the reference kernel on the same codes."""
    w = np.asarray(layer_w)
    b = None if layer_b is None else np.asarray(layer_b)
    if name == "int8":
        return R.int8_weight_only_matmul(x, *P.quantize_int8(w), bias=b)
    if name == "int8-dynamic":
        return R.int8_dynamic_matmul(x, *P.quantize_int8(w), bias=b)
    cfg = CONFIGS[name]
    p, s, z = P.quantize_int4(w, cfg.group_size, cfg.zero_point)
    if x.dtype == np.float32:       # the CPU kernels round float32 activations to int8 per block
        x = simd.dequantized_activations(x)
    return R.int4_weight_only_matmul(x, p, s, z, cfg.group_size, b)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_quantize_swaps_linears_and_matches_the_reference(name):
    model = _mlp()
    w0, b0 = model[0].weight.detach().numpy().copy(), model[0].bias.detach().numpy().copy()
    first = model[0]
    quantize_(model, CONFIGS[name])
    assert isinstance(model[0], QuantizedLinear) and isinstance(model[2], QuantizedLinear)
    assert model[0] is first                      # converted in place: references stay valid
    assert model[0].mode == CONFIGS[name].mode
    # float weights are gone: only the biases are parameters now
    assert [n for n, _ in model.named_parameters()] == ["0.bias", "2.bias"]
    x = np.random.default_rng(0).standard_normal((17, 128)).astype(np.float32)
    with nb.no_grad():
        got = model[0](nb.tensor(x)).numpy()
    np.testing.assert_allclose(got, _expected(w0, b0, x, name), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_batch_1_and_leading_dims(name):
    model = _mlp(bias=False)
    quantize_(model, CONFIGS[name])
    x = nb.randn(2, 3, 128)
    y = model(x)
    assert y.shape == (2, 3, 10) and y.dtype == nb.float32
    y1 = model(x[0, 0])
    np.testing.assert_allclose(y1.numpy(), y[0, 0].numpy(), rtol=1e-4, atol=1e-5) if name != "int8-dynamic" \
        else np.testing.assert_allclose(y1.numpy(), y[0, 0].numpy(), rtol=1e-3, atol=1e-4)


def test_float64_activations_stay_float64():
    model = _mlp()
    quantize_(model, int8_weight_only())
    y = model(nb.randn(4, 128).astype(nb.float64))
    assert y.dtype == nb.float64


def test_filter_fn_selects_layers():
    model = _mlp()
    seen = []

    def only_first(m, fqn):
        seen.append(fqn)
        return isinstance(m, nn.Linear) and fqn == "0"
    quantize_(model, int8_weight_only(), filter_fn=only_first)
    assert isinstance(model[0], QuantizedLinear) and isinstance(model[2], nn.Linear)
    assert "" in seen and "2" in seen
    # a second pass over the rest (mixed precision) is fine: the filter skips quantized layers
    quantize_(model, int4_weight_only(32), filter_fn=lambda m, fqn: isinstance(m, nn.Linear))
    assert model[0].mode == "int8" and model[2].mode == "int4"


def test_a_bare_linear_is_converted_in_place():
    lin = nn.Linear(64, 8)
    assert quantize_(lin, int4_weight_only(64)) is lin
    assert isinstance(lin, QuantizedLinear)
    assert repr(lin) == "QuantizedLinear(in_features=64, out_features=8, bias=True, mode=int4, group_size=64)"


@pytest.mark.parametrize("name,ratio", [("int8", 0.27), ("int4", 0.16), ("int8-dynamic", 0.27)])
def test_model_bytes_shrink(name, ratio):
    model = nn.Sequential(nn.Linear(256, 256, bias=False), nn.Linear(256, 128, bias=False))
    before = model_bytes(model)
    assert before == (256 * 256 + 256 * 128) * 4
    quantize_(model, CONFIGS[name])
    after = model_bytes(model)
    assert after < before * ratio, (after, before)
    if name == "int8":      # codes plus a float32 scale per output row
        assert after == 256 * 256 + 256 * 128 + 4 * (256 + 128)


# ---- bad input --------------------------------------------------------------------------------

def test_in_features_not_a_multiple_of_the_group_size():
    model = nn.Sequential(nn.Linear(96, 32), nn.Linear(32, 4))
    with pytest.raises(ValueError, match=r"'0'.*in_features=96 is not a multiple of group_size=64"):
        quantize_(model, int4_weight_only(group_size=64))
    # checked before anything changed: the model is untouched
    assert isinstance(model[0], nn.Linear) and isinstance(model[1], nn.Linear)


def test_unsupported_group_size():
    with pytest.raises(ValueError, match="group_size must be one of"):
        int4_weight_only(group_size=100)


def test_already_quantized():
    model = _mlp()
    quantize_(model, int8_weight_only())
    with pytest.raises(ValueError, match="already quantized"):
        quantize_(model, int8_weight_only())


def test_non_2d_weight_and_unsupported_dtypes():
    with pytest.raises(ValueError, match="2-D"):
        QuantizedTensor.from_float(nb.randn(4, 4, 4))
    with pytest.raises(TypeError, match="floating point"):
        QuantizedTensor.from_float(nb.ones((4, 32), dtype=nb.int32))
    lin = nn.Linear(32, 4)
    lin.weight = nn.Parameter(nb.randn(4, 32, 1))
    with pytest.raises(ValueError, match="weight must be 2-D"):
        quantize_(lin, int8_weight_only())
    model = _mlp()
    quantize_(model, int8_weight_only())
    with pytest.raises(TypeError, match="float32 or float64 input"):
        model(nb.randn(2, 128).astype(nb.float16))
    with pytest.raises(ValueError, match="in_features=128"):
        model(nb.randn(2, 127))


def test_bad_config_module_and_filter():
    with pytest.raises(TypeError, match="unsupported config"):
        quantize_(_mlp(), "int8")
    with pytest.raises(TypeError, match="nn.Module"):
        quantize_(nb.randn(3, 3), int8_weight_only())
    with pytest.raises(TypeError, match="only quantize nn.Linear"):
        quantize_(_mlp(), int8_weight_only(), filter_fn=lambda m, fqn: isinstance(m, nn.GELU))


# ---- QuantizedTensor ------------------------------------------------------------------------------

def test_quantized_tensor_repr_dequantize_and_bytes():
    w = nb.randn(16, 64)
    q8 = QuantizedTensor.from_float(w, bits=8)
    q4 = QuantizedTensor.from_float(w, bits=4, group_size=32, zero_point=True)
    assert repr(q8) == "QuantizedTensor(int8, shape=(16, 64))"
    assert repr(q4) == "QuantizedTensor(int4, shape=(16, 64), group_size=32, zero_point=True)"
    assert q8.nbytes == 16 * 64 + 16 * 4
    assert q4.nbytes == 16 * 32 + 16 * 2 * 4 + 16 * 2
    for q, bound in ((q8, 0.01), (q4, 0.15)):
        d = q.dequantize()
        assert d.shape == (16, 64) and d.dtype == nb.float32
        rel = float(((d - w) ** 2).sum() ** 0.5 / (w ** 2).sum() ** 0.5)
        assert 0 < rel < bound


def test_quantized_tensor_validates_its_parts():
    with pytest.raises(ValueError, match="scale must be float32"):
        QuantizedTensor(8, np.zeros((4, 8), np.int8), np.ones(3, np.float32))
    with pytest.raises(ValueError, match="bits must be 8 or 4"):
        QuantizedTensor(2, np.zeros((4, 8), np.int8), np.ones(4, np.float32))


# ---- autograd and the compiler -----------------------------------------------------------------------

@pytest.mark.parametrize("name", ["int8", "int4"])
def test_gradient_flows_to_the_input(name):
    model = _mlp()
    quantize_(model, CONFIGS[name])
    x = nb.randn(3, 128, requires_grad=True)
    model[0](x).sum().backward()
    w = model[0].weight.dequantize().numpy()
    np.testing.assert_allclose(x.grad.numpy(), np.ones((3, 64), np.float32) @ w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_compiled_model_matches_eager_with_extern_kernels(name):
    model = _mlp()
    quantize_(model, CONFIGS[name])
    x = nb.randn(5, 128)
    eager = model(x).numpy()
    compiled = nb.compile(model)
    np.testing.assert_allclose(compiled(x).numpy(), eager, rtol=1e-5, atol=1e-6)
    ext = [k for k in compiled.report.kernels if k["ops"] == ["quantized_linear"]]
    assert len(ext) == 2
    assert {k["backend"] for k in ext} == {CONFIGS[name].mode}
    assert {k["device"] for k in ext} == {"cpu"}


# ---- save / load -------------------------------------------------------------------------------------

def test_save_load_round_trip(tmp_path):
    q4 = QuantizedTensor.from_float(nb.randn(8, 64), bits=4, group_size=32, zero_point=True)
    q8 = QuantizedTensor.from_float(nb.randn(8, 64), bits=8)
    obj = {"q4": q4, "q8": q8, "t": nb.arange(5), "a": np.ones((2, 2), np.float64),
           "bf": nb.ones(3, dtype=nb.bfloat16)}
    path = tmp_path / "x.npz"
    nb.save(obj, path)
    assert path.exists()
    back = nb.load(path)
    assert list(back) == list(obj)
    for k in ("q4", "q8"):
        assert repr(back[k]) == repr(obj[k])
        for part, t in obj[k].tensors().items():
            np.testing.assert_array_equal(back[k].tensors()[part].numpy(), t.numpy())
        np.testing.assert_array_equal(back[k].dequantize().numpy(), obj[k].dequantize().numpy())
    assert back["t"].dtype == nb.int64 and back["t"].tolist() == [0, 1, 2, 3, 4]
    assert back["a"].dtype == nb.float64
    assert back["bf"].dtype == nb.bfloat16 and back["bf"].astype(nb.float32).tolist() == [1.0] * 3
    # plain NumPy reads it without pickle
    with np.load(path, allow_pickle=False) as z:
        assert "__nbaccel__" in z.files


def test_save_load_a_quantized_model(tmp_path):
    model = _mlp()
    quantize_(model, CONFIGS["int4-zp"])
    path = tmp_path / "model.npz"
    nb.save(model.state_dict(), path)
    fresh = _mlp()
    nb.manual_seed(99)
    fresh[0].reset_parameters()
    quantize_(fresh, CONFIGS["int4-zp"])
    fresh.load_state_dict(nb.load(path))
    x = nb.randn(4, 128)
    np.testing.assert_array_equal(fresh(x).numpy(), model(x).numpy())
    other = _mlp()
    quantize_(other, int8_weight_only())
    with pytest.raises(ValueError, match="formats differ"):
        other.load_state_dict(nb.load(path))


def test_save_load_bad_input(tmp_path):
    # lists, strings and nested dicts are saved since issue 24; arbitrary objects never are
    with pytest.raises(TypeError, match="never pickles"):
        nb.save({"x": object()}, tmp_path / "a.npz")
    with pytest.raises(TypeError, match="never pickles"):
        nb.save([nb.ones(2), {1: object()}], tmp_path / "a.npz")
    np.savez(tmp_path / "plain.npz", x=np.ones(2))
    with pytest.raises(ValueError, match="not a file written by nb.save"):
        nb.load(tmp_path / "plain.npz")


def test_compiled_function_with_fullgraph_and_dequantize():
    model = _mlp()
    quantize_(model, int4_weight_only(32))
    w = model[0].weight

    @nb.compile(fullgraph=True)        # no graph break: both quantized ops are captured
    def f(x):
        return model(x).sum(-1) + (x @ w.dequantize().T).sum(-1)

    x = nb.randn(3, 128)
    want = model(x).sum(-1) + (x @ w.dequantize().T).sum(-1)
    np.testing.assert_allclose(f(x).numpy(), want.numpy(), rtol=1e-4, atol=1e-4)
    ops = [op for k in f.report.kernels for op in k["ops"]]
    assert ops.count("quantized_linear") == 2 and ops.count("dequantize_weight") == 1


def test_compile_cell_magic_runs_a_quantized_model():
    pytest.importorskip("IPython")
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython
    shell = start_ipython() or get_ipython()
    shell.run_line_magic("load_ext", "nbaccel")
    model = _mlp()
    quantize_(model, int8_weight_only())
    x = np.random.default_rng(0).standard_normal((4, 128)).astype(np.float32)
    shell.user_ns.update(qmodel=model, qx=x)
    try:
        res = shell.run_cell("%%compile -o qrep\nqy = qmodel(qx)")
        assert res.success, res.error_in_exec
        np.testing.assert_allclose(np.asarray(shell.user_ns["qy"]), model(nb.tensor(x)).numpy(),
                                   rtol=1e-5, atol=1e-6)
        rep = shell.user_ns["qrep"]
        assert not rep.graph_breaks
        assert [k["backend"] for k in rep.kernels if k["ops"] == ["quantized_linear"]] == ["int8", "int8"]
    finally:
        for k in ("qmodel", "qx", "qy", "qrep"):
            shell.user_ns.pop(k, None)
