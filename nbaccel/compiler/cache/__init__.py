"""The cache room: compiled kernels kept on disk, and numba's costs made smaller and visible.

``cache.py`` is the disk cache (trusted directories, content-addressed kernel modules, faults
that degrade); ``numba_cache.py`` numba's machine code in it, one verified file per kernel;
``housekeeping.py`` its sizes and eviction; ``warmup.py`` numba's first-use set-up, done early in
the background; ``jit_split.py`` where a kernel's JIT time went.

May import: config
"""
