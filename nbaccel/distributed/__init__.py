"""``nbaccel.distributed``: a distributed checkpoint on zarr v3 and data-parallel training on
Dask workers. Importing it imports neither zarr nor Dask; they load on first use
(``pip install 'nbaccel[distributed]'``).

* ``checkpoint.save`` / ``checkpoint.load`` / ``checkpoint.load_slice``: state_dicts as zarr
  arrays whose chunks are the shards, resharded on load.
* ``Shard(tensor, offsets)``, ``ShardedTensor(shards, global_shape)``: what one process holds.
* ``DataParallel(model, optimizer, client=client)``: a replica per Dask worker.

See docs/distributed.md.
"""
from . import checkpoint  # noqa: F401
from .sharded import Shard, ShardedTensor  # noqa: F401
# torch.distributed's process-group calls, answered for one process (nbaccel has no process
# groups: DataParallel replicates over Dask workers instead); defined in torch_compat
from ..torch_compat import _no_distributed  # noqa: E402

is_available = lambda: False  # noqa: E731
is_initialized = lambda: False  # noqa: E731
get_rank = lambda group=None: 0  # noqa: E731
get_world_size = lambda group=None: 1  # noqa: E731
init_process_group = _no_distributed("init_process_group")
destroy_process_group = _no_distributed("destroy_process_group")
barrier = _no_distributed("barrier")
all_reduce = _no_distributed("all_reduce")

__all__ = ["checkpoint", "Shard", "ShardedTensor", "DataParallel", "WorkerLostError"]


def __getattr__(name):
    # the data-parallel side needs dask.distributed: import it when it is first asked for
    if name in ("DataParallel", "WorkerLostError"):
        from . import data_parallel  # lazy: DataParallel (on Dask) is imported when used
        return getattr(data_parallel, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
