"""Forward mode and Jacobians: ``jvp``, ``jacrev``, ``jacfwd``, ``hessian``.

Forward mode is the *double-vjp* construction, not a second set of per-op rules: with
``g(u) = J^T u`` (one reverse pass with ``create_graph``, ``u`` a dummy cotangent), ``J t`` is
the vjp of ``g`` with respect to ``u`` along ``t``. It costs two reverse passes instead of one
forward pass, and needs nothing from the op table beyond the ``grad`` rules autograd already
uses, so every differentiable op has forward mode for free.

The Jacobians vmap over a basis: ``jacrev`` maps ``vjp_fn`` over the rows of an identity (one
batched reverse pass), ``jacfwd`` maps the forward product over its columns.
"""
from __future__ import annotations

import functools

from .. import autograd
from ..ops.registry import OPS
from .grad import _argnums, _zeros_like, on_outer_tape, vjp_with_leaves
from .pytree import tree_flatten, tree_unflatten
from .vmap import vmap

__all__ = ["jvp", "jacrev", "jacfwd", "hessian"]


def _eye_basis(x):
    """``numel`` unit tensors shaped like ``x``, stacked along a new front dim."""
    n = max(x.numel(), 1) if x.ndim else 1
    eye = OPS["eye"].front(n, dtype=x.dtype, device=x.device)
    return eye.reshape((n,) + tuple(x.shape))


def _forward_products(flat_in, flat_out, keep):
    """``push(tangents) -> J t`` per output, by double vjp, for the graph from ``flat_in`` to
    ``flat_out`` (recorded with grad enabled)."""
    with autograd.enable_grad():
        us = [_zeros_like(o).detach().requires_grad_(True) if o.requires_grad else None
              for o in flat_out]
        live = [(o, u) for o, u in zip(flat_out, us) if u is not None]
        if live:
            gs = autograd.grad([o for o, _ in live], flat_in, grad_outputs=[u for _, u in live],
                               create_graph=True, allow_unused=True)
        else:
            gs = (None,) * len(flat_in)

    def push(tangents):
        pairs = [(g, t) for g, t in zip(gs, tangents) if g is not None and g.requires_grad]
        with autograd.enable_grad():
            if pairs and live:
                jv = autograd.grad([g for g, _ in pairs], [u for _, u in live],
                                   grad_outputs=[t for _, t in pairs], retain_graph=True,
                                   create_graph=keep, allow_unused=True)
            else:
                jv = (None,) * len(live)
        it = iter(jv)
        out = [(next(it) if u is not None else None) for u in us]
        out = [_zeros_like(o) if j is None else j for j, o in zip(out, flat_out)]
        return out if keep else [j.detach() for j in out]

    return push


def jvp(func, primals, tangents, *, strict: bool = False, has_aux: bool = False):
    """``(func(*primals), J @ tangents)`` (``torch.func.jvp``); ``primals`` and ``tangents``
    are tuples of the same structure. Computed by double vjp (see the module docstring)."""
    what = "jvp(f, primals, tangents)"
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise RuntimeError(f"{what}: Expected primals and tangents to be tuples")
    p_leaves, p_spec = tree_flatten(primals)
    t_leaves, t_spec = tree_flatten(tangents)
    if p_spec != t_spec:
        raise RuntimeError(f"{what}: Expected primals and tangents to have the same python "
                           f"structure")
    for p, t in zip(p_leaves, t_leaves):
        if tuple(getattr(t, "shape", ())) != tuple(getattr(p, "shape", ())):
            raise RuntimeError(f"{what}: Expected primals and tangents to have the same shape, "
                               f"got {tuple(p.shape)} and {tuple(getattr(t, 'shape', ()))}")
    keep = any(on_outer_tape(x) for x in p_leaves + t_leaves)
    out, _, aux, (flat_in, flat_out) = vjp_with_leaves(func, primals, has_aux, what, create_graph=True)
    jv = _forward_products(flat_in, flat_out, keep)(t_leaves)
    out_leaves, out_spec = tree_flatten(out)
    shown = out if keep else tree_unflatten([o.detach() for o in out_leaves], out_spec)
    res = (shown, tree_unflatten(jv, out_spec))
    return res + (aux,) if has_aux else res


def _jacobian_layout(rows, o, x, inputs_first):
    """Stacked products (``numel`` of the mapped tensor first) as a Jacobian of shape
    ``o.shape + x.shape``."""
    if inputs_first:   # jacfwd: rows are indexed by the input's elements
        flat = rows.reshape((max(x.numel(), 1), max(o.numel(), 1)))
        return flat.permute(1, 0).reshape(tuple(o.shape) + tuple(x.shape))
    return rows.reshape(tuple(o.shape) + tuple(x.shape))


def _jac(func, argnums, has_aux, mode, chunk_size=None):
    what = f"{mode}({getattr(func, '__name__', 'f')})(*args)"

    @functools.wraps(func)
    def wrapper(*args):
        nums = _argnums(argnums, len(args), what)
        diff = tuple(args[a] for a in nums)

        def f_diff(*d):
            full = list(args)
            for a, v in zip(nums, d):
                full[a] = v
            return func(*full)

        connected = any(on_outer_tape(x) for x in tree_flatten(diff)[0])
        out, vjp_fn, aux, (flat_in, flat_out) = vjp_with_leaves(
            f_diff, diff, has_aux, what, create_graph=(mode == "jacfwd") or connected)
        out_leaves, out_spec = tree_flatten(out)
        in_trees = [tree_flatten(d) for d in diff]
        # jac[i][j]: d out_leaves[i] / d flat_in[j]
        jac = [[None] * len(flat_in) for _ in flat_out]
        if mode == "jacrev":
            for i, o in enumerate(flat_out):
                def row(u, i=i):
                    cts = [u if k == i else _zeros_like(flat_out[k]) for k in range(len(flat_out))]
                    res = vjp_fn(tree_unflatten(cts, out_spec))
                    return [g for r in res for g in tree_flatten(r)[0]]
                rows = vmap(row, chunk_size=chunk_size)(_eye_basis(o))
                for j, x in enumerate(flat_in):
                    jac[i][j] = _jacobian_layout(rows[j], o, x, False)
        else:
            push = _forward_products(flat_in, flat_out, connected)
            for j, x in enumerate(flat_in):
                def col(t, j=j):
                    return push([t if k == j else _zeros_like(flat_in[k]) for k in range(len(flat_in))])
                cols = vmap(col)(_eye_basis(x))
                for i, o in enumerate(flat_out):
                    jac[i][j] = _jacobian_layout(cols[i], o, x, True)
        if not connected:
            jac = [[j.detach() for j in r] for r in jac]
        # structure: the output's tree; each leaf holds the input's tree (a tuple of them for
        # a tuple argnums)
        per_out = []
        for i in range(len(flat_out)):
            trees, k = [], 0
            for leaves, spec in in_trees:
                trees.append(tree_unflatten(jac[i][k:k + len(leaves)], spec))
                k += len(leaves)
            per_out.append(trees[0] if isinstance(argnums, int) else tuple(trees))
        result = tree_unflatten(per_out, out_spec)
        return (result, aux) if has_aux else result

    return wrapper


def jacrev(func, argnums=0, *, has_aux: bool = False, chunk_size=None):
    """The Jacobian by reverse mode (``torch.func.jacrev``): one ``vmap``'d vjp over the rows
    of an identity (``chunk_size`` rows at a time when given). Shaped
    ``output.shape + input.shape``."""
    return _jac(func, argnums, has_aux, "jacrev", chunk_size)


def jacfwd(func, argnums=0, has_aux: bool = False, *, randomness: str = "error"):
    """The Jacobian by forward mode (``torch.func.jacfwd``; double-vjp forward products,
    ``vmap``'d over the columns of an identity)."""
    return _jac(func, argnums, has_aux, "jacfwd")


def hessian(func, argnums=0):
    """The Hessian (``torch.func.hessian``): ``jacfwd(jacrev(func))``."""
    return jacfwd(jacrev(func, argnums), argnums)

