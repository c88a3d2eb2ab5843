"""``nbaccel.utils.data``: datasets, samplers and the ``DataLoader``, in PyTorch's spelling.

>>> import nbaccel as nb
>>> from nbaccel.utils.data import DataLoader, TensorDataset
>>> ds = TensorDataset(nb.arange(10.0).reshape(5, 2), nb.arange(5))
>>> [tuple(x.shape) for x, y in DataLoader(ds, batch_size=2)]
[(2, 2), (2, 2), (1, 2)]
"""
from .dataset import (ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset,  # noqa: F401
                      random_split)
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,  # noqa: F401
                      SubsetRandomSampler, WeightedRandomSampler)
from .dataloader import DataLoader, default_collate, default_convert, get_worker_info  # noqa: F401

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "Subset",
           "random_split", "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler", "DataLoader", "default_collate",
           "default_convert", "get_worker_info"]
