"""``ExportedProgram.module()``: the program as an ``nn.Module`` with the original weight names."""
from __future__ import annotations

from ..devices import cpu
from ..nn import Module
from ..tensor import Parameter, Tensor


class ExportedModule(Module):
    """Calls its exported program with the module's current parameters and buffers, so
    ``load_state_dict`` of the original model's weights works, and so does ``nb.compile``."""

    def __init__(self, program):
        super().__init__()
        self.__dict__["_program"] = program
        self.__dict__["_weight_paths"] = []
        spec = program._spec
        for entry, array in zip(spec["weights"], program._weights):
            path = entry["name"].split(".") if entry["kind"] != "constant" else [entry["name"]]
            owner = self
            for part in path[:-1]:
                child = owner._modules.get(part)
                if child is None:
                    child = Module()
                    owner.add_module(part, child)
                owner = child
            t = Tensor._wrap(array.copy(), entry["dtype"], cpu, entry["np"])
            if entry["kind"] == "parameter":
                p = Parameter(t, requires_grad=False) if t.dtype.kind in "fc" else t
                if isinstance(p, Parameter):
                    owner.register_parameter(path[-1], p)
                else:
                    owner.register_buffer(path[-1], p)
            else:
                owner.register_buffer(path[-1], t, persistent=entry["kind"] == "buffer")
            self._weight_paths.append((owner, path[-1]))
        self.eval()

    def forward(self, *args):
        weights = [getattr(owner, name) for owner, name in self._weight_paths]
        return self._program._call(args, weights, "auto")

    def extra_repr(self):
        return repr(self._program)
