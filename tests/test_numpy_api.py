"""nbaccel.numpy against plain NumPy: values AND dtypes, eagerly and traced by the compiler."""
import numpy as np
import pytest

import nbaccel
import nbaccel.numpy as xnp

F32 = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
F64 = np.random.default_rng(1).standard_normal((4, 5))
I64 = np.arange(20).reshape(4, 5) - 7
I32 = (np.arange(20).reshape(4, 5) % 6).astype(np.int32)
U8 = (np.arange(20).reshape(4, 5) % 7).astype(np.uint8)
B = F64 > 0
POS = np.abs(F64) + 0.5
ARRAYS = {"f32": F32, "f64": F64, "i64": I64, "i32": I32, "u8": U8, "b": B, "pos": POS}

EXPRS = [
    # elementwise and Python-scalar promotion (NEP 50: Python scalars are weak)
    "f32 * 2.5", "f32 + 1", "i64 * 2.5", "i64 + 1", "i32 + 1", "i32 * 2.0", "u8 + 1", "u8 * 1.5",
    "b + 1", "b * 2.0", "b & b", "f32 + f64", "i32 + i64", "i32 + f32", "u8 + i32", "u8 + f32",
    "i64 / 2", "i32 / i32.clip(1, None)", "i64 // 3", "i64 % 3", "f64 ** 2", "i64 ** 2",
    "2 ** f32", "1 - f32", "-f32", "abs(i32)", "f32 > 0", "i64 == 3",
    "np.exp(f32)", "np.exp(i64 % 5)", "np.exp(i32 % 5)", "np.exp(u8)", "np.log(pos)", "np.sqrt(pos)",
    "np.tanh(f64)", "np.sin(i32)", "np.abs(i64)", "np.maximum(f32, 0)", "np.minimum(i64, 2.5)",
    "np.where(b, f32, 0)", "np.where(b, i64, 1.5)", "np.clip(f64, -0.5, 0.5)", "np.sign(i64)",
    "np.floor(f32)", "np.square(i32)", "np.power(f32, 2)", "np.add(f32, 1)", "np.multiply(i64, f32)",
    "np.exp(1.0)", "np.exp(1)", "np.add(1, 2.5)", "np.isnan(f32)", "np.logical_and(b, f32 > 1)",
    # reductions and their dtypes
    "f32.sum()", "i32.sum()",
    "u8.sum()", "b.sum()", "np.sum(f32, axis=0)", "i64.mean()",
    "i32.mean(axis=1)", "f32.mean(axis=1, keepdims=True)", "f32.max(axis=1)", "i64.min()",
    "np.argmax(f32, axis=1)", "np.argmin(i64)", "f64.std()", "f32.var(axis=0)", "i64.prod(axis=0)",
    "np.cumsum(i32, axis=1)", "np.cumsum(f32)", "np.any(b)", "np.all(b, axis=0)", "np.mean([1, 2, 3])",
    # movement / linalg
    "f32.T", "f32.reshape(5, 4)", "np.transpose(f64)", "np.concatenate([f32, f32])",
    "np.stack([i64, i64], axis=1)", "f32[1:3, ::2]", "f64[b]", "f32 @ f32.T", "np.dot(f64, f64.T)",
    "np.matmul(i64, i64.T)", "np.linalg.inv(f64[:, :4] @ f64[:, :4].T + 4 * np.eye(4))",
    "np.swapaxes(f32, 0, 1)", "np.expand_dims(f32, 0)", "np.flip(i32, axis=1)",
    # creation with NumPy's defaults
    "np.zeros((2, 3))", "np.ones(3, dtype=np.int32)", "np.full((2, 2), 7)", "np.full((2, 2), 1.5)",
    "np.full(3, True)", "np.arange(5)", "np.arange(0, 1, 0.25)", "np.arange(5.0)",
    "np.arange(2, 10, 3, dtype=np.float32)", "np.linspace(0, 1, 5)", "np.eye(3)", "np.eye(2, 3, 1)",
    "np.empty((2, 2)) * 0", "np.zeros_like(i32)", "np.ones_like(f32)", "np.full_like(f64, 3)",
    "np.zeros_like(f32, dtype=np.float64)", "np.identity(3)", "np.array([1, 2, 3])",
    "np.array([1.0, 2.0])", "np.asarray([[1, 2]], dtype=np.float32)", "np.array(f32)",
    "np.zeros(4) + f32[0, :4]", "f32 * np.float64(2)", "f32 * np.float32(2)",
    # functions without ops: NumPy fallback, wrapped back
    "np.median(f64, axis=0)", "np.diff(i64, axis=1)", "np.cbrt(f32)", "np.percentile(f64, 50)",
    "np.isclose(f32, f32)", "np.add.reduce(f32, axis=0)", "np.fft.rfft(f64, axis=1).real",
]


def _value(x):
    if isinstance(x, nbaccel.Tensor):
        a = np.asarray(x)
        return a[()] if a.ndim == 0 else a
    return x


def _check(got, want, expr):
    got = _value(got)
    if isinstance(want, (np.ndarray, np.generic)):
        assert np.asarray(got).dtype == want.dtype, f"{expr}: dtype {np.asarray(got).dtype} != {want.dtype}"
        np.testing.assert_allclose(np.asarray(got, dtype=float if want.dtype.kind != "b" else bool),
                                   np.asarray(want, dtype=float if want.dtype.kind != "b" else bool),
                                   rtol=1e-5, atol=1e-6, err_msg=expr)
    else:
        assert got == want, expr


@pytest.mark.parametrize("expr", EXPRS)
def test_eager_matches_numpy(expr):
    want = eval(expr, {"np": np, **ARRAYS})
    got = eval(expr, {"np": xnp, **{k: nbaccel.asarray(v) for k, v in ARRAYS.items()}})
    _check(got, want, expr)


@pytest.mark.parametrize("expr", EXPRS)
def test_traced_matches_numpy(expr):
    """The same expression inside a compiled function whose inputs are NumPy arrays."""
    want = eval(expr, {"np": np, **ARRAYS})
    names = sorted(ARRAYS)
    fn = eval(f"lambda {', '.join(names)}: {expr}", {"np": xnp})
    cf = nbaccel.compile(fn, backend="numpy")
    got = cf(*(ARRAYS[n] for n in names))
    _check(got, want, expr)


def test_results_are_numpy_flavoured_tensors():
    t = xnp.exp(F32)
    assert isinstance(t, nbaccel.Tensor) and t._np and t.dtype is nbaccel.float32
    assert xnp.zeros(3)._np and xnp.zeros(3).dtype is nbaccel.float64
    assert (xnp.arange(3) * 0.5).dtype is nbaccel.float64


def test_numpy_objects_are_numpy_own():
    for name in ("float32", "int64", "pi", "e", "inf", "nan", "newaxis", "ndarray", "dtype",
                 "finfo", "iinfo", "bool_"):
        assert getattr(xnp, name) is getattr(np, name), name
    assert xnp.random.RandomState is np.random.RandomState   # NumPy's own generator objects
    assert xnp.linalg.inv is not np.linalg.inv and callable(xnp.linalg.inv)
    assert callable(xnp.fft.fft) and callable(xnp.linalg.eig)
    with pytest.raises(AttributeError):
        xnp.not_a_numpy_name  # noqa: B018


def test_random_is_bit_identical():
    np.random.seed(3)
    a = xnp.random.rand(4, 4)
    assert isinstance(a, nbaccel.Tensor) and a._np      # wrapped, so arithmetic on it is captured
    np.random.seed(3)
    assert np.array_equal(np.asarray(a), np.random.rand(4, 4))
    assert np.array_equal(a, np.asarray(a))              # NumPy functions without an op fall back


def test_fallback_on_tracer_is_a_graph_break_naming_the_function():
    cf = nbaccel.compile(lambda x: xnp.median(xnp.exp(x), axis=0) * 2, backend="numpy")
    got = cf(F64)
    np.testing.assert_allclose(got, np.median(np.exp(F64), axis=0) * 2)
    assert any("median" in b["reason"] for b in cf.report.graph_breaks)


def test_unsupported_signatures_fall_back_and_errors_are_numpy_errors():
    out = np.empty_like(F32)
    xnp.exp(F32, out=out)                        # out= is not an op argument: NumPy does it
    np.testing.assert_allclose(out, np.exp(F32))
    with pytest.raises(ValueError):
        xnp.add(np.ones(3), np.ones(4))
    with pytest.raises(np.exceptions.AxisError if hasattr(np, "exceptions") else Exception):
        xnp.median(F64, axis=5)


def test_import_forms():
    import nbaccel.numpy as m
    from nbaccel.numpy import exp, zeros
    assert m is nbaccel.numpy and exp is nbaccel.numpy.exp and zeros(2).dtype is nbaccel.float64
