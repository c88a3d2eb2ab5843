"""``vmap``: map a function over a dimension of its inputs, as ``torch.func.vmap``."""
from __future__ import annotations

import functools

from ..ops import creation
from ..dispatch import apply
from ..ops.registry import OPS
from ..tensor import Tensor
from . import batched as B
from .pytree import broadcast_prefix, tree_flatten, tree_unflatten

__all__ = ["vmap"]

_RANDOMNESS = ("error", "different", "same")


def _name(func):
    return getattr(func, "__name__", type(func).__name__)


def _move(x, src: int, dst: int):
    """``x`` with dim ``src`` moved to ``dst`` (both non-negative)."""
    if src == dst:
        return x
    axes = [i for i in range(x.ndim) if i != src]
    axes.insert(dst, src)
    return apply(OPS["permute"], (x,), {"axes": tuple(axes)})


def vmap(func, in_dims=0, out_dims=0, randomness: str = "error", *, chunk_size=None):
    """Vectorise ``func`` over dimension ``in_dims`` of its inputs (``torch.func.vmap``).

    ``in_dims`` is an int (the same dim of every tensor input), None (not mapped) or a tuple
    with one entry per positional argument, each an int, None or a pytree (tuple/list/dict)
    matching that argument; negative dims count from the end. ``out_dims`` places the batch
    dim in each output the same way. Keyword arguments are passed through unmapped.
    ``randomness``: ``"error"`` (a random draw inside raises), ``"different"`` (one draw per
    example) or ``"same"`` (one draw shared by the batch).

    ``chunk_size`` runs the batch that many examples at a time (less memory, more calls).

    Composes with :func:`grad` (``vmap(grad(f))`` gives per-example gradients), with itself
    and with ``nb.compile`` (the batched function is one graph). Ops run through their
    batching rules; one without a rule loops over the batch with a warning naming it.
    """
    if randomness not in _RANDOMNESS:
        raise ValueError(f"Only allowed values for randomness are 'error', 'different', or "
                         f"'same'. Got {randomness!r}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")
    where = f"vmap({_name(func)}, in_dims={in_dims!r}, ...)(<inputs>)"

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        if not args:
            raise ValueError(f"{where}: got no inputs. Maybe you forgot to add inputs, or you "
                             f"are trying to vmap over a function with no inputs. The latter "
                             f"is unsupported.")
        if not isinstance(in_dims, (int, tuple, type(None))) or isinstance(in_dims, bool):
            raise ValueError(f"{where}: expected `in_dims` to be int or a (potentially nested) "
                             f"tuple matching the structure of inputs, got: {type(in_dims)}.")
        if isinstance(in_dims, tuple) and len(in_dims) != len(args):
            raise ValueError(f"{where}: in_dims is not compatible with the structure of "
                             f"`inputs`. in_dims has {len(in_dims)} entries but there are "
                             f"{len(args)} positional inputs")
        leaves, spec = tree_flatten(list(args))
        dims = broadcast_prefix(list(in_dims) if isinstance(in_dims, tuple) else in_dims,
                                list(args), "in_dims")
        size = _batch_size(leaves, dims, where)
        if chunk_size is not None and chunk_size < size:
            return _in_chunks(wrapped_once, leaves, spec, dims, size, chunk_size, kwargs, out_dims)
        return wrapped_once(leaves, spec, dims, size, kwargs)

    def wrapped_once(leaves, spec, dims, size, kwargs):
        level = B.BatchLevel(size, randomness)
        inputs = [x if d is None else B.wrap(_move(x, d % x.ndim, 0), level)
                  for x, d in zip(leaves, dims)]
        B.active_levels().append(level)
        prev_hook = creation.vmap_random_hook
        creation.vmap_random_hook = _random_draw
        try:
            out = func(*tree_unflatten(inputs, spec), **kwargs)
        finally:
            B.active_levels().pop()
            creation.vmap_random_hook = prev_hook
        return _unbatch(out, level, out_dims, size, func)

    return wrapped


def _in_chunks(run, leaves, spec, dims, size, chunk, kwargs, out_dims):
    """``chunk_size``: run the batch ``chunk`` examples at a time (less memory at once), and
    join the chunks' outputs along their out dims."""
    outs = []
    for start in range(0, size, chunk):
        stop = min(start + chunk, size)
        part = [x if d is None else x[(slice(None),) * (d % x.ndim) + (slice(start, stop),)]
                for x, d in zip(leaves, dims)]
        outs.append(run(part, spec, dims, stop - start, kwargs))
    parts = [tree_flatten(o)[0] for o in outs]
    out_spec = tree_flatten(outs[0])[1]
    joined = []
    for k, d in enumerate(broadcast_prefix(out_dims, outs[0], "out_dims")):
        pieces = [p[k] for p in parts]
        joined.append(pieces[0] if d is None else OPS["concat"].front(pieces, d % pieces[0].ndim))
    return tree_unflatten(joined, out_spec)


def _batch_size(leaves, dims, where):
    size = None
    for x, d in zip(leaves, dims):
        if d is None:
            continue
        if not isinstance(x, Tensor):
            raise ValueError(f"{where}: Got in_dim={d} for an input but the input is of type "
                             f"{type(x)}. We cannot vmap over non-Tensor arguments, please use "
                             f"None as the respective in_dim")
        if not -x.ndim <= d < x.ndim:
            raise ValueError(f"{where}: Got in_dim={d} for some input, but that input is a "
                             f"Tensor of dimensionality {x.ndim} so expected in_dim to satisfy "
                             f"-{x.ndim} <= in_dim < {x.ndim}.")
        n = x.shape[d]
        if size is None:
            size = n
        elif n != size:
            sizes = [x.shape[d] for x, d in zip(leaves, dims) if d is not None]
            raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped "
                             f"dimension, got sizes {sizes} for the mapped dimension")
    if size is None:
        raise ValueError(f"{where}: at least one input must be a Tensor mapped over (in_dims "
                         f"are all None or the inputs hold no Tensor)")
    return size


def _unbatch(out, level, out_dims, size, func):
    leaves, spec = tree_flatten(out)
    dims = broadcast_prefix(out_dims, out, "out_dims")
    result = []
    for x, d in zip(leaves, dims):
        if not isinstance(x, Tensor):
            raise ValueError(f"vmap({_name(func)}, ...): `{_name(func)}` must only return "
                             f"Tensors, got type {type(x)}. Did you mean to set out_dims= to "
                             f"None for output?" if d is not None else
                             f"vmap({_name(func)}, ...): `{_name(func)}` must only return Tensors, "
                             f"got type {type(x)}.")
        batched = B.is_batched_at(x, level)
        if d is None:
            if batched:
                raise ValueError(f"vmap({_name(func)}, ..., out_dims=None): the output varies "
                                 f"over the batch, so it cannot be returned unbatched; give it "
                                 f"an out_dim")
            result.append(x)
            continue
        p = x._node.physical if batched else apply(
            OPS["broadcast_to"], (x,), {"shape": (size,) + tuple(x.shape)})
        if not -p.ndim <= d < p.ndim:
            raise ValueError(f"vmap({_name(func)}, ...): out_dims={d} is out of range for an "
                             f"output of dimensionality {p.ndim - 1} (expected "
                             f"-{p.ndim} <= out_dim < {p.ndim})")
        result.append(_move(p, 0, d % p.ndim))
    return tree_unflatten(result, spec)


def _random_draw(sample, shape, make):
    """``creation.vmap_random_hook``: how a random draw inside vmap batches."""
    shape = tuple(shape)
    draw_levels = []
    for level in B.active_levels():
        if level.randomness == "error":
            raise RuntimeError("vmap: called random operation while in randomness error mode. "
                               "Please either use the 'same' or 'different' randomness flags "
                               "on vmap or perform the randomness operation out of vmap")
        if level.randomness == "different":
            draw_levels.append(level)
    if not draw_levels:
        return make(sample(shape))
    t = make(sample(tuple(lv.size for lv in draw_levels) + shape))
    return _wrap_levels(t, draw_levels)


def _wrap_levels(t, draw_levels):
    """The raw draw has one leading dim per level (outermost first): each level wraps the
    tensor the level outside it made, so the innermost one shows the per-example shape."""
    for level in draw_levels:
        t = B.wrap(t, level)
    return t
