"""int4 weight layouts chosen at quantize time (issue 39 item 2): which layout is chosen, every
layout against the NumPy reference through the public API, and nb.save / nb.load keeping it
(old files without a layout load as row-major)."""
import hashlib
import json
import pathlib

import numpy as np
import pytest

import nbaccel as nb
from nbaccel import nn
from nbaccel.ops import quantized as Q
from nbaccel.quant import QuantizedTensor, int4_weight_only, quantize_
from nbaccel.quant import layout as L
from nbaccel_kernels.quant import cpu, packing as P, reference as R, simd

OLD_FILE = pathlib.Path(__file__).parent / "data" / "quant-format1-int4.npz"
SIMD = bool(cpu.INT4_GEMV_SIMD)


def _model():
    """Layers 0 and 2 can be interleaved ([128, 256], [64, 128]); layer 4 cannot ([10, 64])."""
    nb.manual_seed(39)
    return nn.Sequential(nn.Linear(256, 128), nn.GELU(), nn.Linear(128, 64), nn.GELU(),
                         nn.Linear(64, 10))


def _float_weights(model):
    return [(m.weight.detach().numpy().copy(), m.bias.detach().numpy().copy())
            for m in model if isinstance(m, nn.Linear)]


def _expected(w, b, x, g, zp):
    """The reference kernel on row-major codes of the same weight (activations rounded as the
    CPU kernels round float32 ones)."""
    p, s, z = P.quantize_int4(w, g, zp)
    xr = simd.dequantized_activations(x) if x.dtype == np.float32 else x
    return R.int4_weight_only_matmul(xr, p, s, z, g, b)


# ---- the choice ------------------------------------------------------------------------------------

def test_choice_follows_shape_group_size_and_cpu(monkeypatch):
    w = nb.randn(128, 256)
    want = "rows4x64" if SIMD else "rows"
    assert QuantizedTensor.from_float(w, bits=4, group_size=128).layout == want
    assert QuantizedTensor.from_float(w, bits=4, group_size=64).layout == want
    assert QuantizedTensor.from_float(w, bits=4, group_size=32).layout == "rows"   # measured slower
    assert QuantizedTensor.from_float(nb.randn(10, 256), bits=4, group_size=64).layout == "rows"
    assert QuantizedTensor.from_float(nb.randn(8, 64), bits=4, group_size=64).layout == "rows"
    assert QuantizedTensor.from_float(w, bits=8).layout == "rows"
    monkeypatch.setattr(cpu, "INT4_GEMV_SIMD", ())      # no SIMD GEMV: nothing reads rows4x64 as is
    assert QuantizedTensor.from_float(w, bits=4, group_size=128).layout == "rows"


@pytest.mark.skipif(not SIMD, reason="this CPU has no explicit-SIMD int4 GEMV")
def test_quantize_chooses_per_layer():
    model = quantize_(_model(), int4_weight_only(group_size=64))
    assert [model[i].weight.layout for i in (0, 2, 4)] == ["rows4x64", "rows4x64", "rows"]
    assert "layout=rows4x64" in repr(model[0]) and "layout" not in repr(model[4])
    assert repr(model[0].weight).endswith("layout=rows4x64)")


# ---- every layout against the reference ---------------------------------------------------------

@pytest.mark.parametrize("layout", ["rows", "rows4x64", None])
@pytest.mark.parametrize("group_size,zero_point", [(64, False), (128, True), (32, True)])
@pytest.mark.parametrize("m", [1, 3, 17])
def test_forward_matches_the_reference(layout, group_size, zero_point, m):
    model = _model()
    ws = _float_weights(model)
    cfg = int4_weight_only(group_size=group_size, zero_point=zero_point, layout=layout)
    if layout == "rows4x64":       # layer 4 cannot take it: only the others
        quantize_(model, cfg, filter_fn=lambda mod, fqn: fqn in ("0", "2"))
    else:
        quantize_(model, cfg, filter_fn=lambda mod, fqn: isinstance(mod, nn.Linear)
                  and mod.in_features % group_size == 0)
    x = np.random.default_rng(m).standard_normal((m, 256)).astype(np.float32)
    with nb.no_grad():
        got = model[0](nb.tensor(x)).numpy()
    np.testing.assert_allclose(got, _expected(*ws[0], x, group_size, zero_point),
                               rtol=1e-4, atol=1e-5)
    q = model[0].weight
    p, s, z = P.quantize_int4(ws[0][0], group_size, zero_point)
    np.testing.assert_array_equal(q.qdata.numpy(), L.convert(p, "rows", q.layout))
    np.testing.assert_array_equal(q.dequantize().numpy(), P.dequantize_int4(p, s, z, group_size))
    with nb.no_grad():
        assert model(nb.tensor(x)).shape == (m, 10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows4x64_on_the_portable_loops(dtype, monkeypatch):
    """Without the SIMD GEMV (or on float64 activations) the kernel reads a row-major copy."""
    model = _model()
    ws = _float_weights(model)
    quantize_(model, int4_weight_only(group_size=64, layout="rows4x64"),
              filter_fn=lambda mod, fqn: fqn in ("0", "2"))
    monkeypatch.setattr(cpu, "INT4_GEMV_SIMD", ())
    for m in (1, 5, 11):
        x = np.random.default_rng(m).standard_normal((m, 256)).astype(dtype)
        with nb.no_grad():
            got = model[0](nb.tensor(x)).numpy()
        tol = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got, _expected(*ws[0], x, 64, False), **tol)


def test_layouts_agree_in_gradient_and_compiled():
    x = nb.randn(3, 256)
    outs, grads = [], []
    for layout in ("rows", "rows4x64"):
        model = quantize_(_model(), int4_weight_only(group_size=64, layout=layout),
                          filter_fn=lambda mod, fqn: fqn in ("0", "2"))
        xi = x.detach().requires_grad_(True)
        y = model(xi)
        y.sum().backward()
        outs.append(y.detach().numpy())
        grads.append(xi.grad.numpy())
        compiled = nb.compile(model)
        np.testing.assert_allclose(compiled(x).numpy(), outs[-1], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-6)


def test_with_layout_and_to():
    q = QuantizedTensor.from_float(nb.randn(8, 128), bits=4, group_size=64, zero_point=True,
                                   layout="rows4x64")
    r = q.with_layout("rows")
    assert r.layout == "rows" and r.scale is q.scale and r.with_layout("rows") is r
    np.testing.assert_array_equal(r.with_layout("rows4x64").qdata.numpy(), q.qdata.numpy())
    np.testing.assert_array_equal(r.dequantize().numpy(), q.dequantize().numpy())
    assert q.to("cpu") is q
    # the Triton path's reordering (the same reshape on NumPy and CuPy arrays)
    np.testing.assert_array_equal(Q._row_major(np, q.qdata.numpy(), "rows4x64"), r.qdata.numpy())


def test_layout_errors():
    with pytest.raises(ValueError, match="layout must be None or one of"):
        int4_weight_only(layout="cols")
    with pytest.raises(ValueError, match=r"layer '4' to int4 in the rows4x64 layout.*\[10, 64\]"):
        quantize_(_model(), int4_weight_only(group_size=32, layout="rows4x64"),
                  filter_fn=lambda mod, fqn: fqn == "4" or fqn == "0")
    with pytest.raises(ValueError, match="rows4x64 layout needs"):
        QuantizedTensor.from_float(nb.randn(10, 128), bits=4, group_size=64, layout="rows4x64")
    with pytest.raises(ValueError, match="int8 codes are row-major"):
        QuantizedTensor.from_float(nb.randn(8, 128), bits=8, layout="rows4x64")
    with pytest.raises(ValueError, match="only int4 codes have a layout"):
        nb.quant.quantized_linear(nb.randn(1, 4), np.zeros((4, 4), np.int8), np.ones(4, np.float32),
                                  mode="int8", layout="rows4x64")


# ---- nb.save / nb.load ----------------------------------------------------------------------------

def _format(path):
    with np.load(path, allow_pickle=False) as z:
        return json.loads(str(z["__nbaccel__"]))["format"]


@pytest.mark.parametrize("layout,flat_format,tree_format", [("rows", 1, 2), ("rows4x64", 3, 4)])
def test_save_load_keeps_the_layout(tmp_path, layout, flat_format, tree_format):
    model = quantize_(_model(), int4_weight_only(group_size=64, zero_point=True, layout=layout),
                      filter_fn=lambda mod, fqn: fqn in ("0", "2"))
    x = nb.randn(2, 256)
    want = model(x).numpy()
    path = tmp_path / "m.npz"
    nb.save(model.state_dict(), path)
    assert _format(path) == flat_format
    back = nb.load(path)
    assert back["0.weight"].layout == layout and repr(back["0.weight"]) == repr(model[0].weight)
    for part, t in model[0].weight.tensors().items():
        np.testing.assert_array_equal(back["0.weight"].tensors()[part].numpy(), t.numpy())
    for into in ("rows", "rows4x64"):       # a file loads into a model of either layout
        fresh = quantize_(_model(), int4_weight_only(group_size=64, zero_point=True, layout=into),
                          filter_fn=lambda mod, fqn: fqn in ("0", "2"))
        fresh.load_state_dict(nb.load(path))
        assert fresh[0].weight.layout == into
        np.testing.assert_array_equal(fresh(x).numpy(), want)
    nb.save([model[0].weight, {"step": 3}], tmp_path / "tree.npz")    # the tree format
    assert _format(tmp_path / "tree.npz") == tree_format
    q, extra = nb.load(tmp_path / "tree.npz")
    assert q.layout == layout and extra == {"step": 3}
    np.testing.assert_array_equal(q.dequantize().numpy(), model[0].weight.dequantize().numpy())


def test_a_file_from_before_layouts_loads_as_row_major():
    """tests/data/quant-format1-int4.npz was written by nb.save before layouts existed (format
    1, no layout in the metadata): an [8, 128] group-64 weight with zero points, and the float
    weight it came from."""
    assert _format(OLD_FILE) == 1
    d = nb.load(OLD_FILE)
    q, w = d["w4"], d["w"].numpy()
    assert q.layout == "rows" and q.metadata() == {"bits": 4, "group_size": 64, "shape": [8, 128]}
    p, s, z = P.quantize_int4(w, 64, True)
    np.testing.assert_array_equal(q.qdata.numpy(), p)
    np.testing.assert_array_equal(q.dequantize().numpy(), P.dequantize_int4(p, s, z, 64))
    # into a layer quantized now, in the layout chosen here
    layer = nn.Linear(128, 8, bias=False)
    quantize_(layer, int4_weight_only(group_size=64, zero_point=True, layout="rows4x64"))
    layer.load_state_dict({"weight": q})
    x = np.random.default_rng(1).standard_normal((1, 128)).astype(np.float32)
    np.testing.assert_allclose(layer(nb.tensor(x)).numpy(), _expected(w, None, x, 64, True),
                               rtol=1e-4, atol=1e-5)


def test_unknown_format_is_refused(tmp_path):
    path = tmp_path / "future.npz"
    np.savez(path, __nbaccel__=np.array(json.dumps({"format": 5, "entries": []})))
    with pytest.raises(ValueError, match="unknown format 5"):
        nb.load(path)


# ---- exported graphs -----------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["rows", "rows4x64"])
def test_exported_program_keeps_the_layout(tmp_path, layout):
    model = quantize_(_model(), int4_weight_only(group_size=64, layout=layout),
                      filter_fn=lambda mod, fqn: fqn in ("0", "2"))
    x = nb.randn(3, 256)
    want = model(x).numpy()
    nb.export(model, x).save(tmp_path / "ep")
    np.testing.assert_allclose(nb.load(tmp_path / "ep")(x).numpy(), want, rtol=1e-5, atol=1e-6)
    if layout == "rows":
        # a graph exported before layouts existed has no layout param: it reads row-major codes
        program = tmp_path / "ep" / "program.json"
        text = program.read_text()
        old = json.dumps(_drop_layout(json.loads(text)), indent=1)
        assert old != json.dumps(json.loads(text), indent=1)
        program.write_text(old)
        _reseal(tmp_path / "ep", "program.json")
        np.testing.assert_allclose(nb.load(tmp_path / "ep")(x).numpy(), want, rtol=1e-5, atol=1e-6)


def _drop_layout(node):
    """The JSON of an exported program with every ``layout`` op param left out."""
    if isinstance(node, list):
        return [_drop_layout(v) for v in node if not (isinstance(v, list) and v[:1] == ["layout"])]
    if isinstance(node, dict):
        return {k: _drop_layout(v) for k, v in node.items()}
    return node


def _reseal(directory, name):
    """Write the edited file's size and checksum into the manifest (as ep.save would have)."""
    manifest = directory / "manifest.json"
    data = (directory / name).read_bytes()
    meta = json.loads(manifest.read_text())

    def fix(node):
        if isinstance(node, dict):
            if name in node and isinstance(node[name], dict) and "sha256" in node[name]:
                node[name] = {**node[name], "sha256": hashlib.sha256(data).hexdigest(),
                              "bytes": len(data)}
            for v in node.values():
                fix(v)
    fix(meta)
    manifest.write_text(json.dumps(meta))


def test_the_gpu_kernel_gets_row_major_codes(monkeypatch):
    """On CuPy arrays the op hands the Triton kernel (which reads row-major codes only) a
    reordered copy; checked with a stand-in array module and kernel."""
    import types
    seen = {}

    def int4_weight_only_matmul(x, packed, scales, zeros, group_size, bias, **kw):
        seen.update(packed=packed, kw=kw)
        return R.int4_weight_only_matmul(x, packed, scales, zeros, group_size, bias)

    monkeypatch.setattr(Q, "_kernels", lambda xp: types.SimpleNamespace(
        int4_weight_only_matmul=int4_weight_only_matmul))
    fake_cupy = types.SimpleNamespace(__name__="cupy", ascontiguousarray=np.ascontiguousarray)
    q = QuantizedTensor.from_float(nb.randn(8, 128), bits=4, group_size=64, layout="rows4x64")
    x = np.random.default_rng(2).standard_normal((2, 128))
    y = Q._linear_impl(fake_cupy, x, q.qdata.numpy(), q.scale.numpy(), mode="int4",
                       group_size=64, zeros=False, bias=False, layout="rows4x64")
    rows = q.with_layout("rows")
    np.testing.assert_array_equal(seen["packed"], rows.qdata.numpy())
    assert seen["kw"] == {}
    np.testing.assert_allclose(y, x @ rows.dequantize().numpy().T.astype(np.float64), rtol=1e-5,
                               atol=1e-6)
