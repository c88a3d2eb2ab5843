"""Datasets: ``Dataset``, ``IterableDataset``, ``TensorDataset``, ``ConcatDataset``, ``Subset``
and ``random_split`` (PyTorch's semantics, including its rounding of fractional lengths)."""
from __future__ import annotations

import bisect
import math

from .sampler import _rng


class Dataset:
    """A map-style dataset: ``__getitem__(index)`` and usually ``__len__``. ``a + b``
    concatenates."""

    def __getitem__(self, index):
        raise NotImplementedError("subclasses of Dataset should implement __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is a stream: ``__iter__`` yields samples (no indexing, no sampler)."""

    def __iter__(self):
        raise NotImplementedError("subclasses of IterableDataset should implement __iter__")

    def __add__(self, other):
        raise TypeError("IterableDatasets cannot be concatenated with +")


class TensorDataset(Dataset):
    """Sample ``i`` is ``tuple(t[i] for t in tensors)``; every tensor has the same first size."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        n = tensors[0].shape[0]
        if any(t.shape[0] != n for t in tensors):
            raise ValueError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class ConcatDataset(Dataset):
    """Datasets one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][idx - start]


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = list(indices)

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self):
        return len(self.indices)


def _lengths(n, lengths):
    """Fractions become counts as PyTorch does: floor each, then hand the remainder out one
    by one from the first subset on."""
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = [int(math.floor(n * f)) for f in lengths]
        for f in lengths:
            if f < 0 or f > 1:
                raise ValueError(f"Fraction at index is not between 0 and 1: {f}")
        for i in range((n - sum(counts))):
            counts[i % len(counts)] += 1
        return counts
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    return [int(x) for x in lengths]


def random_split(dataset, lengths, generator=None):
    """Split into non-overlapping ``Subset``s of the given lengths (or fractions summing to 1)
    after a random permutation drawn from ``generator`` (default: nbaccel's seeded one)."""
    counts = _lengths(len(dataset), list(lengths))
    perm = _rng(generator).permutation(sum(counts)).tolist()
    out, start = [], 0
    for c in counts:
        out.append(Subset(dataset, perm[start:start + c]))
        start += c
    return out
