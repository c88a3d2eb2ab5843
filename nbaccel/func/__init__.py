"""Composable function transforms, spelled and behaving as ``torch.func``.

``grad``, ``grad_and_value``, ``vjp`` (reverse mode on nbaccel's tape); ``jvp``, ``jacfwd``
(forward mode by double vjp); ``jacrev``, ``hessian``; ``vmap`` (batching rules beside the
ops in the op table, derived from the op's kind where it can be); ``functional_call``.
They nest (``vmap(grad(f))`` gives per-example gradients) and work inside ``nb.compile``,
where the transformed function is traced into one graph. See docs/func.md.
"""
from .forward import hessian, jacfwd, jacrev, jvp
from .functional_call import functional_call
from .grad import grad, grad_and_value, vjp
from .vmap import vmap

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "vmap",
           "functional_call"]
