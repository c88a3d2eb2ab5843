"""nbaccel's settings: one dict (``nbaccel.config``, also ``nbaccel.compiler.config`` and
``nbaccel.compiler.api.config``), read by the compiler and the ``%%compile`` magic.

The bottom of the compiler: it imports nothing from nbaccel. Change a setting by assigning
to the dict (``nb.config["strict"] = True``); every reader looks it up when it needs it.

Environment variables are read once, here, when nbaccel is imported, into the dict; no other
module of the compiler or the magics reads an ``NBACCEL_*`` variable. Set them before
importing nbaccel (a child process inherits them); in a running process change the dict.

* ``NBACCEL_STRICT`` -> ``strict``: 1 makes a failure inside the compiler raise instead of
  running the graph eagerly or the ``%%compile`` cell plainly (default 0; the tests set 1)
* ``NBACCEL_RAISE_COMPILER_ERRORS`` -> ``strict``: the deprecated name of NBACCEL_STRICT
* ``NBACCEL_CACHE_DIR`` -> ``cache_dir``: the disk cache root (default: the user cache directory)
* ``NBACCEL_CACHE_SIZE_LIMIT`` -> ``cache_size_limit``: bytes or "500M" (default 1G)
* ``NBACCEL_CACHE_GRACE_DAYS`` -> ``cache_grace_days``: other versions' directories unused
  this long are removed (default 7)
* ``NBACCEL_CACHE_LOCK_TIMEOUT`` -> ``cache_lock_timeout``: seconds a compile waits for another
  process's lock (default 30)
* ``NBACCEL_NUMBA_WARMUP`` -> ``numba_warmup``: 0 switches the background numba warm-up off
  (default 1)
* ``NBACCEL_TRITON_INTERPRET`` -> ``triton_interpret``: 1 runs ``backend="triton"`` through
  Triton's CPU interpreter (default 0)

Read elsewhere, on purpose (tests/test_compiler_config.py lists the same exceptions):

* ``NBACCEL_AUTO_GPU_BYTES``: ``nbaccel/gpu/placement.py``. gpu/ is a layer below this module
  (tests/test_layering.py), so it cannot import it.
* ``NBACCEL_KERNEL_THREADS``: ``kernels/`` (installed as ``nbaccel_kernels``, which imports
  nothing from nbaccel).
* ``NBACCEL_STABLE_OUTPUT``: ``nbaccel_ext/widget.py``, the front-end package outside
  ``nbaccel/`` (the root conftest.py switches it per notebook kernel, at run time).
* bench/ and the tests set ``NBACCEL_*`` variables for the child processes they start.

Deprecated spellings still work (with a ``DeprecationWarning``): the keys
``raise_compiler_errors`` and ``test_mode`` mean ``strict``, and
``nbaccel.compiler.replay.cheap_path.SETTINGS[k]`` means ``config["cheap_" + k]``.
"""
from __future__ import annotations

import copy as _copy
import os
import warnings
from collections.abc import MutableMapping

# old key -> the key that replaced it
ALIASES = {"raise_compiler_errors": "strict", "test_mode": "strict"}


def _flag(environ, name, default):
    val = environ.get(name)
    if val is None:
        return default
    return val.strip() not in ("", "0")


def _number(environ, name, default):
    try:
        return float(environ.get(name, default))
    except ValueError:
        return float(default)


def from_environment(environ=None) -> dict:
    """The settings the ``NBACCEL_*`` variables of ``environ`` (default: ``os.environ``) give."""
    env = os.environ if environ is None else environ
    strict = _flag(env, "NBACCEL_RAISE_COMPILER_ERRORS", False)
    strict = _flag(env, "NBACCEL_STRICT", strict)
    return {"strict": strict,
            "cache_dir": env.get("NBACCEL_CACHE_DIR") or None,
            "cache_size_limit": env.get("NBACCEL_CACHE_SIZE_LIMIT") or None,
            "cache_grace_days": _number(env, "NBACCEL_CACHE_GRACE_DAYS", 7),
            "cache_lock_timeout": _number(env, "NBACCEL_CACHE_LOCK_TIMEOUT", 30),
            "numba_warmup": _flag(env, "NBACCEL_NUMBA_WARMUP", True),
            "triton_interpret": _flag(env, "NBACCEL_TRITON_INTERPRET", False)}


def _canonical(key):
    new = ALIASES.get(key)
    if new is None:
        return key
    warnings.warn(f"nbaccel config key {key!r} is deprecated: use {new!r}", DeprecationWarning, stacklevel=3)
    return new


class Settings(dict):
    """A dict that maps the deprecated keys (:data:`ALIASES`) to their replacements."""

    def __getitem__(self, key):
        return dict.__getitem__(self, _canonical(key))

    def __setitem__(self, key, value):
        dict.__setitem__(self, _canonical(key), value)

    def __delitem__(self, key):
        dict.__delitem__(self, _canonical(key))

    def __contains__(self, key):
        return dict.__contains__(self, ALIASES.get(key, key))

    def get(self, key, default=None):
        return dict.get(self, _canonical(key), default)

    def setdefault(self, key, default=None):
        return dict.setdefault(self, _canonical(key), default)

    def pop(self, key, *default):
        return dict.pop(self, _canonical(key), *default)

    def update(self, *args, **kwargs):
        for k, v in dict(*args, **kwargs).items():
            self[k] = v

    def __deepcopy__(self, memo):
        return Settings({k: _copy.deepcopy(v, memo) for k, v in dict.items(self)})

    def copy(self):
        return Settings(dict.items(self))


config = Settings({
    "recompile_limit": 8, "history": 5,
    # default mode: check guards and replay the compiled program instead of re-tracing
    # (guarded.py); False re-traces every call (the trace is then the guard)
    "guarded_replay": True,
    # a call with more graph breaks than this runs plainly (tracing it costs more)
    "max_graph_breaks": 64,
    # a %%compile cell whose run had this many breaks and took this long is run plainly
    # once to compare; if tracing cost more than `ratio` x the plain run + `slack` s, its
    # later runs go plain
    "plain_probe": {"breaks": 8, "seconds": 0.25, "ratio": 4.0, "slack": 0.05},
    # a %%compile cell's first run on a kind of input (decision.py, docs/cheap-path.md):
    # "compiled" compiles at once; "plain" runs plainly until compiling can pay off
    "cell_first_run": "plain",
    # nb.compile'd functions and training steps: their calls are timed against the plain
    # function on the same arguments and the faster one runs (decision.py); False: always compiled
    "decide_functions": True,
    # the cheap path (cheap_path.py, docs/cheap-path.md)
    "cheap_enabled": True,           # False: never take a cheap path (every cell compiles at once)
    "cheap_functions": False,        # also for nb.compile'd functions (default: %%compile cells only)
    "cheap_graph_seconds": 100e-6,   # a graph estimated below this runs as one NumPy function
    # an exiting process waits at most this long for the numba compiles it queued (they fill
    # the disk cache for the next session); the rest are dropped (runtime._at_exit)
    "exit_compile_wait": 10.0,
    # from the environment (the list above):
    # * strict: a failure inside the compiler raises. Otherwise it never reaches the user: a
    #   graph that fails to compile runs eagerly (the report says why), and an internal failure
    #   of a %%compile run runs the cell again plainly (the last safety net, docs/magics.md).
    #   Tests and bug reports want it raised.
    # * cache_dir, cache_size_limit (None: 1G), cache_grace_days, cache_lock_timeout,
    #   numba_warmup, triton_interpret
    **from_environment(),
})


class PrefixView(MutableMapping):
    """``view[k]`` is ``config[prefix + k]``: the deprecated ``cheap_path.SETTINGS``."""

    def __init__(self, prefix, name):
        self.prefix, self.name = prefix, name

    def _key(self, key):
        warnings.warn(f"{self.name}[{key!r}] is deprecated: use nbaccel.config[{self.prefix + key!r}]",
                      DeprecationWarning, stacklevel=3)
        return self.prefix + key

    def __getitem__(self, key):
        return config[self._key(key)]

    def __setitem__(self, key, value):
        k = self._key(key)
        if k not in config:
            raise KeyError(key)
        config[k] = value

    def __delitem__(self, key):
        raise TypeError(f"{self.name} keys cannot be removed")

    def __iter__(self):
        return (k[len(self.prefix):] for k in list(config) if k.startswith(self.prefix))

    def __len__(self):
        return sum(1 for _ in self)
