"""The checkpoint on disk: one zarr v3 array per tensor in a fresh data directory, and a JSON
manifest published last by an atomic rename.

    <checkpoint_id>/
      .metadata.json      {"format", "version", "data": "data-<id>", "arrays", "entries"}
      data-<id>/          a zarr v3 group; array <name>: codecs bytes + crc32c, chunks = shards

A save writes ``data-<new id>``, fsyncs it, then replaces ``.metadata.json`` (write to a
temporary name, fsync, ``os.replace``): until that rename the previous manifest still names the
previous, untouched data directory. Each chunk carries zarr's crc32c checksum, so a truncated or
altered chunk fails to decode; the reader names the tensor and the chunk. Before zarr opens an
array its ``zarr.json`` is checked against the manifest and an allow-list of codecs and dtypes,
so nothing in a checkpoint selects code to run.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import uuid

import numpy as np

from . import rowchunks
from .layout import chunks_of_region
from ... import dtypes as D
from ...version import __version__

FORMAT = "nbaccel.distributed.checkpoint"
VERSION = 1
MANIFEST = ".metadata.json"
# nbaccel dtype name -> the zarr data_type that holds its bytes (bfloat16 travels as its bits)
STORED = {"bool": "bool", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
          "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
          "float16": "float16", "float32": "float32", "float64": "float64", "bfloat16": "uint16",
          "complex64": "complex64", "complex128": "complex128"}


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used: missing, incomplete, corrupt, or from a newer format."""


def _zarr():
    import zarr
    return zarr


# -- writing ------------------------------------------------------------------------------------
def new_data_dir(root: str) -> str:
    """Create ``root`` if needed and an empty zarr group ``root/data-<id>``; its name."""
    if os.path.exists(root) and not os.path.isdir(root):
        raise NotADirectoryError(f"checkpoint.save: {root!r} is a file, not a checkpoint directory")
    os.makedirs(root, exist_ok=True)
    name = f"data-{uuid.uuid4().hex[:12]}"
    _zarr().create_group(store=os.path.join(root, name), zarr_format=3)
    return name


def create_array(data_dir: str, path: str, shape, dtype_name: str, chunks) -> None:
    from zarr.codecs import Crc32cCodec
    _zarr().create_array(store=os.path.join(data_dir, path), shape=tuple(shape),
                         chunks=tuple(chunks), dtype=STORED[dtype_name], compressors=[Crc32cCodec()],
                         filters=None, fill_value=0, chunk_key_encoding={"name": "default", "separator": "/"},
                         attributes={"nbaccel_dtype": dtype_name})


def write_region(data_dir: str, path: str, offsets, array: np.ndarray) -> None:
    """Write ``array`` at ``offsets`` into the array ``path`` (whole chunks: no read-back).
    Runs wherever the data is: a thread, a process or a Dask worker."""
    array = np.asarray(array, order="C")     # (ascontiguousarray would make 0-d 1-d)
    if array.dtype.kind == "V":
        array = array.view(f"u{array.dtype.itemsize}")       # bfloat16 (ml_dtypes): its raw bits
    array_dir = os.path.join(data_dir, path)
    with open(os.path.join(array_dir, "zarr.json")) as f:
        meta = json.load(f)
    shape = tuple(meta["shape"])
    chunks = tuple(meta["chunk_grid"]["configuration"]["chunk_shape"])
    if rowchunks.applies(shape, chunks) and array.dtype.byteorder in "=<|" \
            and tuple(array.shape[1:]) == shape[1:] and not any(offsets[1:]):
        rowchunks.write_rows(array_dir, shape, chunks, offsets[0], array)
        return
    # every chunk is written, even one that equals the fill value: a missing chunk file then
    # always means damage (zarr would otherwise read it silently as zeros)
    arr = _zarr().open_array(store=array_dir, mode="r+").with_config({"write_empty_chunks": True})
    if array.ndim == 0:
        arr[...] = array
    else:
        arr[tuple(slice(o, o + n) for o, n in zip(offsets, array.shape))] = array


def fsync_tree(path: str) -> None:
    """Flush every file and directory under ``path`` to the disk (before publishing); the
    files in parallel, so the disk sees all the writes at once."""
    from concurrent.futures import ThreadPoolExecutor
    files, dirs = [], []
    for dirpath, _, names in os.walk(path):
        files += [os.path.join(dirpath, f) for f in names]
        dirs.append(dirpath)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(_fsync_file, files))
        list(pool.map(_fsync_dir, dirs))


def _fsync_file(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(root: str, data_name: str, arrays: dict, entries: list) -> None:
    """Make ``data_name`` the checkpoint: write the manifest under a temporary name, flush it,
    rename it over the old one; then drop the data directories no manifest names."""
    fsync_tree(os.path.join(root, data_name))
    doc = {"format": FORMAT, "version": VERSION, "nbaccel": __version__, "data": data_name,
           "arrays": arrays, "entries": entries}
    tmp = os.path.join(root, f"{MANIFEST}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        _rename(tmp, os.path.join(root, MANIFEST))
    except BaseException:
        _remove(tmp)
        raise
    _fsync_dir(root)
    for name in os.listdir(root):            # the previous data, and leftovers of failed saves
        if name.startswith("data-") and name != data_name:
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


_rename = os.replace     # the commit point (a module attribute so tests can crash right there)


def discard(root: str, data_name: str) -> None:
    shutil.rmtree(os.path.join(root, data_name), ignore_errors=True)


def _remove(path):
    try:
        os.remove(path)
    except OSError:
        pass


# -- reading ------------------------------------------------------------------------------------
def read_manifest(root, who: str = "checkpoint.load") -> dict:
    root = os.fspath(root)
    if not os.path.exists(root):
        raise FileNotFoundError(f"{who}: no checkpoint at {root!r} (the path does not exist)")
    if not os.path.isdir(root):
        raise NotADirectoryError(f"{who}: {root!r} is a file; a checkpoint is a directory "
                                 "written by nbaccel.distributed.checkpoint.save")
    path = os.path.join(root, MANIFEST)
    if not os.path.exists(path):
        if any(n.startswith("data-") for n in os.listdir(root)):
            raise CheckpointError(f"{who}: the checkpoint at {root!r} is incomplete: a save "
                                  f"started but never published its {MANIFEST} (it crashed or "
                                  "is still running); nothing in it can be trusted")
        raise CheckpointError(f"{who}: {root!r} is not a checkpoint (no {MANIFEST})")
    try:
        with open(path) as f:
            doc = json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{who}: {path!r} is not valid JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CheckpointError(f"{who}: {path!r} is not an nbaccel checkpoint manifest")
    version = doc.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise CheckpointError(f"{who}: the checkpoint at {root!r} has format version {version!r}, "
                              f"newer than this nbaccel reads ({VERSION}); upgrade nbaccel")
    data = doc.get("data")
    if not isinstance(data, str) or not data.startswith("data-") or os.sep in data \
            or not os.path.isdir(os.path.join(root, data)):
        raise CheckpointError(f"{who}: the checkpoint at {root!r} names a data directory "
                              f"{data!r} that does not exist")
    return doc


class ArrayReader:
    """Reads regions of one saved array, checking its zarr metadata first and naming the chunk
    that fails to decode. ``chunk_reads`` counts the chunks read (tests and the bench use it)."""

    def __init__(self, root: str, doc: dict, key: str):
        spec = doc["arrays"].get(key)
        if spec is None:
            raise KeyError(key)
        self.key, self.spec = key, spec
        self.dir = os.path.join(root, doc["data"], spec["path"])
        self.shape, self.chunks = tuple(spec["shape"]), tuple(spec["chunks"])
        self.dtype_name = spec["dtype"]
        self._check_zarr_json()
        self._opened = None          # zarr opens the array only for a layout rowchunks cannot read
        self.chunk_reads = 0

    def _check_zarr_json(self):
        try:
            with open(os.path.join(self.dir, "zarr.json")) as f:
                meta = json.load(f)
        except (OSError, ValueError) as e:
            raise CheckpointError(f"checkpoint: the array of {self.key!r} is missing or unreadable "
                                  f"({e})") from None
        grid = meta.get("chunk_grid", {}).get("configuration", {}).get("chunk_shape")
        want_dtype = STORED.get(self.dtype_name)
        problems = [what for what, ok in [
            ("node type", meta.get("node_type") == "array" and meta.get("zarr_format") == 3),
            ("codecs", _our_codecs(meta.get("codecs"))),
            ("data type", want_dtype is not None and meta.get("data_type") == want_dtype),
            ("shape", tuple(meta.get("shape", ())) == self.shape),
            ("chunks", grid is not None and tuple(grid) == self.chunks),
            ("storage transformers", not meta.get("storage_transformers")),
            ("chunk keys", meta.get("chunk_key_encoding") == {"name": "default",
                                                               "configuration": {"separator": "/"}}),
        ] if not ok]
        if problems:
            raise CheckpointError(f"checkpoint: the zarr metadata of {self.key!r} does not match the "
                                  f"manifest or is not one nbaccel writes ({', '.join(problems)}); "
                                  "refusing to read it")

    @property
    def _array(self):
        if self._opened is None:
            self._opened = _zarr().open_array(store=self.dir, mode="r")
        return self._opened

    def _chunk_file(self, coords):
        return os.path.join(self.dir, "c", *map(str, coords)) if coords else os.path.join(self.dir, "c")

    def read(self, region, out: np.ndarray | None = None) -> np.ndarray:
        """The stored values in ``region`` (``(start, stop)`` per dim) as NumPy, in the
        nbaccel dtype (bfloat16 as ml_dtypes); into ``out`` (C-contiguous, the region's shape
        and dtype) when given, which row-block chunks are read straight into."""
        stored = np.dtype(STORED[self.dtype_name])
        buf = None if out is None else out.view(stored)
        if rowchunks.applies(self.shape, self.chunks) and \
                all((lo, hi) == (0, n) for (lo, hi), n in zip(region[1:], self.shape[1:])):
            buf = self._read_rows(region, buf)
        elif buf is None:
            buf = self._read_zarr(region)
        else:
            buf[...] = self._read_zarr(region)
        if out is not None:
            return out
        if self.dtype_name == "bfloat16":
            buf = buf.view(D.dtype("bfloat16").np)
        return buf

    def _read_rows(self, region, out=None):
        lo, hi = region[0]
        if out is None:
            out = np.empty((hi - lo,) + self.shape[1:], dtype=np.dtype(STORED[self.dtype_name]))
        if hi > lo:
            try:
                self.chunk_reads += rowchunks.read_rows(self.dir, self.shape, self.chunks, lo, hi, out)
            except rowchunks.ChunkError as e:
                raise CheckpointError(f"checkpoint: chunk {e.coords} of {self.key!r} is {e.what}; "
                                      f"file {e.path}") from None
        return out

    def _read_zarr(self, region):
        needed = chunks_of_region(region, self.chunks) if self.shape else [()]
        for c in needed:
            if not os.path.isfile(self._chunk_file(c)):
                raise CheckpointError(f"checkpoint: chunk {c} of {self.key!r} is missing "
                                      f"({self._chunk_file(c)}); the checkpoint is damaged")
        self.chunk_reads += len(needed)
        index = tuple(slice(lo, hi) for lo, hi in region) if self.shape else ...
        try:
            out = self._array[index]
        except Exception:
            self._name_bad_chunk(needed)
            raise
        return np.asarray(out)

    def _name_bad_chunk(self, needed):
        grid = self.chunks
        for c in needed:
            index = tuple(slice(i * n, min((i + 1) * n, s)) for i, n, s in zip(c, grid, self.shape))
            try:
                self._array[index if index else ...]
            except Exception as e:
                size = os.path.getsize(self._chunk_file(c))
                raise CheckpointError(
                    f"checkpoint: chunk {c} of {self.key!r} is corrupt ({type(e).__name__}: {e}; "
                    f"file {self._chunk_file(c)}, {size} bytes): truncated or altered after the "
                    "save") from None


def _our_codecs(codecs) -> bool:
    """Exactly what create_array writes: raw little-endian bytes, then a crc32c checksum (a
    1-byte dtype's bytes codec has no endianness)."""
    if not isinstance(codecs, list) or len(codecs) != 2 or codecs[1] != {"name": "crc32c"}:
        return False
    first = codecs[0]
    return isinstance(first, dict) and first.get("name") == "bytes" and set(first) <= {"name", "configuration"} \
        and first.get("configuration", {}) in ({}, {"endian": "little"})


def region_nbytes(region, itemsize) -> int:
    return itemsize * math.prod(hi - lo for lo, hi in region)
