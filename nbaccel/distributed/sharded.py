"""``Shard`` and ``ShardedTensor``: the pieces of a tensor one process holds, in PyTorch's terms.

A shard is a local tensor and the offsets of its first element in the global tensor. A
``ShardedTensor`` is the shards one process holds plus the global shape; together the shards of
all processes tile the global tensor. A plain tensor is one shard at offset 0.

>>> import nbaccel as nb
>>> from nbaccel.distributed import Shard, ShardedTensor
>>> st = ShardedTensor([Shard(nb.zeros(2, 3), (0, 0)), Shard(nb.ones(2, 3), (2, 0))], (4, 3))
>>> st
ShardedTensor(shape=(4, 3), dtype=float32, shards=[(0:2, 0:3), (2:4, 0:3)])
>>> st.full_tensor().sum().item()
6.0
>>> [s.offsets for s in ShardedTensor.split(nb.arange(10.0), 3).local_shards()]
[(0,), (4,), (8,)]
"""
from __future__ import annotations

import numpy as np

from ..convert import asarray

from ..tensor import Tensor
from ..ops import ALIASES


class Shard:
    """``Shard(tensor, offsets)``: ``tensor`` holds the global elements starting at ``offsets``
    (one offset per dimension). ``sizes`` is the tensor's shape; ``region`` the global slices."""

    __slots__ = ("tensor", "offsets")

    def __init__(self, tensor, offsets):
        self.tensor = tensor if isinstance(tensor, Tensor) else asarray(tensor)
        offsets = tuple(int(o) for o in offsets)
        if len(offsets) != self.tensor.ndim:
            raise ValueError(f"Shard: {len(offsets)} offsets for a {self.tensor.ndim}-D tensor "
                             f"of shape {tuple(self.tensor.shape)}")
        if any(o < 0 for o in offsets):
            raise ValueError(f"Shard: offsets must be >= 0, got {offsets}")
        self.offsets = offsets

    @property
    def sizes(self) -> tuple:
        return tuple(self.tensor.shape)

    @property
    def region(self) -> tuple:
        """The global index of this shard: one ``slice`` per dimension."""
        return tuple(slice(o, o + n) for o, n in zip(self.offsets, self.sizes))

    def __repr__(self):
        return f"Shard(offsets={self.offsets}, sizes={self.sizes}, dtype={self.tensor.dtype.name})"


class ShardedTensor:
    """``ShardedTensor(shards, global_shape)``: the shards of a global tensor that this process
    holds. Shards must lie inside ``global_shape``, share one dtype and not overlap."""

    __slots__ = ("_shards", "shape")

    def __init__(self, shards, global_shape):
        self.shape = tuple(int(n) for n in global_shape)
        self._shards = list(shards)
        if not self._shards:
            raise ValueError("ShardedTensor: needs at least one shard")
        for s in self._shards:
            if not isinstance(s, Shard):
                raise TypeError(f"ShardedTensor: shards must be Shard objects, got {type(s).__name__}")
            if len(s.offsets) != len(self.shape):
                raise ValueError(f"ShardedTensor: a {len(s.offsets)}-D shard in a {len(self.shape)}-D "
                                 f"tensor of shape {self.shape}")
            if any(o + n > g for o, n, g in zip(s.offsets, s.sizes, self.shape)):
                raise ValueError(f"ShardedTensor: {s} reaches outside the global shape {self.shape}")
            if s.tensor.dtype != self._shards[0].tensor.dtype:
                raise TypeError(f"ShardedTensor: shards have different dtypes "
                                f"({self._shards[0].tensor.dtype}, {s.tensor.dtype})")
        for i, a in enumerate(self._shards):
            for b in self._shards[i + 1:]:
                if _overlap(a, b):
                    raise ValueError(f"ShardedTensor: {a} and {b} overlap")

    def local_shards(self) -> list:
        return list(self._shards)

    @property
    def dtype(self):
        return self._shards[0].tensor.dtype

    @property
    def ndim(self):
        return len(self.shape)

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def full_tensor(self) -> Tensor:
        """The global tensor assembled from the local shards (all of it must be local)."""
        covered = sum(int(np.prod(s.sizes)) for s in self._shards)
        if covered != int(np.prod(self.shape)):
            raise ValueError(f"ShardedTensor.full_tensor: the local shards cover {covered} of "
                             f"{int(np.prod(self.shape))} elements")
        first = self._shards[0].tensor
        out = np.empty(self.shape, dtype=np.asarray(first.detach().numpy(force=True)).dtype)
        for s in self._shards:
            out[s.region] = s.tensor.detach().numpy(force=True)
        return asarray(out, device=first.device, _np=False)

    @classmethod
    def split(cls, tensor, num_shards: int, dim: int = 0) -> "ShardedTensor":
        """``tensor`` cut into ``num_shards`` pieces along ``dim`` as ``torch.chunk`` cuts it
        (equal pieces of ceil(n / num_shards), the last one smaller; fewer if n is small)."""
        t = tensor if isinstance(tensor, Tensor) else asarray(tensor)
        bounds = _chunk_bounds(t.shape[dim], num_shards)
        shards = []
        for lo, hi in bounds:
            index = tuple(slice(lo, hi) if d == dim else slice(None) for d in range(t.ndim))
            offsets = tuple(lo if d == dim else 0 for d in range(t.ndim))
            shards.append(Shard(t.detach()[index].clone(), offsets))
        return cls(shards, t.shape)

    @classmethod
    def zeros(cls, global_shape, num_shards: int, dim: int = 0, dtype=None) -> "ShardedTensor":
        """Zero-filled shards laid out as :meth:`split` lays them out: a target to load into."""
        shape = tuple(global_shape)
        shards = []
        for lo, hi in _chunk_bounds(shape[dim], num_shards):
            sizes = tuple(hi - lo if d == dim else n for d, n in enumerate(shape))
            offsets = tuple(lo if d == dim else 0 for d in range(len(shape)))
            shards.append(Shard(ALIASES["zeros"](*sizes, dtype=dtype), offsets))
        return cls(shards, shape)

    def __repr__(self):
        regions = ", ".join("(" + ", ".join(f"{r.start}:{r.stop}" for r in s.region) + ")"
                            for s in self._shards)
        return f"ShardedTensor(shape={self.shape}, dtype={self.dtype.name}, shards=[{regions}])"


def _chunk_bounds(n: int, num_shards: int):
    if num_shards < 1:
        raise ValueError(f"num_shards must be >= 1, got {num_shards}")
    step = max(1, -(-n // num_shards))
    return [(lo, min(lo + step, n)) for lo in range(0, n, step)] or [(0, 0)]


def _overlap(a: Shard, b: Shard) -> bool:
    return all(oa < ob + nb and ob < oa + na and na > 0 and nb > 0
               for oa, na, ob, nb in zip(a.offsets, a.sizes, b.offsets, b.sizes))
