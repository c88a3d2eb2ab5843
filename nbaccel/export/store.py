"""Saving an exported program: one directory written atomically, JSON + ``.npz`` with a
manifest of each file's size and SHA-256 (the layout and the checks on load are in
:mod:`.load`). The writing side of the format, below the program type that calls it."""
from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tempfile

import numpy as np

from ..version import __version__
from .dims import ExportError
from .serialize import encode

FORMAT = "nbaccel-export"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
PROGRAM = "program.json"
WEIGHTS = "weights.npz"
MAX_FILE_BYTES = 1 << 34


def is_export_dir(path) -> bool:
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, MANIFEST))


def _program_json(ep):
    spec = ep._spec
    enc = {
        "version": FORMAT_VERSION,
        "dims": spec["dims"],
        "args": [dict(a, value=encode(a["value"], f"argument {a['name']!r}")) if a["kind"] == "value" else a
                 for a in spec["args"]],
        "inputs": [{"name": e["name"], "dtype": e["dtype"].name, "shape": encode(list(e["shape"])),
                    "np": e["np"]} for e in spec["inputs"]],
        "weights": [{"name": e["name"], "kind": e["kind"], "dtype": e["dtype"].name,
                     "shape": list(e["shape"]), "np": e["np"]} for e in spec["weights"]],
        "nodes": [{"op": n["op"], "args": encode(list(n["args"]), f"{n['op']} at {n['where']}"),
                   "params": encode(n["params"], f"{n['op']} at {n['where']}"),
                   "dtype": n["dtype"].name, "shape": encode(list(n["shape"])),
                   "np_flavour": n["np_flavour"], "where": n["where"]} for n in spec["nodes"]],
        "outputs": [{"ref": o["ref"].k, "np": o["np"], "gives_array": o["gives_array"]} for o in spec["outputs"]],
        "tree": _encode_tree(spec["tree"]),
    }
    return json.dumps(enc, allow_nan=False, indent=1).encode()


def _encode_tree(t):
    if "value" in t:
        return {"value": encode(t["value"])}
    if "dict" in t:
        return {"dict": [[k, _encode_tree(v)] for k, v in t["dict"]]}
    for kind in ("tuple", "list"):
        if kind in t:
            return {kind: [_encode_tree(v) for v in t[kind]]}
    return t


def _weights_npz(ep):
    arrays = {}
    for i, a in enumerate(ep._weights):
        if a.dtype.kind not in "biufc":
            a = a.view(f"u{a.dtype.itemsize}")        # bfloat16: its raw bits
        arrays[f"w{i}"] = a
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def save(ep, path) -> None:
    """Write ``ep`` to directory ``path`` (replacing an earlier export there, atomically)."""
    path = os.fspath(path)
    if os.path.exists(path) and not (os.path.isdir(path) and (is_export_dir(path) or not os.listdir(path))):
        raise ExportError(f"{path} exists and is not an exported program; choose another path")
    blobs = {PROGRAM: _program_json(ep), WEIGHTS: _weights_npz(ep)}
    manifest = {"format": FORMAT, "version": FORMAT_VERSION, "nbaccel": __version__,
                "files": {n: {"sha256": hashlib.sha256(b).hexdigest(), "bytes": len(b)} for n, b in blobs.items()}}
    blobs[MANIFEST] = json.dumps(manifest, indent=1).encode()
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".nbexport-", dir=parent)
    try:
        for name, b in blobs.items():
            with open(os.path.join(tmp, name), "wb") as fh:
                fh.write(b)
        old = None
        if os.path.exists(path):
            old = tmp + ".old"
            os.replace(path, old)
        os.replace(tmp, path)
        if old:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
