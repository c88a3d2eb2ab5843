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
               report shows for it (``"flash"``, ``"int4"``, ``"sparse24"``). A composite op
               may declare it too (its eager impl runs a fused kernel: ``"fused"``); for
               params its kernel does not cover it returns None, and the op decomposes
* ``batch_rule``  vmap's rule for a primitive whose kind does not give one
               (``rule(args, batched, params, size) -> result``, see ``ops/batching.py``);
               elementwise and reduction ops get theirs from their kind (``nbaccel/func``)
* ``operands`` for an elementwise primitive, the dtype its operands are computed in (its
               *dtype class*, declared once so no renderer keeps its own list): ``"result"``
               (converted to the result dtype: arithmetic), ``"common"`` (converted to their
               common dtype, the result is bool: comparisons), ``"own"`` (each keeps its own
               dtype: predicates and logical ops), ``"select"`` (a condition first, then values
               converted to the result dtype: ``where``)
* ``reduce``   for a reduction primitive, its :class:`ReduceRule`: the identity per dtype, the
               binary op that combines two partial results, whether it returns an index, and
               the error it raises over empty ranges
* ``layout``   for a movement primitive, its layout function ``layout(lay, params, shape)``: how
               a strided view of the input becomes the view of the output (the compiler folds
               movement into index arithmetic with it); ``bijective`` movement reads every
               element once (a transpose or a reshape, not a slice or a broadcast)
* ``fill``     for a creation op the compiler treats as a constant, ``fill(params)`` the value
* ``front``    the user-facing function (argument parsing, NumPy and PyTorch spellings); it
               becomes ``nbaccel.<name>``, the Tensor methods in ``methods`` and the NumPy
               functions in ``numpy`` (``__array_function__`` / ``__array_ufunc__`` dispatch)

Tensor methods, namespace functions, autograd and NumPy dispatch are all derived from this
table: nothing else lists ops. The op *groups* the compiler and the renderers need
(:func:`group`: elementwise, comparison, float-result, own-input-dtype, reduce, arg-reduce,
movement) are derived from these declarations, never listed by name.

How a generated name is made, and found again: ``defop``, ``defalias`` and ``defmethod``
record the file and line of the statement that registers the entry (``op.site``,
``ALIAS_SITES``, ``METHOD_SITES``). Once every family has registered,
``nbaccel.dispatch.install_methods`` ends each front's docstring with that file and line
(:func:`document_sites`) and sets each ``methods`` name on Tensor to ``op.front`` (or a thin
documented wrapper: reflected, in-place, ``+=``); ``nbaccel/__init__.py`` puts the same
functions into the namespace (``ops.namespace()``). So ``help(nb.Tensor.sort)`` ends with
``op table (...): nbaccel/ops/sorting.py:<line>``, the line to open.

The tracing protocol (the engine never imports the compiler): a Tensor whose ``_node`` is set
is a tracer (``tensor_meta.is_traced``; ``tensor_meta.is_tensor`` tests for any tensor below
``tensor.py``). ``apply`` hands any op with a tracer argument to ``tracer._node.graph.record``;
anything that needs a concrete value calls ``graph.realize(tensor, reason)`` (a graph break).
"""
from __future__ import annotations

import math
import os
import sys
from typing import Callable

from .meta import default_infer
from .fronts import default_front


OPS: dict[str, "OpDef"] = {}
NUMPY_FUNCS: dict[str, Callable] = {}     # numpy function name -> front
ELEMENTWISE_KINDS = ("unary", "binary", "ternary")
OPERAND_CLASSES = ("result", "common", "own", "select")
# dtype rules whose results are floats (NumPy's float loops and true division)
FLOAT_RULES = ("float", "ufloat", "realfloat")
KINDS = ("unary", "binary", "ternary", "reduce", "movement", "index", "creation",
         "linalg", "nn", "random", "other")
# the kinds whose shape/dtype rules read only shapes, dtypes, flavours, scalar types and params
# (movement's are shape arithmetic: reshape, permute, broadcast_to, concat, slicing, pad/roll/tile)
MEMO_KINDS = ("unary", "binary", "ternary", "reduce", "movement")


class OpDef:
    __slots__ = ("name", "kind", "impl", "infer", "grad", "decomp", "primitive",
                 "differentiable", "front", "methods", "numpy",
                 "view", "inplace", "doc", "dtype_rule", "extern_backend", "batch_rule",
                 "operands", "reduce", "layout", "bijective", "fill", "site", "infer_memo")

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
        self.operands = None
        self.reduce = None
        self.layout = None
        self.bijective = False
        self.fill = None
        self.site = None        # (file, line) of the statement that defines it: _definition_site
        self.infer_memo = False   # see defop

    def __repr__(self):
        return f"<op {self.name} ({'primitive' if self.primitive else 'composite'} {self.kind})>"


def defop(name: str, *, kind: str, impl: Callable | None = None, infer: Callable | None = None,
          grad: Callable | None = None, decomp: Callable | None = None,
          differentiable: bool = True, methods=(), numpy=(), view: bool = False, inplace: bool = False,
          dtype_rule: str = "promote", front: Callable | None = None, doc: str = "",
          extern_backend: Callable | None = None, batch_rule: Callable | None = None,
          operands: str | None = None, reduce: "ReduceRule | None" = None,
          layout: Callable | None = None, bijective: bool = False, fill: Callable | None = None,
          infer_memo: bool | None = None):
    """Register one op. Returns the OpDef; ``front`` (or a default one for the kind) is
    attached as ``op.front`` and exported by name.

    ``infer_memo``: the shape/dtype rule reads only the inputs' shapes, dtypes and flavours,
    the scalars' types and the params, so eager dispatch may memoise it per signature. The
    default is true for the kinds whose rules are that by construction (elementwise,
    reductions, movement: shape arithmetic); an op of another kind declares it, or declares
    ``"one input"``: memoised only when called with one argument (indexing: a boolean index
    tensor's values decide the result's shape)."""
    if name in OPS:
        raise ValueError(f"op {name!r} is defined twice")
    if kind not in KINDS:
        raise ValueError(f"op {name!r}: unknown kind {kind!r}")
    if impl is None and decomp is None:
        raise ValueError(f"op {name!r} needs an eager impl or a decomposition")
    if operands is None and kind in ELEMENTWISE_KINDS and decomp is None:
        operands = "select" if kind == "ternary" else "result"
    if operands is not None and operands not in OPERAND_CLASSES:
        raise ValueError(f"op {name!r}: unknown operand class {operands!r}")
    if infer is None:
        infer = default_infer(kind, dtype_rule)
    op = OpDef(name, kind, impl, infer, grad, decomp, decomp is None, differentiable,
               tuple(methods) if not isinstance(methods, str) else (methods,),
               tuple(numpy) if not isinstance(numpy, str) else (numpy,),
               view, inplace, doc, dtype_rule)
    if front is None:
        front = default_front(op)
    front.__name__ = front.__qualname__ = name
    if not front.__doc__:
        front.__doc__ = doc or f"nbaccel op ``{name}`` ({kind})."
    op.front = front
    op.extern_backend = extern_backend
    op.batch_rule = batch_rule
    op.operands = operands
    op.reduce = reduce
    op.layout = layout
    op.bijective = bijective
    op.fill = fill
    if infer_memo not in (None, True, False, "one input"):
        raise ValueError(f"op {name!r}: infer_memo is True, False or 'one input'")
    op.infer_memo = (kind in MEMO_KINDS) if infer_memo is None else infer_memo
    op.site = _definition_site()
    OPS[name] = op
    for np_name in op.numpy:
        NUMPY_FUNCS[np_name] = front
    return op


def remove_op(name: str):
    """Take an op out of the table again (tests that define a toy op clean up with this)."""
    op = OPS.pop(name)
    for np_name in op.numpy:
        if NUMPY_FUNCS.get(np_name) is op.front:
            del NUMPY_FUNCS[np_name]


def primitives():
    return [o for o in OPS.values() if o.primitive]


def composites():
    return [o for o in OPS.values() if not o.primitive]


ALIASES: dict[str, Callable] = {}       # namespace functions that are fronts over other ops
ALIAS_METHODS: dict[str, Callable] = {}
ALIAS_SITES: dict[str, tuple] = {}       # alias name -> (file, line) of its defalias statement
METHOD_SITES: dict[str, tuple] = {}      # ALIAS_METHODS name -> (file, line) that registered it


def defalias(name: str, front: Callable, *, numpy=(), methods=()):
    """Export a function that is a spelling of existing ops (``zeros`` over ``full``,
    ``max(dim=)`` over ``amax`` and ``argmax``). It adds no op: autograd, tracing and
    code generation see only the ops it calls."""
    if name in OPS:
        raise ValueError(f"alias {name!r} would hide the op of the same name")
    front.__name__ = front.__qualname__ = name
    ALIASES[name] = front
    ALIAS_SITES[name] = _definition_site()
    for np_name in ((numpy,) if isinstance(numpy, str) else numpy):
        NUMPY_FUNCS[np_name] = front
    for m in ((methods,) if isinstance(methods, str) else methods):
        ALIAS_METHODS[m] = front
        METHOD_SITES[m] = ALIAS_SITES[name]
    return front


def defmethod(name: str, fn: Callable):
    """A Tensor method with no namespace function of the same meaning (``t.sort()`` gives
    values and indices, ``t.contiguous()``, ``t.view_as(o)``): installed on Tensor with the
    op table's methods, and like them documented with the line that registers it."""
    fn.__name__ = fn.__qualname__ = name
    ALIAS_METHODS[name] = fn
    METHOD_SITES[name] = _definition_site()
    return fn


# -- where each entry is defined -----------------------------------------------------------------

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))     # .../nbaccel
_ROOT = os.path.dirname(_PACKAGE)


def _definition_site():
    """(file, line) of the statement that defines the op being registered, for its docstring.

    The caller of ``defop`` is often a family's helper (``exp = _float_unary("exp", ...)``), so
    the frames are followed outward, through nbaccel's own code, to the module-level statement
    that ran it; a caller outside nbaccel (a test's toy op) is its own site. About half a
    microsecond per entry at import."""
    site = sys._getframe(2)       # the caller of defop / defalias
    while site.f_code.co_name != "<module>":
        outer = site.f_back
        if outer is None or not outer.f_code.co_filename.startswith(_PACKAGE):
            break
        site = outer
    return site.f_code.co_filename, site.f_lineno


def site_text(site) -> str:
    """``nbaccel/ops/sorting.py:<line>``: a site as a path from the repository root (or as it is)."""
    path, line = site
    if path.startswith(_ROOT + os.sep):
        path = path[len(_ROOT) + 1:]
    return f"{path}:{line}"


def _stamp(front, site, what, name):
    """Add ``what: file:line`` to ``front``'s docstring (once per site). A function registered
    under two names (``cat`` is ``concat``'s front) lists both entries, the first one first."""
    sites = getattr(front, "__nbaccel_sites__", ())
    if site is None or site in sites:
        return
    try:
        front.__nbaccel_sites__ = sites + (site,)
    except (AttributeError, TypeError):       # a builtin or a callable object: no docstring to extend
        return
    doc = (front.__doc__ or "").rstrip()
    if sites:           # a second name of the same function: one more line under the first
        front.__doc__ = f"{doc}\n{what}, as ``{name}``: {site_text(site)}"
    else:
        line = f"{what}: {site_text(site)}"
        front.__doc__ = f"{doc}\n\n{line}" if doc else line


def document_sites():
    """End every op front's and alias's docstring with the file and line that define it
    (``op table: nbaccel/ops/sorting.py:<line>``), so ``help(nb.sort)`` and ``help(nb.Tensor.sort)``
    say where to look. Run once all families have registered, when the methods are installed:
    some families set a front's docstring after ``defop`` returns."""
    for op in OPS.values():
        _stamp(op.front, op.site, "op table", op.name)
    for name, front in ALIASES.items():
        _stamp(front, ALIAS_SITES.get(name), "op table (an alias over other ops)", name)
    for name, fn in ALIAS_METHODS.items():
        _stamp(fn, METHOD_SITES.get(name), "op table (a Tensor method over other ops)", name)


def documented(method, front, how: str):
    """A wrapper that ``install_methods`` makes around an op's front (reflected, in-place) gets
    a docstring saying what it does and where the op is defined."""
    sites = getattr(front, "__nbaccel_sites__", ())
    method.__doc__ = f"{how} ``{front.__name__}``." + (f"\n\nop table: {site_text(sites[0])}" if sites else "")
    return method


# -- what reductions mean ------------------------------------------------------------------------

class ReduceRule:
    """What a reduction primitive means, declared once on its op: every backend renders it
    from this (the fused NumPy tier as ``ufunc.reduce`` of ``combine``, the loop tiers as an
    accumulator that starts at ``identity`` and folds with ``combine``).

    * ``combine``   the binary elementwise op that folds two partial results (``"add"``)
    * ``identity``  ``identity(dtype)``: what an empty range (and a masked lane) contributes,
                    as a Python scalar (``-inf`` for a float max; None where it has none)
    * ``arg``       the result is the flat index of the first best element (argmax/argmin)
    * ``empty_error``  NumPy's ValueError message for an empty range (None: it has an identity)
    * ``truth``     the elements count as their truth value (any/all)
    * ``selects``   the result is one of the elements (max, min and their indices): it needs
                    an order, and NaN propagates
    """

    __slots__ = ("combine", "identity", "arg", "empty_error", "truth", "selects")

    def __init__(self, combine: str, identity: Callable, *, arg: bool = False,
                 empty_error: str | None = None, truth: bool = False, selects: bool = False):
        self.combine = combine
        self.identity = identity
        self.arg = arg
        self.empty_error = empty_error
        self.truth = truth
        self.selects = selects or arg

    def __repr__(self):
        return f"ReduceRule({self.combine!r}{', arg' if self.arg else ''})"

    def empty(self, domain, axes) -> str | None:
        """The error this reduction raises over these ranges, or None."""
        if self.empty_error is not None and math.prod(domain[a] for a in axes) == 0:
            return self.empty_error
        return None


def lowest(dtype):
    """The identity of a max over ``dtype``: -inf, the smallest integer, or False."""
    import numpy as np
    if dtype.kind in "fc":
        return float("-inf")
    if dtype.kind == "b":
        return False
    return int(np.iinfo(dtype.np).min)


def highest(dtype):
    """The identity of a min over ``dtype``: inf, the largest integer, or True."""
    import numpy as np
    if dtype.kind in "fc":
        return float("inf")
    if dtype.kind == "b":
        return True
    return int(np.iinfo(dtype.np).max)


def constant(value):
    """An identity that is the same Python scalar for every dtype (0 for a sum)."""
    return lambda dtype: value


# -- the groups ----------------------------------------------------------------------------------

_GROUPS = {
    # elementwise primitives the compiler fuses into loops
    "elementwise": lambda o: o.primitive and o.kind in ELEMENTWISE_KINDS and o.layout is None,
    # operands converted to their common dtype, a bool result
    "comparison": lambda o: o.operands == "common",
    # a float result (integer inputs become the float result dtype first)
    "float_result": lambda o: o.operands is not None and o.dtype_rule in FLOAT_RULES,
    # operands keep their own dtype (tests of a value, logical ops on truth values)
    "own_input_dtype": lambda o: o.operands == "own",
    "reduce": lambda o: o.reduce is not None,
    "arg_reduce": lambda o: o.reduce is not None and o.reduce.arg,
    # movement the compiler folds into layouts
    "movement": lambda o: o.layout is not None,
}
GROUP_NAMES = tuple(_GROUPS)


def group(name: str) -> frozenset:
    """The names of the ops in one group, derived from the table (never listed by hand)."""
    test = _GROUPS[name]
    return frozenset(o.name for o in OPS.values() if test(o))
