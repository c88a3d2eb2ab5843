"""Reverse-mode autograd over a tape of op applications.

Each differentiable op application on a tensor that requires grad gets a :class:`Node`
(its ``grad_fn``) holding the op, *shells* of its arguments (tensors that share data and
remember the version they had when saved) and a shell of its output. ``backward`` walks
the nodes in reverse topological order and calls each op's ``grad`` rule from the op
table. The rules are written with nbaccel ops, so the same walk over tracer tensors
builds a backward *graph*: that is how the compiler does ahead-of-time autograd.
"""
from __future__ import annotations

import contextlib
import sys
import threading
import weakref

import numpy as np

from . import dtypes as _dtypes
from . import ops
from .tensor_meta import is_tensor

# The Tensor class: autograd makes gradients and results with it and recognises them by it, but
# sits below it (tensor.py imports this module), so tensor.py hands the class in once, when it is
# made (its last lines), as it does to convert.py and dispatch.py
Tensor = None

__all__ = ["Node", "backward", "grad", "no_grad", "enable_grad", "set_grad_enabled",
           "is_grad_enabled", "Function"]

class _State(threading.local):
    """Per-thread grad mode and, inside a grad rule, which inputs need a gradient. The class
    attributes are each new thread's defaults: reading one is a plain attribute lookup
    (``getattr(local, name, default)`` on a missing name costs several times more, and grad
    mode is read by every op on a tensor that requires grad)."""
    enabled = True
    needs = None


_state = _State()
# how many threads have grad mode off now (set_grad_enabled keeps it): while none has, an op
# knows grad mode is on without reading the thread-local (dispatch.apply, issue 36)
GRAD_OFF = 0
_GRAD_OFF_LOCK = threading.Lock()


def _set_enabled(mode):
    global GRAD_OFF
    with _GRAD_OFF_LOCK:
        GRAD_OFF += (not mode) - (not _state.enabled)
        _state.enabled = mode


class ConsumedGraphError(RuntimeError):
    """backward() through a tape that an earlier backward() freed (PyTorch's RuntimeError)."""


def is_grad_enabled() -> bool:
    return _state.enabled


class set_grad_enabled(contextlib.ContextDecorator):
    def __init__(self, mode: bool):
        self.mode = bool(mode)

    def __enter__(self):
        self.prev = is_grad_enabled()
        _set_enabled(self.mode)

    def __exit__(self, *exc):
        _set_enabled(self.prev)
        return False


class no_grad(set_grad_enabled):
    """Context manager / decorator: ops inside record no graph."""

    def __init__(self):
        super().__init__(False)


class enable_grad(set_grad_enabled):
    def __init__(self):
        super().__init__(True)


def needs_input_grad(i: int) -> bool:
    """Inside a grad rule: does argument ``i`` of the op need a gradient? (True outside one.)
    A rule may return None for an argument that does not, instead of computing it."""
    needs = _state.needs
    return needs is None or i >= len(needs) or needs[i]


class Node:
    """One recorded op application: ``grad_fn`` of its output.

    Recording is on every differentiable op's path, so it saves little: a concrete input is
    kept as itself with the state its grad rule must see (its ``grad_fn``, version, array and
    ``requires_grad`` then: ``_saved``), and the output as its array and version, not as the
    output (which would make a cycle output -> node -> output). ``args`` and ``out`` give the
    stand-ins the rules read: an input unchanged since is itself, one changed since (written
    in place, given a new ``.data``) a *shell* of what it was, whose value raises if the
    write made it stale. Tracers get their shells when recorded (the trace tracks them)."""

    # (dispatch.apply sets these fields inline on its short path: a new one is set there too;
    # tests/test_eager_dispatch.py checks that every one is)
    __slots__ = ("op", "_args", "_saved", "params", "_out", "backward_fn", "name", "__weakref__")

    def __init__(self, op, args, params, out, backward_fn=None, name=None, saved=None):
        self.op = op
        self._args = args          # tensor args (or their shells), scalars as they were
        self._saved = saved        # per arg: None, or what it was when recorded (see _as_saved)
        self.params = params
        self._out = out            # shell of the output, the state to make one from, None, False
        self.backward_fn = backward_fn   # custom: f(grad_out) -> tuple of grads per arg
        self.name = name or (op.name if op is not None else "Custom")

    def __repr__(self):
        return f"<{self.name[0].upper()}{self.name[1:]}Backward>"

    @property
    def args(self):
        """The inputs as the grad rule reads them (see the class docstring)."""
        saved = self._saved
        if saved is None:
            return self._args
        return tuple([a if s is None else _as_saved(a, s) for a, s in zip(self._args, saved)])

    @property
    def out(self):
        """The output's shell (made from its saved state on first read), None when the rule
        does not need it, False once a backward without ``retain_graph`` consumed the node."""
        out = self._out
        if type(out) is tuple:
            data, dtype, device, npflag, version, saved_version = out
            out = self._out = Tensor._wrap(data, dtype, device, npflag, version)
            out.requires_grad = True
            out._saved_version = saved_version
        return out

    @out.setter
    def out(self, value):
        self._out = value

    def release(self, args):
        """After a backward without ``retain_graph``: the output and the inputs that need no
        gradient are let go (``args``: what ``args`` gave for this backward)."""
        self._out = False
        self._saved = None
        self._args = tuple(None if is_tensor(a) and not a.requires_grad else a for a in args)

    def inputs(self):
        return [a for a in self.args if is_tensor(a) and a.requires_grad]

    def parents(self):
        """The ``grad_fn`` of each tensor input as recorded (the walk's edges; no shells made)."""
        saved = self._saved
        if saved is None:
            return [a.grad_fn for a in self._args if is_tensor(a)]
        return [a.grad_fn if s is None else s[0] for a, s in zip(self._args, saved) if is_tensor(a)]

    def apply(self, g, args=None):
        if args is None:
            args = self.args
        out = self.out
        if self.backward_fn is not None:
            grads = self.backward_fn(g)
        elif out is not None and is_grad_enabled():
            # create_graph: a rule that reads the output (exp, tanh, sqrt) must be
            # differentiable through this node, but the saved shell cannot hold it for good
            # (node -> shell -> node would be a reference cycle): lend it for the call
            out.grad_fn = self
            try:
                grads = self.op.grad(g, out, *args, **self.params)
            finally:
                out.grad_fn = None
        else:
            # rules with costly per-input grads (matmul, linear) skip the ones nobody needs
            prev = _state.needs
            _state.needs = tuple(is_tensor(a) and a.requires_grad for a in args)
            try:
                grads = self.op.grad(g, out, *args, **self.params)
            finally:
                _state.needs = prev
        if not isinstance(grads, (tuple, list)):
            grads = (grads,)
        return grads

    # torch-compatible introspection
    @property
    def next_functions(self):
        return tuple((a.grad_fn, 0) for a in self.args if is_tensor(a))


def _as_saved(a, saved):
    """Input ``a`` as it was recorded: itself while unchanged, else a shell of what it was."""
    grad_fn, version, data, requires_grad = saved
    if (a._version[0] == version and a.grad_fn is grad_fn and a._data is data
            and a.requires_grad == requires_grad):
        return a
    s = a._shell()
    s.grad_fn = grad_fn
    s._saved_version = version         # its value raises when an in-place write made it stale
    s.requires_grad = requires_grad
    if data is not a._data:            # a new ``.data`` since: the shell keeps the old array
        s._data = data
        s.dtype = _dtypes.dtype(data.dtype)
    return s


def attach(op, args, params, out):
    """Record ``out = op(*args, **params)`` on the tape."""
    T = Tensor
    kept = []
    saved = []
    for a in args:
        if isinstance(a, T):
            if a._node is None and a._saved_version is None:
                kept.append(a)
                saved.append((a.grad_fn, a._version[0], a._data, a.requires_grad))
                continue
            a = a._shell()
        kept.append(a)
        saved.append(None)
    out.requires_grad = True
    if out._node is None:
        rec = (out._data, out.dtype, out.device, out._np, out._version, out._version[0])
    else:
        rec = out._shell()
    out.grad_fn = Node(op, tuple(kept), params, rec, None, op.name, tuple(saved))


def attach_custom(out, inputs, backward_fn, name="Custom"):
    """Record an output computed outside the op table (a compiled graph, a Function)."""
    shells = tuple(a._shell() for a in inputs)
    out.requires_grad = True
    out.grad_fn = Node(None, shells, {}, None, backward_fn, name)


def _unbroadcast(g, shape):
    """Sum a gradient over the dimensions that broadcasting added or stretched."""
    if g.shape == tuple(shape):
        return g
    nd = g.ndim - len(shape)
    axes = tuple(range(nd)) + tuple(i + nd for i, s in enumerate(shape) if s == 1 and g.shape[i + nd] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    if nd:
        g = g.reshape(shape)
    if g.shape != tuple(shape):
        g = g.reshape(shape)
    return g


def _toposort(roots):
    order, seen = [], set()
    for root in roots:
        if root is None or id(root) in seen:
            continue
        stack = [(root, False)]
        while stack:
            node, done = stack.pop()
            if done:
                order.append(node)
                continue
            if id(node) in seen:
                continue
            seen.add(id(node))
            stack.append((node, True))
            for fn in node.parents():
                if fn is not None and id(fn) not in seen:
                    stack.append((fn, False))
    order.reverse()
    return order


def _summed(p, ga, create_graph, held):
    """p + ga for the walk's sum of one tensor's incoming gradients, written into p when no one
    else can see p: a plain NumPy tensor whose array is its own, of ga's dtype and shape, held
    only by the walk (``held`` references: the walk's store and this call's argument). PyTorch
    steals such a buffer too; an extra full-size array per fan-in (the three pieces of a
    split, a residual connection) was made otherwise. The same ufunc on the same operands: the
    same bits."""
    if (not create_graph and type(p) is type(ga) is Tensor and p._node is None
            and ga._node is None and p._saved_version is None and p.dtype is ga.dtype):
        a = p._data
        if (type(a) is np.ndarray and a.base is None and a.shape == ga._data.shape
                and a.flags.writeable and sys.getrefcount(p) <= held + 1
                and sys.getrefcount(a) <= 3):   # (p's slot, ``a``, getrefcount's argument)
            np.add(a, ga._data, out=a)
            return p
    return p + ga


def _run(outputs, grad_outputs, retain_graph, create_graph, targets=None):
    """Propagate; returns {id(leaf or target): (tensor, grad)} for leaves/targets reached."""
    pending: dict[int, object] = {}
    reached: dict[int, list] = {}
    target_ids = {id(t): t for t in targets} if targets is not None else None

    def add_to(store, key, t, g):
        if key in store:
            entry = store[key]
            entry[1] = _summed(entry[1], g, create_graph, 2)
        else:
            store[key] = [t, g]

    roots = []
    for t, g in zip(outputs, grad_outputs):
        if not t.requires_grad:
            raise RuntimeError("element of the outputs does not require grad and has no grad_fn")
        if t.grad_fn is None or (target_ids is not None and id(t) in target_ids):
            add_to(reached, id(t), t, g)
            continue
        pending[id(t.grad_fn)] = pending[id(t.grad_fn)] + g if id(t.grad_fn) in pending else g
        roots.append(t.grad_fn)
    with set_grad_enabled(create_graph):
        for node in _toposort(roots):
            g = pending.pop(id(node), None)
            if g is None:
                continue
            if node.out is False:
                raise ConsumedGraphError("Trying to backward through the graph a second time (or directly "
                                   "access saved tensors after they have already been freed). "
                                   "Specify retain_graph=True on the first backward call.")
            args = node.args
            grads = node.apply(g, args)
            for a, ga in zip(args, grads):
                if ga is None or not is_tensor(a) or not a.requires_grad:
                    continue
                if not isinstance(ga, Tensor):
                    raise TypeError(f"grad rule of {node.name} returned {type(ga).__name__}")
                ga = _unbroadcast(ga, a.shape)
                if ga.dtype is not a.dtype and a.dtype.kind == "f":
                    ga = ga.astype(a.dtype)
                origin = a._origin
                if origin is None:
                    origin = a                # an input saved as itself (not a shell)
                elif isinstance(origin, weakref.ref):
                    origin = origin()
                if target_ids is not None:
                    if id(origin) in target_ids:   # stop at the requested inputs
                        add_to(reached, id(origin), target_ids[id(origin)], ga)
                        continue
                    if a.grad_fn is None:
                        continue
                if a.grad_fn is None:
                    if origin is not None:
                        add_to(reached, id(origin), origin, ga)
                else:
                    k = id(a.grad_fn)
                    pending[k] = _summed(pending[k], ga, create_graph, 2) if k in pending else ga
                    if getattr(origin, "_retains_grad", False) and targets is None:
                        add_to(reached, id(origin), origin, ga)
            if not retain_graph:
                node.release(args)
    return reached


def _default_grads(outputs, grad_outputs):
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    out = []
    for t, g in zip(outputs, grad_outputs):
        if g is None:
            if t.numel() != 1:
                raise RuntimeError(f"grad can be implicitly created only for scalar outputs; "
                                   f"got an output of shape {tuple(t.shape)}: pass a gradient")
            g = ops.ones_like(t)
        elif not isinstance(g, Tensor):
            g = ops.asarray(g, dtype=t.dtype)
        if tuple(g.shape) != tuple(t.shape):
            raise RuntimeError(f"gradient has shape {tuple(g.shape)} but the output has shape {tuple(t.shape)}")
        out.append(g)
    return out


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate d(tensors)/d(leaf) into each leaf's ``.grad``."""
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    if isinstance(grad_tensors, Tensor):
        grad_tensors = [grad_tensors]
    grads = _default_grads(tensors, grad_tensors)
    retain = create_graph if retain_graph is None else retain_graph
    reached = _run(tensors, grads, retain, create_graph, targets=inputs)
    for t, g in reached.values():
        if not (t.grad_fn is None or getattr(t, "_retains_grad", False) or inputs is not None):
            continue
        g = g if create_graph else g.detach()
        t.grad = g if t.grad is None else t.grad + g
        if t.grad._node is not None:          # backward() ran inside a compiled region
            t.grad._node.graph.note_grad(t)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=False):
    """Return d(outputs)/d(inputs) without touching ``.grad`` (like ``torch.autograd.grad``)."""
    outputs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    single = isinstance(inputs, Tensor)
    inputs = [inputs] if single else list(inputs)
    for t in inputs:
        if not t.requires_grad:
            raise RuntimeError("One of the differentiated tensors does not require grad")
    if isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs]
    grads = _default_grads(outputs, grad_outputs)
    retain = create_graph if retain_graph is None else retain_graph
    reached = _run(outputs, grads, retain, create_graph, targets=inputs)
    result = []
    for t in inputs:
        if id(t) in reached:
            g = reached[id(t)][1]
            result.append(g if create_graph else g.detach())
        elif allow_unused:
            result.append(None)
        else:
            raise RuntimeError("One of the differentiated tensors appears to not have been used "
                               "in the graph. Set allow_unused=True if this is the desired behavior.")
    return tuple(result)


def zero_grads(params, set_to_none=True):
    """Clear the gradients of ``params``: set them to None, or zero them in place."""
    for p in params:
        if p.grad is None:
            continue
        if set_to_none:
            p.grad = None
        else:
            with no_grad():
                p.grad = p.grad.detach().zero_()


class Function:
    """A user-defined differentiable function (like ``torch.autograd.Function``).

    Subclass with static ``forward(ctx, *args)`` and ``backward(ctx, *grads)``.
    """

    @classmethod
    def apply(cls, *args):

        class Ctx:
            saved_tensors = ()

            def save_for_backward(self, *ts):
                self.saved_tensors = ts

        ctx = Ctx()
        with no_grad():
            out = cls.forward(ctx, *args)
        tensor_args = [a for a in args if isinstance(a, Tensor)]
        if is_grad_enabled() and any(a.requires_grad for a in tensor_args):
            def bw(g):
                gs = cls.backward(ctx, g)
                gs = gs if isinstance(gs, tuple) else (gs,)
                # backward returns one grad per forward arg; keep those of tensor args
                return tuple(g_ for a, g_ in zip(args, gs) if isinstance(a, Tensor))
            attach_custom(out, tensor_args, bw, cls.__name__)
        return out
