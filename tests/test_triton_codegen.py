"""The Triton renderer, run through Triton's interpreter on NumPy arrays (no GPU needed):
every result against plain NumPy (values, dtypes, shapes), over N-D broadcasting, reductions
over every axis set (one block and the blocked loop), argmax/argmin ties and NaNs, strided,
reversed and broadcast layouts, every dtype Triton has, the primitives' edge values, and the
structure of the generated source. Small shapes: the interpreter costs ~1.5 ms a program.
With a GPU and CuPy the same tests run on the GPU (NumPy inputs go to the device and the
results come back)."""
import os

import numpy as np
import pytest

pytest.importorskip("triton")

import ml_dtypes  # noqa: E402

import nbaccel as nb  # noqa: E402
from nbaccel.compiler.codegen import triton as tri  # noqa: E402
from nbaccel.compiler.runtime.triton_runtime import gpu_present, interpret_requested  # noqa: E402

# on a machine with a GPU (and CuPy) the same tests run the kernels on it
ON_GPU = gpu_present()[0] and not interpret_requested()
if not ON_GPU:
    os.environ.setdefault("NBACCEL_TRITON_INTERPRET", "1")     # for the child processes, and
    nb.config["triton_interpret"] = os.environ["NBACCEL_TRITON_INTERPRET"] not in ("", "0")
interpreter_only = pytest.mark.skipif(ON_GPU, reason="checks what Triton's interpreter lacks")

rng = np.random.default_rng(0)
BF16 = np.dtype(ml_dtypes.bfloat16)
RTOL = {np.dtype(np.float16): 2e-3, BF16: 1.6e-2, np.dtype(np.float32): 2e-5, np.dtype(np.float64): 1e-12}


def check(fn, *args, rtol=None, kernels=None):
    """Compile fn on the Triton tier, compare with NumPy; returns the report's kernel rows."""
    cf = nb.compile(fn, backend="triton")
    with np.errstate(all="ignore"):
        out = cf(*args)
        ref = fn(*args)
    outs, refs = (out, ref) if isinstance(ref, tuple) else ((out,), (ref,))
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert type(o) is type(r), (type(o), type(r))
        assert o.dtype == r.dtype and o.shape == r.shape, (o.dtype, r.dtype, o.shape, r.shape)
        if r.dtype.kind in "fc" or r.dtype == BF16:
            tol = rtol if rtol is not None else RTOL.get(r.dtype, 2e-5)
            o64, r64 = np.asarray(o, np.float64), np.asarray(r, np.float64)
            np.testing.assert_array_equal(np.isnan(o64), np.isnan(r64))
            np.testing.assert_allclose(o64, r64, rtol=tol, atol=tol)
        else:
            np.testing.assert_array_equal(o, r)
    with np.errstate(all="ignore"):      # reading the report times the eager baseline
        rows = [k for k in cf.report.kernels if k["backend"] not in ("blas",)]
    assert rows and all(k["backend"] == "triton" for k in rows if "ranges" in k), rows
    if kernels is not None:
        assert len([k for k in rows if "ranges" in k]) == kernels, rows
    return rows


def sources(fn, *args):
    cf = nb.compile(fn, backend="triton")
    cf(*args)
    entry = next(iter(cf.cache.entries.values()))
    prog = next(iter(entry.programs.values()))
    return [s.source for s in prog.slots.values()]


@pytest.fixture
def looped(monkeypatch):
    """Reduction ranges longer than 4 elements take the blocked loop."""
    monkeypatch.setattr(tri, "BLOCK_R_MAX", 4)
    monkeypatch.setattr(tri, "COLUMN_BLOCK_R", 4)


# -- broadcasting and layouts ------------------------------------------------------------------

def test_pairwise_distances_are_one_kernel():
    X = rng.random((30, 8), dtype=np.float32)
    C = rng.random((6, 8), dtype=np.float32)
    rows = check(lambda X, C: ((X[:, None, :] - C[None, :, :]) ** 2).sum(-1), X, C, kernels=1)
    assert rows[0]["ranges"] == "(30, 6 | 8)"


@pytest.mark.parametrize("shapes", [((3, 1, 4), (1, 5, 4)), ((2, 1), (2, 1, 1, 3)), ((4,), (3, 1)),
                                    ((), (2, 3)), ((1, 0, 2), (3, 1, 2)), ((2, 3, 4, 5), (5,))])
def test_elementwise_nd_broadcasting(shapes):
    a = rng.standard_normal(shapes[0]).astype(np.float32)
    b = rng.standard_normal(shapes[1]).astype(np.float32)
    check(lambda a, b: np.tanh(a * b) + np.maximum(a, b) / 3 - np.sqrt(np.abs(a)), a, b)


def test_strided_reversed_and_broadcast_views_fold_into_loads():
    x = rng.standard_normal((12, 10)).astype(np.float32)
    check(lambda x: x[::-2, 1::3].T * 2 + x[1::2, 9:0:-3].T + x[None, 0, :3, None], x, kernels=1)
    check(lambda x: np.swapaxes(x.reshape(3, 4, 10), 0, 2) + 1, x)
    check(lambda x: (x[::-1] * x[:, ::-1]).sum(axis=0), x)
    check(lambda x: np.broadcast_to(x[3], (5, 10)) * x[:5], x)
    # a non-contiguous input buffer
    big = rng.standard_normal((6, 20)).astype(np.float32)
    check(lambda v: np.exp(v) - v.max(axis=1, keepdims=True), big[:, 3:17:2])


def test_contiguous_elementwise_indexes_with_the_flat_index_alone():
    x = rng.standard_normal((4, 5, 6)).astype(np.float32)
    (src,) = sources(lambda x: x * 2 + 1, x)
    body = src.split("@triton.jit\ndef kernel")[1]
    assert "tl.program_id(0)" in body and "BLOCK_O: tl.constexpr" in body
    assert "mask=o_mask" in body and "//" not in body and "%" not in body
    (src,) = sources(lambda x: x.transpose(2, 0, 1) * 2, x)       # a transposed read: split per dim
    body = src.split("@triton.jit\ndef kernel")[1]
    assert "//" in body and "%" in body


# -- reductions -----------------------------------------------------------------------------------

AXES = [None, 0, 1, 2, (0, 1), (0, 2), (1, 2), (0, 1, 2)]


@pytest.mark.parametrize("loop", [False, True])
@pytest.mark.parametrize("axis", AXES)
def test_reductions_over_every_axis_set(axis, loop, monkeypatch):
    if loop:
        monkeypatch.setattr(tri, "BLOCK_R_MAX", 4)
        monkeypatch.setattr(tri, "COLUMN_BLOCK_R", 4)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    x[1, 2, 3] = np.nan
    b = x > 0.3

    def f(x, b):
        return (x.sum(axis=axis), x.max(axis=axis), x.min(axis=axis),
                (x * 0.5).prod(axis=axis), b.any(axis=axis), b.all(axis=axis), x.mean(axis=axis, keepdims=True),
                np.abs(x).std(axis=axis), b.sum(axis=axis))
    check(f, x, b)


@pytest.mark.parametrize("loop", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_])
def test_argmax_argmin_first_occurrence_ties_and_nans(dtype, loop, monkeypatch):
    if loop:
        monkeypatch.setattr(tri, "BLOCK_R_MAX", 4)
        monkeypatch.setattr(tri, "COLUMN_BLOCK_R", 4)
    x = rng.integers(-2, 3, (6, 9)).astype(dtype)
    if dtype in (np.float32, np.float64):
        x[1, 4] = np.nan
        x[2, 0] = np.nan
        x[2, 7] = np.nan
        x[3, :] = -np.inf
        x[4, 5] = np.inf
    check(lambda x: (x.argmax(axis=1), x.argmin(axis=1), x.argmax(axis=0), x.argmin(axis=0), x.argmax()), x)


@pytest.mark.parametrize("loop", [False, True])
def test_multi_pass_kernels_softmax_layer_norm_and_centring(loop, monkeypatch):
    if loop:
        monkeypatch.setattr(tri, "BLOCK_R_MAX", 4)
        monkeypatch.setattr(tri, "COLUMN_BLOCK_R", 4)
    x = rng.standard_normal((7, 11)).astype(np.float32)

    def softmax(x, axis):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)
    check(lambda x: softmax(x, -1), x, kernels=1)
    check(lambda x: softmax(x, 0), x, kernels=1)
    check(lambda x: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5), x)
    check(lambda x: (x - x.mean(0), x.sum(0), x.max(0)), x)


def test_empty_ranges_match_numpy_and_its_errors():
    e = np.zeros((3, 0), np.float32)
    check(lambda x: (x.sum(axis=1), x.prod(axis=1), x.any(axis=1), x.sum(axis=0), x + 1), e)
    cf = nb.compile(lambda x: x.max(axis=1), backend="triton")
    with pytest.raises(ValueError):
        cf(e)
    cf = nb.compile(lambda x: x.argmax(axis=1), backend="triton")
    with pytest.raises(ValueError):
        cf(e)


def test_the_blocked_loop_is_used_for_long_rows_and_for_columns():
    x = rng.standard_normal((3, 9000)).astype(np.float32)
    (src,) = sources(lambda x: x - x.max(axis=1, keepdims=True), x)
    assert "for r0 in range(0, n_red, BLOCK_R):" in src
    check(lambda x: (x.sum(axis=1), x.argmax(axis=1), x - x.max(axis=1, keepdims=True)), x)
    c = rng.standard_normal((100, 6)).astype(np.float32)      # axis 0: 64-row blocks of columns
    (src,) = sources(lambda c: c - c.max(axis=0), c)
    assert "for r0 in range(0, n_red, BLOCK_R):" in src
    check(lambda c: (c.sum(axis=0), c.argmin(axis=0), c - c.max(axis=0)), c)


# -- dtypes ---------------------------------------------------------------------------------------

ALL = [np.float16, BF16, np.float32, np.float64, np.int8, np.uint8, np.int16, np.uint16, np.int32,
       np.uint32, np.int64, np.uint64, np.bool_]


@pytest.mark.parametrize("dtype", ALL, ids=lambda d: np.dtype(d).name)
def test_every_dtype_loads_computes_and_stores_as_numpy(dtype):
    x = (rng.standard_normal((4, 6)) * 4).astype(dtype)
    y = (rng.standard_normal((4, 6)) * 4).astype(dtype)
    check(lambda x, y: (x * y, np.maximum(x, y), x.sum(axis=0), x.max(axis=1), x == y, x.astype(np.float32),
                        np.where(x > y, x, y), x.min(axis=0), x.argmin(axis=1), x.argmax(axis=0)), x, y)


def test_half_precision_rounds_every_operation_like_numpy():
    x = (rng.standard_normal(64) * 30).astype(np.float16)
    check(lambda x: np.exp(x * 0.1) * x + x / 3, x, rtol=2e-3)
    b = x.astype(BF16)
    check(lambda x: x * x - x / 7, b, rtol=1.6e-2)


# -- primitives and NumPy's edge semantics -----------------------------------------------------------

SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 0.5, -0.5, 1.5, 3.0, 1e-7, -1e-7, 40.0, -40.0,
                    np.inf, -np.inf, np.nan, 7.25])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_unary_primitives(dtype):
    x = SPECIAL.astype(dtype)
    fns = [np.negative, np.abs, np.sign, np.floor, np.ceil, np.trunc, np.rint, np.exp, np.expm1, np.log,
           np.log1p, np.sqrt, np.sin, np.cos, np.tan, np.tanh, np.arcsinh, np.arccosh, np.arctanh,
           np.isnan, np.isinf, np.isfinite, np.signbit, np.logical_not, np.square, np.positive]
    for f in fns:
        check(lambda x, f=f: f(x), x, rtol=1e-5 if dtype == np.float32 else 1e-9)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_binary_primitives(dtype):
    a = np.repeat(SPECIAL, SPECIAL.size).astype(dtype)
    b = np.tile(SPECIAL, SPECIAL.size).astype(dtype)
    fns = [np.add, np.subtract, np.multiply, np.divide, np.maximum, np.minimum, np.floor_divide,
           np.remainder, np.fmod, np.copysign, np.less, np.greater_equal, np.equal, np.not_equal,
           np.logical_and, np.logical_xor]
    for f in fns:
        check(lambda a, b, f=f: f(a, b), a, b, rtol=1e-5 if dtype == np.float32 else 1e-9)
    pos = np.abs(a[np.isfinite(a)]) + 0.5
    check(lambda a, b: np.power(a, b), pos, np.resize(b[np.isfinite(b)], pos.size) / 8, rtol=1e-4)
    check(lambda a: (a ** 2, a ** 3, a ** 0.5, a ** -1, a ** 1.5), np.abs(a), rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.int8])
def test_integer_primitives_floor_division_remainder_and_shifts(dtype):
    vals = np.array([0, 1, -1, 7, -7, 3, -3, 100, -100, 2, 127, -128], dtype=np.int64)
    vals = vals.astype(dtype)
    a, b = np.repeat(vals, vals.size), np.tile(vals, vals.size)
    check(lambda a, b: (np.floor_divide(a, b), np.remainder(a, b), np.fmod(a, b), a * b + a - b, a // 2, a % 3,
                        np.maximum(a, b), np.minimum(a, b), np.abs(a), np.sign(a), ~a, a & b, a | b, a ^ b,
                        a ** 2, a ** 3, a / b, a < b), a, b)
    s = np.resize(np.arange(-2, 70), a.size).astype(dtype)
    check(lambda a, s: (np.left_shift(a, s), np.right_shift(a, s)), a, s)


def test_weak_python_scalars_follow_numpy2():
    x = rng.integers(-3, 4, 12).astype(np.int32)
    b = x > 0
    check(lambda x: (x + 2, x * 0.5, x >= 2 ** 40, x < -2 ** 40, np.maximum(x, -1), x / 2), x)
    check(lambda b: (b * 1.5, 0.5 / (b + 1), np.logical_xor(b, 0.5), np.where(b, 2, -1.5), b + True), b)
    cf = nb.compile(lambda x: x ** -1, backend="triton")
    with pytest.raises(ValueError):
        cf(x)


# -- the tier around it ---------------------------------------------------------------------------

def test_report_and_code_name_the_triton_tier():
    x = rng.standard_normal((4, 8)).astype(np.float32)
    cf = nb.compile(lambda x: np.exp(x).sum(axis=1), backend="triton")
    cf(x)
    k = [r for r in cf.report.kernels if "ranges" in r]
    assert k and k[0]["backend"] == "triton" and k[0]["ranges"] == "(4 | 8)"
    prog = next(iter(next(iter(cf.cache.entries.values())).programs.values()))
    assert prog.tier() == "triton" and "@triton.jit" in prog.code() and "tl.sum(" in prog.code()


def test_matmul_runs_as_an_extern_between_triton_kernels():
    a = rng.standard_normal((5, 4)).astype(np.float32)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    f = lambda a, w: np.tanh((a * 2) @ w + 1)   # noqa: E731
    check(f, a, w)
    cf = nb.compile(f, backend="triton")
    cf(a, w)
    backends = [r["backend"] for r in cf.report.kernels]
    assert "blas" in backends and "triton" in backends


def test_several_shapes_reuse_the_generated_module():
    from nbaccel.compiler.runtime import triton_runtime as tr
    cf = nb.compile(lambda x: (x * 3).sum(axis=-1), backend="triton")
    for n in (5, 6, 7):
        x = rng.standard_normal((3, n)).astype(np.float32)
        np.testing.assert_allclose(cf(x), (x * 3).sum(axis=-1), rtol=1e-5)
    assert len(tr._MODULES) >= 1


@interpreter_only
def test_unrenderable_kernels_raise_a_clear_reason():
    x = rng.standard_normal(8).astype(np.float32)
    with pytest.raises(tri.TritonUnsupported, match="libdevice"):
        nb.compile(lambda x: np.arctan(x), backend="triton")(x)
    nb.config["strict"] = False
    cf = nb.compile(lambda x: np.arctan(x) + 1, backend="triton")
    np.testing.assert_allclose(cf(x), np.arctan(x) + 1, rtol=1e-6)
    assert any("libdevice" in (k.get("note") or "") for k in cf.report.kernels)


def test_without_a_gpu_the_backend_says_what_to_install(monkeypatch):
    import importlib.util
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed")
    monkeypatch.setitem(nb.config, "triton_interpret", False)
    with pytest.raises(RuntimeError, match=r"nbaccel\[gpu\]"):
        nb.compile(lambda x: x + 1, backend="triton")


def test_status_probe_is_honest():
    from nbaccel.compiler.report.triton_status import triton_status
    state, reason = triton_status()
    assert state in ("available", "interpreter only", "missing") and reason
    import importlib.util
    if importlib.util.find_spec("cupy") is None:
        assert state == "interpreter only"


def test_launch_configurations_an_autotuner_may_choose_give_the_same_values(looped):
    x = rng.standard_normal((6, 10)).astype(np.float32)
    f = lambda x: (x - x.max(axis=1, keepdims=True), x.sum(axis=1))   # noqa: E731
    cf = nb.compile(f, backend="triton")
    want = cf(x)
    prog = next(iter(next(iter(cf.cache.entries.values())).programs.values()))
    (slot,) = prog.slots.values()
    space = slot.candidates()
    assert space and all("BLOCK_O" in c and "BLOCK_R" in c for c in space)
    for cfg in [dict(BLOCK_O=1, BLOCK_R=2), dict(BLOCK_O=4, BLOCK_R=8), dict(BLOCK_O=16, BLOCK_R=4)]:
        slot.configure(**cfg)
        for g, w in zip(cf(x), want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_integer_power_wraps_and_a_negative_exponent_raises_numpys_error():
    a = np.array([0, 1, -1, 2, -3, 7, 100, -100], dtype=np.int64)
    b = np.array([0, 3, 5, 10, 3, 2, 9, 63], dtype=np.int64)
    check(lambda a, b: (a ** b, a.astype(np.int32) ** b.astype(np.int32), a.astype(np.int8) ** b.astype(np.int8)), a, b)
    cf = nb.compile(lambda a, b: a ** b, backend="triton")
    with pytest.raises(ValueError, match="negative integer powers"):
        cf(a, -b)
    with pytest.raises(ValueError, match="negative integer powers"):
        nb.compile(lambda a: a ** -1, backend="triton")(a)


def test_nbaccel_status_lists_triton_with_its_state(monkeypatch):
    from IPython.testing.globalipapp import get_ipython, start_ipython
    shell = start_ipython() or get_ipython()
    shell.run_line_magic("load_ext", "nbaccel")
    from nbaccel.compiler.report.triton_status import triton_status
    from nbaccel.magics import get_extension
    state, _ = triton_status()
    monkeypatch.delenv("NBACCEL_STABLE_OUTPUT", raising=False)
    backends = get_extension(shell).status_info()["backends"]
    line = [b for b in backends if b.startswith("triton")]
    assert line == ["triton"] if state == "available" else line[0].startswith(f"triton ({state}: ")


def test_64_bit_indexing_gives_the_same_values(monkeypatch):
    monkeypatch.setattr(tri, "INT32_LIMIT", 0)        # as if the buffers were past 2**31 elements
    x = rng.standard_normal((5, 9)).astype(np.float32)
    (src,) = sources(lambda x: x.T * 2 - x.T.max(axis=0), x)
    assert "pid.to(tl.int64)" in src
    check(lambda x: (x.T * 2 - x.T.max(axis=0), x.argmax(axis=1), x[::-1] + 1), x)
    monkeypatch.setattr(tri, "BLOCK_R_MAX", 4)
    monkeypatch.setattr(tri, "COLUMN_BLOCK_R", 4)
    check(lambda x: (x.sum(axis=1), x.argmin(axis=1), x - x.mean(axis=0, keepdims=True)), x)


def test_max_autotune_hands_each_slot_to_the_gpu_autotuner_once(monkeypatch):
    """The protocol of nbaccel.gpu.autotune.tune: candidates(), configure(**flat dict),
    source, and one launch per call (its trials call the slot again)."""
    import sys
    import types
    calls = []

    def tune(kernel, *arrays, cache_dir=None):
        cands = kernel.candidates()
        assert cands and isinstance(kernel.source, str)
        assert cache_dir is not None and cache_dir.endswith("autotune")   # the compiler's
        for c in cands[:3]:
            kernel.configure(**c)
            kernel(*arrays)
        kernel.configure(**cands[0])
        calls.append(len(cands))
        return cands[0]
    fake = types.ModuleType("nbaccel.gpu.autotune")
    fake.tune = tune
    pkg = sys.modules.get("nbaccel.gpu") or types.ModuleType("nbaccel.gpu")
    monkeypatch.setitem(sys.modules, "nbaccel.gpu", pkg)
    monkeypatch.setitem(sys.modules, "nbaccel.gpu.autotune", fake)
    monkeypatch.setattr(pkg, "autotune", fake, raising=False)
    x = rng.standard_normal((6, 10)).astype(np.float32)
    f = lambda x: (x - x.max(axis=1, keepdims=True), x * 2)   # noqa: E731
    cf = nb.compile(f, backend="triton", mode="max-autotune")
    cf(x)
    prog = next(iter(next(iter(cf.cache.entries.values())).programs.values()))
    prog_slots = list(prog.slots.values())
    for slot in prog_slots:            # under the interpreter the slots do not tune: switch it on
        slot.autotune = True
    for _ in range(2):
        got = cf(x)
        for g, w in zip(got, f(x)):
            np.testing.assert_allclose(g, w, rtol=1e-6)
    assert len(calls) == len(prog_slots) and all(s.tune_note.startswith("autotuned") for s in prog_slots)


@interpreter_only
def test_interpreter_mode_after_triton_was_imported_says_what_to_do(tmp_path):
    import subprocess
    import sys
    code = ("import triton, numpy as np, nbaccel as nb\n"
            "try:\n    nb.compile(lambda x: x + 1, backend='triton')\n"
            "except RuntimeError as e:\n    print('ERR', e)\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(NBACCEL_TRITON_INTERPRET="1", NBACCEL_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert "ERR" in out.stdout and "before anything imports triton" in out.stdout, out.stdout + out.stderr


@interpreter_only
def test_compile_magic_with_triton_and_no_gpu_is_a_usage_error(monkeypatch, capsys):
    from IPython.testing.globalipapp import get_ipython, start_ipython
    shell = start_ipython() or get_ipython()
    shell.run_line_magic("load_ext", "nbaccel")
    shell.user_ns["np"] = np
    monkeypatch.setitem(nb.config, "triton_interpret", False)
    r = shell.run_cell("%%compile --backend triton --report none\nq_t = np.ones(3) * 2\n")
    assert not r.success and "nbaccel[gpu]" in str(r.error_in_exec)
    assert "q_t" not in shell.user_ns
    monkeypatch.setitem(nb.config, "triton_interpret", True)
    r = shell.run_cell("%%compile --backend triton --report none\nq_t = np.ones(3) * 2\n")
    assert r.success and shell.user_ns["q_t"].tolist() == [2.0, 2.0, 2.0]
    del shell.user_ns["q_t"]


@interpreter_only
def test_gpu_renderings_compile_for_sm90(tmp_path):
    """What the interpreter cannot check: Triton's real front end and the ptxas in its wheel
    accept every GPU rendering (one-block, looped and 64-bit forms, libdevice functions,
    every dtype), compiled to an sm_90 cubin in a process without the interpreter."""
    import pathlib
    import subprocess
    import sys
    script = pathlib.Path(__file__).parent / "triton_sm90" / "compile_check.py"
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "NBACCEL_TRITON_INTERPRET")}
    env.update(TRITON_CACHE_DIR=str(tmp_path / "triton"), NBACCEL_CACHE_DIR=str(tmp_path / "nbaccel"),
               PYTHONPATH=os.pathsep.join([str(script.parents[2])] + sys.path))
    out = subprocess.run([sys.executable, str(script), str(tmp_path / "kernels")], env=env,
                         capture_output=True, text=True, timeout=300)
    last = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    assert out.returncode == 0 and last.endswith(", 0 failed"), out.stdout[-3000:] + out.stderr[-3000:]
    assert int(last.split()[1]) >= 30
