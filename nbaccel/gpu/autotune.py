"""``mode="max-autotune"`` for Triton kernels: a small pruned space of launch configurations
(block sizes, ``num_warps``, ``num_stages``), searched once per kernel and shape class, the
winner kept on disk per GPU architecture.

The renderer's runtime asks::

    from nbaccel.gpu import autotune, triton_driver
    cands = autotune.candidates("pointwise", numel=n)            # or "reduction" / "matmul"
    cfg = autotune.choose(kernel_key, triton_driver.arch(), cands,
                          bench_fn=lambda cfg: autotune.median_seconds(lambda: launch(cfg)),
                          shape=(rows, cols))
    launch(cfg)      # cfg.blocks["XBLOCK"], cfg.num_warps, cfg.num_stages

``kernel_key`` names the kernel (a hash of its generated source is right: a changed kernel is
searched again). Choices are found, in order, in this process's memory, in
``<cache_dir>/<arch>/<hash>.json`` (written atomically, like the kernel cache, so a reader
never sees half a file; the compiler passes ``<nbaccel cache>/<version>/autotune``, and
without a ``cache_dir`` choices stay in memory), or by timing every candidate once. A candidate
whose trial raises (too many resources, a compile error) is skipped; only when all fail is the
search an error. A cache that cannot be written is not an error: the choice then lives in
memory for this process.
"""
from __future__ import annotations

import hashlib
import json
import os
import statistics
import threading
import time
from dataclasses import dataclass

from .. import cache_fs
from . import triton_driver

__all__ = ["Config", "AutotuneError", "candidates", "shape_class", "choose", "tune", "median_seconds",
           "cache_path", "clear_memory"]

FORMAT = 1              # bump when the file layout changes (old files are then ignored)
MAX_CANDIDATES = 12     # a search times at most this many configurations


class AutotuneError(RuntimeError):
    """Every candidate configuration failed; the message lists why, one line each."""


@dataclass(frozen=True)
class Config:
    """One launch configuration: named block sizes (``tl.constexpr`` arguments such as
    ``XBLOCK``/``RBLOCK`` or ``BLOCK_M``/``BLOCK_N``/``BLOCK_K``), ``num_warps``, ``num_stages``."""
    blocks: tuple = ()                 # sorted ((name, size), ...): hashable and deterministic
    num_warps: int = 4
    num_stages: int = 1

    @classmethod
    def make(cls, num_warps=4, num_stages=1, **blocks):
        return cls(tuple(sorted((k, int(v)) for k, v in blocks.items())), int(num_warps), int(num_stages))

    @property
    def kwargs(self) -> dict:
        """The keyword arguments of a launch: ``kernel[grid](*args, **cfg.kwargs)``."""
        return dict(self.blocks, num_warps=self.num_warps, num_stages=self.num_stages)

    def block(self, name: str) -> int:
        return dict(self.blocks)[name]

    def to_dict(self) -> dict:
        return {"blocks": dict(self.blocks), "num_warps": self.num_warps, "num_stages": self.num_stages}

    @classmethod
    def from_dict(cls, d: dict) -> "Config":
        """From :meth:`to_dict`'s form, or a flat one (``{"BLOCK_O": 1024, "num_warps": 4}``:
        every key but num_warps/num_stages is a block size; a None value is left out)."""
        if "blocks" in d:
            blocks = d["blocks"]
        else:
            blocks = {k: v for k, v in d.items() if k not in ("num_warps", "num_stages") and v is not None}
        return cls.make(d.get("num_warps") or 4, d.get("num_stages") or 1, **blocks)

    def __str__(self):
        b = ", ".join(f"{k}={v}" for k, v in self.blocks)
        return f"{b}{', ' if b else ''}num_warps={self.num_warps}, num_stages={self.num_stages}"


def _pow2_at_least(n: int) -> int:
    n = max(int(n), 1)
    return 1 << (n - 1).bit_length()


def shape_class(shape) -> tuple:
    """The shapes one search covers: each size rounded up to a power of two (0 and 1 stay as
    they are: they change what the kernel does, not only how much)."""
    if shape is None:
        return ()
    return tuple(int(s) if int(s) <= 1 else _pow2_at_least(s) for s in shape)


def _keep_useful(cfgs, limit):
    """Deduplicate (pruning often maps several settings to one), keep order, cap the count."""
    seen, out = set(), []
    for c in cfgs:
        if c not in seen:
            seen.add(c)
            out.append(c)
    return out[:limit]


def candidates(kind: str, *, numel: int = 0, rnumel: int = 0, m: int = 0, n: int = 0, k: int = 0,
               itemsize: int = 4, max_shared_bytes: int = 228 * 1024,
               limit: int = MAX_CANDIDATES) -> list[Config]:
    """The pruned search space of one kernel kind.

    * ``"pointwise"`` (``numel`` elements): ``XBLOCK`` ∈ 256…4096, ``num_warps`` ∈ {2, 4, 8};
      a block larger than the next power of two of ``numel`` only adds masked-off lanes, and a
      warp count that leaves a thread less than one element wastes it: both are pruned.
    * ``"reduction"`` (``numel`` rows of ``rnumel``): ``RBLOCK`` covers a row in one block when
      it fits (≤ 2048; up to 8192 it competes with 2048/4096 and a loop), otherwise
      1024/2048/4096 with a loop; ``XBLOCK`` (rows per program)
      ∈ {1, 2, 4, 8} only while ``XBLOCK·RBLOCK`` ≤ 8192; ``num_warps`` ∈ {4, 8, 16} (16 only
      for blocks of 4096 elements or more).
    * ``"matmul"`` (``m×k @ k×n``): ``BLOCK_M/N`` ∈ {64, 128}, ``BLOCK_K`` ∈ {32, 64},
      ``num_warps`` ∈ {4, 8}, ``num_stages`` ∈ {3, 4}, pruned to what fits in
      ``max_shared_bytes`` (the pipelined A and B tiles) and to blocks no larger than the matrix.
    """
    cfgs = []
    if kind == "pointwise":
        top = _pow2_at_least(numel or 1)
        for xb in (1024, 2048, 512, 4096, 256):
            xb = min(xb, max(top, 128))
            for w in (4, 8, 2):
                if w * 32 <= xb:
                    cfgs.append(Config.make(w, 1, XBLOCK=xb))
    elif kind == "reduction":
        r = _pow2_at_least(rnumel or 1)
        rblocks = [r] if r <= 2048 else [r, 2048, 4096] if r <= 8192 else [2048, 1024, 4096]
        rows = _pow2_at_least(numel or 1)
        for rb in rblocks:
            for xb in (1, 2, 4, 8):
                if xb > rows or xb * rb > 8192:
                    continue
                for w in (4, 8, 16):
                    if w * 32 <= max(xb * rb, 128) and (w < 16 or xb * rb >= 4096):
                        cfgs.append(Config.make(w, 1, XBLOCK=xb, RBLOCK=rb))
        if not cfgs:
            cfgs.append(Config.make(4, 1, XBLOCK=1, RBLOCK=min(r, 4096)))
    elif kind == "matmul":
        for bm in (128, 64):
            for bn in (128, 64):
                for bk in (64, 32):
                    if (m and bm > max(_pow2_at_least(m), 64)) or (n and bn > max(_pow2_at_least(n), 64)) \
                            or (k and bk > max(_pow2_at_least(k), 32)):
                        continue
                    for stages in (3, 4):
                        if stages * (bm + bn) * bk * itemsize > max_shared_bytes:
                            continue
                        for w in (4, 8):
                            if w == 8 and bm * bn < 128 * 128:
                                continue
                            cfgs.append(Config.make(w, stages, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk))
    else:
        raise ValueError(f"unknown kernel kind {kind!r}: expected pointwise, reduction or matmul")
    return _keep_useful(cfgs, limit)


# -- the cache ----------------------------------------------------------------------------------
_memory: dict[str, Config] = {}
_lock = threading.Lock()


def clear_memory():
    """Forget the choices held in memory (the disk keeps its own)."""
    with _lock:
        _memory.clear()


def _key(kernel_key, arch, shape, cands) -> str:
    text = json.dumps([FORMAT, str(kernel_key), str(arch), list(shape_class(shape)),
                       [c.to_dict() for c in cands]], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def cache_path(kernel_key, arch, candidates_, shape=None, cache_dir=None) -> str | None:
    """Where the choice for this kernel, arch, shape class and candidate list is kept under
    ``cache_dir`` (None: no disk, the choice lives in memory). The compiler passes its disk
    cache's ``autotune/`` directory; this package does not reach up to find it."""
    root = cache_dir
    if root is None:
        return None
    safe_arch = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in str(arch)) or "unknown"
    return os.path.join(root, safe_arch, _key(kernel_key, arch, shape, list(candidates_)) + ".json")


def _read(path, cands):
    data = cache_fs.read_bytes(path) if path else None
    if not data:
        return None
    try:
        d = json.loads(data)
        cfg = Config.from_dict(d["choice"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None            # a damaged file is searched again (and overwritten)
    return cfg if d.get("format") == FORMAT and cfg in cands else None


def _write(path, record) -> bool:
    if not path:
        return False
    try:
        d = os.path.dirname(path)
        cache_fs.check_dir(os.path.dirname(d), create=True)
        cache_fs.check_dir(d, create=True)
        cache_fs.atomic_write(path, json.dumps(record, indent=1, sort_keys=True).encode())
        return True
    except (OSError, cache_fs.Untrusted):
        return False


def choose(kernel_key: str, arch: str, candidates_, bench_fn, *, shape=None, cache_dir=None,
           log=None) -> Config:
    """The fastest of ``candidates_`` for this kernel on this architecture and shape class.

    ``bench_fn(config) -> seconds`` times one configuration (it may raise: that candidate is
    skipped). The search runs once per (kernel_key, arch, shape class, candidate list); later
    calls, in this process or another, read the choice back. ``log``, if given, is called with
    a one-line summary after a search."""
    cands = [c if isinstance(c, Config) else Config.from_dict(c) for c in candidates_]
    if not cands:
        raise ValueError("autotune.choose needs at least one candidate")
    if len(cands) == 1:
        return cands[0]
    path = cache_path(kernel_key, arch, cands, shape, cache_dir)
    mkey = path or _key(kernel_key, arch, shape, cands)
    with _lock:
        hit = _memory.get(mkey)
    if hit is not None:
        return hit
    hit = _read(path, cands)
    if hit is not None:
        with _lock:
            _memory[mkey] = hit
        return hit
    timings, failures = [], []
    t0 = time.perf_counter()
    for cfg in cands:
        try:
            s = float(bench_fn(cfg))
        except Exception as e:      # out of shared memory / registers, a compile error, ...
            failures.append(f"{cfg}: {type(e).__name__}: {e}")
            continue
        if s != s or s <= 0:        # NaN or a clock that did not move: not a measurement
            failures.append(f"{cfg}: timing {s!r} is not a positive number")
            continue
        timings.append((s, cfg))
    if not timings:
        raise AutotuneError(f"autotune {kernel_key} on {arch}: every candidate failed:\n  "
                            + "\n  ".join(failures))
    best_s, best = min(timings, key=lambda p: p[0])
    record = {"format": FORMAT, "kernel": str(kernel_key), "arch": str(arch),
              "shape_class": list(shape_class(shape)), "choice": best.to_dict(), "seconds": best_s,
              "trials": [{"config": c.to_dict(), "seconds": s} for s, c in timings],
              "failed": failures, "search_seconds": time.perf_counter() - t0}
    _write(path, record)
    with _lock:
        _memory[mkey] = best
    if log is not None:
        log(f"autotune {kernel_key} on {arch}: {best} ({best_s * 1e6:.1f} us, "
            f"{len(timings)} tried, {len(failures)} failed)")
    return best


def tune(kernel, *arrays, arch: str | None = None, shape=None, cache_dir=None, timer=None) -> Config:
    """Autotune one kernel object and leave it configured with the winner.

    ``kernel`` has ``candidates()`` (flat dicts: block sizes, num_warps, num_stages),
    ``configure(**config)``, ``source`` (its generated code: the cache key) and
    ``__call__(*arrays)`` (one launch); the Triton tier's kernel slots are such objects. The
    trials write the kernel's outputs, and a kernel may write one of its inputs (``x += 1``),
    so every array is copied before the search and restored after it: call this before the
    launch that counts. ``timer(fn) -> seconds`` defaults to :func:`median_seconds`."""
    timer = timer or median_seconds
    if arch is None:
        arch = triton_driver.arch()
    cands = [c if isinstance(c, Config) else Config.from_dict(c) for c in kernel.candidates()]
    if not cands:
        raise ValueError("autotune.tune: the kernel offers no candidate configurations")
    key = hashlib.sha256(str(kernel.source).encode()).hexdigest()[:24]
    saved = [a.copy() for a in arrays if hasattr(a, "copy")]

    def bench(cfg):
        kernel.configure(**cfg.kwargs)
        return timer(lambda: kernel(*arrays))
    try:
        best = choose(key, arch, cands, bench, shape=shape, cache_dir=cache_dir)
    finally:
        it = iter(saved)
        for a in arrays:
            if hasattr(a, "copy"):
                a[...] = next(it)
    kernel.configure(**best.kwargs)
    return best


def median_seconds(fn, *, warmup: int = 2, rounds: int = 10) -> float:
    """The median GPU time of ``fn`` (CUDA events on CuPy's current stream): a ``bench_fn``
    body for :func:`choose`."""
    return statistics.median(triton_driver.bench(fn, warmup=warmup, rounds=rounds))
