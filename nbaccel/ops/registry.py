"""THE op table: every op is defined exactly once, here or in a sibling module.

An :class:`OpDef` holds everything the engine and the compiler need to know:

* ``kind``     unary / binary / ternary / reduce / movement / index / creation / linalg / nn / other
* ``impl``     the eager implementation, ``impl(xp, *arrays, **params)``, written against an
               array module ``xp`` (NumPy on the CPU, CuPy on CUDA: the same code)
* ``infer``    the shape and dtype rule, ``infer(args, params) -> (shape, DType)``; defaults by kind
* ``grad``     the derivative, ``grad(g, out, *args, **params) -> tuple`` (one entry per arg,
               None where there is none), written with nbaccel ops so it runs eagerly *and*
               traces (that is how the compiler derives backward graphs)
* ``decomp``   for a composite op: its definition in terms of other ops (``decomp(*args, **params)``);
               primitives have none. The table holds semantics only: how each backend spells a
               primitive is that renderer's own table (``compiler/codegen/numpy.py: UFUNC``,
               ``numba.py: SCALAR``), and a test checks that every table covers its group
* ``extern_backend``  for an op the compiler runs whole (an extern kernel: attention, quantized
               or sparse matmul): ``extern_backend(params) -> str``, the backend label the
               report shows for it (``"flash"``, ``"int4"``, ``"sparse24"``)
* ``batch_rule``  vmap's rule for a primitive whose kind does not give one
               (``rule(args, batched, params, size) -> result``, see ``ops/batching.py``);
               elementwise and reduction ops get theirs from their kind (``nbaccel/func``)
* ``front``    the user-facing function (argument parsing, NumPy and PyTorch spellings); it
               becomes ``nbaccel.<name>``, the Tensor methods in ``methods`` and the NumPy
               functions in ``numpy`` (``__array_function__`` / ``__array_ufunc__`` dispatch)

Tensor methods, namespace functions, autograd and NumPy dispatch are all derived from this
table: nothing else lists ops.

The tracing protocol (the engine never imports the compiler): a Tensor whose ``_node`` is set
is a tracer. ``apply`` hands any op with a tracer argument to ``tracer._node.graph.record``;
anything that needs a concrete value calls ``graph.realize(tensor, reason)`` (a graph break).
"""
from __future__ import annotations

from typing import Callable



OPS: dict[str, "OpDef"] = {}
NUMPY_FUNCS: dict[str, Callable] = {}     # numpy function name -> front
KINDS = ("unary", "binary", "ternary", "reduce", "movement", "index", "creation",
         "linalg", "nn", "random", "other")


class OpDef:
    __slots__ = ("name", "kind", "impl", "infer", "grad", "decomp", "primitive",
                 "differentiable", "front", "methods", "numpy",
                 "view", "inplace", "doc", "dtype_rule", "extern_backend", "batch_rule")

    def __init__(self, name, kind, impl, infer, grad, decomp, primitive, differentiable,
                 methods, numpy, view, inplace, doc, dtype_rule):
        self.name = name
        self.kind = kind
        self.impl = impl
        self.infer = infer
        self.grad = grad
        self.decomp = decomp
        self.primitive = primitive
        self.differentiable = differentiable
        self.methods = methods
        self.numpy = numpy
        self.view = view
        self.inplace = inplace
        self.doc = doc
        self.dtype_rule = dtype_rule
        self.extern_backend = None
        self.batch_rule = None
        self.front = None

    def __repr__(self):
        return f"<op {self.name} ({'primitive' if self.primitive else 'composite'} {self.kind})>"


def defop(name: str, *, kind: str, impl: Callable | None = None, infer: Callable | None = None,
          grad: Callable | None = None, decomp: Callable | None = None,
          differentiable: bool = True, methods=(), numpy=(), view: bool = False, inplace: bool = False,
          dtype_rule: str = "promote", front: Callable | None = None, doc: str = "",
          extern_backend: Callable | None = None, batch_rule: Callable | None = None):
    """Register one op. Returns the OpDef; ``front`` (or a default one for the kind) is
    attached as ``op.front`` and exported by name."""
    if name in OPS:
        raise ValueError(f"op {name!r} is defined twice")
    if kind not in KINDS:
        raise ValueError(f"op {name!r}: unknown kind {kind!r}")
    if impl is None and decomp is None:
        raise ValueError(f"op {name!r} needs an eager impl or a decomposition")
    if infer is None:
        from .meta import default_infer
        infer = default_infer(kind, dtype_rule)
    op = OpDef(name, kind, impl, infer, grad, decomp, decomp is None, differentiable,
               tuple(methods) if not isinstance(methods, str) else (methods,),
               tuple(numpy) if not isinstance(numpy, str) else (numpy,),
               view, inplace, doc, dtype_rule)
    if front is None:
        from .fronts import default_front
        front = default_front(op)
    front.__name__ = front.__qualname__ = name
    if not front.__doc__:
        front.__doc__ = doc or f"nbaccel op ``{name}`` ({kind})."
    op.front = front
    op.extern_backend = extern_backend
    op.batch_rule = batch_rule
    OPS[name] = op
    for np_name in op.numpy:
        NUMPY_FUNCS[np_name] = front
    return op


def primitives():
    return [o for o in OPS.values() if o.primitive]


def composites():
    return [o for o in OPS.values() if not o.primitive]


ALIASES: dict[str, Callable] = {}       # namespace functions that are fronts over other ops
ALIAS_METHODS: dict[str, Callable] = {}


def defalias(name: str, front: Callable, *, numpy=(), methods=()):
    """Export a function that is a spelling of existing ops (``zeros`` over ``full``,
    ``max(dim=)`` over ``amax`` and ``argmax``). It adds no op: autograd, tracing and
    code generation see only the ops it calls."""
    if name in OPS:
        raise ValueError(f"alias {name!r} would hide the op of the same name")
    front.__name__ = front.__qualname__ = name
    ALIASES[name] = front
    for np_name in ((numpy,) if isinstance(numpy, str) else numpy):
        NUMPY_FUNCS[np_name] = front
    for m in ((methods,) if isinstance(methods, str) else methods):
        ALIAS_METHODS[m] = front
    return front
