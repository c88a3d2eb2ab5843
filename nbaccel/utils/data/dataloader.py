"""``DataLoader``: batches from a dataset through a sampler and a collate function, optionally
fetched by worker threads.

Workers are threads (``num_workers`` of them, each fetching whole batches, ``prefetch_factor``
batches ahead per worker, handed out in sampler order). NumPy releases the GIL in its copies,
so threads overlap fetching with training without pickling the dataset; a dataset whose
``__getitem__`` is pure Python gains little from them.

``TensorDataset`` batches (and ``Subset``s of them) are gathered in one indexing op per tensor
instead of stacking samples one by one: the same values, far fewer ops.
"""
from __future__ import annotations

import collections
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .dataset import IterableDataset, Subset, TensorDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler
from ... import ops, dtypes as D
from ...convert import asarray, tensor as _tensor
from ...ops.creation import generator
from ...tensor import Tensor

_worker = threading.local()


class WorkerInfo:
    def __init__(self, id, num_workers, seed, dataset):
        self.id, self.num_workers, self.seed, self.dataset = id, num_workers, seed, dataset

    def __repr__(self):
        return f"WorkerInfo(id={self.id}, num_workers={self.num_workers})"


def get_worker_info():
    """Inside a worker thread: its ``WorkerInfo``; in the main thread: None."""
    return getattr(_worker, "info", None)


def default_convert(data):
    """NumPy arrays (not of strings or objects) become tensors, recursively through sequences
    and mappings; everything else stays."""
    if isinstance(data, np.ndarray) and data.dtype.kind not in "OSUV":
        return asarray(data, _np=False)
    if isinstance(data, np.generic) and data.dtype.kind not in "OSUV":
        return asarray(np.asarray(data), _np=False)
    if isinstance(data, collections.abc.Mapping):
        return {k: default_convert(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, (list, tuple)):
        return type(data)(default_convert(d) for d in data)
    return data


def default_collate(batch):
    """PyTorch's collation: tensors and NumPy arrays are stacked along a new first axis into
    a tensor; Python floats become a float64 tensor, ints an int64 tensor, bools a bool
    tensor; strings stay a list; tuples, lists, named tuples and dicts are collated field by
    field."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return ops.stack(list(batch), 0)
    if isinstance(elem, np.ndarray) and elem.dtype.kind not in "OSUV":
        return asarray(np.stack(batch), _np=False)
    if isinstance(elem, np.generic) and elem.dtype.kind not in "OSUV":
        return asarray(np.array(batch), _np=False)
    if isinstance(elem, bool):
        return _tensor(batch, dtype=D.bool_)
    if isinstance(elem, int):
        return _tensor(batch, dtype=D.int64)
    if isinstance(elem, float):
        return _tensor(batch, dtype=D.float64)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        return {k: default_collate([d[k] for d in batch]) for k in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        n = len(elem)
        if any(len(b) != n for b in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        out = [default_collate(list(s)) for s in zip(*batch)]
        return tuple(out) if isinstance(elem, tuple) else out
    raise TypeError(f"default_collate: batch must contain tensors, NumPy arrays, numbers, "
                    f"dicts or lists; found {type(elem).__name__}")


def _tensor_rows(dataset):
    """(tensors, index map) when ``dataset`` is a TensorDataset or a Subset chain over one."""
    idx = None
    while isinstance(dataset, Subset):
        sub = np.asarray(dataset.indices, dtype=np.int64)
        idx = sub if idx is None else sub[idx]
        dataset = dataset.dataset
    if isinstance(dataset, TensorDataset):
        return dataset.tensors, idx
    return None, None


class DataLoader:
    """Iterate over ``dataset`` in batches.

    ``batch_size`` (None: samples one by one, converted but not collated), ``shuffle`` (a
    ``RandomSampler`` drawing from ``generator``), ``sampler`` / ``batch_sampler``,
    ``drop_last``, ``collate_fn`` (default: :func:`default_collate`), ``num_workers`` (threads;
    see the module docstring), ``prefetch_factor``, ``worker_init_fn``, ``persistent_workers``.
    ``pin_memory``, ``timeout`` and ``multiprocessing_context`` are accepted and have no effect
    on the CPU.
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers: int = 0, collate_fn=None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None,
                 persistent_workers: bool = False, pin_memory_device: str = "", in_order: bool = True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                             "let num_workers > 0 to enable multiprocessing, otherwise set "
                             "prefetch_factor to None.")
        self.dataset, self.num_workers = dataset, num_workers
        self.prefetch_factor = 2 if num_workers and prefetch_factor is None else prefetch_factor
        self.pin_memory, self.timeout, self.worker_init_fn = pin_memory, timeout, worker_init_fn
        self.generator, self.persistent_workers = generator, persistent_workers
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle:
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle}")
            if sampler is not None or batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler "
                                 "and batch_sampler options")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None and not self._iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size, self.drop_last = batch_size, drop_last
        self.sampler, self.batch_sampler = sampler, batch_sampler
        self._auto_collation = batch_sampler is not None or (self._iterable and batch_size is not None)
        self._default_collate = collate_fn is None
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if self._auto_collation else default_convert)
        self._pool = None

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler if self._auto_collation else self.sampler)

    # -- fetching -----------------------------------------------------------------------------
    def _fetch(self, indices):
        if not self._auto_collation:
            return self.collate_fn(self.dataset[indices])
        if self._default_collate:
            tensors, idx = _tensor_rows(self.dataset)
            if tensors is not None:
                rows = np.asarray(indices, dtype=np.int64)
                rows = rows if idx is None else idx[rows]
                return tuple(t[rows] for t in tensors)
        getitems = getattr(self.dataset, "__getitems__", None)
        samples = getitems(list(indices)) if getitems else [self.dataset[i] for i in indices]
        return self.collate_fn(samples)

    def _index_stream(self):
        return iter(self.batch_sampler if self._auto_collation else self.sampler)

    def _iterable_batches(self):
        it = iter(self.dataset)
        if self.batch_size is None:
            for sample in it:
                yield self.collate_fn(sample)
            return
        batch = []
        for sample in it:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __iter__(self):
        if self._iterable:
            return self._iterable_batches()      # a stream is read in the main thread
        if self.num_workers == 0:
            return (self._fetch(i) for i in self._index_stream())
        return self._threaded()

    def _start_pool(self):
        if self._pool is not None:
            return self._pool
        base = int(generator().integers(0, 2 ** 62))
        ids = iter(range(self.num_workers))
        lock = threading.Lock()

        def init():
            with lock:
                wid = next(ids)
            _worker.info = WorkerInfo(wid, self.num_workers, base + wid, self.dataset)
            if self.worker_init_fn is not None:
                self.worker_init_fn(wid)

        pool = ThreadPoolExecutor(self.num_workers, thread_name_prefix="nbaccel-dataloader",
                                  initializer=init)
        if self.persistent_workers:
            self._pool = pool
        return pool

    def _threaded(self):
        pool = self._start_pool()
        ahead = self.num_workers * self.prefetch_factor
        pending = collections.deque()
        stream = self._index_stream()
        try:
            for indices in stream:
                pending.append(pool.submit(self._fetch, indices))
                if len(pending) >= ahead:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for f in pending:
                f.cancel()
            if pool is not self._pool:
                pool.shutdown(wait=True)

    def __del__(self):
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=False)
