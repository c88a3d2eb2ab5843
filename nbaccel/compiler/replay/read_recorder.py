"""Which code a traced call ran, and whether it did anything a replay would not repeat.

:class:`ReadRecorder` watches the first trace of a function with ``sys.setprofile``: every
Python code object that ran, every C function a user frame called (``print``, ``time.time`` and
``list.append`` are not pure; ``len``, ``math.sqrt`` and NumPy's readers are), every call from
user code into library Python that nbaccel does not follow, and the states of the global random
generators before and after (generators' methods are Cython, which the profiler does not see).
:mod:`readset` turns what it saw into guards, or into the reason a function re-traces.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
import types

import numpy as np

from ...ops import creation

# nbaccel/: this file is nbaccel/compiler/<room>/<module>.py
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


def _kernels_dir():
    """Where ``nbaccel_kernels`` lives (the repository's kernels/, beside nbaccel/ in a source
    checkout): its code is nbaccel's (a conv's geometry), not the user's."""
    spec = importlib.util.find_spec("nbaccel_kernels")
    locs = list(spec.submodule_search_locations or ()) if spec is not None else []
    return tuple(os.path.abspath(p) + os.sep for p in locs)


_NBACCEL_DIRS = (_PKG_DIR,) + _kernels_dir()
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__)) + os.sep
_LIB_DIRS = tuple({os.path.abspath(p) + os.sep for p in
                   (sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib"))
                   if p} | {os.path.dirname(os.__file__) + os.sep})
# the user's own files inside the package (the demo is user code)
_USER_FILES_IN_PKG = {os.path.join(_PKG_DIR, "demo.py")}
# standard-library modules whose Python code a user function may call and stay replayable
_PURE_STDLIB = {"functools", "operator", "contextlib", "abc", "typing", "enum", "numbers", "copy",
                "collections", "dataclasses", "_collections_abc", "types", "warnings"}

_PURE_BUILTINS = {"len", "isinstance", "issubclass", "abs", "min", "max", "sum", "round", "divmod",
                  "pow", "hash", "callable", "any", "all", "sorted", "hasattr", "format", "chr",
                  "ord", "bin", "hex", "oct", "repr", "ascii", "iter", "id", "locals"}
# NumPy's C functions that write into an argument or global state
_NUMPY_WRITERS = {"copyto", "put", "place", "putmask", "seterr", "seterrcall", "set_printoptions",
                  "setbufsize", "save", "savez", "savetxt", "tofile", "fromfile", "load", "_set_promotion_state"}
_ARRAY_WRITERS = {"sort", "fill", "partition", "put", "resize", "setflags", "itemset", "byteswap",
                  "tofile", "dump", "__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__",
                  "setfield", "__setstate__"}
_CONTAINER_READERS = {"copy", "index", "count", "get", "keys", "values", "items", "__contains__",
                      "__getitem__", "__len__", "issubset", "issuperset", "union", "intersection",
                      "difference", "isdisjoint", "__iter__"}


_kind_memo: dict = {}


def code_kind(filename: str) -> str:
    """'user', 'nbaccel', 'numpy', 'stdlib:<module>' or 'library' for a code object's file."""
    kind = _kind_memo.get(filename)
    if kind is None:
        path = os.path.abspath(filename) if not filename.startswith("<") else filename
        if path in _USER_FILES_IN_PKG:
            kind = "user"
        elif path.startswith(_NBACCEL_DIRS):
            kind = "nbaccel"
        elif path.startswith(_NUMPY_DIR):
            kind = "numpy-random" if os.sep + "random" + os.sep in path[len(_NUMPY_DIR) - 1:] else "numpy"
        elif filename.startswith("<frozen"):
            kind = "library"
        elif path.startswith(_LIB_DIRS):
            inner = "site-packages" in path or "dist-packages" in path
            mod = os.path.splitext(os.path.basename(path))[0]
            if mod == "__init__":
                mod = os.path.basename(os.path.dirname(path))
            kind = "library" if inner else f"stdlib:{mod}"
        else:
            kind = "user"
        _kind_memo[filename] = kind
    return kind


def _is_user(code) -> bool:
    return code_kind(code.co_filename) == "user"


def _calls_as_user(code) -> bool:
    """Whether the calls this code makes are the user's own (user code, or a wrapper making
    them on its behalf)."""
    return code in _ON_BEHALF or code_kind(code.co_filename) == "user"


_ON_BEHALF: set = set()     # code of wrappers that make the user's calls for it


def calls_for_the_user(fn):
    """Register ``fn`` as making calls on the user's behalf (the %%compile cell's call
    wrapper): what it calls is judged as if the user's frame called it. Returns ``fn``."""
    _ON_BEHALF.add(fn.__code__)
    return fn


def _random_state(obj) -> bool:
    import random
    return isinstance(obj, (np.random.Generator, np.random.RandomState, np.random.BitGenerator,
                            random.Random))


def _pure_c_call(fn) -> bool:
    """Whether a user frame's call of the C function ``fn`` leaves no trace outside it."""
    name = getattr(fn, "__name__", "")
    owner = getattr(fn, "__self__", None)
    if owner is None or isinstance(owner, types.ModuleType):
        mod = getattr(fn, "__module__", None) or getattr(owner, "__name__", "") or ""
        if mod == "builtins":
            return name in _PURE_BUILTINS
        if mod in ("math", "cmath"):
            return True
        if mod.startswith("numpy") and not mod.startswith("numpy.random"):
            return name not in _NUMPY_WRITERS
        return False
    if isinstance(owner, (np.ndarray, np.generic)):
        return name not in _ARRAY_WRITERS
    if isinstance(owner, (list, dict, set, bytearray)):
        return name in _CONTAINER_READERS
    if isinstance(owner, (str, bytes, tuple, int, float, complex, frozenset, range, np.dtype)):
        return True
    if isinstance(owner, np.ufunc):
        return name in ("reduce", "accumulate", "outer", "reduceat")
    return False


class ReadRecorder:
    """Context manager around the first trace: which user code ran, and the first thing that
    makes the call impossible to replay (``self.refusal``)."""

    def __init__(self):
        self.codes: set = set()
        self.refusal: str | None = None
        self.array_calls: set = set()       # ids of arrays whose C methods user code called
        self._prev = None

    def __enter__(self):
        self._random = _random_fingerprint()
        self._prev = sys.getprofile()
        if self._prev is not None:      # a profiler is already watching: do not displace it
            self.refusal = "a profiler is active (sys.setprofile), so the reads cannot be recorded"
            return self
        sys.setprofile(self._event)
        return self

    def __exit__(self, *exc):
        if self._prev is None:
            sys.setprofile(None)
        # generators' methods are Cython (no profile event): compare the global generators'
        # states instead; nbaccel's own random ops draw from its generator at trace time
        if self.refusal is None and not _same_random(self._random, _random_fingerprint()):
            self.refusal = "draws random numbers (each call must draw new ones)"
        return False

    def _event(self, frame, event, arg):
        if self.refusal is not None:
            return
        if event == "c_call":
            owner = getattr(arg, "__self__", None)
            if owner is not None and not isinstance(owner, types.ModuleType) and _random_state(owner):
                self.refusal = "draws random numbers (each call must draw new ones)"
            elif _calls_as_user(frame.f_code):
                if not _pure_c_call(arg):
                    self.refusal = f"calls `{_c_name(arg)}`, which may have side effects"
                elif isinstance(owner, np.ndarray):
                    self.array_calls.add(id(owner))
        elif event == "call":
            code = frame.f_code
            kind = code_kind(code.co_filename)
            if kind == "user":
                self.codes.add(code)
                return
            caller = frame.f_back
            if caller is None or not _calls_as_user(caller.f_code):
                return
            if kind in ("nbaccel", "numpy") or kind.split(":")[-1] in _PURE_STDLIB:
                return
            mod = frame.f_globals.get("__name__", "?")
            self.refusal = f"calls `{mod}.{code.co_name}`, whose reads nbaccel does not follow"


def _random_fingerprint():
    legacy = np.random.mtrand._rand._bit_generator.state
    return (creation._rng, creation._rng.bit_generator.state, legacy)


def _same_random(a, b) -> bool:
    if a[0] is not b[0] or a[1] != b[1]:
        return False
    (sa, sb) = a[2]["state"], b[2]["state"]
    return sa["pos"] == sb["pos"] and np.array_equal(sa["key"], sb["key"])


def _draws_random(v) -> bool:
    import random
    mod = getattr(v, "__module__", None) or ""
    if isinstance(v, types.ModuleType):
        mod = v.__name__
    owner = getattr(v, "__self__", None)
    return mod.startswith("numpy.random") or mod == "random" or v is random or \
        (owner is not None and not isinstance(owner, types.ModuleType) and _random_state(owner)) or \
        _random_state(v)


def _c_name(fn) -> str:
    owner = getattr(fn, "__self__", None)
    name = getattr(fn, "__name__", repr(fn))
    if owner is not None and not isinstance(owner, types.ModuleType):
        return f"{type(owner).__name__}.{name}"
    return name
