"""Generate docs/supported-ops.md from the op table: ``python -m nbaccel.docgen docs/supported-ops.md``.

The list is never written by hand; a test checks that the committed file matches the table.
"""
from __future__ import annotations

import sys

from .ops.registry import ALIASES, OPS, NUMPY_FUNCS
from .compiler.codegen.numba import SCALAR
from .compiler.codegen.numpy import UFUNC, reduce_function
from .ndarray_methods import _NUMPY_MEANING, _PLAIN_ONLY

KIND_TITLES = {
    "unary": "Elementwise, one operand", "binary": "Elementwise, two operands",
    "ternary": "Elementwise, three operands", "reduce": "Reductions", "movement": "Shape and movement",
    "index": "Indexing", "creation": "Creation", "linalg": "Linear algebra", "nn": "Neural-network ops",
    "random": "Random", "other": "Other",
}


def _cell(items):
    return ", ".join(f"`{i}`" for i in items) if items else ""


def render() -> str:
    prims = [o for o in OPS.values() if o.primitive]

    def rendering(o):
        """How a fused kernel spells the primitive: numba's template and the NumPy tier's ufunc."""
        if o.layout is not None:
            return "folded into the index expressions of its consumers"
        ufunc = UFUNC.get(o.name) or (reduce_function(o.reduce) if o.reduce else None)
        parts = [f"`{SCALAR[o.name]}`" if o.name in SCALAR else "",
                 f"`np.{ufunc}`" if ufunc else ""]
        return " · ".join(p for p in parts if p)
    rendered = sum(1 for o in prims if rendering(o))
    lines = ["# Supported ops", "",
             "Generated from the op table by `python -m nbaccel.docgen docs/supported-ops.md` "
             "(`make docs`); do not edit by hand.", "",
             f"{len(OPS)} ops: {len(prims)} primitives and {len(OPS) - len(prims)} composites "
             "(defined by a decomposition into other ops), plus "
             f"{len(ALIASES)} aliases (other spellings over the same ops). Of the primitives, "
             f"{rendered} run inside fused kernels (a per-element or reduction rendering, or, for "
             "movement, folded into index expressions); the others (matmul, indexing, sorting, linear algebra, ...) run as "
             "extern steps through their own implementation, as BLAS calls do in other compilers.",
             ""]
    for kind, title in KIND_TITLES.items():
        ops = sorted((o for o in OPS.values() if o.kind == kind), key=lambda o: o.name)
        if not ops:
            continue
        lines += [f"## {title}", "", "| op | primitive | gradient | in fused kernels (numba · NumPy tier) | NumPy names | Tensor methods |",
                  "|---|---|---|---|---|---|"]
        for o in ops:
            grad = "rule" if o.grad else "via decomposition" if (o.differentiable and o.decomp) else "—"
            render_ = rendering(o) if o.primitive else ""
            methods = [m for m in o.methods if not m.startswith("__")]
            dunders = [m for m in o.methods if m.startswith("__")]
            lines.append(f"| `{o.name}` | {'yes' if o.primitive else 'composite'} | {grad} | "
                         f"{render_.replace('|', '&#124;')} | {_cell(o.numpy)} | {_cell(methods + dunders)} |")
        lines.append("")
    lines += ["## Aliases", "", "Spellings that call the ops above (NumPy and PyTorch names):", "",
              ", ".join(f"`{a}`" for a in sorted(ALIASES)), ""]
    return "\n".join(lines + _numpy_surface())


# the tests that measure the NumPy surface under %%compile, and what each calls
SURFACE_TESTS = [
    ("tests/test_numpy_namespace_surface.py", "every public function of numpy, numpy.linalg and numpy.fft "
     "that takes one or two float64 arrays, and each one-array function on int64, float32 and bool"),
    ("tests/test_numpy_keyword_surface.py", "the same functions with each keyword they accept (axis=, "
     "keepdims=, dtype=, ord=, n=, norm=, ...), every ufunc with out= and where= and through "
     "reduce/accumulate/outer/at/reduceat, and calls of three and more arguments"),
    ("tests/test_numpy_random_surface.py", "every draw of the legacy np.random state, of a RandomState and "
     "of a Generator, seeded, including traced parameters, out= and in-place shuffles"),
    ("tests/test_ndarray_surface.py", "every public attribute of np.ndarray, with its in-place forms"),
]


def _numpy_surface():
    """The NumPy names a %%compile cell captures into its graph, and how the rest behave."""
    groups = {"numpy": [], "numpy.linalg": [], "numpy.fft": []}
    for name in NUMPY_FUNCS:
        module, _, short = name.rpartition(".")
        groups["numpy." + module if module else "numpy"].append(short)
    lines = ["## The NumPy surface under `%%compile`", "",
             "A name with an op is captured into the cell's graph; every other public function runs "
             "as NumPy's own on concrete values (a graph break that names it), and `np.random` draws "
             "with NumPy's own generators, so seeded draws match plain NumPy bit for bit. No call "
             "may give a different result: each row below is run plainly and under `%%compile`, and "
             "names, values, types, dtypes, output and exceptions must match.", "",
             "| module | names captured by an op |", "|---|---|"]
    lines += [f"| `{m}` | {len(v)}: {_cell(sorted(v))} |" if v else f"| `{m}` | none: NumPy's own, a graph break |"
              for m, v in groups.items()]
    lines += ["", f"ndarray methods whose NumPy meaning differs from PyTorch's follow NumPy in a cell: "
              f"{_cell(sorted(_NUMPY_MEANING))}. Methods that change the array itself run the cell "
              f"plainly: {_cell(sorted(_PLAIN_ONLY))}. Other in-place methods (`partition`, `put`, "
              "`byteswap(inplace=True)`, ...) run on a copy whose contents are written back, as "
              "`t[...] = v` is.", "", "Measured by:", ""]
    lines += [f"- `{path}`: {what}." for path, what in SURFACE_TESTS]
    return lines + [""]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    text = render()
    if argv:
        with open(argv[0], "w") as f:
            f.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
