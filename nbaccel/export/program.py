"""``ExportedProgram``: an exported graph with its weights, independent of the code it came from.

>>> import nbaccel as nb, numpy as np
>>> ep = nb.export(lambda x: np.tanh(x) * 2, np.ones((4, 3), np.float32),
...                dynamic_shapes=({0: nb.export.Dim("n", min=2, max=64)},))
>>> print(ep.graph)
graph(x: f32[n, 3]):
  %0 = tanh(x)                                   f32[n, 3]
  %1 = multiply(%0, 2)                           f32[n, 3]
  return %1
>>> ep.run(np.zeros((5, 3), np.float32)).shape
(5, 3)
"""
from __future__ import annotations

import numpy as np

from ..compiler.schedule.ir import fmt_param, _SHORT
from ..devices import cpu
from ..convert import asarray
from ..dispatch import active_trace
from ..tensor import Tensor
from .dims import ExportError, Poly
from .runner import Executable, bind, replay
from .serialize import Ref
from .store import save
from ..autograd import is_grad_enabled
from .module import ExportedModule
from . import call_path

BACKENDS = ("auto", "numba", "numpy", "eager")
MAX_EXECUTABLES = 32     # built graphs kept per program (one per set of sizes and backend)


def _backends():
    """The compiler's backends (a triton backend, where the compiler has one, is accepted too)."""
    return tuple(dict.fromkeys(BACKENDS + tuple(call_path.compiler()[0].BACKENDS)))


class ExportedProgram:
    """One full graph plus its weights. ``run`` (or calling it) runs it on a backend,
    ``module()`` wraps it as an ``nn.Module``, ``save`` writes it to a directory that
    ``nb.load`` reads back in a process that never saw the defining code."""

    def __init__(self, spec, weights):
        self._spec = spec
        self._weights = [np.asarray(w, order="C") for w in weights]   # (0-d stays 0-d)
        self._executables = {}
        if len(self._weights) != len(spec["weights"]):
            raise ExportError("the program and its weights do not match")

    # -- description ----------------------------------------------------------------------------
    @property
    def graph(self) -> str:
        """The graph as text, with symbolic sizes (``f32[batch, 128]``)."""
        spec = self._spec
        names = [e["name"] for e in spec["inputs"] + spec["weights"]]
        ins = ", ".join(f"{e['name']}: {_type(e['dtype'], e['shape'])}" for e in spec["inputs"] + spec["weights"])
        lines = [f"graph({ins}):"]

        def ref(v):
            return names[v.k] if v.k < len(names) else f"%{v.k - len(names)}"

        def arg(a):
            return ref(a) if isinstance(a, Ref) else str(a) if isinstance(a, Poly) else fmt_param(a)
        for i, n in enumerate(spec["nodes"]):
            parts = [arg(a) for a in n["args"]]
            parts += [f"{k}={_param(v)}" for k, v in n["params"].items() if k != "device"]
            lhs = f"  %{i} = {n['op']}({', '.join(parts)})"
            lines.append(f"{lhs:<48} {_type(n['dtype'], n['shape'])}")
        lines.append("  return " + ", ".join(ref(o["ref"]) for o in spec["outputs"]))
        return "\n".join(lines)

    @property
    def signature(self) -> str:
        """Inputs, their dims' ranges, weights and outputs, one line each."""
        spec = self._spec
        lines = ["inputs:"]
        for a in spec["args"]:
            if a["kind"] == "value":
                lines.append(f"  {a['name']} = {a['value']!r} (baked in)")
            else:
                e = spec["inputs"][a["input"]]
                lines.append(f"  {a['name']}: {_type(e['dtype'], e['shape'])}")
        for name, d in spec["dims"].items():
            lines.append(f"  {name}: {d['min']} <= {name} <= {d['max']}")
        if spec["weights"]:
            n = sum(int(np.prod(w.shape)) for w in self._weights)
            lines.append(f"weights: {len(spec['weights'])} tensors, {n} values")
        lines.append("outputs:")
        nv = spec["inputs"] + spec["weights"]
        for i, o in enumerate(spec["outputs"]):
            k = o["ref"].k
            e = nv[k] if k < len(nv) else spec["nodes"][k - len(nv)]
            lines.append(f"  out{i}: {_type(e['dtype'], e['shape'])}")
        return "\n".join(lines)

    @property
    def dynamic_dims(self) -> dict:
        """``{name: (min, max)}`` of the program's symbolic dims."""
        return {n: (d["min"], d["max"]) for n, d in self._spec["dims"].items()}

    @property
    def ops(self) -> list:
        """The op-table names of the graph's nodes, in order."""
        return [n["op"] for n in self._spec["nodes"]]

    def state_dict(self) -> dict:
        """The weights by name (copies as Tensors)."""
        return {w["name"]: Tensor._wrap(a.copy(), w["dtype"], cpu, False)
                for w, a in zip(self._spec["weights"], self._weights)}

    def __str__(self):
        return f"ExportedProgram\n{self.signature}\n{self.graph}"

    def __repr__(self):
        ins = ", ".join(f"{a['name']}: {_type(self._spec['inputs'][a['input']]['dtype'], self._spec['inputs'][a['input']]['shape'])}"
                        for a in self._spec["args"] if a["kind"] == "input")
        return f"<ExportedProgram ({ins}) {len(self._spec['nodes'])} ops>"

    # -- running --------------------------------------------------------------------------------
    def run(self, *args, backend: str = "auto"):
        """Run on ``args`` (NumPy arrays in → NumPy arrays out, Tensors → Tensors) on a backend:
        ``"auto"`` (NumPy tier at once, numba when compiled), ``"numba"``, ``"numpy"`` or
        ``"eager"`` (the reference interpreter, op by op)."""
        return self._call(args, None, backend)

    __call__ = run

    def _call(self, args, weights, backend):
        if backend not in _backends():
            raise ValueError(f"backend must be one of {_backends()}, got {backend!r}")
        spec = self._spec
        inputs, env, kinds = bind(spec, args)
        wts = self._weights if weights is None else weights
        traced = active_trace() is not None or any(isinstance(a, Tensor) and a._node is not None for a in inputs)
        if traced or _needs_grad(inputs, weights):
            tensors = [a if isinstance(a, Tensor) else _as_tensor(a) for a in inputs]
            tensors += [w if isinstance(w, Tensor) else Tensor._wrap(w, e["dtype"], cpu, False)
                        for w, e in zip(wts, spec["weights"])]
            values = replay(spec, tensors, env)
            leaves = [values[o["ref"].k] for o in spec["outputs"]]
            return _rebuild(spec["tree"], leaves)
        arrays = [a._data if isinstance(a, Tensor) else a for a in inputs]
        arrays += [w._data if isinstance(w, Tensor) else w for w in wts]
        key = (tuple(sorted(env.items())), backend)
        exe = self._executables.pop(key, None)
        if exe is None:
            exe = Executable(spec, env, backend)
            if len(self._executables) >= MAX_EXECUTABLES:       # least recently used goes
                self._executables.pop(next(iter(self._executables)))
        self._executables[key] = exe
        got = exe.run(arrays)
        numpy_out = True if kinds == {"numpy"} else False if kinds else None
        leaves = []
        for o in spec["outputs"]:
            k = o["ref"].k
            a = got[k]
            dt = _dtype_of(spec, k)
            if numpy_out or (numpy_out is None and o["np"]):
                leaves.append(a[()] if a.ndim == 0 and not o["gives_array"] else a)
            else:
                leaves.append(Tensor._wrap(a, dt, cpu, o["np"]))
        return _rebuild(spec["tree"], leaves)

    def wait(self):
        """Wait for background numba compiles of the graphs run so far (``backend="auto"``)."""
        for exe in self._executables.values():
            exe.wait()
        return self

    def module(self):
        """An ``nn.Module`` that runs this program; its parameters and buffers are the
        program's weights under their original names (``state_dict`` keys match the model's)."""
        return ExportedModule(self)

    def save(self, path) -> None:
        """Write the program to directory ``path``: ``manifest.json``, ``program.json`` and
        ``weights.npz`` (no pickle; nothing executable). ``nb.load(path)`` reads it back."""
        save(self, path)


def _needs_grad(inputs, weights):
    if not is_grad_enabled():
        return False
    ts = list(inputs) + list(weights or [])
    return any(isinstance(t, Tensor) and t.requires_grad for t in ts)


def _as_tensor(a):
    return asarray(a)


def _dtype_of(spec, k):
    nv = spec["inputs"] + spec["weights"]
    return (nv[k] if k < len(nv) else spec["nodes"][k - len(nv)])["dtype"]


def _rebuild(tree, leaves):
    if "leaf" in tree:
        return leaves[tree["leaf"]]
    if "tuple" in tree:
        return tuple(_rebuild(t, leaves) for t in tree["tuple"])
    if "list" in tree:
        return [_rebuild(t, leaves) for t in tree["list"]]
    if "dict" in tree:
        return {k: _rebuild(t, leaves) for k, t in tree["dict"]}
    return tree["value"]


def _type(dtype, shape):
    dims = ", ".join(str(s) for s in shape)
    return f"{_SHORT.get(dtype.name, dtype.name)}[{dims}]"


def _param(v):
    if isinstance(v, Poly):
        return str(v)
    if isinstance(v, tuple):
        return "(" + ", ".join(_param(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    return fmt_param(v)


__all__ = ["ExportedProgram"]
