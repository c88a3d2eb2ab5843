"""Reverse-mode transforms: ``grad``, ``grad_and_value``, ``vjp`` (``torch.func`` spelling).

They run nbaccel's own tape (``nbaccel.autograd``) on fresh leaves made for the inputs being
differentiated. A fresh leaf stays connected to whatever the input was connected to (an outer
``grad``, the physical tensor of an outer ``vmap``), so the transforms nest: ``grad(grad(f))``,
``vmap(grad(f))``, ``grad(vmap(f))``. Results are detached unless an input was itself on an
outer tape (then they stay differentiable, as ``torch.func``'s are under an outer transform).
"""
from __future__ import annotations

import functools
import threading

from .. import autograd
from ..dispatch import apply
from ..ops.registry import OPS
from ..tensor import Tensor
from .batched import BatchNode, wrap
from .pytree import tree_flatten, tree_unflatten

__all__ = ["grad", "grad_and_value", "vjp"]


# how many grad/vjp transforms are running their function on this thread: inside one, a
# nested transform keeps its results differentiable (the outer one may need them, also when
# they depend on a tensor the function closes over rather than on an argument)
_active = threading.local()


def _depth() -> int:
    return getattr(_active, "depth", 0)


class _running:
    def __enter__(self):
        _active.depth = _depth() + 1

    def __exit__(self, *exc):
        _active.depth -= 1
        return False


def on_outer_tape(x) -> bool:
    """Whether ``x`` is differentiated by an enclosing transform (or the user's own tape)."""
    while isinstance(x, Tensor):
        if x.requires_grad:
            return True
        x = x._node.physical if isinstance(x._node, BatchNode) else None
    return False


def fresh_leaf(x, what: str):
    """A tensor equal to ``x`` that this transform differentiates with respect to."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{what}: expected the differentiated inputs to be Tensors (or pytrees "
                        f"of them), got {type(x).__name__}")
    if x.dtype.kind not in "f":
        raise TypeError(f"{what}: only floating point tensors can be differentiated, got an "
                        f"input of dtype {x.dtype}")
    if x.requires_grad:
        # an alias on the tape: gradients stop at it, and stay functions of x for the outer one
        return apply(OPS["reshape"], (x,), {"shape": tuple(x.shape)})
    if isinstance(x._node, BatchNode):
        leaf = wrap(x._node.physical, x._node.graph)   # same physical value, own logical leaf
    else:
        leaf = x.detach()
    return leaf.requires_grad_(True)


def _argnums(argnums, nargs, what):
    nums = (argnums,) if isinstance(argnums, int) else argnums
    if not isinstance(nums, tuple) or not nums or not all(isinstance(a, int) for a in nums):
        raise TypeError(f"{what}: argnums must be an int or a non-empty tuple of ints, got "
                        f"{argnums!r}")
    out = []
    for a in nums:
        if not -nargs <= a < nargs:
            raise RuntimeError(f"{what}: Got argnums={argnums!r} but only {nargs} positional "
                               f"inputs")
        out.append(a % nargs)
    if len(set(out)) != len(out):
        raise RuntimeError(f"{what}: argnums must be unique, got {argnums!r}")
    return out


def _detach_tree(tree, keep):
    if keep:
        return tree
    return tree_unflatten([x.detach() if isinstance(x, Tensor) else x
                           for x in tree_flatten(tree)[0]], tree_flatten(tree)[1])


def _zeros_like(x):
    return OPS["full_like"].front(x, 0)


def grad_and_value(func, argnums=0, has_aux: bool = False):
    """``func``'s gradient with respect to argument(s) ``argnums``, and its value
    (``torch.func.grad_and_value``). ``func`` must return a 0-d tensor (with ``has_aux``:
    ``(tensor, aux)``). Returns ``(grads, value)`` or ``(grads, (value, aux))``; ``grads``
    has the structure of the argument (a pytree: a dict of parameters gives a dict), or is a
    tuple of them when ``argnums`` is a tuple."""
    what = f"grad_and_value({getattr(func, '__name__', 'f')})(*args)"

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _argnums(argnums, len(args), what)
        args = list(args)
        trees, connected = [], False
        for a in nums:
            leaves, spec = tree_flatten(args[a])
            connected = connected or any(on_outer_tape(x) for x in leaves)
            fresh = [fresh_leaf(x, what) for x in leaves]
            trees.append((fresh, spec))
            args[a] = tree_unflatten(fresh, spec)
        connected = connected or _depth() > 0
        with autograd.enable_grad(), _running():
            out = func(*args, **kwargs)
        aux = None
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise RuntimeError(f"{what}: output of function f should be a tuple: "
                                   f"(output, aux) if has_aux is True")
            out, aux = out
        if not isinstance(out, Tensor):
            raise RuntimeError(f"{what}: Expected f(*args) to return a Tensor, got "
                               f"{type(out).__name__}")
        if out.ndim != 0:
            raise RuntimeError(f"{what}: Expected f(*args) to return a scalar Tensor, got "
                               f"tensor with {out.ndim} dims. Maybe you wanted to use the vjp "
                               f"or jacrev APIs instead?")
        flat = [x for fresh, _ in trees for x in fresh]
        if out.requires_grad:
            with autograd.enable_grad():
                gs = autograd.grad(out, flat, create_graph=connected, allow_unused=True)
        else:
            gs = (None,) * len(flat)
        gs = [(_zeros_like(x) if g is None else g) for g, x in zip(gs, flat)]
        if not connected:
            gs = [g.detach() for g in gs]
        grads, k = [], 0
        for fresh, spec in trees:
            grads.append(tree_unflatten(gs[k:k + len(fresh)], spec))
            k += len(fresh)
        grads = grads[0] if isinstance(argnums, int) else tuple(grads)
        value = out if connected else out.detach()
        if has_aux:
            return grads, (value, _detach_tree(aux, connected))
        return grads, value

    return wrapper


def grad(func, argnums=0, has_aux: bool = False):
    """The gradient of a scalar function (``torch.func.grad``): ``grad(f)(x)`` is df/dx.
    With ``has_aux``, ``func`` returns ``(loss, aux)`` and ``grad`` returns ``(grads, aux)``."""
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, v = gv(*args, **kwargs)
        return (g, v[1]) if has_aux else g

    return wrapper


def vjp(func, *primals, has_aux: bool = False):
    """``(output, vjp_fn)`` (``torch.func.vjp``): ``vjp_fn(cotangents)`` returns, for each
    primal, the vector-Jacobian product (a tuple, one entry per primal, each shaped like it).
    ``vjp_fn`` may be called many times, and under ``vmap`` (that is how :func:`jacrev`
    works)."""
    out, fn, aux, _ = vjp_with_leaves(func, primals, has_aux, "vjp(f, *primals)")
    return (out, fn, aux) if has_aux else (out, fn)


def vjp_with_leaves(func, primals, has_aux, what, create_graph=False):
    """``vjp``'s work, also returning the fresh leaves (jvp and jacfwd build on them).
    ``create_graph`` keeps the backward differentiable (double-vjp forward mode needs it)."""
    trees, connected = [], False
    args = []
    for p in primals:
        leaves, spec = tree_flatten(p)
        connected = connected or any(on_outer_tape(x) for x in leaves)
        fresh = [fresh_leaf(x, what) for x in leaves]
        trees.append((fresh, spec))
        args.append(tree_unflatten(fresh, spec))
    connected = connected or _depth() > 0
    with autograd.enable_grad(), _running():
        out = func(*args)
    aux = None
    if has_aux:
        if not (isinstance(out, tuple) and len(out) == 2):
            raise RuntimeError(f"{what}: output of function f should be a tuple: (output, aux) "
                               f"if has_aux is True")
        out, aux = out
    flat_out, out_spec = tree_flatten(out)
    for o in flat_out:
        if not isinstance(o, Tensor):
            raise RuntimeError(f"{what}: Expected f to return Tensors (or pytrees of them), got "
                               f"{type(o).__name__}")
    flat_in = [x for fresh, _ in trees for x in fresh]
    keep = connected or create_graph

    def vjp_fn(cotangents, *more):
        if more:     # vjp_fn(a, b) for a function of two outputs, as torch allows
            cotangents = (cotangents,) + more
        cts, ct_spec = tree_flatten(cotangents)
        if len(cts) != len(flat_out):
            raise RuntimeError(f"vjp_fn: Expected cotangents to have the same structure as the "
                               f"output ({len(flat_out)} tensors), got {len(cts)}")
        pairs = [(o, c) for o, c in zip(flat_out, cts) if o.requires_grad]
        for o, c in zip(flat_out, cts):
            if tuple(getattr(c, "shape", ())) != tuple(o.shape):
                raise RuntimeError(f"vjp_fn: Mismatch in shape: a cotangent has shape "
                                   f"{tuple(getattr(c, 'shape', ()))} and the output it goes "
                                   f"with has shape {tuple(o.shape)}")
        if pairs:
            with autograd.enable_grad():
                gs = autograd.grad([o for o, _ in pairs], flat_in, grad_outputs=[c for _, c in pairs],
                                   retain_graph=True, create_graph=keep or any(
                                       on_outer_tape(c) for _, c in pairs), allow_unused=True)
        else:
            gs = (None,) * len(flat_in)
        gs = [(_zeros_like(x) if g is None else g) for g, x in zip(gs, flat_in)]
        if not keep and not any(on_outer_tape(c) for c in cts):
            gs = [g.detach() for g in gs]
        res, k = [], 0
        for fresh, spec in trees:
            res.append(tree_unflatten(gs[k:k + len(fresh)], spec))
            k += len(fresh)
        return tuple(res)

    shown = out if keep else _detach_tree(out, False)
    return shown, vjp_fn, (_detach_tree(aux, connected) if has_aux else None), (flat_in, flat_out)
