"""Coverage of the PyTorch names that 10 well-known small programs use (tests/data/
pytorch-names.tsv, issue 24): which of them nbaccel has under PyTorch's spelling.

    python tests/pytorch_names.py        # prints the figure and the missing names

``torch.X`` is looked up as ``nbaccel.X``, ``Tensor.X`` on ``nbaccel.Tensor`` (or an instance,
for attributes set in ``__init__``), ``torch.nn.Module.X`` on a Module instance and
``torch.optim.Optimizer.X`` on an Optimizer instance.
"""
from __future__ import annotations

import os

TSV = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "pytorch-names.tsv")

# names that need a GPU runtime or several processes: they exist and raise NotImplementedError
# naming the alternative (called with these arguments)
NEEDS_GPU_OR_CLUSTER = {
    "torch.distributed.init_process_group": ("nccl",),
    "torch.distributed.destroy_process_group": (),
    "torch.nn.parallel.DistributedDataParallel": ("MODULE",),
    "torch.onnx.export": ("MODULE", None, "x.onnx"),
}


def names():
    out = []
    with open(TSV) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            name, programs, _ = line.rstrip("\n").split("\t")
            out.append((name, int(programs)))
    return out


def _roots(nb):
    m = nb.nn.Linear(2, 2)
    return {
        "Tensor": nb.ones(2),
        "torch.nn.Module": m,
        "torch.optim.Optimizer": nb.optim.SGD(m.parameters(), lr=0.1),
        "torch": nb,
    }


def resolve(name, nb=None):
    """The object nbaccel has for ``name``, or raise AttributeError."""
    if nb is None:
        import nbaccel as nb
    roots = _roots(nb)
    for prefix in ("Tensor", "torch.nn.Module", "torch.optim.Optimizer", "torch"):
        if name.startswith(prefix + "."):
            obj = roots[prefix]
            rest = name[len(prefix) + 1:]
            break
    else:
        raise ValueError(f"unknown root in {name!r}")
    for part in rest.split("."):
        obj = getattr(obj, part)
    return obj


def coverage(nb=None):
    have, missing = [], []
    for name, _ in names():
        try:
            resolve(name, nb)
            have.append(name)
        except AttributeError:
            missing.append(name)
    return have, missing


if __name__ == "__main__":
    have, missing = coverage()
    total = len(have) + len(missing)
    print(f"{len(have)} / {total} names of {os.path.basename(TSV)} "
          f"({100 * len(have) / total:.0f}%); {len(NEEDS_GPU_OR_CLUSTER)} of them raise "
          "NotImplementedError by design (GPU / cluster only)")
    for n in missing:
        print("missing:", n)
