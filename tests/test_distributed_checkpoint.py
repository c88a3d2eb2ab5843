"""nb.distributed.checkpoint against real zarr v3 stores on disk: round trips over dtypes and
tensor kinds, resharding (counting the chunks zarr really reads), partial loads, every bad
input of the issue, damaged chunks, crashes mid-save and a full disk."""
import errno
import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("zarr")
import zarr.storage  # noqa: E402

import nbaccel as nb  # noqa: E402
from nbaccel.distributed import Shard, ShardedTensor, checkpoint  # noqa: E402
from nbaccel.distributed.checkpoint import CheckpointError  # noqa: E402
from nbaccel.distributed.checkpoint import store  # noqa: E402

INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float16", "bfloat16", "float32", "float64"]


def _np(t):
    return np.asarray(t.numpy(force=True))


def _same(a, b):
    a, b = _np(a), _np(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _values(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return nb.asarray(rng.random(shape) > 0.5)
    if dtype in INTS:
        info = np.iinfo(dtype)
        return nb.asarray(rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True))
    data = rng.standard_normal(shape).astype(np.float32) * 100
    return nb.asarray(data).astype(getattr(nb, dtype))


@pytest.fixture
def count_reads(monkeypatch):
    """The chunk files really read, as (array directory, chunk key): through zarr's LocalStore
    (any layout) or straight from the file (row-block chunks, see checkpoint/rowchunks.py)."""
    from nbaccel.distributed.checkpoint import rowchunks
    reads = []
    real_get, real_open = zarr.storage.LocalStore.get, rowchunks.open_chunk

    async def get(self, key, prototype=None, byte_range=None):
        if "/c/" in "/" + key or key == "c":
            reads.append((str(self.root), key))
        return await real_get(self, key, prototype, byte_range)

    def open_chunk(path, mode):
        if "r" in mode:
            array_dir, key = path.rsplit(os.sep + "c" + os.sep, 1)
            reads.append((array_dir, "c/" + key.replace(os.sep, "/")))
        return real_open(path, mode)
    monkeypatch.setattr(zarr.storage.LocalStore, "get", get)
    monkeypatch.setattr(rowchunks, "open_chunk", open_chunk)
    return reads


# -- round trips ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["bool"] + INTS + FLOATS + ["complex64"])
def test_every_dtype_round_trips_bit_exactly(tmp_path, dtype):
    sd = {"x": _values(dtype, (5, 3)), "scalar": _values(dtype, ()), "empty": _values(dtype, (0, 4))}
    checkpoint.save(sd, checkpoint_id=tmp_path)
    back = {k: nb.zeros(*v.shape, dtype=v.dtype) if v.ndim else nb.zeros((), dtype=v.dtype)
            for k, v in sd.items()}
    checkpoint.load(back, checkpoint_id=tmp_path)
    for k in sd:
        assert _same(back[k], sd[k]), k


def test_numpy_arrays_and_json_values(tmp_path):
    sd = {"a": np.arange(6, dtype=np.int16).reshape(2, 3), "cfg": {"lr": 0.5, "name": "run", "betas": (0.9, 0.99),
                                                                  "nan": float("nan"), "none": None}}
    checkpoint.save(sd, checkpoint_id=tmp_path)
    back = {"a": np.zeros((2, 3), np.int16), "cfg": {"lr": 0.0, "name": "", "betas": (0, 0), "nan": 0.0, "none": 1}}
    checkpoint.load(back, checkpoint_id=tmp_path)
    assert (back["a"] == sd["a"]).all()
    assert back["cfg"]["betas"] == (0.9, 0.99) and isinstance(back["cfg"]["betas"], tuple)
    assert back["cfg"]["lr"] == 0.5 and back["cfg"]["name"] == "run" and back["cfg"]["none"] is None
    assert np.isnan(back["cfg"]["nan"])


def _mlp():
    return nb.nn.Sequential(nb.nn.Linear(3, 8), nb.nn.GELU(), nb.nn.Linear(8, 2))


def _train(model, opt, steps, seed=1):
    rng = np.random.default_rng(seed)
    losses = []
    for _ in range(steps):
        x, y = nb.asarray(rng.standard_normal((16, 3)).astype(np.float32)), nb.asarray(
            rng.standard_normal((16, 2)).astype(np.float32))
        loss = nb.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses


def test_model_and_adamw_state_resume_training_identically(tmp_path):
    model = _mlp()
    opt = nb.optim.AdamW(model.parameters(), lr=1e-2)
    _train(model, opt, 3)
    checkpoint.save({"model": model.state_dict(), "optim": opt.state_dict()}, checkpoint_id=tmp_path)
    doc = json.loads((tmp_path / ".metadata.json").read_text())
    assert doc["version"] == checkpoint.VERSION and "optim.state.0.exp_avg" in doc["arrays"]
    after = _train(model, opt, 3, seed=2)

    nb.manual_seed(5)
    fresh = _mlp()                       # different weights, an optimizer with no state yet
    fresh_opt = nb.optim.AdamW(fresh.parameters(), lr=0.5)
    sd = {"model": fresh.state_dict(), "optim": fresh_opt.state_dict()}
    assert sd["optim"]["state"] == {}
    checkpoint.load(sd, checkpoint_id=tmp_path)
    fresh.load_state_dict(sd["model"])
    fresh_opt.load_state_dict(sd["optim"])
    assert fresh_opt.param_groups[0]["lr"] == 1e-2
    assert _train(fresh, fresh_opt, 3, seed=2) == after


def _sparse(seed):
    # built from its parts: the 2:4 compression kernel's first compile costs seconds, and the
    # checkpoint only sees the parts (kept values, packed positions, columns, transposition)
    rng = np.random.default_rng(seed)
    values = nb.asarray(rng.standard_normal((8, 32)).astype(np.float32))
    meta = nb.asarray(rng.integers(0, 256, (8, 8), dtype=np.uint8))
    return nb.sparse.SparseSemiStructuredTensor(values, meta, 64)


def test_quantized_int8_int4_and_sparse_2_4_round_trip(tmp_path):
    from nbaccel.quant import QuantizedTensor
    w = nb.randn(8, 64)
    sd = {"q8": QuantizedTensor.from_float(w, bits=8),
          "q4": QuantizedTensor.from_float(w, bits=4, group_size=32, zero_point=True),
          "s24": _sparse(0), "s24t": _sparse(1).t()}
    checkpoint.save(sd, checkpoint_id=tmp_path)

    # into existing objects of the same format, in place
    w2 = nb.randn(8, 64)
    back = {"q8": QuantizedTensor.from_float(w2, bits=8),
            "q4": QuantizedTensor.from_float(w2, bits=4, group_size=32, zero_point=True),
            "s24": _sparse(2), "s24t": _sparse(3).t()}
    checkpoint.load(back, checkpoint_id=tmp_path)
    for k in ("q8", "q4"):
        assert all(_same(back[k].tensors()[p], sd[k].tensors()[p]) for p in sd[k].tensors())
        assert _same(back[k].dequantize(), sd[k].dequantize())
    for k in ("s24", "s24t"):
        assert _same(back[k].values, sd[k].values) and _same(back[k].meta, sd[k].meta)
        assert back[k].shape == sd[k].shape
    with pytest.raises(ValueError, match=r"'s24': the layout .* is \(64, False\), the state_dict has "
                                         r"\(64, True\)"):
        checkpoint.load({"s24": _sparse(2).t()}, checkpoint_id=tmp_path)

    # and as new objects, into an empty dict
    other = tmp_path / "nested"
    checkpoint.save({"all": sd}, checkpoint_id=other)
    new = {"all": {}}
    checkpoint.load(new, checkpoint_id=other)
    assert sorted(new["all"]) == sorted(sd)
    assert repr(new["all"]["q4"]) == repr(sd["q4"])
    assert _same(new["all"]["q4"].dequantize(), sd["q4"].dequantize())
    assert new["all"]["s24t"].shape == (64, 8) and _same(new["all"]["s24t"].values, sd["s24t"].values)


def test_int4_into_int8_is_refused(tmp_path):
    from nbaccel.quant import QuantizedTensor
    w = nb.randn(4, 64)
    checkpoint.save({"q": QuantizedTensor.from_float(w, bits=4, group_size=32)}, checkpoint_id=tmp_path)
    with pytest.raises(ValueError, match=r"'q': the quantization in the checkpoint is .*'bits': 4.*"
                                         r"the state_dict has .*'bits': 8"):
        checkpoint.load({"q": QuantizedTensor.from_float(w, bits=8)}, checkpoint_id=tmp_path)


# -- resharding -------------------------------------------------------------------------------------
def _save_4_row_shards(path, rows=16, cols=6):
    w = nb.arange(float(rows * cols)).reshape(rows, cols)
    st = ShardedTensor.split(w, 4)
    checkpoint.save({"w": st}, checkpoint_id=path)
    doc = json.loads((path / ".metadata.json").read_text())
    assert doc["arrays"]["w"]["chunks"] == [rows // 4, cols]          # a chunk is a shard
    assert len(doc["arrays"]["w"]["shards"]) == 4
    return w


@pytest.mark.parametrize("layout", ["1 shard", "2 row shards", "3 row shards", "2 column shards",
                                    "2x2 grid", "plain tensor"])
def test_four_row_shards_reshard_reading_only_needed_chunks(tmp_path, count_reads, layout):
    w = _save_4_row_shards(tmp_path)
    full = np.asarray(w)
    if layout == "plain tensor":
        target = nb.zeros(16, 6)
    elif layout == "2 column shards":
        target = ShardedTensor.zeros((16, 6), 2, dim=1)
    elif layout == "2x2 grid":
        target = ShardedTensor([Shard(nb.zeros(8, 3), (r, c)) for r in (0, 8) for c in (0, 3)], (16, 6))
    else:
        target = ShardedTensor.zeros((16, 6), int(layout[0]))
    count_reads.clear()
    checkpoint.load({"w": target}, checkpoint_id=tmp_path)
    if isinstance(target, ShardedTensor):
        for s in target.local_shards():
            assert (np.asarray(s.tensor) == full[s.region]).all()
        # what each shard needs: the 4-row chunks its rows meet (columns are one chunk wide)
        needed = sum(len({r // 4 for r in range(s.offsets[0], s.offsets[0] + s.sizes[0])})
                     for s in target.local_shards())
    else:
        assert (np.asarray(target) == full).all()
        needed = 4
    assert len(count_reads) == needed


def test_each_of_three_readers_reads_its_chunks_only(tmp_path, count_reads):
    _save_4_row_shards(tmp_path, rows=12)                      # chunks of 3 rows
    per_reader = []
    for s in ShardedTensor.zeros((12, 6), 3).local_shards():  # rows 0:4, 4:8, 8:12
        count_reads.clear()
        checkpoint.load({"w": ShardedTensor([s], (12, 6))}, checkpoint_id=tmp_path)
        per_reader.append(sorted(k for _, k in count_reads))
    assert per_reader == [["c/0/0", "c/1/0"], ["c/1/0", "c/2/0"], ["c/2/0", "c/3/0"]]


def test_uneven_shards_use_a_common_chunk_grid(tmp_path):
    w = nb.arange(40.0).reshape(10, 4)
    st = ShardedTensor([Shard(w[0:3].clone(), (0, 0)), Shard(w[3:9].clone(), (3, 0)),
                        Shard(w[9:].clone(), (9, 0))], (10, 4))
    doc = checkpoint.save({"w": st}, checkpoint_id=tmp_path)
    assert doc["arrays"]["w"]["chunks"] == [3, 4]          # no chunk straddles two shards
    back = ShardedTensor.zeros((10, 4), 2)
    checkpoint.load({"w": back}, checkpoint_id=tmp_path)
    assert (np.asarray(back.full_tensor()) == np.asarray(w)).all()


def test_large_shards_are_cut_into_row_blocks():
    from nbaccel.distributed.checkpoint.layout import chunk_shape
    assert chunk_shape((4096, 4096), [((0, 0), (4096, 4096))], 4) == (512, 4096)   # 8 MiB chunks
    assert chunk_shape((4099, 4096), [((0, 0), (4099, 4096))], 4) == (4099, 4096)  # prime: one
    assert chunk_shape((1024, 10), [((0, 0), (512, 10)), ((512, 0), (512, 10))], 4) == (512, 10)
    assert chunk_shape((), [((), ())], 4) == ()


@pytest.mark.parametrize("index, expect", [
    ((slice(0, 32), slice(None)), lambda a: a[0:32, :]),
    ((5,), lambda a: a[5]),
    ((slice(None, None, -7), -1), lambda a: a[::-7, -1]),
    ((Ellipsis, slice(1, 5, 3)), lambda a: a[..., 1:5:3]),
    ((slice(40, 10),), lambda a: a[40:10]),
])
def test_load_slice(tmp_path, count_reads, index, expect):
    a = np.arange(64 * 6, dtype=np.float32).reshape(64, 6)
    checkpoint.save({"w": ShardedTensor.split(nb.asarray(a), 8)}, checkpoint_id=tmp_path)
    count_reads.clear()
    got = checkpoint.load_slice(tmp_path, "w", index)
    want = expect(a)
    assert got.shape == want.shape and (np.asarray(got) == want).all()
    if index == (slice(0, 32), slice(None)):
        assert len(count_reads) == 4                      # 4 of the 8 chunks


def test_load_slice_errors(tmp_path):
    from nbaccel.quant import QuantizedTensor
    checkpoint.save({"w": nb.zeros(4, 4), "q": QuantizedTensor.from_float(nb.ones(2, 4))}, checkpoint_id=tmp_path)
    with pytest.raises(IndexError, match="out of bounds"):
        checkpoint.load_slice(tmp_path, "w", 9)
    with pytest.raises(IndexError, match="too many"):
        checkpoint.load_slice(tmp_path, "w", (1, 2, 3))
    with pytest.raises(KeyError, match=r"no tensor 'nope'"):
        checkpoint.load_slice(tmp_path, "nope", 0)
    with pytest.raises(KeyError, match=r"quantized entry; its arrays are \['q.qdata', 'q.scale'\]"):
        checkpoint.load_slice(tmp_path, "q", 0)
    assert checkpoint.load_slice(tmp_path, "q.qdata", 0).dtype == nb.int8


def test_partial_loads(tmp_path):
    checkpoint.save({"a": nb.ones(2), "b": nb.ones(3), "c": {"d": 4}}, checkpoint_id=tmp_path)
    sd = {"b": nb.zeros(3)}                                      # a subset of the keys
    checkpoint.load(sd, checkpoint_id=tmp_path)
    assert sd["b"].tolist() == [1.0, 1.0, 1.0]
    sd = {"a": nb.zeros(2), "new": nb.zeros(1)}
    with pytest.raises(ValueError, match=r"'new' is not in the checkpoint .*allow_partial_load=True"):
        checkpoint.load(sd, checkpoint_id=tmp_path)
    checkpoint.load(sd, checkpoint_id=tmp_path, allow_partial_load=True)
    assert sd["a"].tolist() == [1.0, 1.0] and sd["new"].tolist() == [0.0]


# -- bad input -------------------------------------------------------------------------------------
def test_shape_and_dtype_mismatches_name_key_expected_and_found(tmp_path):
    checkpoint.save({"model": {"w": nb.zeros(4, 3)}}, checkpoint_id=tmp_path)
    with pytest.raises(ValueError, match=r"'model.w': the shape in the checkpoint is \(4, 3\), the "
                                         r"state_dict has \(3, 4\)"):
        checkpoint.load({"model": {"w": nb.zeros(3, 4)}}, checkpoint_id=tmp_path)
    with pytest.raises(ValueError, match=r"'model.w': the dtype in the checkpoint is float32, the "
                                         r"state_dict has float16"):
        checkpoint.load({"model": {"w": nb.zeros(4, 3, dtype=nb.float16)}}, checkpoint_id=tmp_path)
    with pytest.raises(ValueError, match=r"'model.w': the shape in the checkpoint is \(4, 3\), the "
                                         r"state_dict has \(4, 4\)"):
        checkpoint.load({"model": {"w": ShardedTensor.zeros((4, 4), 2)}}, checkpoint_id=tmp_path)
    with pytest.raises(ValueError, match=r"'model.w': the checkpoint holds a tensor, the state_dict "
                                         r"has a float"):
        checkpoint.load({"model": {"w": 1.0}}, checkpoint_id=tmp_path)


def test_paths_that_are_not_checkpoints(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(NotADirectoryError, match="is a file"):
        checkpoint.load({}, checkpoint_id=f)
    with pytest.raises(NotADirectoryError, match="is a file"):
        checkpoint.save({"a": nb.ones(1)}, checkpoint_id=f)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        checkpoint.load({}, checkpoint_id=tmp_path / "missing")
    (tmp_path / "emptydir").mkdir()
    with pytest.raises(CheckpointError, match="not a checkpoint"):
        checkpoint.load({}, checkpoint_id=tmp_path / "emptydir")
    with pytest.raises(TypeError, match="checkpoint_id must be a path"):
        checkpoint.load({}, checkpoint_id=3)
    with pytest.raises(ValueError, match="pass checkpoint_id"):
        checkpoint.save({})


def test_newer_format_version_is_refused(tmp_path):
    checkpoint.save({"a": nb.ones(1)}, checkpoint_id=tmp_path)
    doc = json.loads((tmp_path / ".metadata.json").read_text())
    doc["version"] = checkpoint.VERSION + 1
    (tmp_path / ".metadata.json").write_text(json.dumps(doc))
    with pytest.raises(CheckpointError, match=rf"format version {checkpoint.VERSION + 1}, newer than "
                                              rf"this nbaccel reads \({checkpoint.VERSION}\)"):
        checkpoint.load({"a": nb.ones(1)}, checkpoint_id=tmp_path)


def test_bad_values_to_save(tmp_path):
    with pytest.raises(TypeError, match="state_dict must be a dict"):
        checkpoint.save([nb.ones(1)], checkpoint_id=tmp_path)
    with pytest.raises(TypeError, match=r"'m.f' is a set; a checkpoint holds tensors"):
        checkpoint.save({"m": {"f": {1, 2}}}, checkpoint_id=tmp_path)
    with pytest.raises(TypeError, match="keys must be strings or ints"):
        checkpoint.save({(1, 2): nb.ones(1)}, checkpoint_id=tmp_path)
    with pytest.raises(ValueError, match=r"both called 'a.b'"):
        checkpoint.save({"a.b": nb.ones(1), "a": {"b": nb.ones(1)}}, checkpoint_id=tmp_path)
    half = ShardedTensor([Shard(nb.ones(2, 2), (0, 0))], (4, 2))
    with pytest.raises(ValueError, match=r"'w': the shards cover 4 of the 8 elements"):
        checkpoint.save({"w": half}, checkpoint_id=tmp_path)
    with pytest.raises(ValueError, match="overlap"):
        ShardedTensor([Shard(nb.ones(2, 2), (0, 0)), Shard(nb.ones(2, 2), (1, 0))], (4, 2))
    with pytest.raises(ValueError, match="outside the global shape"):
        ShardedTensor([Shard(nb.ones(2, 2), (3, 0))], (4, 2))
    assert not any(p.name.startswith("data-") for p in tmp_path.iterdir())   # nothing left behind


# -- integrity and safety ---------------------------------------------------------------------------
def _chunk(tmp_path, key, coords):
    doc = json.loads((tmp_path / ".metadata.json").read_text())
    return tmp_path / doc["data"] / doc["arrays"][key]["path"] / "c" / "/".join(map(str, coords))


@pytest.mark.parametrize("damage", ["truncate", "flip a byte", "delete"])
def test_damaged_chunk_is_refused_naming_tensor_and_chunk(tmp_path, damage):
    checkpoint.save({"layer.w": ShardedTensor.split(nb.randn(8, 4), 4)}, checkpoint_id=tmp_path)
    p = _chunk(tmp_path, "layer.w", (2, 0))
    data = p.read_bytes()
    if damage == "truncate":
        p.write_bytes(data[:-6])
    elif damage == "flip a byte":
        p.write_bytes(data[:5] + bytes([data[5] ^ 1]) + data[6:])
    else:
        p.unlink()
    what = "missing" if damage == "delete" else "corrupt"
    with pytest.raises(CheckpointError, match=rf"chunk \(2, 0\) of 'layer.w' is {what}"):
        checkpoint.load({"layer.w": nb.zeros(8, 4)}, checkpoint_id=tmp_path)
    # a reader that does not need the damaged chunk still loads its part
    part = ShardedTensor([Shard(nb.zeros(4, 4), (0, 0))], (8, 4))
    checkpoint.load({"layer.w": part}, checkpoint_id=tmp_path)


def test_tampered_zarr_metadata_is_refused_before_zarr_reads_it(tmp_path):
    checkpoint.save({"w": nb.ones(4)}, checkpoint_id=tmp_path)
    doc = json.loads((tmp_path / ".metadata.json").read_text())
    zj = tmp_path / doc["data"] / "w" / "zarr.json"
    meta = json.loads(zj.read_text())
    meta["codecs"].insert(0, {"name": "numcodecs.pickle"})         # a codec that would unpickle
    zj.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=r"zarr metadata of 'w' .*\(codecs\)"):
        checkpoint.load({"w": nb.ones(4)}, checkpoint_id=tmp_path)


def test_manifest_is_plain_json_and_data_dirs_are_zarr_v3(tmp_path):
    checkpoint.save({"w": nb.ones(2, 2), "n": 3}, checkpoint_id=tmp_path)
    doc = json.loads((tmp_path / ".metadata.json").read_text())
    assert doc["format"] == checkpoint.FORMAT and doc["entries"][1] == {
        "key": "n", "path": ["n"], "kind": "value", "value": 3, "tuple": False}
    group = zarr.open_group(str(tmp_path / doc["data"]), mode="r")
    assert group.metadata.zarr_format == 3 and (group["w"][:] == 1).all()


# -- atomic commit and faults -------------------------------------------------------------------------
class PowerCut(BaseException):
    """Stands for the process dying: not an Exception, so no handler swallows it."""


def _ok(path, value):
    sd = {"w": nb.zeros(64, 8)}
    checkpoint.load(sd, checkpoint_id=path)
    assert (np.asarray(sd["w"]) == value).all()


def test_resave_replaces_and_cleans_up(tmp_path):
    checkpoint.save({"w": nb.ones(64, 8)}, checkpoint_id=tmp_path)
    checkpoint.save({"w": nb.ones(64, 8) * 2}, checkpoint_id=tmp_path)
    _ok(tmp_path, 2)
    assert len([p for p in tmp_path.iterdir() if p.name.startswith("data-")]) == 1


@pytest.mark.parametrize("crash_at", ["writing a shard", "publishing the manifest"])
def test_crash_mid_save_leaves_previous_checkpoint(tmp_path, monkeypatch, crash_at):
    checkpoint.save({"w": nb.ones(64, 8)}, checkpoint_id=tmp_path)

    def boom(*a, **k):
        raise PowerCut()
    monkeypatch.setattr(store, "write_region" if crash_at == "writing a shard" else "_rename", boom)
    with pytest.raises(PowerCut):
        checkpoint.save({"w": nb.ones(64, 8) * 5}, checkpoint_id=tmp_path)
    monkeypatch.undo()
    _ok(tmp_path, 1)


def test_half_written_checkpoint_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "discard", lambda root, name: None)     # as if the process died
    monkeypatch.setattr(store, "_rename", lambda *a: (_ for _ in ()).throw(PowerCut()))
    with pytest.raises(PowerCut):
        checkpoint.save({"w": nb.ones(64, 8)}, checkpoint_id=tmp_path)
    monkeypatch.undo()
    with pytest.raises(CheckpointError, match="is incomplete: a save started but never published"):
        checkpoint.load({"w": nb.zeros(64, 8)}, checkpoint_id=tmp_path)


@pytest.mark.parametrize("layout", ["row shards (written directly)", "column shards (written by zarr)"])
def test_full_disk_fails_clearly_and_keeps_previous(tmp_path, monkeypatch, layout):
    from nbaccel.distributed.checkpoint import rowchunks
    checkpoint.save({"w": nb.ones(64, 8)}, checkpoint_id=tmp_path)
    writes = []

    def full(n):
        writes.append(n)
        if len(writes) > 3:
            raise OSError(errno.ENOSPC, "No space left on device")
    real_set, real_open = zarr.storage.LocalStore.set, rowchunks.open_chunk

    async def set_(self, key, value):
        full(key)
        return await real_set(self, key, value)

    class FullFile:
        def __init__(self, f):
            self.f = f

        def write(self, data):
            full(len(data))
            return self.f.write(data)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()
    monkeypatch.setattr(zarr.storage.LocalStore, "set", set_)
    monkeypatch.setattr(rowchunks, "open_chunk", lambda path, mode: FullFile(real_open(path, mode)))
    value = ShardedTensor.split(nb.ones(64, 8) * 3, 8, dim=0 if layout.startswith("row") else 1)
    with pytest.raises(CheckpointError, match=r"failed: .*No space left on device.*previous checkpoint "
                                              r"there \(if any\) is unchanged"):
        checkpoint.save({"w": value}, checkpoint_id=tmp_path)
    monkeypatch.undo()
    _ok(tmp_path, 1)
    assert len([p for p in tmp_path.iterdir() if p.name.startswith("data-")]) == 1


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0, reason="mounting needs root")
def test_full_tmpfs(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                      capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        ck = mnt / "ck"
        checkpoint.save({"w": nb.ones(64, 8)}, checkpoint_id=ck)
        with pytest.raises(CheckpointError, match="No space left on device"):
            checkpoint.save({"w": nb.ones(512, 1024)}, checkpoint_id=ck)        # 2 MiB
        _ok(ck, 1)
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_importing_nbaccel_imports_neither_zarr_nor_dask():
    code = ("import sys, nbaccel, nbaccel.distributed as d; d.Shard; d.checkpoint.save; "
            "print(sorted(m for m in ('zarr', 'dask', 'distributed') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("module", ["nbaccel.distributed.sharded", "nbaccel.distributed.checkpoint",
                                    "nbaccel.distributed.checkpoint.api"])
def test_docstring_examples(module):
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted and not result.failed


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64"])
def test_chunks_written_directly_are_what_zarr_writes_and_reads(tmp_path, dtype):
    w = _values(dtype, (10, 3))                      # 3 shards of 4, 4, 2 rows: a partial edge chunk
    checkpoint.save({"w": ShardedTensor.split(w, 3)}, checkpoint_id=tmp_path / "direct")
    doc = json.loads((tmp_path / "direct" / ".metadata.json").read_text())
    arr = zarr.open_array(str(tmp_path / "direct" / doc["data"] / "w"), mode="r")
    stored = _np(w).view("u2") if dtype == "bfloat16" else _np(w)          # bfloat16: its bits
    assert arr.chunks == (4, 3) and (arr[:] == stored).all()
    # byte for byte what zarr itself writes for the same array
    ref = zarr.create_array(store=str(tmp_path / "ref"), shape=(10, 3), chunks=(4, 3), dtype=arr.dtype,
                            compressors=[zarr.codecs.Crc32cCodec()], filters=None, fill_value=0)
    ref[:] = arr[:]
    for i in range(3):
        assert (tmp_path / "ref" / "c" / str(i) / "0").read_bytes() == \
            (tmp_path / "direct" / doc["data"] / "w" / "c" / str(i) / "0").read_bytes()
    got = checkpoint.load_slice(tmp_path / "direct", "w", (slice(3, 10),))
    assert _same(got, w[3:10])


def test_load_in_place_is_seen_by_a_replayed_compiled_function(tmp_path):
    m = nb.nn.Linear(4, 3)
    x = nb.randn(2, 4)
    f = nb.compile(lambda x: m(x), mode="reduce-overhead", backend="numpy")
    f(x), f(x)                                         # traced, then replayed
    other = nb.nn.Linear(4, 3)
    checkpoint.save(other.state_dict(), checkpoint_id=tmp_path)
    version = m.weight._version[0]
    checkpoint.load(m.state_dict(), checkpoint_id=tmp_path)     # straight into m's memory
    assert m.weight._version[0] > version
    np.testing.assert_allclose(np.asarray(f(x)), np.asarray(other(x)), rtol=1e-6)
