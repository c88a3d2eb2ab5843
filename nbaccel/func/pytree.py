"""The little pytree the transforms need: nested tuples, lists and dicts, anything else a leaf.

Dicts keep their insertion order (as ``torch.utils._pytree``). A spec is ``None`` for a leaf
or ``(type, keys_or_len, child_specs)``.
"""
from __future__ import annotations


def tree_flatten(tree):
    """``(leaves, spec)``."""
    leaves: list = []
    spec = _flatten(tree, leaves)
    return leaves, spec


def _flatten(tree, leaves):
    if isinstance(tree, dict):
        keys = list(tree)
        return (dict, keys, [_flatten(tree[k], leaves) for k in keys])
    if isinstance(tree, (tuple, list)) and not hasattr(tree, "_fields"):
        return (type(tree), len(tree), [_flatten(t, leaves) for t in tree])
    if isinstance(tree, tuple):        # a namedtuple
        return (type(tree), len(tree), [_flatten(t, leaves) for t in tree])
    leaves.append(tree)
    return None


def tree_unflatten(leaves, spec):
    it = iter(leaves)
    out = _unflatten(it, spec)
    return out


def _unflatten(it, spec):
    if spec is None:
        return next(it)
    kind, keys, children = spec
    if kind is dict:
        return {k: _unflatten(it, c) for k, c in zip(keys, children)}
    items = [_unflatten(it, c) for c in children]
    if hasattr(kind, "_fields"):
        return kind(*items)
    return kind(items)


def tree_map(fn, tree):
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([fn(x) for x in leaves], spec)


def describe(spec) -> str:
    """A short text of a spec's structure, for error messages."""
    if spec is None:
        return "*"
    kind, keys, children = spec
    if kind is dict:
        return "{" + ", ".join(f"{k!r}: {describe(c)}" for k, c in zip(keys, children)) + "}"
    inner = ", ".join(describe(c) for c in children)
    return f"[{inner}]" if kind is list else f"({inner}{',' if len(children) == 1 else ''})"


def broadcast_prefix(prefix, tree, what: str):
    """One entry of ``prefix`` per leaf of ``tree``: an int or None in ``prefix`` covers the
    whole subtree under it (how ``in_dims`` and ``out_dims`` match their trees). Raises
    ValueError, naming ``what``, where the structures do not match."""
    out: list = []

    def go(p, t):
        if p is None or isinstance(p, int) and not isinstance(p, bool):
            out.extend([p] * len(tree_flatten(t)[0]))
        elif isinstance(p, dict):
            if not isinstance(t, dict) or set(p) != set(t):
                raise _mismatch(prefix, tree, what)
            for k in t:
                go(p[k], t[k])
        elif isinstance(p, (tuple, list)):
            if not isinstance(t, (tuple, list)) or isinstance(t, dict) or len(p) != len(t):
                raise _mismatch(prefix, tree, what)
            for pi, ti in zip(p, t):
                go(pi, ti)
        else:
            raise ValueError(f"{what} must be an int, None or a (nested) tuple/list/dict of "
                             f"them matching the structure of the inputs, got {p!r} of type "
                             f"{type(p).__name__}")

    go(prefix, tree)
    return out


def _mismatch(prefix, tree, what):
    return ValueError(f"{what}={prefix!r} is not compatible with the structure of the "
                      f"{'inputs' if what == 'in_dims' else 'outputs'}: {what} has structure "
                      f"{describe(tree_flatten(prefix)[1])} but the "
                      f"{'inputs have' if what == 'in_dims' else 'outputs have'} structure "
                      f"{describe(tree_flatten(tree)[1])}")
