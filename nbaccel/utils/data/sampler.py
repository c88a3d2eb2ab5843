"""Samplers: which indices a ``DataLoader`` reads, in which order, in which batches."""
from __future__ import annotations

import numpy as np

from ...ops.creation import generator as default
from ...tensor import Tensor


def _rng(generator):
    """The NumPy generator to draw from: ``generator`` (a ``nbaccel.Generator`` or any NumPy
    Generator) or nbaccel's seeded default (``nbaccel.manual_seed``)."""
    if generator is not None:
        return generator
    return default()


class Sampler:
    """Base class: ``__iter__`` yields indices (or lists of indices, for batch samplers)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation (a fresh one per epoch), or ``num_samples`` draws with
    replacement."""

    def __init__(self, data_source, replacement: bool = False, num_samples=None, generator=None):
        self.data_source, self.replacement, self.generator = data_source, replacement, generator
        self._num_samples = num_samples
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n, rng = len(self.data_source), _rng(self.generator)
        if self.replacement:
            return iter(rng.integers(0, n, self.num_samples).tolist())
        reps, rest = divmod(self.num_samples, n)
        idx = [rng.permutation(n) for _ in range(reps)] + [rng.permutation(n)[:rest]]
        return iter(np.concatenate(idx).tolist())

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order."""

    def __init__(self, indices, generator=None):
        self.indices, self.generator = list(indices), generator

    def __iter__(self):
        perm = _rng(self.generator).permutation(len(self.indices))
        return iter([self.indices[i] for i in perm])

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights``."""

    def __init__(self, weights, num_samples: int, replacement: bool = True, generator=None):
        w = np.asarray(weights.numpy() if isinstance(weights, Tensor) else weights, dtype=np.float64)
        if w.ndim != 1:
            raise ValueError("weights should be a 1-d sequence")
        self.weights, self.num_samples = w, int(num_samples)
        self.replacement, self.generator = replacement, generator

    def __iter__(self):
        p = self.weights / self.weights.sum()
        idx = _rng(self.generator).choice(len(p), self.num_samples, replace=self.replacement, p=p)
        return iter(idx.tolist())

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of ``batch_size`` indices from ``sampler``; the last one shorter unless
    ``drop_last``."""

    def __init__(self, sampler, batch_size: int, drop_last: bool):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        batch = []
        for i in self.sampler:
            batch.append(i)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
