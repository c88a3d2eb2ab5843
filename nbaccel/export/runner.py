"""Running an exported program: check the inputs, build the graph at their sizes, run it.

The graph for one set of input sizes is rebuilt from the program by re-recording each node
with its op's shape and dtype rule (symbolic sizes evaluated first), and checked against the
dtype and shape the program states. It is compiled by the same decompose → schedule →
codegen path as ``nb.compile`` and cached per (sizes, backend).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..autograd import no_grad
from ..devices import cpu
from ..ops.registry import OPS
from ..tensor import Tensor
from ..compiler.capture.decompose import Recorder, decompose
from .dims import ExportError, Poly
from .serialize import Ref
from . import call_path
from ..dispatch import apply


def evaluate(v, env):
    """``v`` with every symbolic size replaced by its value at ``env``."""
    if isinstance(v, Poly):
        return v(env)
    if isinstance(v, tuple):
        return tuple(evaluate(x, env) for x in v)
    if isinstance(v, list):
        return [evaluate(x, env) for x in v]
    if isinstance(v, dict):
        return {k: evaluate(x, env) for k, x in v.items()}
    if isinstance(v, slice):
        return slice(evaluate(v.start, env), evaluate(v.stop, env), evaluate(v.step, env))
    return v


def bind(spec, args):
    """Check a call's arguments against the program: ``(input arrays, dim values, kinds)``.
    Every error names the input, the dim and the bound."""
    if len(args) != len(spec["args"]):
        raise ExportError(f"the exported program takes {len(spec['args'])} arguments "
                          f"({', '.join(a['name'] for a in spec['args'])}), got {len(args)}")
    env, where, arrays, kinds = {}, {}, [], set()
    for a, sa in zip(args, spec["args"]):
        name = sa["name"]
        if sa["kind"] == "value":
            if not (type(a) is type(sa["value"]) and a == sa["value"]):
                raise ExportError(f"argument {name!r} was exported as the constant {sa['value']!r}; "
                                  f"got {a!r} (export again to change it)")
            continue
        inp = spec["inputs"][sa["input"]]
        if isinstance(a, Tensor):
            kinds.add("tensor")
            dt = a.dtype
        elif isinstance(a, np.ndarray):
            kinds.add("numpy")
            dt = D.dtype(a.dtype)
        else:
            raise ExportError(f"input {name!r} must be an array or a Tensor, got {type(a).__name__}")
        if dt is not inp["dtype"]:
            raise ExportError(f"input {name!r}: expected dtype {inp['dtype'].name}, got {dt.name}")
        shape = tuple(a.shape)
        want = inp["shape"]
        if len(shape) != len(want):
            raise ExportError(f"input {name!r}: expected {len(want)} dims "
                              f"{_fmt(want)}, got {len(shape)} dims {list(shape)}")
        for d, (got, w) in enumerate(zip(shape, want)):
            if isinstance(w, Poly):
                sym = w.names()[0]
                lo, hi = spec["dims"][sym]["min"], spec["dims"][sym]["max"]
                if not lo <= got <= hi:
                    raise ExportError(f"input {name!r} dim {d} ({sym}) = {got} is outside its "
                                      f"range: {sym} must be in [{lo}, {hi}]")
                if sym in env and env[sym] != got:
                    raise ExportError(f"input {name!r} dim {d} ({sym}) = {got}, but {where[sym]} "
                                      f"gives {sym} = {env[sym]}; they must be equal")
                env[sym], where[sym] = got, f"input {name!r} dim {d}"
            elif got != w:
                raise ExportError(f"input {name!r} dim {d}: expected size {w} (static), got {got}")
        arrays.append(a)
    return arrays, env, kinds


def build_graph(spec, env):
    """The concrete graph at dim values ``env`` (a compiler Recorder; no decomposition)."""
    rec = Recorder(decompose=False)
    rec.dynamic = {i: {d: str(s) for d, s in enumerate(e["shape"]) if isinstance(s, Poly)}
                   for i, e in enumerate(spec["inputs"]) if any(isinstance(s, Poly) for s in e["shape"])}
    values = []
    for entry in spec["inputs"] + spec["weights"]:
        shape = tuple(evaluate(s, env) for s in entry["shape"])
        p = rec.placeholder(shape, entry["dtype"], entry["name"])
        p.params = {"np": entry["np"]}
        values.append(Tensor._tracer(p, entry["dtype"], cpu, entry["np"]))
    with no_grad():
        for k, n in enumerate(spec["nodes"], start=len(values)):
            op = OPS.get(n["op"])
            if op is None:
                raise ExportError(f"unknown op {n['op']!r} (node {k})")
            args = tuple(values[a.k] if isinstance(a, Ref) else evaluate(a, env) for a in n["args"])
            params = evaluate(n["params"], env)
            try:
                t = rec.record(op, args, params)
            except ExportError:
                raise
            except Exception as e:   # noqa: BLE001 - a size the graph cannot take
                raise ExportError(f"{n['op']} (from {n['where']}) fails at "
                                  f"{_fmt_env(env)}: {type(e).__name__}: {e}") from None
            if not isinstance(t, Tensor):
                raise ExportError(f"op {n['op']!r} (node {k}) does not give one tensor")
            if n["np_flavour"]:
                t._np = True
                t._node.np_flavour = True
            want = tuple(evaluate(s, env) for s in n["shape"])
            if t.dtype is not n["dtype"] or tuple(t.shape) != want:
                raise ExportError(f"node {k} ({n['op']} from {n['where']}) gives {t.dtype.name}{list(t.shape)} "
                                  f"at {_fmt_env(env)}, but the program says {n['dtype'].name}{list(want)}: "
                                  "these sizes are outside what the exported graph holds for")
            values.append(t)
    node_refs = []
    for o in spec["outputs"]:
        k = o["ref"].k
        if k >= len(spec["inputs"]) + len(spec["weights"]) and k not in node_refs:
            node_refs.append(k)
    rec.outputs = [values[k]._node for k in node_refs]
    return rec, node_refs


class Executable:
    """One graph at one set of sizes on one backend."""

    def __init__(self, spec, env, backend):
        self.graph, self.node_refs = build_graph(spec, env)
        self.n_inputs = len(spec["inputs"])
        self.n_values = self.n_inputs + len(spec["weights"])
        self.backend = backend
        self.program = None
        self.consts = []
        if backend != "eager":
            _, entries, runtime = call_path.compiler()
            prim = decompose(self.graph)
            # the compiler's choice of program class per backend (a Triton program, where the
            # compiler has one), else the CPU program
            pick = getattr(entries, "_program_class", lambda _backend: runtime.Program)
            self.program = pick(backend)(prim, backend, "default", dynamic=bool(env))
            n0 = len(self.graph.placeholders)
            self.consts = [prim.constants[i] for i in range(n0, len(prim.placeholders))]

    def run(self, arrays):
        """Arrays for every value the outputs refer to: ``{value number: array}``."""
        if self.program is None:
            outs = call_path.compiler()[2].interpret(self.graph, arrays)
        else:
            outs = self.program.run(list(arrays) + self.consts)
        got = dict(zip(self.node_refs, outs))
        for k in range(self.n_values):      # an input returned as it is stays that array; a
            if k not in got:                # weight is copied (the caller must not edit the program)
                got[k] = arrays[k] if k < self.n_inputs else arrays[k].copy()
        return got

    def wait(self):
        if self.program is not None:
            self.program.wait()


def replay(spec, tensors, env):
    """Run the program op by op through the engine (``apply``): inside a compiled function
    this records into its trace, and on tensors that require grad it records autograd."""
    values = list(tensors)
    for n in spec["nodes"]:
        args = tuple(values[a.k] if isinstance(a, Ref) else evaluate(a, env) for a in n["args"])
        t = apply(OPS[n["op"]], args, evaluate(n["params"], env))
        if n["np_flavour"]:
            t._np = True
        values.append(t)
    return values


def _fmt(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _fmt_env(env):
    return ", ".join(f"{k}={v}" for k, v in sorted(env.items())) or "the exported sizes"
