"""glibc's malloc keeps the memory of freed arrays for the next ones, arranged at import.

An eager training step makes and frees the same few-megabyte arrays every step (activations,
their gradients, the kernels' outputs). With glibc's defaults (a dynamic mmap threshold, and a
trim threshold of twice the largest mapping freed so far) the top of the heap goes back to
the kernel whenever a step's arrays are freed, and the next step faults every page in again:
`bench.eager`'s GPT step took 13,300 minor page faults a step (about 54 MB touched fresh; 20-28
ms of system time in 145 ms of CPU), the CNN step 3,500 (docs/eager.md). PyTorch's steps, in
the same process, took 800.

``configure`` fixes the two thresholds at the values glibc itself reaches once a 32 MiB array
has been freed: arrays below 32 MiB come from the heap, and up to 64 MiB of freed heap is kept
for reuse instead of returned. Then the GPT step takes 8 faults a step and 117 ms of CPU, the
CNN step 1 fault and 28 ms (33 before). The cost is that memory: up to 64 MiB more stays
resident after a large free. Arrays of 32 MiB and more are still mappings of their own,
returned when freed.

Applied once, only where the C library is glibc, and not when the process was started with
``MALLOC_MMAP_THRESHOLD_`` or ``MALLOC_TRIM_THRESHOLD_`` (the user's own choice, which glibc
read at start) or with ``NBACCEL_MALLOC=default``.
"""
from __future__ import annotations

import ctypes
import os
import sys

M_TRIM_THRESHOLD = -1            # mallopt's parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20        # glibc's largest dynamic mmap threshold on 64-bit
TRIM_THRESHOLD = 64 << 20        # twice it, as glibc's dynamic rule sets it
_USER_VARS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")

_applied = None


def _glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc")
    except (ValueError, OSError, AttributeError):     # another C library (musl) or platform
        return False


def configure(env=None) -> bool:
    """Set the thresholds (see the module docstring); True when they are in effect."""
    global _applied
    env = os.environ if env is None else env
    if _applied is not None:
        return _applied
    _applied = False
    if env.get("NBACCEL_MALLOC", "") == "default" or any(v in env for v in _USER_VARS):
        return False
    if not sys.platform.startswith("linux") or not _glibc():
        return False
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    # mallopt returns 1 on success; the mmap threshold first, as fixing the trim threshold
    # alone also ends the dynamic mmap threshold (every array over 128 KiB mapped and faulted)
    _applied = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
        bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _applied
