"""Loading exported programs (saving is :mod:`.store`): one directory, JSON + ``.npz``, checked on load.

Layout of ``path/``::

    manifest.json   {"format": "nbaccel-export", "version": 1, "nbaccel": "0.1.0",
                     "files": {"program.json": {"sha256": ..., "bytes": ...},
                               "weights.npz":  {"sha256": ..., "bytes": ...}}}
    program.json    the graph: dims, inputs, weights (name, kind, dtype, shape), nodes (op-table
                    name, args, params, dtype, shape with symbols, source line), outputs
    weights.npz     one array per weight, ``w0``, ``w1``, ... (bfloat16 as raw uint16 bits)

Loading checks, in order: the manifest's format and version (a newer version is refused), each
file's size and SHA-256 (a truncated, corrupt or edited file is refused before it is parsed),
the program's schema, that every op exists in this nbaccel's op table, the weights' dtypes and
shapes, and finally that the graph rebuilds at the exported sizes with the dtypes and shapes it
states. Every failure is an :class:`ExportError`. Nothing is unpickled, imported or evaluated:
the ``.npz`` is read with ``allow_pickle=False`` and op names are looked up in the op table.
"""
from __future__ import annotations

import hashlib
import io
import json
import os

import numpy as np

from .. import dtypes as D
from ..ops.registry import OPS
from .dims import ExportError, Poly
from .serialize import DTYPE_NAMES, Ref, decode
from .runner import build_graph
from . import program as _program

from .store import (FORMAT, FORMAT_VERSION, MANIFEST, MAX_FILE_BYTES, PROGRAM, WEIGHTS,  # noqa: F401
                    is_export_dir, save)


# -- load --------------------------------------------------------------------------------------------
def load(path):
    """Read an exported program written by ``ExportedProgram.save``."""
    path = os.fspath(path)
    if not is_export_dir(path):
        raise ExportError(f"{path}: not an exported program (no {MANIFEST})")
    manifest = _json(_read(path, MANIFEST, None), MANIFEST)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ExportError(f"{path}/{MANIFEST}: not an nbaccel export manifest")
    version = manifest.get("version")
    if type(version) is not int:
        raise ExportError(f"{path}/{MANIFEST}: malformed format version {version!r}")
    if version > FORMAT_VERSION:
        raise ExportError(f"{path} was written in export format {version} by nbaccel "
                          f"{manifest.get('nbaccel')!r}; this nbaccel reads format {FORMAT_VERSION} "
                          "and older: upgrade nbaccel to load it")
    if version < 1:
        raise ExportError(f"{path}: unknown export format version {version}")
    files = manifest.get("files")
    if not isinstance(files, dict) or set(files) != {PROGRAM, WEIGHTS}:
        raise ExportError(f"{path}/{MANIFEST}: the file list must be exactly {PROGRAM} and {WEIGHTS}")
    program = _json(_read(path, PROGRAM, files[PROGRAM]), PROGRAM)
    weights_blob = _read(path, WEIGHTS, files[WEIGHTS])
    try:
        spec = _decode_program(program)
    except ExportError as e:
        raise ExportError(f"{path}/{PROGRAM}: {e}") from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError) as e:
        raise ExportError(f"{path}/{PROGRAM}: malformed program ({type(e).__name__}: {e})") from None
    weights = _decode_weights(weights_blob, spec, path)
    ep = _program.ExportedProgram(spec, weights)
    env = {n: d["example"] for n, d in spec["dims"].items()}
    try:
        build_graph(spec, env)
    except ExportError as e:
        raise ExportError(f"{path}: the program does not rebuild: {e}") from None
    return ep


def _read(path, name, meta):
    full = os.path.join(path, name)
    if os.path.islink(full) or not os.path.isfile(full):
        raise ExportError(f"{full}: missing (or not a regular file)")
    size = os.path.getsize(full)
    if size > MAX_FILE_BYTES:
        raise ExportError(f"{full}: too large ({size} bytes)")
    with open(full, "rb") as fh:
        data = fh.read()
    if meta is None:
        return data
    if not isinstance(meta, dict) or not isinstance(meta.get("sha256"), str) or type(meta.get("bytes")) is not int:
        raise ExportError(f"{path}/{MANIFEST}: malformed entry for {name}")
    if len(data) != meta["bytes"]:
        raise ExportError(f"{full}: {len(data)} bytes, the manifest says {meta['bytes']} "
                          "(truncated or corrupt)")
    if hashlib.sha256(data).hexdigest() != meta["sha256"]:
        raise ExportError(f"{full}: checksum mismatch (the file is corrupt or was modified after saving)")
    return data


def _json(data, name):
    def no_constants(c):
        raise ValueError(f"{c} is not valid JSON")
    try:
        return json.loads(data.decode("utf-8"), parse_constant=no_constants)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ExportError(f"{name}: not valid JSON ({e}); the file is corrupt or truncated") from None


def _dtype(name):
    if name not in DTYPE_NAMES:
        raise ExportError(f"unknown dtype {name!r}")
    return D.dtype(name)


def _bool(v, what):
    if type(v) is not bool:
        raise ExportError(f"{what} must be true or false")
    return v


def _name(v, what):
    if not isinstance(v, str) or not v:
        raise ExportError(f"{what} must be a non-empty string")
    return v


def _decode_program(p):
    if not isinstance(p, dict):
        raise ExportError("the program is not a JSON object")
    if p.get("version") != FORMAT_VERSION:
        raise ExportError(f"program version {p.get('version')!r} does not match the manifest")
    dims = {}
    for n, d in p["dims"].items():
        if not (n.isidentifier() and all(type(d[k]) is int for k in ("min", "max", "example"))
                and 0 <= d["min"] <= d["example"] <= d["max"]):
            raise ExportError(f"malformed dim {n!r}")
        dims[n] = {"min": d["min"], "max": d["max"], "example": d["example"]}
    ctx = {"known": set(dims), "max_ref": 0}
    inputs = []
    for e in p["inputs"]:
        shape = decode(e["shape"], ctx)
        for s in shape:
            if not (type(s) is int and s >= 0) and not (isinstance(s, Poly) and len(s.terms) == 1
                                                        and s.terms.get(tuple(s.names())) == 1
                                                        and len(s.names()) == 1):
                raise ExportError(f"input {e['name']!r}: malformed shape")
        inputs.append({"name": _name(e["name"], "an input name"), "dtype": _dtype(e["dtype"]),
                       "shape": tuple(shape), "np": _bool(e["np"], "np")})
    weights = []
    for e in p["weights"]:
        if e["kind"] not in ("parameter", "buffer", "constant"):
            raise ExportError(f"weight {e['name']!r}: unknown kind {e['kind']!r}")
        if not all(type(s) is int and s >= 0 for s in e["shape"]):
            raise ExportError(f"weight {e['name']!r}: malformed shape")
        weights.append({"name": _name(e["name"], "a weight name"), "kind": e["kind"], "dtype": _dtype(e["dtype"]),
                        "shape": tuple(e["shape"]), "np": _bool(e["np"], "np")})
    nv = len(inputs) + len(weights)
    args = []
    for a in p["args"]:
        if a["kind"] == "input":
            if type(a["input"]) is not int or not 0 <= a["input"] < len(inputs):
                raise ExportError(f"argument {a['name']!r} refers to a missing input")
            args.append({"name": _name(a["name"], "an argument name"), "kind": "input", "input": a["input"]})
        elif a["kind"] == "value":
            args.append({"name": _name(a["name"], "an argument name"), "kind": "value",
                         "value": decode(a["value"], ctx)})
        else:
            raise ExportError(f"argument {a.get('name')!r}: unknown kind")
    nodes = []
    for i, n in enumerate(p["nodes"]):
        if n["op"] not in OPS:
            raise ExportError(f"unknown op {n['op']!r} (node %{i}): the program was written by a "
                              "newer nbaccel, or names an op this nbaccel does not have")
        ctx["max_ref"] = nv + i
        node_args = decode(n["args"], ctx)
        params = decode(n["params"], ctx)
        if not isinstance(node_args, list) or not isinstance(params, dict) or not all(isinstance(k, str) for k in params):
            raise ExportError(f"node %{i}: malformed args or params")
        if _has_ref(params):
            raise ExportError(f"node %{i}: a parameter may not refer to a value")
        nodes.append({"op": n["op"], "args": node_args, "params": params, "dtype": _dtype(n["dtype"]),
                      "shape": tuple(decode(n["shape"], ctx)), "np_flavour": _bool(n["np_flavour"], "np_flavour"),
                      "where": str(n["where"])})
    total = nv + len(nodes)
    outputs = []
    for o in p["outputs"]:
        if type(o["ref"]) is not int or not 0 <= o["ref"] < total:
            raise ExportError("an output refers to a missing value")
        outputs.append({"ref": Ref(o["ref"]), "np": _bool(o["np"], "np"),
                        "gives_array": _bool(o["gives_array"], "gives_array")})
    ctx["max_ref"] = 0
    tree = _decode_tree(p["tree"], len(outputs), ctx)
    return {"dims": dims, "args": args, "inputs": inputs, "weights": weights, "nodes": nodes,
            "outputs": outputs, "tree": tree}


def _has_ref(v):
    if isinstance(v, Ref):
        return True
    if isinstance(v, (list, tuple)):
        return any(_has_ref(x) for x in v)
    if isinstance(v, dict):
        return any(_has_ref(x) for x in v.values())
    return False


def _decode_tree(t, n_leaves, ctx, depth=0):
    if not isinstance(t, dict) or len(t) != 1 or depth > 64:
        raise ExportError("malformed output structure")
    kind, body = next(iter(t.items()))
    if kind == "leaf":
        if type(body) is not int or not 0 <= body < n_leaves:
            raise ExportError("an output leaf is out of range")
        return t
    if kind == "value":
        return {"value": decode(body, ctx)}
    if kind in ("tuple", "list"):
        return {kind: [_decode_tree(x, n_leaves, ctx, depth + 1) for x in body]}
    if kind == "dict":
        return {"dict": [[_name(k, "an output key"), _decode_tree(v, n_leaves, ctx, depth + 1)] for k, v in body]}
    raise ExportError(f"unknown output kind {kind!r}")


def _decode_weights(blob, spec, path):
    try:
        z = np.load(io.BytesIO(blob), allow_pickle=False)
        want = {f"w{i}" for i in range(len(spec["weights"]))}
        if set(z.files) != want:
            raise ExportError(f"{path}/{WEIGHTS}: holds {sorted(z.files)}, the program needs {sorted(want)}")
        out = []
        for i, e in enumerate(spec["weights"]):
            a = z[f"w{i}"]
            dt = e["dtype"].np
            if a.dtype != dt:
                if a.dtype.kind == "u" and a.dtype.itemsize == np.dtype(dt).itemsize and np.dtype(dt).kind not in "biufc":
                    a = a.view(dt)
                else:
                    raise ExportError(f"weight {e['name']!r}: stored as {a.dtype}, the program says {e['dtype'].name}")
            if tuple(a.shape) != e["shape"]:
                raise ExportError(f"weight {e['name']!r}: stored shape {list(a.shape)}, the program says {list(e['shape'])}")
            out.append(a)
        return out
    except ExportError:
        raise
    except Exception as e:   # noqa: BLE001 - a damaged archive: zipfile/NumPy errors of many kinds
        raise ExportError(f"{path}/{WEIGHTS}: cannot read the weights ({type(e).__name__}: {e})") from None
