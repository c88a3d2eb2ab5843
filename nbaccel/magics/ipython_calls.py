"""``%magic``, ``!cmd`` and ``get_ipython().method(...)`` inside a ``%%compile`` cell, and
whether a cell has any such syntax at all (:func:`plain_python`).

IPython turns ``%timeit f(x)`` into ``get_ipython().run_line_magic('timeit', 'f(x)')`` and
reads the *caller's frame* for the names the magic sees (``$x`` expansion, ``local_ns``). In
the cell function that frame holds tracers (or, behind a wrapper, the wrapper's own ``f``,
``args`` and ``kwargs``). :func:`call` runs the method instead from a frame whose locals are the
cell's current local values as the plain cell holds them (NumPy values, NumPy's own module),
and names the magic binds there (``%time y = x * 2``) go to the notebook namespace, where the
plain cell would have put them.
"""
from __future__ import annotations

import re

from . import boundary
from .cell_values import _swap_out
from .cellnames import LOCAL

_MISSING = object()
_RUNNER = compile("__nbaccel_method__(*__nbaccel_args__, **__nbaccel_kwargs__)", "<nbaccel ipython call>",
                  "eval")


def _plain_locals(local_vars) -> dict:
    out = {}
    for k, v in local_vars.items():
        if k.startswith(LOCAL):
            k = k[len(LOCAL):]
        elif k.startswith("__nbaccel"):
            continue
        out[k] = _swap_out(boundary.to_numpy(v, "a line magic or shell command reads the cell's values"))
    return out


def call(local_vars, method, *args, **kwargs):
    """``get_ipython().<method>(*args, **kwargs)`` seeing the cell's current locals."""
    __tracebackhide__ = True  # noqa: F841
    from IPython import get_ipython
    shell = get_ipython()
    bound = getattr(shell, method)
    ns = _plain_locals(local_vars)
    before = dict(ns)
    user = shell.user_ns
    # the plain cell's locals *are* the notebook namespace: magics that read it (%who, ev(),
    # %store) see the cell's values while they run; the notebook's own come back afterwards
    pushed = {k: user.get(k, _MISSING) for k in ns}
    user.update(ns)
    helpers = {"__nbaccel_method__": bound, "__nbaccel_args__": args, "__nbaccel_kwargs__": kwargs,
               "__builtins__": __builtins__}
    # run_line_magic / system look `_stack_depth` frames up: that is this eval's frame, whose
    # f_locals is ``ns`` (the helper names live in its globals, so the magic never sees them)
    try:
        return eval(_RUNNER, helpers, ns)          # noqa: S307 - a fixed expression
    finally:
        for k, old in pushed.items():
            if user.get(k, _MISSING) is before[k]:  # (a name the magic rebound keeps its new value)
                if old is _MISSING:
                    user.pop(k, None)
                else:
                    user[k] = old
        for k, v in ns.items():                     # names the magic bound (%time y = x * 2)
            if k not in before or before[k] is not v:
                user[k] = v


_IPYTHON_PROMPT = re.compile(r"^\s*(>>>|\.\.\.|In \[|Out\[)", re.M)


def plain_python(cell: str) -> bool:
    """Whether IPython's input transforms leave ``cell`` as it is (up to its trailing
    newline): no magic, shell, help or assignment-from-magic syntax (``%``, ``!``, ``?``
    anywhere), no pasted prompts (``>>>``, ``...``, ``In [n]:``), no leading blank line or
    indentation (IPython strips and dedents those). The magic then skips IPython's tokenising
    transform of the cell's text."""
    return (not any(c in cell for c in "%!?") and cell[:1] not in ("", " ", "\t", "\n", "\r")
            and _IPYTHON_PROMPT.search(cell) is None)
