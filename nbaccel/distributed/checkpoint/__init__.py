"""``nbaccel.distributed.checkpoint``: save and load state_dicts as zarr v3 arrays, with
resharding, in torch.distributed.checkpoint's spelling. zarr is imported on first use.

>>> import nbaccel as nb, tempfile
>>> from nbaccel.distributed import checkpoint, ShardedTensor
>>> path = tempfile.mkdtemp()
>>> w = nb.arange(24.0).reshape(8, 3)
>>> _ = checkpoint.save({"w": ShardedTensor.split(w, 4)}, checkpoint_id=path)   # 4 row shards
>>> sd = {"w": ShardedTensor.zeros((8, 3), 3)}                                   # load into 3
>>> checkpoint.load(sd, checkpoint_id=path)
>>> bool((sd["w"].full_tensor() == w).all())
True

See docs/distributed.md.
"""
from .api import FileSystemReader, FileSystemWriter, load, load_slice, save  # noqa: F401
from .store import FORMAT, VERSION, CheckpointError  # noqa: F401

__all__ = ["save", "load", "load_slice", "FileSystemWriter", "FileSystemReader", "CheckpointError"]
