"""nbaccel.gpu.autotune on the CPU: the pruned spaces, the search, and its on-disk cache per
architecture (bench_fn is a plain Python function here: the search logic does not care what
it times; tests/test_gpu_cuda.py times real kernels on a GPU)."""
import json
import os

import numpy as np
import pytest

from nbaccel.gpu import autotune as at
from nbaccel.gpu.autotune import Config


@pytest.fixture(autouse=True)
def _fresh_memory():
    at.clear_memory()
    yield
    at.clear_memory()


def fake_bench(fast, calls):
    """seconds per config: the one in ``fast`` wins; every call is recorded"""
    def bench(cfg):
        calls.append(cfg)
        return 1e-4 if cfg == fast else 5e-4
    return bench


def test_pointwise_space_is_pruned_to_the_problem():
    big = at.candidates("pointwise", numel=8192 * 8192)
    assert 4 <= len(big) <= at.MAX_CANDIDATES and len(set(big)) == len(big)
    assert {c.block("XBLOCK") for c in big} >= {512, 1024, 2048}
    assert all(c.num_warps * 32 <= c.block("XBLOCK") for c in big)     # a thread has work
    tiny = at.candidates("pointwise", numel=100)
    assert all(c.block("XBLOCK") == 128 for c in tiny)                  # no block past the data
    assert len(tiny) < len(big)


def test_reduction_space_one_block_for_short_rows_and_a_loop_for_long_ones():
    short = at.candidates("reduction", numel=4096, rnumel=100)
    assert {c.block("RBLOCK") for c in short} == {128}
    long = at.candidates("reduction", numel=64, rnumel=100_000)
    assert {c.block("RBLOCK") for c in long} <= {1024, 2048, 4096}
    for c in short + long:
        assert c.block("XBLOCK") * c.block("RBLOCK") <= 8192
        assert c.num_stages == 1
    single_row = at.candidates("reduction", numel=1, rnumel=512)
    assert {c.block("XBLOCK") for c in single_row} == {1}


def test_matmul_space_fits_shared_memory():
    cands = at.candidates("matmul", m=4096, n=4096, k=4096, max_shared_bytes=100 * 1024)
    assert cands
    for c in cands:
        assert c.num_stages * (c.block("BLOCK_M") + c.block("BLOCK_N")) * c.block("BLOCK_K") * 4 <= 100 * 1024
    small = at.candidates("matmul", m=16, n=16, k=16)
    assert all(c.block("BLOCK_M") == 64 and c.block("BLOCK_K") == 32 for c in small)
    with pytest.raises(ValueError, match="unknown kernel kind"):
        at.candidates("conv")


def test_config_round_trips_and_launch_kwargs():
    c = Config.make(8, 3, BLOCK_N=64, BLOCK_M=128)
    assert Config.from_dict(json.loads(json.dumps(c.to_dict()))) == c
    assert c.kwargs == {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3}
    assert str(c) == "BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3"


def test_shape_class_rounds_to_powers_of_two_but_keeps_0_and_1():
    assert at.shape_class((8000, 8192)) == (8192, 8192)
    assert at.shape_class((1, 0, 3)) == (1, 0, 4)
    assert at.shape_class(None) == ()


def test_search_once_then_memory_then_disk(tmp_path):
    cands = at.candidates("pointwise", numel=1 << 20)
    calls = []
    best = at.choose("k1", "sm_90", cands, fake_bench(cands[3], calls), shape=(1024, 1024), cache_dir=str(tmp_path))
    assert best == cands[3] and len(calls) == len(cands)
    # same class (8000 rounds to 8192... here 1000 -> 1024): no new search, from memory
    assert at.choose("k1", "sm_90", cands, fake_bench(cands[0], calls), shape=(1000, 1024),
                     cache_dir=str(tmp_path)) == cands[3]
    assert len(calls) == len(cands)
    # a new process (memory gone) reads the disk
    at.clear_memory()
    assert at.choose("k1", "sm_90", cands, fake_bench(cands[0], calls), shape=(1024, 1024),
                     cache_dir=str(tmp_path)) == cands[3]
    assert len(calls) == len(cands)
    path = at.cache_path("k1", "sm_90", cands, (1024, 1024), cache_dir=str(tmp_path))
    assert os.path.dirname(path) == str(tmp_path / "sm_90")
    rec = json.loads(open(path).read())
    assert rec["choice"] == cands[3].to_dict() and rec["arch"] == "sm_90" and len(rec["trials"]) == len(cands)
    assert rec["shape_class"] == [1024, 1024]
    assert not [n for n in os.listdir(tmp_path / "sm_90") if ".tmp-" in n]     # atomic: no leftovers


def test_choice_is_per_architecture_kernel_and_shape_class(tmp_path):
    cands = at.candidates("pointwise", numel=1 << 20)
    calls = []
    at.choose("k", "sm_90", cands, fake_bench(cands[1], calls), shape=(4096,), cache_dir=str(tmp_path))
    n = len(calls)
    assert at.choose("k", "sm_80", cands, fake_bench(cands[2], calls), shape=(4096,),
                     cache_dir=str(tmp_path)) == cands[2]                       # another GPU
    assert at.choose("k2", "sm_90", cands, fake_bench(cands[0], calls), shape=(4096,),
                     cache_dir=str(tmp_path)) == cands[0]                       # another kernel
    assert at.choose("k", "sm_90", cands, fake_bench(cands[4], calls), shape=(16384,),
                     cache_dir=str(tmp_path)) == cands[4]                       # another shape class
    assert len(calls) == 4 * n
    assert sorted(os.listdir(tmp_path)) == ["sm_80", "sm_90"]


def test_failing_candidates_are_skipped_and_all_failing_is_an_error(tmp_path):
    cands = at.candidates("matmul", m=512, n=512, k=512)

    def bench(cfg):
        if cfg.num_stages == 4:
            raise RuntimeError("out of resource: shared memory")
        return cfg.block("BLOCK_K") * 1e-6
    best = at.choose("mm", "sm_90", cands, bench, cache_dir=str(tmp_path))
    assert best.num_stages == 3 and best.block("BLOCK_K") == 32
    rec = json.loads(open(at.cache_path("mm", "sm_90", cands, cache_dir=str(tmp_path))).read())
    assert rec["failed"] and all("out of resource" in f for f in rec["failed"])

    def broken(cfg):
        raise RuntimeError("no")
    with pytest.raises(at.AutotuneError, match="every candidate failed") as e:
        at.choose("mm2", "sm_90", cands, broken, cache_dir=str(tmp_path))
    assert str(e.value).count("RuntimeError: no") == len(cands)
    with pytest.raises(at.AutotuneError):
        at.choose("mm3", "sm_90", cands, lambda c: float("nan"), cache_dir=str(tmp_path))


def test_single_candidate_needs_no_timing():
    c = Config.make(4, 1, XBLOCK=128)
    assert at.choose("k", "sm_90", [c], lambda cfg: 1 / 0) == c
    with pytest.raises(ValueError):
        at.choose("k", "sm_90", [], lambda cfg: 1.0)


def test_damaged_or_stale_file_is_searched_again(tmp_path):
    cands = at.candidates("pointwise", numel=1 << 16)
    path = at.cache_path("k", "sm_90", cands, cache_dir=str(tmp_path))
    os.makedirs(os.path.dirname(path))
    open(path, "w").write("{not json")
    calls = []
    assert at.choose("k", "sm_90", cands, fake_bench(cands[1], calls), cache_dir=str(tmp_path)) == cands[1]
    assert calls
    at.clear_memory()
    rec = json.loads(open(path).read())
    rec["choice"] = Config.make(4, 1, XBLOCK=7).to_dict()      # not a candidate any more
    open(path, "w").write(json.dumps(rec))
    calls.clear()
    assert at.choose("k", "sm_90", cands, fake_bench(cands[2], calls), cache_dir=str(tmp_path)) == cands[2]
    assert calls


def test_an_unwritable_cache_keeps_the_choice_in_memory(tmp_path, monkeypatch):
    import errno
    from nbaccel import cache_fs

    def full_disk(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(cache_fs, "atomic_write", full_disk)
    cands = at.candidates("pointwise", numel=1 << 16)
    calls = []
    assert at.choose("k", "sm_90", cands, fake_bench(cands[1], calls), cache_dir=str(tmp_path)) == cands[1]
    n = len(calls)
    assert at.choose("k", "sm_90", cands, fake_bench(cands[0], calls), cache_dir=str(tmp_path)) == cands[1]
    assert len(calls) == n
    assert not os.path.exists(at.cache_path("k", "sm_90", cands, cache_dir=str(tmp_path)))


def test_the_compilers_location_is_inside_nbaccels_versioned_cache(tmp_path, monkeypatch):
    # the compiler hands the tuner its directory (gpu/ does not import the compiler); without
    # one the choice stays in memory
    from nbaccel.compiler.cache import cache
    from nbaccel.compiler.config import config
    monkeypatch.setitem(config, "cache_dir", str(tmp_path / "c"))
    cache._reset_session_for_tests()
    try:
        cands = at.candidates("pointwise", numel=1 << 16)
        path = at.cache_path("k", "sm_90", cands, cache_dir=cache.autotune_dir())
        assert path.startswith(os.path.join(cache.cache_dir(), "autotune", "sm_90"))
        assert at.cache_path("k", "sm_90", cands) is None
    finally:
        cache._reset_session_for_tests()


class FakeKernel:
    """The kernel-object protocol tune() drives (the Triton tier's slots follow it): a NumPy
    in-place kernel whose speed depends on its configuration only through the fake timer."""
    source = "def kernel(x): x += 1  # generated"

    def __init__(self):
        self.config = None
        self.launches = 0

    def candidates(self):
        return [{"BLOCK_O": 1024, "num_warps": 4, "num_stages": 1},
                {"BLOCK_O": 2048, "num_warps": 8, "num_stages": 1},
                {"BLOCK_O": 256, "BLOCK_R": 4, "num_warps": 4, "num_stages": None},
                {"BLOCK_O": 64, "num_warps": 2, "num_stages": 1}]

    def configure(self, BLOCK_O, BLOCK_R=None, num_warps=4, num_stages=None):   # noqa: N803
        if BLOCK_O < 128:
            raise ValueError("too small for this kernel")
        self.config = dict(BLOCK_O=BLOCK_O, BLOCK_R=BLOCK_R, num_warps=num_warps, num_stages=num_stages)

    def __call__(self, x):
        x += 1                                  # writes its input, as an in-place kernel does
        self.launches += 1


def test_tune_configures_the_winner_and_leaves_the_arrays_as_they_were(tmp_path):
    k = FakeKernel()
    x = np.zeros(8, np.float32)

    def timer(fn):
        fn()
        return {1024: 3e-4, 2048: 1e-4, 256: 2e-4}[k.config["BLOCK_O"]]
    best = at.tune(k, x, arch="sm_90", shape=(8,), cache_dir=str(tmp_path), timer=timer)
    assert best == Config.make(8, 1, BLOCK_O=2048)
    assert k.config == {"BLOCK_O": 2048, "BLOCK_R": None, "num_warps": 8, "num_stages": 1}
    assert k.launches == 3 and not x.any()     # trials ran; the input is restored
    k2 = FakeKernel()                           # the same kernel again: no trials, same choice
    assert at.tune(k2, x, arch="sm_90", shape=(8,), cache_dir=str(tmp_path), timer=timer) == best
    assert k2.launches == 0 and k2.config["BLOCK_O"] == 2048


def test_flat_candidate_dicts():
    c = Config.from_dict({"BLOCK_O": 256, "BLOCK_R": None, "num_warps": 8, "num_stages": None})
    assert c == Config.make(8, 1, BLOCK_O=256) and c.kwargs == {"BLOCK_O": 256, "num_warps": 8, "num_stages": 1}
