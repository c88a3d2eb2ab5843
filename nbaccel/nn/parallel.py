"""``nbaccel.nn.parallel``: PyTorch's data-parallel wrappers, for one device.

nbaccel runs in one process on one device, so ``data_parallel`` and ``DataParallel`` with no
more than one device simply call the module (which is what PyTorch does with a single
device), and ``DistributedDataParallel`` raises ``NotImplementedError`` saying what to do
instead.
"""
from __future__ import annotations

from .module import Module

__all__ = ["data_parallel", "DataParallel", "DistributedDataParallel"]


def _one_device(device_ids, what):
    if device_ids is not None and len(list(device_ids)) > 1:
        raise NotImplementedError(f"{what} over {len(list(device_ids))} devices: nbaccel runs "
                                  "a module on one device; call the module directly")


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0,
                  module_kwargs=None):
    """``module(*inputs)`` on its one device."""
    _one_device(device_ids, "data_parallel")
    if not isinstance(inputs, tuple):
        inputs = (inputs,)
    return module(*inputs, **(module_kwargs or {}))


class DataParallel(Module):
    """Wraps ``module`` (as ``self.module``, so state_dict keys gain the ``module.`` prefix
    as in PyTorch) and calls it on its one device."""
    _takes_tensors = False    # the wrapped module decides

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        _one_device(device_ids, "DataParallel")
        self.module = module

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


class DistributedDataParallel(Module):
    _takes_tensors = False    # the wrapped module decides
    def __init__(self, module, *args, **kwargs):
        raise NotImplementedError(
            "DistributedDataParallel needs torch.distributed process groups, which nbaccel does "
            "not have: train the module directly in one process (the model runs unchanged "
            "without the wrapper).")
