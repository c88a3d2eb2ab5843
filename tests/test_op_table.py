"""The op table is the single source of truth: these checks keep every table complete."""
import pathlib
import string

import numpy as np
import pytest

import nbaccel as nb
from nbaccel.ops.registry import ALIASES, NUMPY_FUNCS, OPS

ROOT = pathlib.Path(__file__).resolve().parent.parent
ELEMENTWISE = ("unary", "binary", "ternary")


@pytest.mark.parametrize("op", sorted(OPS), ids=str)
def test_every_op_has_a_derivative_or_is_marked(op):
    o = OPS[op]
    assert (not o.differentiable) or o.grad is not None or o.decomp is not None, \
        f"{op}: differentiable but has neither a grad rule nor a decomposition"


@pytest.mark.parametrize("op", sorted(o.name for o in OPS.values() if not o.primitive), ids=str)
def test_every_composite_has_a_decomposition(op):
    assert callable(OPS[op].decomp)


@pytest.mark.parametrize("op", sorted(o.name for o in OPS.values() if o.primitive and o.kind in ELEMENTWISE),
                         ids=str)
def test_every_elementwise_primitive_renders_for_every_backend(op):
    """Each renderer owns its table from primitive to syntax; together they cover the group."""
    from nbaccel.compiler.codegen import numba as nb_codegen, numpy as np_codegen
    o = OPS[op]
    if op == "astype" or op in nb_codegen._NUMPY_ONLY:
        pass     # astype is a cast in every renderer; shifts stay on the NumPy tier on purpose
    elif op in nb_codegen.SCALAR:
        fields = {f for _, f, _, _ in string.Formatter().parse(nb_codegen.SCALAR[op]) if f}
        n_args = {"unary": 1, "binary": 2, "ternary": 3}[o.kind]
        assert fields <= {str(i) for i in range(n_args)}, f"{op}: template uses {fields}"
    else:
        pytest.fail(f"{op}: no numba rendering (codegen/numba.py SCALAR)")
    # the fused NumPy tier calls the ufunc with out=, or the op's own xp implementation
    uf = np_codegen.UFUNC.get(op)
    assert (uf and isinstance(getattr(np, uf, None), np.ufunc)) or o.impl is not None


def test_every_fusable_reduction_has_both_renderings():
    from nbaccel.compiler.codegen import numba as nb_codegen, numpy as np_codegen
    from nbaccel.compiler.schedule import REDUCTION_OPS
    for op in REDUCTION_OPS:
        assert op in OPS and op in np_codegen.REDUCE
        assert op in nb_codegen._INIT or op in ("amax", "amin", "argmax", "argmin")


def test_the_op_table_holds_no_backend_syntax():
    for o in OPS.values():
        assert not hasattr(o, "scalar") and not hasattr(o, "ufunc"), o.name


@pytest.mark.parametrize("op", sorted(OPS), ids=str)
def test_fronts_methods_and_numpy_names_come_from_the_table(op):
    o = OPS[op]
    assert callable(o.front) and o.infer is not None
    for m in o.methods:
        assert hasattr(nb.Tensor, m), f"{op}: method {m} not installed"
    for n in o.numpy:
        assert NUMPY_FUNCS.get(n) is not None


def test_names_are_unique_between_ops_and_aliases():
    assert not set(OPS) & set(ALIASES)


def test_supported_ops_doc_is_generated_from_the_table():
    from nbaccel.docgen import render
    doc = ROOT / "docs" / "supported-ops.md"
    assert doc.read_text() == render(), "docs/supported-ops.md is stale: run `make docs`"
