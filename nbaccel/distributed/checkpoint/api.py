"""``save`` / ``load`` / ``load_slice``: torch.distributed.checkpoint's calls over zarr v3."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ... import dtypes as D
from ...convert import asarray
from ...tensor import Tensor
from ..sharded import ShardedTensor
from . import store
from .flatten import EMPTY, array_names, key_of, kind_of, walk
from .layout import check_tiling, chunk_shape
from ...autograd import no_grad
from ...quant.tensor import QuantizedTensor
from ...sparse.semi_structured import SparseSemiStructuredTensor


class FileSystemWriter:
    """Where and how :func:`save` writes: ``FileSystemWriter(path, thread_count=None)``.
    ``thread_count`` threads write shards in parallel (default: up to 4)."""

    def __init__(self, path, thread_count: int | None = None):
        self.path = os.fspath(path)
        self.thread_count = thread_count or min(4, os.cpu_count() or 1)


class FileSystemReader:
    """Where :func:`load` reads: ``FileSystemReader(path)``. ``read_metadata()`` gives the
    manifest (JSON: tensors, dtypes, shapes, chunk grid, shard layout, format version)."""

    def __init__(self, path):
        self.path = os.fspath(path)

    def read_metadata(self) -> dict:
        return store.read_manifest(self.path)


def _root(checkpoint_id, io, cls, who):
    if io is not None:
        if not isinstance(io, cls):
            raise TypeError(f"{who}: expected a {cls.__name__}, got {type(io).__name__}")
        return io
    if checkpoint_id is None:
        raise ValueError(f"{who}: pass checkpoint_id=<directory> (or a {cls.__name__})")
    if not isinstance(checkpoint_id, (str, os.PathLike)):
        raise TypeError(f"{who}: checkpoint_id must be a path, got {type(checkpoint_id).__name__}")
    return cls(checkpoint_id)


def _no_torch_only_args(who, planner, process_group):
    # torch's signature, so calls written for it read the same; no_dist is accepted (there are no
    # process groups here: many writers are threads or Dask workers)
    if process_group is not None:
        raise NotImplementedError(f"checkpoint.{who}: nbaccel has no process groups; shards written by "
                                  "Dask workers come from DataParallel.state_dict()")
    if planner is not None:
        raise NotImplementedError(f"checkpoint.{who}: custom planners are not supported (for a "
                                  "partial load pass allow_partial_load=True)")


def _host(t) -> np.ndarray:
    return np.asarray(t.detach().numpy(force=True) if isinstance(t, Tensor) else t, order="C")


def _dtype_name(value) -> str:
    if isinstance(value, np.ndarray):
        return D.dtype(value.dtype).name
    return value.dtype.name


# -- save -----------------------------------------------------------------------------------------
def _plan(state_dict):
    """(arrays to write, manifest entries). An array is (key, shape, dtype, boxes, sources):
    local sources are (offsets, ndarray); a value with ``__nbaccel_checkpoint__`` writes its
    own shards where they live (a DataParallel replica on a Dask worker)."""
    if not isinstance(state_dict, dict):
        raise TypeError(f"checkpoint.save: state_dict must be a dict, got {type(state_dict).__name__}")
    arrays, entries, seen = [], [], set()

    def add_array(key, value):
        if isinstance(value, ShardedTensor):
            shards = value.local_shards()
            arrays.append((key, value.shape, value.dtype.name,
                           [(s.offsets, s.sizes) for s in shards], [(s.offsets, s.tensor) for s in shards]))
        elif hasattr(value, "__nbaccel_checkpoint__"):
            remote = value.__nbaccel_checkpoint__()
            arrays.append((key, remote.shape, remote.dtype_name, remote.boxes, remote))
        else:
            shape = tuple(value.shape)
            arrays.append((key, shape, _dtype_name(value), [((0,) * len(shape), shape)],
                           [((0,) * len(shape), value)]))

    for path, _, _, value in walk(state_dict):
        key = key_of(path)
        if key in seen:
            raise ValueError(f"checkpoint.save: two entries of the state_dict are both called {key!r}")
        seen.add(key)
        kind = kind_of(value)
        entry = {"key": key, "path": list(path), "kind": kind}
        if value is EMPTY:
            entry["kind"] = "value"
            entry["value"] = {}
        elif kind == "tensor":
            add_array(key, value)
        elif kind == "quantized":
            entry["meta"] = value.metadata()
            entry["parts"] = {}
            for part, t in value.tensors().items():
                entry["parts"][part] = f"{key}.{part}"
                add_array(f"{key}.{part}", t)
        elif kind == "sparse_2_4":
            entry.update(cols=value._cols, transposed=value._transposed,
                         parts={"values": f"{key}.values", "meta": f"{key}.meta"})
            add_array(f"{key}.values", value.values)
            add_array(f"{key}.meta", value.meta)
        elif kind == "value":
            entry["value"] = list(value) if isinstance(value, tuple) else value
            entry["tuple"] = isinstance(value, tuple)
        else:
            raise TypeError(f"checkpoint.save: {key!r} is a {type(value).__name__}; a checkpoint "
                            "holds tensors, ShardedTensors, QuantizedTensors, 2:4 sparse tensors "
                            "and JSON values (numbers, strings, lists of them)")
        entries.append(entry)
    for key, shape, dtype_name, boxes, _ in arrays:
        if dtype_name not in store.STORED:
            raise TypeError(f"checkpoint.save: {key!r} has dtype {dtype_name}, which a checkpoint "
                            "cannot hold")
        check_tiling(key, shape, boxes)
    return arrays, entries


def save(state_dict: dict, *, checkpoint_id=None, storage_writer: FileSystemWriter | None = None,
         planner=None, process_group=None, no_dist: bool = True) -> dict:
    """Write ``state_dict`` to the directory ``checkpoint_id``: one zarr v3 array per tensor,
    whose chunks are the shards that hold it, written by parallel threads (or, for a
    DataParallel's state_dict, by the Dask workers holding the replicas); then the JSON
    manifest, published atomically. The previous checkpoint there stays loadable until the
    new manifest replaces it; a failed save leaves it untouched. Returns the manifest.

    >>> import nbaccel as nb, tempfile
    >>> from nbaccel.distributed import checkpoint
    >>> path = tempfile.mkdtemp()
    >>> _ = checkpoint.save({"w": nb.arange(6.0).reshape(2, 3), "step": 7}, checkpoint_id=path)
    >>> sd = {"w": nb.zeros(2, 3), "step": 0}
    >>> checkpoint.load(sd, checkpoint_id=path)
    >>> sd["w"].tolist(), sd["step"]
    ([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], 7)
    """
    _no_torch_only_args("save", planner, process_group)
    writer = _root(checkpoint_id, storage_writer, FileSystemWriter, "checkpoint.save")
    arrays, entries = _plan(state_dict)
    root = writer.path
    data_name = store.new_data_dir(root)
    data_dir = os.path.join(root, data_name)
    names = array_names([a[0] for a in arrays])
    specs = {}
    try:
        local, remote = [], {}
        for key, shape, dtype_name, boxes, sources in arrays:
            chunks = chunk_shape(shape, boxes, D.dtype(dtype_name).itemsize)
            store.create_array(data_dir, names[key], shape, dtype_name, chunks)
            specs[key] = {"path": names[key], "dtype": dtype_name, "shape": list(shape),
                          "chunks": list(chunks), "shards": [[list(o), list(s)] for o, s in boxes]}
            if isinstance(sources, list):
                local += [(names[key], off, t) for off, t in sources]
            else:
                remote.setdefault(id(sources.writer), (sources.writer, []))[1].append((names[key], sources))
        with ThreadPoolExecutor(writer.thread_count) as pool:
            pending = [pool.submit(writer_fn.write_shards, data_dir, items)
                       for writer_fn, items in remote.values()]
            pending += [pool.submit(store.write_region, data_dir, name, off, _host(t))
                        for name, off, t in local]
            for f in pending:
                f.result()
        store.publish(root, data_name, specs, entries)
        for remote_writer, _ in remote.values():     # e.g. a DataParallel: resume from here
            remote_writer.checkpoint_published(root)
    except BaseException as e:
        store.discard(root, data_name)
        if isinstance(e, OSError):
            raise store.CheckpointError(f"checkpoint.save to {root!r} failed: {e}. Nothing was "
                                        "published: the previous checkpoint there (if any) is "
                                        "unchanged") from e
        raise
    return {"data": data_name, "arrays": specs, "entries": entries}


# -- load -----------------------------------------------------------------------------------------
class _Readers:
    def __init__(self, root, doc):
        self.root, self.doc, self.open = root, doc, {}

    def __call__(self, key) -> store.ArrayReader:
        if key not in self.open:
            self.open[key] = store.ArrayReader(self.root, self.doc, key)
        return self.open[key]

    @property
    def chunk_reads(self):
        return {k: r.chunk_reads for k, r in self.open.items()}


def _full(shape):
    return [(0, n) for n in shape]


def _expect(key, what, expected, found):
    if expected != found:
        raise ValueError(f"checkpoint.load: {key!r}: {what} in the checkpoint is {expected}, the "
                         f"state_dict has {found}")


def _into_tensor(key, target, reader):
    """Copy the saved tensor ``reader`` into ``target`` (Tensor, ndarray or ShardedTensor) in
    place, reading only the chunks its shards need."""
    shape, dtype_name = reader.shape, reader.dtype_name
    if isinstance(target, ShardedTensor):
        _expect(key, "the shape", shape, tuple(target.shape))
        _expect(key, "the dtype", dtype_name, target.dtype.name)
        for s in target.local_shards():
            _fill(s.tensor, reader, [(o, o + n) for o, n in zip(s.offsets, s.sizes)])
        return
    _expect(key, "the shape", shape, tuple(target.shape))
    _expect(key, "the dtype", dtype_name, _dtype_name(target))
    _fill(target, reader, _full(shape))


def _fill(target, reader, region):
    """Read ``region`` into ``target``: straight into its memory when that is a C-contiguous
    host buffer (a CPU tensor's ``.numpy()`` shares it, as in PyTorch), else by ``copy_``."""
    dest = target if isinstance(target, np.ndarray) else None
    if dest is None and target.device.type == "cpu":
        try:
            dest = target.detach().numpy()
        except Exception:            # a tensor without a concrete value (inside a trace)
            dest = None
    if isinstance(dest, np.ndarray) and dest.flags.c_contiguous and dest.flags.writeable \
            and dest.shape == tuple(hi - lo for lo, hi in region):
        reader.read(region, out=dest)
        if not isinstance(target, np.ndarray):
            target._version[0] += 1      # an in-place write, as copy_ counts it (replays see it)
    else:
        _copy(target, reader.read(region))


def _copy(target, data: np.ndarray):
    if isinstance(target, np.ndarray):
        target[...] = data
        return
    with no_grad():
        target.copy_(asarray(data, device=target.device, _np=False))


def _new_tensor(reader):
    return asarray(reader.read(_full(reader.shape)), _np=False)


def _load_entry(entry, target, readers):
    """Load one manifest entry: into ``target`` in place, or, when ``target`` is EMPTY, as a
    new value. Returns the value to store in the container (None: nothing to replace)."""
    key, kind = entry["key"], entry["kind"]
    found = "an empty dict" if target is EMPTY else type(target).__name__
    if target is not EMPTY and kind_of(target) != kind:
        want = {"tensor": "a tensor", "quantized": "a QuantizedTensor", "sparse_2_4":
                "a SparseSemiStructuredTensor", "value": f"the value {entry.get('value')!r}"}[kind]
        raise ValueError(f"checkpoint.load: {key!r}: the checkpoint holds {want}, the state_dict "
                         f"has a {found}")
    if kind == "tensor":
        if target is EMPTY:
            return _new_tensor(readers(key))
        _into_tensor(key, target, readers(key))
    elif kind == "quantized":
        parts = {p: readers(a) for p, a in entry["parts"].items()}
        if target is EMPTY:
            return QuantizedTensor.from_parts(entry["meta"], {p: _new_tensor(r) for p, r in parts.items()})
        _expect(key, "the quantization", entry["meta"], target.metadata())
        _expect(key, "the parts", sorted(parts), sorted(target.tensors()))
        for p, t in target.tensors().items():
            _into_tensor(f"{key}.{p}", t, parts[p])
    elif kind == "sparse_2_4":
        values, meta = readers(entry["parts"]["values"]), readers(entry["parts"]["meta"])
        if target is EMPTY:
            return SparseSemiStructuredTensor(_new_tensor(values), _new_tensor(meta), entry["cols"],
                                              entry["transposed"])
        _expect(key, "the layout (columns, transposed)", (entry["cols"], entry["transposed"]),
                (target._cols, target._transposed))
        _into_tensor(f"{key}.values", target.values, values)
        _into_tensor(f"{key}.meta", target.meta, meta)
    else:
        value = entry["value"]
        return tuple(value) if entry.get("tuple") else value
    return None


def load(state_dict: dict, *, checkpoint_id=None, storage_reader: FileSystemReader | None = None,
         allow_partial_load: bool = False, planner=None, process_group=None, no_dist: bool = True) -> None:
    """Fill ``state_dict`` in place from the checkpoint at ``checkpoint_id`` (PyTorch's
    in-place load): tensors are copied into, ShardedTensors get each local shard's region
    (reading only the chunks that region meets: this is resharding), JSON values are replaced,
    and an empty dict receives everything saved under its key (an optimizer's ``state`` before
    its first step). Keys of the checkpoint that the state_dict lacks are not read; a key of
    the state_dict that the checkpoint lacks is an error unless ``allow_partial_load=True``
    (torch's ``DefaultLoadPlanner(allow_partial_load=True)``). Shapes and dtypes must match."""
    _no_torch_only_args("load", planner, process_group)
    reader = _root(checkpoint_id, storage_reader, FileSystemReader, "checkpoint.load")
    if not isinstance(state_dict, dict):
        raise TypeError(f"checkpoint.load: state_dict must be a dict, got {type(state_dict).__name__}")
    doc = store.read_manifest(reader.path)
    by_key = {e["key"]: e for e in doc["entries"]}
    readers = _Readers(reader.path, doc)
    for path, container, name, target in list(walk(state_dict)):
        key = key_of(path)
        entry = by_key.get(key)
        if entry is None and target is EMPTY:
            prefix = key + "."
            inner = [e for e in doc["entries"] if e["key"].startswith(prefix)]
            if inner:
                _fill_empty(container[name], path, inner, readers)
                continue
        if entry is None:
            if allow_partial_load:
                continue
            raise ValueError(f"checkpoint.load: {key!r} is not in the checkpoint at "
                             f"{reader.path!r} (pass allow_partial_load=True to skip missing keys)")
        new = _load_entry(entry, target, readers)
        if new is not None or entry["kind"] == "value":
            container[name] = new
    load.last_chunk_reads = readers.chunk_reads


def _fill_empty(container, path, entries, readers):
    for e in entries:
        d = container
        rest = e["path"][len(path):]
        for part in rest[:-1]:
            d = d.setdefault(part, {})
        d[rest[-1]] = _load_entry(e, EMPTY, readers)


def load_slice(checkpoint_id, key: str, index=...) -> Tensor:
    """Read ``index`` (ints, slices with any step, ``...``) of the saved tensor ``key``
    without reading the rest: only the chunks the slice meets are read.

    >>> import nbaccel as nb, tempfile
    >>> from nbaccel.distributed import checkpoint
    >>> path = tempfile.mkdtemp()
    >>> _ = checkpoint.save({"w": nb.arange(12.0).reshape(4, 3)}, checkpoint_id=path)
    >>> checkpoint.load_slice(path, "w", (slice(1, 3), slice(None))).tolist()
    [[3.0, 4.0, 5.0], [6.0, 7.0, 8.0]]
    """
    root = os.fspath(checkpoint_id) if isinstance(checkpoint_id, (str, os.PathLike)) else checkpoint_id
    if isinstance(root, FileSystemReader):
        root = root.path
    doc = store.read_manifest(root, "checkpoint.load_slice")
    if key not in doc["arrays"]:
        entry = next((e for e in doc["entries"] if e["key"] == key), None)
        hint = f" (it is a {entry['kind']} entry; its arrays are {sorted(entry.get('parts', {}).values())})" \
            if entry and entry.get("parts") else ""
        raise KeyError(f"checkpoint.load_slice: no tensor {key!r} in the checkpoint{hint}")
    reader = store.ArrayReader(root, doc, key)
    region, post = _normalize_index(index, reader.shape, key)
    data = reader.read(region)
    load_slice.last_chunk_reads = reader.chunk_reads
    return asarray(np.asarray(data[post], order="C"), _np=False)


def _normalize_index(index, shape, key):
    """(the bounding region to read, the index that takes the result out of it)."""
    if not isinstance(index, tuple):
        index = (index,)
    if sum(i is Ellipsis for i in index) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if Ellipsis in index:
        at = index.index(Ellipsis)
        index = index[:at] + (slice(None),) * (len(shape) - len(index) + 1) + index[at + 1:]
    if len(index) > len(shape):
        raise IndexError(f"checkpoint.load_slice: too many indices for {key!r} of shape {shape}")
    index = index + (slice(None),) * (len(shape) - len(index))
    region, post = [], []
    for i, n in zip(index, shape):
        if isinstance(i, (int, np.integer)) and not isinstance(i, bool):
            j = int(i) + n if i < 0 else int(i)
            if not 0 <= j < n:
                raise IndexError(f"checkpoint.load_slice: index {i} is out of bounds for a dimension "
                                 f"of size {n} of {key!r}")
            region.append((j, j + 1))
            post.append(0)
        elif isinstance(i, slice):
            start, stop, step = i.indices(n)
            picked = range(start, stop, step)
            if len(picked) == 0:
                region.append((0, 0))
                post.append(slice(0, 0))
            else:
                lo, hi = min(picked[0], picked[-1]), max(picked[0], picked[-1]) + 1
                region.append((lo, hi))
                # within the region read: forward from its start, or backward from its end
                post.append(slice(0, None, step) if step > 0 else slice(hi - 1 - lo, None, step))
        else:
            raise TypeError(f"checkpoint.load_slice: index entries must be ints, slices or ..., got "
                            f"{type(i).__name__}")
    return region, tuple(post)
