"""Decomposition (the PrimTorch role): rewrite composite ops into the table's primitives.

It is one mechanism: re-trace the graph, calling each composite op's ``decomp`` on tracers of
a :class:`Recorder` (composites met inside a decomposition decompose again). Every backend
then only needs renderings for primitives.

One exception, declared on the op: a composite whose ``extern_backend`` names a backend for
its params (BatchNorm's training ops, LayerNorm, GELU's erf form, softmax's backward and
cross-entropy with class indices, forward and backward: ops/normalization.py, nn.py,
nn_losses.py) stays whole on CPU values, and the schedule runs it as an extern step through
its ``impl``, the fused kernel eager mode runs. Its ``decomp`` still defines it for autograd's
double backward and for other devices (those kernels are CPU kernels; on a GPU the
decomposition fuses into Triton kernels). The compiled step calls the same kernel as the eager
one instead of a second, generated spelling of it, and traces fewer nodes (measured:
docs/benchmarks.md, "Compiled training steps against eager").
"""
from __future__ import annotations

from ...autograd import no_grad
from ...tensor import Tensor
from ..schedule.ir import Graph, Node
from ...devices import cpu


class Recorder(Graph):
    """A graph builder for compiler passes: records ops on its tracers, decomposing composites."""

    def __init__(self, decompose=True):
        super().__init__()
        self.decompose = decompose
        self.constants: dict[int, object] = {}     # placeholder index -> array (lifted constants)

    # engine tracing protocol -------------------------------------------------------------------
    def record(self, op, args, params):
        args = tuple(self._lift(a) for a in args)
        if self.decompose and not op.primitive and not _kept_whole(op, args, params):
            return op.decomp(*args, **params)
        shape, dtype = op.infer(args, params)
        node = self.add(op, tuple(a._node if isinstance(a, Tensor) else a for a in args),
                        params, shape, dtype)
        dev = next((a.device for a in args if isinstance(a, Tensor)), None) or params.get("device")
        return Tensor._tracer(node, dtype, dev, any(getattr(a, "_np", False) for a in args))

    def lift_args(self, args):
        return tuple(self._lift(a) for a in args)

    def realize(self, tensor, reason):
        raise RuntimeError(f"a decomposition needed a concrete value ({reason}); decompositions "
                           "must be data-independent")

    def assign(self, target, new):
        target._node = new._node

    def track(self, tensor):
        pass

    def note_grad(self, tensor):
        pass

    def _lift(self, a):
        if isinstance(a, Tensor) and (a._node is None or a._node.graph is not self):
            if a._node is None:                      # a constant made inside a decomposition
                node = self.placeholder(a.shape, a.dtype, f"const{len(self.placeholders)}")
                self.constants[node.index] = a._data
                return Tensor._tracer(node, a.dtype, a.device, a._np, data=a._data)
            raise RuntimeError("internal error: foreign tracer in a decomposition")
        return a

    def input_like(self, node: Node, name=None):
        p = self.placeholder(node.shape, node.dtype, name or node.name)
        p.params = dict(node.params)
        return Tensor._tracer(p, node.dtype, cpu, bool(node.params.get("np")))


def _kept_whole(op, args, params) -> bool:
    """Does composite ``op`` run whole here (an extern step), rather than decompose?"""
    if op.extern_backend is None:
        return False
    if any(isinstance(a, Tensor) and a.device is not cpu for a in args):
        return False
    return op.extern_backend(params) is not None


def retrace(graph: Graph, decompose=True):
    """Copy ``graph`` op by op into a new Recorder (decomposing composites).
    Returns (recorder, env) where env maps old node ids to new tracers."""
    rec = Recorder(decompose=decompose)
    env: dict[int, Tensor] = {}
    for p in graph.placeholders:
        env[id(p)] = rec.input_like(p, p.name)
    rec.dynamic = dict(graph.dynamic)
    with no_grad():
        for n in graph.nodes:
            args = tuple(env[id(a)] if isinstance(a, Node) else a for a in n.args)
            t = rec.record(n.op, args, dict(n.params))
            if n.np_flavour and isinstance(t, Tensor):      # np.arange(...) keeps NumPy's promotion
                t._np = True
                t._node.np_flavour = True
            if isinstance(t, Tensor) and (t.dtype is not n.dtype or tuple(t.shape) != n.shape):
                # never a silent change of type: the graph then runs eagerly, and the report says why
                raise RuntimeError(f"re-tracing {n.op.name} gave {t.dtype}{list(t.shape)}, "
                                   f"captured {n.dtype}{list(n.shape)}")
            env[id(n)] = t
    rec.outputs = [env[id(o)]._node for o in graph.outputs]
    return rec, env


def decompose(graph: Graph) -> Recorder:
    """A graph with the same inputs and outputs, made of primitives only."""
    rec, _ = retrace(graph, decompose=True)
    return rec
