"""Ahead-of-time autograd (the AOTAutograd role).

When a traced output requires grad, its backward graph is derived from the forward trace by
running the autograd engine over the tracers: the op table's derivative rules execute on
tracers and record into a :class:`BackwardRecorder`. Forward values that the backward needs
become *saved* inputs of the backward graph and extra outputs of the forward graph. At run
time the concrete output gets a ``grad_fn`` that runs the compiled backward graph.
"""
from __future__ import annotations

from ... import autograd
from ...tensor import Tensor
from .decompose import Recorder


class BackwardRecorder(Recorder):
    def __init__(self, forward_graph):
        super().__init__(decompose=True)
        self.forward_graph = forward_graph
        self.saved = []                 # forward nodes, in placeholder order after the grad input
        self._saved_ph: dict[int, Tensor] = {}

    def grad_input(self, like: Tensor) -> Tensor:
        p = self.placeholder(like.shape, like.dtype, "grad_out")
        p.params = {"np": like._np}
        return Tensor._tracer(p, like.dtype, like.device, like._np)

    def _lift(self, a):
        if isinstance(a, Tensor) and a._node is not None and a._node.graph is not self:
            n = a._node
            hit = self._saved_ph.get(id(n))
            if hit is None:
                p = self.placeholder(n.shape, n.dtype, f"saved{len(self.saved)}")
                p.params = {"np": a._np}
                hit = Tensor._tracer(p, n.dtype, a.device, a._np)
                self._saved_ph[id(n)] = hit
                self.saved.append(n)
            return hit
        return super()._lift(a)


class BackwardSpec:
    """One differentiable output of a forward segment and its backward graph."""

    def __init__(self, output, recorder, targets, has_grad):
        self.output = output            # the forward tracer
        self.recorder = recorder
        self.targets = targets          # placeholder indices whose sources receive grads
        self.has_grad = has_grad        # per target: whether the backward graph outputs a grad


def derive_backward(session, graph, live) -> list[BackwardSpec]:
    outs, seen = [], set()
    for t in live:
        n = t._node
        if n.is_placeholder or id(n) in seen or not t.requires_grad or t.grad_fn is None:
            continue
        if t.grad_fn.out is False:      # its tape was already consumed by backward() in the trace
            continue
        seen.add(id(n))
        outs.append(t)
    if not outs:
        return []
    phs = [session.lifted[id(src)] for src in graph.sources]
    targets = [i for i, ph in enumerate(phs) if ph.requires_grad]
    if not targets:
        return []
    specs = []
    for t in outs:
        rec = BackwardRecorder(graph)
        gin = rec.grad_input(t)
        session.redirect = rec
        try:
            reached = autograd._run([t], [gin], retain_graph=True, create_graph=False,
                                    targets=[phs[i]._origin for i in targets])
        except autograd.ConsumedGraphError:
            # an output that backward() inside the trace did not reach, over a tape it freed
            # (an unused LSTM state, a view of a backpropagated tensor): eagerly, its own
            # backward would raise the same error, so it gets no backward graph
            continue
        finally:
            session.redirect = None
        grads = [reached.get(id(phs[i]._origin), (None, None))[1] for i in targets]
        rec.outputs = [rec._lift(gr)._node for gr in grads if gr is not None]
        specs.append(BackwardSpec(t, rec, targets, [gr is not None for gr in grads]))
        for n in rec.saved:
            if not n.is_placeholder and n not in graph.outputs:
                graph.outputs.append(n)
    return specs
