"""``functional_call``: run a Module with some parameters and buffers swapped for given tensors."""
from __future__ import annotations

__all__ = ["functional_call"]


def _slot(module, name):
    """``(submodule, store, key)`` for a dotted parameter or buffer name, or None."""
    *path, key = name.split(".")
    m = module
    for part in path:
        m = m._modules.get(part) if "_modules" in m.__dict__ else None
        if m is None:
            return None
    for store in ("_parameters", "_buffers"):
        if key in m.__dict__.get(store, {}):
            return m, store, key
    return None


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights: bool = True, strict: bool = False):
    """Call ``module(*args, **kwargs)`` with its parameters and buffers replaced by the tensors
    in ``parameter_and_buffer_dicts`` (a dict name -> tensor, or a tuple of such dicts), as
    ``torch.func.functional_call``. The originals are put back afterwards, also when the call
    raises. With ``grad`` this differentiates a model with respect to a parameter dict:
    ``grad(lambda p, x: loss(functional_call(model, p, (x,))))(params, x)``.

    ``strict=True`` requires the dict to name every parameter and buffer and nothing else;
    ``tie_weights`` (the default, as PyTorch) makes a replacement apply to every name sharing
    the replaced tensor."""
    dicts = parameter_and_buffer_dicts
    if isinstance(dicts, dict):
        dicts = (dicts,)
    merged: dict = {}
    for d in dicts:
        for k, v in d.items():
            if k in merged:
                raise ValueError(f"functional_call: {k!r} appeared in multiple dictionaries; "
                                 f"behavior of functional call is ambiguous")
            merged[k] = v
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    kwargs = kwargs or {}
    names = [n for n, _ in module.named_parameters(remove_duplicate=False)] + \
            [n for n, _ in module.named_buffers(remove_duplicate=False)]
    if strict:
        missing = [n for n in names if n not in merged]
        unexpected = [k for k in merged if k not in names]
        if missing or unexpected:
            raise RuntimeError(f"functional_call got missing keys {missing} and unexpected "
                               f"keys {unexpected}")
    if tie_weights:
        # every name whose tensor is the same object as a replaced one gets the replacement
        by_id: dict = {}
        for n, t in list(module.named_parameters(remove_duplicate=False)) + \
                list(module.named_buffers(remove_duplicate=False)):
            by_id.setdefault(id(t), []).append(n)
        for n, t in list(module.named_parameters(remove_duplicate=False)):
            if n in merged:
                for tied in by_id.get(id(t), ()):
                    merged.setdefault(tied, merged[n])
    saved = []
    try:
        for name, value in merged.items():
            slot = _slot(module, name)
            if slot is None:
                if strict:
                    raise RuntimeError(f"functional_call: no parameter or buffer named {name!r}")
                continue
            m, store, key = slot
            saved.append((m, store, key, m.__dict__[store][key]))
            m.__dict__[store][key] = value
        return module(*args, **kwargs)
    finally:
        for m, store, key, old in reversed(saved):
            m.__dict__[store][key] = old
