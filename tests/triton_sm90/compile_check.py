"""Compile the GPU rendering of a set of loop-IR kernels for sm_90 with Triton's own compiler
and the ptxas in its wheel: no GPU needed. Run in a process without TRITON_INTERPRET
(tests/test_triton_codegen.py does): ``python tests/triton_sm90/compile_check.py OUT_DIR``.
Prints one line per failure and a last line ``compiled N kernels, F failed``."""
import importlib.util
import os
import sys

os.environ.pop("TRITON_INTERPRET", None)
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

import nbaccel as nb  # noqa: E402
from nbaccel.compiler.codegen import triton as tri  # noqa: E402
from nbaccel.compiler.schedule.loops import Kernel  # noqa: E402

PTR = {"bool": "*u8", "float16": "*fp16", "bfloat16": "*bf16", "float32": "*fp32", "float64": "*fp64",
       "int8": "*i8", "uint8": "*u8", "int16": "*i16", "uint16": "*u16", "int32": "*i32", "uint32": "*u32",
       "int64": "*i64", "uint64": "*u64"}
rng = np.random.default_rng(0)


def kernels_of(fn, *args):
    """The loop-IR kernels of fn's graph (scheduled through the NumPy tier: no triton import)."""
    cf = nb.compile(fn, backend="numpy")
    with np.errstate(all="ignore"):
        cf(*args)
    return [s for e in cf.cache.entries.values() for p in e.programs.values()
            for s in p.schedule.steps if isinstance(s, Kernel)]


def life(Z):
    """Conway's Game of Life written with np.roll: one kernel of eight wrapped loads."""
    N = sum(np.roll(np.roll(Z, i, 0), j, 1) for i in (-1, 0, 1) for j in (-1, 0, 1) if (i != 0 or j != 0))
    return ((N == 3) | ((Z == 1) & (N == 2))).astype(Z.dtype)


def cases():
    x = rng.standard_normal((6, 10)).astype(np.float32)
    s = np.linspace(-3, 3, 18)
    out = []
    for dt in (np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int32, np.bool_):
        a, b = x.astype(dt), (x * 2).astype(dt)
        out.append((lambda a, b: (a * b, np.maximum(a, b), a.sum(axis=0), a.max(axis=1), a == b,
                                  np.where(a > b, a, b), a.argmax(axis=1), a.prod(axis=1), a.any(axis=0)), a, b))
    for dt in (np.float32, np.float64):
        v = s.astype(dt)
        out.append((lambda v: (np.sign(v) + np.floor(v) + np.ceil(v) + np.trunc(v) + np.rint(v) + np.exp(v)
                               + np.expm1(v) + np.log(np.abs(v)) + np.log1p(np.abs(v)) + np.sqrt(np.abs(v))
                               + np.sin(v) + np.tan(v) + np.tanh(v) + np.arcsinh(v) + np.arctan(v),
                               np.isnan(v) | np.isinf(v) | np.signbit(v), np.floor_divide(v, v[::-1]),
                               np.remainder(v, 2.5) + np.fmod(v, 1.5) + np.copysign(v, -v) + np.power(np.abs(v), v)
                               + np.arctan2(v, 2.0), v ** 2 + v ** 3 + np.abs(v) ** 0.5 + v ** -1), v))
    for dt in (np.int32, np.int64, np.int8):
        a, b = np.arange(-6, 6).astype(dt), np.arange(12).astype(dt)
        out.append((lambda a, b: (np.floor_divide(a, b) + np.remainder(a, b) + np.fmod(a, b) + (~a & b) + a ** b
                                  + np.left_shift(a, b) + np.right_shift(a, b) + np.sign(a), a / b), a, b))
    z = (rng.random((12, 10)) < 0.3).astype(np.int64)    # roll / pad / tile: index maps
    out.append((lambda z: (life(z), np.pad(z, ((1, 2), (3, 1)), constant_values=2) * 1,
                           np.pad(z, 2, mode="edge") + 1, np.tile(z, (2, 3)) - 1,
                           np.pad(z, ((5, 14), (0, 0)), mode="wrap") * 2, np.roll(z, 3, 1)[::-1] + 0), z))
    x3 = rng.standard_normal((3, 4, 5)).astype(np.float32)
    for ax in (0, 1, 2, (0, 2)):
        out.append((lambda x, ax=ax: (x.sum(axis=ax), x.min(axis=ax), x - x.mean(axis=ax, keepdims=True)), x3))

    def softmax(x, axis):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)
    out.append((lambda x: (softmax(x, -1), softmax(x, 0), x.argmin(axis=0)), x))
    out.append((lambda x: x[::-2, 1::3].T * 2 + x[None, 0, :3, None], rng.standard_normal((12, 10)).astype(np.float32)))
    return out


def main(out_dir):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    all_cases = cases()
    kernels = [k for fn, *args in all_cases for k in kernels_of(fn, *args)]
    # the looped and 64-bit forms for the reductions of the last cases (axes, softmax)
    variants = [k for fn, *args in all_cases[-6:] for k in kernels_of(fn, *args) if k.reductions]
    os.makedirs(out_dir, exist_ok=True)
    target, seen, fails = GPUTarget("cuda", 90, 32), set(), 0
    for label, patch in (("one block", {}), ("looped", {"BLOCK_R_MAX": 4, "COLUMN_BLOCK_R": 4}),
                         ("64-bit", {"INT32_LIMIT": 0})):
        saved = {name: getattr(tri, name) for name in patch}
        for name, v in patch.items():
            setattr(tri, name, v)
        for k in kernels if label == "one block" else variants:
            r = tri.render_kernel(k, "kernel", interpret=False)
            if r.source in seen:
                continue
            seen.add(r.source)
            path = os.path.join(out_dir, f"nbk_sm90_{len(seen)}.py")
            with open(path, "w") as f:
                f.write(r.source)
            spec = importlib.util.spec_from_file_location(f"nbk_sm90_{len(seen)}", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            _, blocks, warps = r.blocks(False)
            ptrs = [PTR[b.dtype.name] for b in k.inputs + k.outputs] + (["*i32"] if r.errors else [])
            values, sig, consts = list(r.values), {}, {}
            for i, name in enumerate(mod.kernel.arg_names):
                if i < len(ptrs):
                    sig[name] = ptrs[i]
                elif name in blocks:
                    sig[name], consts[name] = "constexpr", blocks[name]
                else:
                    v = values.pop(0)
                    sig[name] = "i32" if -2 ** 31 <= v < 2 ** 31 else "i64"
            try:
                compiled = triton.compile(ASTSource(mod.kernel, sig, consts), target=target,
                                          options={"num_warps": warps})
                assert compiled.asm.get("cubin"), "no cubin"
            except Exception as e:      # noqa: BLE001 - every failure is reported
                fails += 1
                lines = [ln.strip() for ln in str(e).splitlines() if ln.strip().strip("^")]
                print(f"FAIL {label} {path}: {type(e).__name__}: {' | '.join(lines[:1] + lines[-2:])[:400]}")
        for name, v in saved.items():
            setattr(tri, name, v)
    print(f"compiled {len(seen)} kernels, {fails} failed")
    return fails


if __name__ == "__main__":
    sys.exit(1 if main(sys.argv[1]) else 0)
