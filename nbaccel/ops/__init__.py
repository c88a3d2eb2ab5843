"""The op table (``registry.OPS``) and one function per op and alias.

Importing this package registers every op. Each module holds one family; to add an op,
add one ``defop(...)`` in the right module (see docs/ops.md).

The functions here (``ops.exp``, ``ops.where``, ...) are not written out in this file: the last
line puts every op's front and every alias in under its name (:func:`namespace`). Each one's
docstring ends with the file and line of the ``defop`` / ``defalias`` that defines it once
``nbaccel`` has installed the methods (``registry.document_sites``): ``help(ops.exp)``.
"""
from . import registry, meta  # noqa: F401
# the families, in order: each registers its ops and may build on the families before it
from . import elementwise, elementwise_extra, complex_ops  # noqa: F401
from . import reduction, movement, movement_extra, joining, creation, wrapping  # noqa: F401
from .registry import OPS, ALIASES, NUMPY_FUNCS, defop, defalias  # noqa: F401
from .creation import manual_seed, rand, randn, randint, randperm, rand_like, randn_like  # noqa: F401


def _load_optional_families():
    import importlib
    for name in ("indexing", "gather", "sorting", "linalg", "matrix", "sets", "nn", "normalization", "nn_losses", "attention",
                 "sparse", "torch_spellings", "conv", "pooling", "pooling_nd", "activations",
                 "activation_grads", "array_api_additions"):
        try:
            importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise


_load_optional_families()


def namespace() -> dict:
    """name -> function for every op front and alias (what ``nbaccel`` exports)."""
    ns = {}
    for op in OPS.values():
        ns[op.name] = op.front
        for n in op.numpy + tuple(m for m in op.methods if not m.startswith("_")):
            if "." not in n:
                ns.setdefault(n, op.front)
    ns.update(ALIASES)
    return ns


# ops.<name> for every op front and alias of the families above (namespace(); the defop's file
# and line end each one's docstring)
globals().update({k: v for k, v in namespace().items() if k not in globals() or k in OPS or k in ALIASES})
