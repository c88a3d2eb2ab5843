"""What makes a numba-tier cold compile cheap, checked by structure and values (never by time):
the fastmath helpers pasted into kernels as straight-line text (fastmath_text.py) compute what
the helpers compute and still vectorise; kernels are serial code run in shares on threads
(numba_launch.py) with the same results; the report splits the JIT time."""
import re
import sys
import pathlib

import numpy as np
import pytest
import numba
from numba import njit

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from tests.test_fastmath import REFERENCE, RTOL, TINY, sample_points  # noqa: E402

import nbaccel as nb  # noqa: E402
from nbaccel.compiler.cache import cache, jit_split, warmup  # noqa: E402
from nbaccel.compiler.runtime import runtime  # noqa: E402
from nbaccel.compiler.codegen import fastmath, fastmath_text, numba as nb_codegen, numba_launch  # noqa: E402

HELPERS = sorted(fastmath_text.BODIES)


def _pasted_kernel(dtype_name, names=HELPERS):
    """out[j, i] = helper_j(x[i]) with every helper pasted in as text, as kernels get them."""
    lines, imported = [], set()
    for j, h in enumerate(names):
        body, result, used = fastmath_text.inline_call(h, "xi", dtype_name, f"h{j}_")
        imported |= used
        lines += [f"        {ln}" for ln in body] + [f"        out[{j}, i] = {result}"]
    src = ("import math\nimport numpy as np\n" + fastmath_text.import_line(imported)
           + "def k(x, out):\n    for i in range(x.size):\n        xi = x[i]\n" + "\n".join(lines) + "\n")
    ns = {}
    exec(compile(src, "<pasted>", "exec"), ns)
    return njit(fastmath=fastmath.SAFE_FASTMATH, error_model="numpy")(ns["k"]), src


@pytest.fixture(scope="module")
def pasted32():
    return _pasted_kernel("float32")


def test_pasted_text_is_straight_line_code_without_helper_calls(pasted32):
    _, src = pasted32
    assert not re.search(r"\b(fexp|flog|ftanh|fsigmoid|ferf|flog1p|fexpm1|fgelu_tanh|fsoftplus)\(", src)
    assert not re.search(r"\b_(exp|log|tanh|sigmoid|erf|log1p|expm1_|gelu_tanh|softplus)(32|64)?\(", src)
    assert "_fmuladd(" in src and "_add_exponent(" in src      # the LLVM intrinsics stay calls
    assert "_select(" in src and " if " not in src             # conditional expressions: selects
    for stmt in src.splitlines()[4:]:
        assert not stmt.strip().startswith(("if ", "while ", "return")), stmt


def test_pasted_float32_text_is_as_accurate_as_the_helpers(pasted32):
    k, _ = pasted32
    x = sample_points(2 ** 15, seed=3)
    out = np.empty((len(HELPERS), x.size), np.float32)
    with np.errstate(all="ignore"):
        k(x, out)
        for j, h in enumerate(HELPERS):
            got = out[j].astype(np.float64)
            ref = REFERENCE[h](x.astype(np.float64))
            rounded = ref.astype(np.float32).astype(np.float64)
            assert np.array_equal(np.isnan(got), np.isnan(rounded)), h
            assert np.array_equal(np.isinf(got) & (got > 0), np.isinf(rounded) & (rounded > 0)), h
            ok = np.isfinite(got) & np.isfinite(rounded)
            if h == "fgelu_tanh":
                ok &= x >= -3
            err = np.maximum(np.abs(got[ok] - ref[ok]) - TINY, 0) / np.maximum(np.abs(ref[ok]), TINY)
            assert err.max() <= RTOL[h], (h, err.max())


def test_pasted_float32_text_vectorises(pasted32):
    k, _ = pasted32
    x = np.ones(64, np.float32)
    sig = (numba.typeof(x), numba.typeof(np.empty((len(HELPERS), 64), np.float32)))
    k(x, np.empty((len(HELPERS), 64), np.float32))
    ir = k.inspect_llvm(sig)
    assert re.search(r"<(8|16|32) x float>", ir)
    assert not re.search(r"@(llvm\.(exp|log|tanh|pow)\.|(expf|logf|tanhf|erff|log1pf|expm1f)\()", ir)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.bool_])
def test_pasted_float64_and_integer_paths_promote_like_numpy(dtype):
    names = ["fexp", "flog1p", "ftanh", "ferf"]
    k, src = _pasted_kernel(np.dtype(dtype).name, names)
    x = np.array([0, 1, 2, 3, 5], dtype=dtype)
    out = np.empty((len(names), x.size), np.float64)
    k(x, out)
    for j, h in enumerate(names):
        np.testing.assert_allclose(out[j], REFERENCE[h](x.astype(np.float64)), rtol=1e-15)


def test_what_cannot_be_pasted_is_refused():
    with pytest.raises(fastmath_text.NotInlinable):
        fastmath_text.inline_call("fnope", "x", "float32", "h_")
    with pytest.raises(fastmath_text.NotInlinable):
        fastmath_text.inline_call("fexp", "x", "complex64", "h_")


def _kernel_sources(cf):
    return [s.numba.source for e in cf.cache.entries.values() for p in e.programs.values()
            for s in p.slots.values() if s.numba is not None]


def test_generated_kernels_paste_helpers_and_use_no_prange():
    def f(x):
        return np.tanh(x) * np.exp(-x * x) + np.log1p(np.abs(x))

    x = np.linspace(-4, 4, 4096, dtype=np.float32).reshape(64, 64)
    cf = nb.compile(f, backend="numba")
    got = cf(x)
    np.testing.assert_allclose(got, f(x), rtol=2e-6, atol=1e-7)
    assert cf.report.tier == "numba"
    (src,) = _kernel_sources(cf)
    assert not re.search(r"\b(fexp|ftanh|flog1p)\(", src)
    assert "from nbaccel.compiler.codegen.fastmath import " in src
    assert "prange" not in src and "parallel=" not in src
    assert re.search(r"def kernel\(.*P, part, parts\):", src)
    assert "range(part * total // parts, (part + 1) * total // parts)" in src


def test_helpers_are_called_when_the_text_cannot_be_pasted(monkeypatch):
    def refuse(*a, **k):
        raise fastmath_text.NotInlinable("test")
    monkeypatch.setattr(fastmath_text, "inline_call", refuse)
    x = np.linspace(-3, 3, 257, dtype=np.float32)
    cf = nb.compile(lambda v: np.exp(v) + 2.5, backend="numba")
    np.testing.assert_allclose(cf(x), np.exp(x) + 2.5, rtol=1e-6)
    (src,) = _kernel_sources(cf)
    assert "fexp(" in src


@pytest.mark.parametrize("fn", [
    lambda x: np.tanh(x * 1.5) + 1,                                         # elementwise
    lambda x: np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1),        # last axis reduced
    lambda x: x - x.mean(axis=0),                                           # last axis kept
], ids=["elementwise", "row-reduction", "column-reduction"])
def test_threaded_shares_give_the_serial_result(fn):
    rows = nb_codegen.PARALLEL_MIN_ELEMS // 512 + 3       # above the threading threshold
    x = np.random.default_rng(1).standard_normal((rows, 512)).astype(np.float32)
    cf = nb.compile(fn, backend="numba")
    got = cf(x)
    np.testing.assert_allclose(got, fn(x), rtol=2e-5, atol=2e-5)
    slots = [s for e in cf.cache.entries.values() for p in e.programs.values() for s in p.slots.values()]
    assert slots and all(s.parallel and s.backend == "numba" for s in slots)
    # the kernel run as one share and as numba_launch's shares writes the same bytes
    for s in slots:
        prog = next(p for e in cf.cache.entries.values() for p in e.programs.values() if s in p.slots.values())
        outs = [np.empty(int(np.prod(o.shape)), o.dtype.np) for o in s.k.outputs]
        ins = [np.ascontiguousarray(x).reshape(-1) if i.is_placeholder else None for i in s.k.inputs]
        if any(a is None for a in ins):
            continue
        serial = [o.copy() for o in outs]
        numba_launch.launch(s.numba.fn, tuple(ins + serial), s.P, False)
        numba_launch.launch(s.numba.fn, tuple(ins + outs), s.P, True)
        for a, b in zip(serial, outs):
            np.testing.assert_array_equal(a, b)
        assert prog.tier() == "numba"


def test_thread_count_follows_numba(monkeypatch):
    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 3)
    assert numba_launch.threads() == 3
    seen = []

    def fake(*args):
        seen.append(args[-2:])
    numba_launch.launch(fake, (), None, True)
    assert sorted(seen) == [(0, 3), (1, 3), (2, 3)]
    seen.clear()
    numba_launch.launch(fake, (), None, False)
    assert seen == [(0, 1)]


def test_report_splits_the_jit_time(tmp_path, monkeypatch):
    monkeypatch.setitem(nb.config, "cache_dir", str(tmp_path / "cache"))
    monkeypatch.setattr(runtime, "_NUMBA_KERNELS", {})
    cache._reset_session_for_tests()
    try:
        x = np.random.default_rng(2).standard_normal((32, 48)).astype(np.float32)
        # numba's LLVM-lock timer hears every thread's LLVM work: a lock section of another
        # thread (numba's set-up, an earlier test's background compile or cache load) that
        # straddles the timer's start unbalances it and it records nothing (CI once: llvm 0)
        warmup.wait(60)
        runtime._COMPILER.wait(timeout=60)
        cf = nb.compile(lambda v: np.tanh(v * 0.73 + 0.11).sum(axis=1) * 1.37, backend="numba")
        cf(x)
        rep = cf.report
        jb = rep.jit_breakdown
        assert set(jb) == set(jit_split.KEYS) and all(v >= 0 for v in jb.values())
        # lowering is the lowering passes' time less LLVM's (LLVM runs inside them); numba's
        # llvm_lock timer also counts waiting for the lock another compile thread holds, so on
        # a loaded machine the difference can clip to 0 (CI once)
        assert jb["numba typing"] > 0 and jb["llvm"] > 0 and jb["numba lowering"] >= 0
        assert sum(jb.values()) == pytest.approx(rep.compile_breakdown["jit"], rel=0.05, abs=1e-3)
        # the split sits in compile_breakdown too, beside (not among) the four parts
        bd = rep.compile_breakdown
        assert bd["jit_split"] == jb and rep.to_dict()["compile_breakdown"]["jit_split"] == jb
        parts = [v for k, v in bd.items() if k != "jit_split"]
        assert sum(parts) == pytest.approx(rep.compile_seconds)
        assert isinstance(rep.call_seconds, float) and isinstance(rep.first_call_seconds, float)
        assert isinstance(rep.to_dict()["call_seconds"], float)
        import nbaccel_ext
        text = nbaccel_ext.render_text(rep.to_dict(), stable=False)
        assert "jit: numba typing" in text and "llvm" in text
        # a new process would load it from disk: nothing compiled, so it is all 'other'
        monkeypatch.setattr(runtime, "_NUMBA_KERNELS", {})
        cache._reset_session_for_tests()
        cf2 = nb.compile(lambda v: np.tanh(v * 0.73 + 0.11).sum(axis=1) * 1.37, backend="numba")
        cf2(x)
        if cf2.report.cache == "disk":
            jb2 = cf2.report.jit_breakdown
            assert jb2["numba typing"] == 0 and jb2["llvm"] == 0
    finally:
        cache._reset_session_for_tests()


def test_numba_warmup_runs_once_in_the_background():
    import subprocess
    code = ("import numba.core.registry as r; from nbaccel.compiler.cache import warmup as w; "
            "print(w.start(), w.start(), w.wait(60), "
            "bool(r.cpu_target.typing_context._registries) and bool(r.cpu_target.target_context._registries))")
    import os
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(__file__).resolve().parent.parent))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "False", "True", "True"]
    env["NBACCEL_NUMBA_WARMUP"] = "0"
    off = subprocess.run([sys.executable, "-c", "from nbaccel.compiler.cache import warmup as w; print(w.start())"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert off.stdout.strip() == "False"


def test_pasting_helper_text_and_the_cache_key_import_neither_numba_nor_fastmath():
    """The helpers' text comes from fastmath.py read as source, and numba's version in the disk
    cache's key from its installation: a process's first compiled call renders its kernels and
    asks for the key while numba is still being imported on the warm-up thread, and importing
    fastmath.py (numba functions) or numba made that call wait for the import (0.37 s, 0.45 s)."""
    import os
    import subprocess
    code = ("import sys; from nbaccel.compiler.codegen import fastmath_text as t; "
            "from nbaccel.compiler.cache import cache; cache._versions(); "
            "[t.inline_call(h, 'x0', d, 'p_') for h in t.BODIES for d in ('float32', 'float64')]; "
            "print(sorted(m for m in ('numba', 'nbaccel.compiler.codegen.fastmath') if m in sys.modules))")
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(__file__).resolve().parent.parent),
               NBACCEL_NUMBA_WARMUP="0")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    import llvmlite
    assert cache._installed_version("numba") == numba.__version__
    assert f"-numba{numba.__version__}-llvmlite{llvmlite.__version__}-" in cache._versions()


@pytest.mark.parametrize("helper", HELPERS)
def test_a_pasted_body_is_the_direct_paste_whatever_the_prefix_and_argument(helper):
    """inline_call pastes each body once with marks and fills them in (a loop's unrolled steps
    paste the same body hundreds of times); the text equals a paste made for the call itself."""
    for dtype_name in ("float32", "float64", "int32"):
        for arg in ("x0", "a[i] * 2.0", "y_3"):
            for prefix in ("h0_", "h12_"):
                try:
                    got = fastmath_text.inline_call(helper, arg, dtype_name, prefix)
                except fastmath_text.NotInlinable:
                    continue
                f32, f64 = fastmath_text.BODIES[helper]
                body = f32 if dtype_name == "float32" else f64
                direct_arg = arg if dtype_name.startswith("float") else f"np.float64({arg})"
                p = fastmath_text._Paster(prefix)
                result = p.paste(body, direct_arg)
                assert got == (p.lines, result, p.names), (dtype_name, arg, prefix)


def test_argument_kinds_give_the_types_numba_gives_the_arrays():
    """The caller's thread records what an argument's numba type depends on; the compile
    thread makes the types: they are numba.typeof's, layout and writability included."""
    base = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    ro = np.ones(4, dtype=np.int64)
    ro.flags.writeable = False
    args = [base, base.T, base[:, ::2], base[0], np.float64(2.5), np.zeros((), np.complex128),
            np.zeros((2, 3), bool), ro, np.zeros((0, 3), np.uint8), np.asfortranarray(base[0])]
    kinds = runtime.argument_kinds(tuple(args))
    assert runtime._signature(kinds) == tuple(numba.typeof(a) for a in args) + numba_launch.signature_tail()


def test_numbas_version_while_another_thread_imports_it(monkeypatch):
    """A module still being imported on another thread (numba on the warm-up thread) is in
    sys.modules without its __version__ yet: the version comes from its installation then, not
    "none" (the disk cache's key then differed between processes: a parent looked for kernels
    in another version's folder, and a warm process missed)."""
    import types
    half = types.ModuleType("numba")
    half.__spec__ = numba.__spec__          # (set before its body runs, as the import system does)
    monkeypatch.setitem(sys.modules, "numba", half)
    assert cache._installed_version("numba") == numba.__version__
