"""Saved exports: loaded in a process that cannot import the defining code; damaged, tampered,
newer-version and unknown-op files each rejected with an ExportError; nb.save files still load."""
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import nbaccel as nb
from nbaccel.export import ExportError

ROOT = pathlib.Path(__file__).resolve().parent.parent

MODEL_SOURCE = '''
import nbaccel as nb
from nbaccel import nn


class Regressor(nn.Module):
    """The tutorial MLP, defined in a module the loading process will not have."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(1, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU())
        self.head = nn.Linear(64, 1)

    def forward(self, x):
        return self.head(self.body(x)) * 0.5
'''

LOADER = '''
import importlib.util, sys
import numpy as np
import nbaccel as nb
assert importlib.util.find_spec("tutorial_defs") is None, "the defining module is importable"
ep = nb.load(sys.argv[1])
data = np.load(sys.argv[2])
for backend in ("eager", "numpy", "numba"):
    got = ep.run(data["x"], backend=backend)
    np.testing.assert_allclose(got, data["want"], rtol=1e-5, atol=1e-6)
got = ep.module()(nb.asarray(data["x"]))
np.testing.assert_allclose(got.numpy(), data["want"], rtol=1e-5, atol=1e-6)
print("loaded", type(ep).__name__, ep.ops.count("linear"), "linear ops")
'''


def test_load_in_a_process_that_cannot_import_the_defining_code(tmp_path):
    defs = tmp_path / "defs"
    defs.mkdir()
    (defs / "tutorial_defs.py").write_text(MODEL_SOURCE)
    sys.path.insert(0, str(defs))
    try:
        import tutorial_defs
        nb.manual_seed(0)
        model = tutorial_defs.Regressor()
        ep = nb.export(model, nb.randn(16, 1), dynamic_shapes={"x": {0: nb.export.Dim("batch", max=4096)}})
        x = np.linspace(-2, 2, 37, dtype=np.float32)[:, None]
        np.savez(tmp_path / "io.npz", x=x, want=model(nb.asarray(x)).numpy())
        ep.save(tmp_path / "model")
    finally:
        sys.path.remove(str(defs))
        sys.modules.pop("tutorial_defs", None)
    (defs / "tutorial_defs.py").unlink()                    # the notebook is gone
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(ROOT)                           # nbaccel only
    run = subprocess.run([sys.executable, "-c", LOADER, str(tmp_path / "model"), str(tmp_path / "io.npz")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "loaded ExportedProgram 3 linear ops" in run.stdout


@pytest.fixture
def saved(tmp_path):
    nb.manual_seed(0)
    model = nb.nn.Sequential(nb.nn.Linear(4, 8), nb.nn.ReLU(), nb.nn.Linear(8, 2))
    ep = nb.export(model, nb.randn(3, 4), dynamic_shapes=({0: nb.export.Dim("batch")},))
    path = tmp_path / "m"
    ep.save(path)
    return path


def _rewrite(path, name, edit):
    """Change a file and record its new checksum: only the later checks can catch it."""
    f = path / name
    data = edit(f.read_bytes())
    f.write_bytes(data)
    man = json.loads((path / "manifest.json").read_text())
    man["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    (path / "manifest.json").write_text(json.dumps(man))


def _edit_program(fn):
    def edit(data):
        p = json.loads(data)
        fn(p)
        return json.dumps(p).encode()
    return edit


def test_round_trip_and_layout(saved):
    assert sorted(os.listdir(saved)) == ["manifest.json", "program.json", "weights.npz"]
    man = json.loads((saved / "manifest.json").read_text())
    assert man["format"] == "nbaccel-export" and man["version"] == nb.export.FORMAT_VERSION
    prog = json.loads((saved / "program.json").read_text())
    assert [n["op"] for n in prog["nodes"]] == ["linear", "relu", "linear"]
    assert prog["inputs"][0]["shape"] == [{"$sym": [[1, 1, ["batch"]]]}, 4]
    with np.load(saved / "weights.npz", allow_pickle=False) as z:   # plain arrays only
        assert sorted(z.files) == ["w0", "w1", "w2", "w3"]
    ep = nb.load(saved)
    assert ep.run(nb.ones(5, 4)).shape == (5, 2)
    ep.save(saved)                                        # saving over an export replaces it
    assert nb.load(str(saved)).ops == ep.ops
    nb.save(ep, saved.parent / "again")                   # nb.save of a program: ep.save
    nb.export.save(ep, saved.parent / "again")            # torch.export.save's spelling
    assert nb.export.load(saved.parent / "again").ops == ep.ops


def _err(path, pattern):
    with pytest.raises(ExportError, match=pattern) as info:
        nb.load(path)
    assert isinstance(info.value, ValueError)


def test_truncated_weights_are_rejected(saved):
    f = saved / "weights.npz"
    f.write_bytes(f.read_bytes()[:100])
    _err(saved, "truncated or corrupt")


def test_corrupt_program_is_rejected(saved):
    f = saved / "program.json"
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0x01
    f.write_bytes(bytes(data))
    _err(saved, "checksum mismatch")


def test_tampered_weights_are_rejected(saved):
    import io
    with np.load(saved / "weights.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays["w0"] = arrays["w0"] * 2
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    data = buf.getvalue()
    (saved / "weights.npz").write_bytes(data)
    man = json.loads((saved / "manifest.json").read_text())
    man["files"]["weights.npz"]["bytes"] = len(data)        # the size fits, the digest does not
    (saved / "manifest.json").write_text(json.dumps(man))
    _err(saved, "checksum mismatch")


def test_truncated_manifest_is_rejected(saved):
    f = saved / "manifest.json"
    f.write_bytes(f.read_bytes()[:40])
    _err(saved, "not valid JSON")


def test_newer_format_version_is_rejected(saved):
    man = json.loads((saved / "manifest.json").read_text())
    man["version"] = nb.export.FORMAT_VERSION + 1
    (saved / "manifest.json").write_text(json.dumps(man))
    _err(saved, r"format 2 .*upgrade nbaccel")


def test_unknown_op_is_rejected(saved):
    _rewrite(saved, "program.json", _edit_program(lambda p: p["nodes"][1].update(op="frobnicate")))
    _err(saved, "unknown op 'frobnicate'")


def test_nothing_stored_is_executed(saved, tmp_path):
    marker = tmp_path / "pwned"
    code = f"__import__('os').system('touch {marker}')"
    _rewrite(saved, "program.json", _edit_program(lambda p: p["nodes"][1].update(op=code)))
    _err(saved, "unknown op")
    _rewrite(saved, "program.json", _edit_program(
        lambda p: p["nodes"][1].update(op="relu", args=p["nodes"][1]["args"] + [{"$eval": code}])))
    _err(saved, r"unknown value tag '\$eval'")
    assert not marker.exists()


def test_pickled_weights_are_rejected(saved):
    import io

    def edit(_):
        buf = io.BytesIO()
        np.savez(buf, w0=np.array([{"a": 1}], dtype=object), w1=np.zeros(8, np.float32),
                 w2=np.zeros((2, 8), np.float32), w3=np.zeros(2, np.float32))
        return buf.getvalue()
    _rewrite(saved, "weights.npz", edit)
    _err(saved, "cannot read the weights")


def test_inconsistent_program_is_rejected(saved):
    def wrong_shape(p):
        p["weights"][0]["shape"] = [8, 5]
    _rewrite(saved, "program.json", _edit_program(wrong_shape))
    _err(saved, r"stored shape \[8, 4\], the program says \[8, 5\]")


def test_node_that_disagrees_with_its_op_is_rejected(saved):
    def wrong_dtype(p):
        p["nodes"][1]["dtype"] = "int32"
    _rewrite(saved, "program.json", _edit_program(wrong_dtype))
    _err(saved, "does not rebuild")


def test_forward_reference_and_extra_files_are_rejected(saved):
    def forward(p):
        p["nodes"][0]["args"][0] = {"$ref": 99}
    _rewrite(saved, "program.json", _edit_program(forward))
    _err(saved, "does not come before it")
    man = json.loads((saved / "manifest.json").read_text())
    man["files"]["../evil.py"] = {"sha256": "0" * 64, "bytes": 0}
    (saved / "manifest.json").write_text(json.dumps(man))
    _err(saved, "exactly program.json and weights.npz")


def test_missing_file_and_plain_directory(saved, tmp_path):
    (saved / "weights.npz").unlink()
    _err(saved, "missing")
    empty = tmp_path / "empty"
    empty.mkdir()
    _err(empty, "not an exported program")


def test_state_dict_files_still_load(tmp_path):
    model = nb.nn.Linear(3, 2)
    nb.save(model.state_dict(), tmp_path / "w.npz")
    state = nb.load(tmp_path / "w.npz")
    assert sorted(state) == ["bias", "weight"]
    np.testing.assert_array_equal(state["weight"].numpy(), model.weight.detach().numpy())


def test_save_refuses_to_overwrite_other_things(tmp_path):
    ep = nb.export(lambda x: x + 1, nb.ones(2))
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("keep me")
    with pytest.raises(ExportError, match="not an exported program"):
        ep.save(tmp_path / "notes")
    assert (tmp_path / "notes" / "a.txt").read_text() == "keep me"


def test_bfloat16_and_numpy_scalar_constants_round_trip(tmp_path):
    w = nb.ones(4, dtype=nb.bfloat16) * 3
    ep = nb.export(lambda x: (x.astype(np.float32) * np.float32(0.5)) + w.astype(nb.float32),
                   np.arange(4, dtype=np.int32))
    ep.save(tmp_path / "b")
    got = nb.load(tmp_path / "b").run(np.arange(4, dtype=np.int32))
    np.testing.assert_array_equal(np.asarray(got), np.arange(4) * 0.5 + 3)


def test_scripts_in_docs_run():
    """docs/export.md's first example (kept short so the page stays right)."""
    src = (ROOT / "docs" / "export.md").read_text()
    block = src.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(textwrap.dedent(block), "docs/export.md", "exec"), {})


@pytest.mark.parametrize("edit", [
    lambda p: p.update(nodes="not a list"),
    lambda p: p["nodes"][0].pop("params"),
    lambda p: p["nodes"][0].update(args=[{"$tuple": [[[[[]]]]] * 3}, 7]),
    lambda p: p.update(dims={"batch": {"min": 5, "max": 2, "example": 3}}),
    lambda p: p["inputs"][0].update(shape=[{"$sym": [[2, 1, ["batch"]]]}, 4]),
    lambda p: p["inputs"][0].update(shape=[{"$sym": [[1, 1, ["nobody"]]]}, 4]),
    lambda p: p["nodes"][0].update(dtype="object"),
    lambda p: p.update(tree={"leaf": 5}),
    lambda p: p["nodes"][0].update(args=[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]),
])
def test_malformed_programs_are_export_errors(saved, edit):
    _rewrite(saved, "program.json", _edit_program(edit))
    _err(saved, None)


def test_deeply_nested_json_is_an_export_error(saved):
    _rewrite(saved, "program.json", lambda data: b"[" * 100000 + b"]" * 100000)
    _err(saved, None)
