"""How nbaccel's parallel kernels share the cores with NumPy's BLAS, arranged at import.

A notebook process holds two thread pools: OpenBLAS's (NumPy's matmuls) and numba's OpenMP
pool (nbaccel's quantized, 2:4 and attention kernels; the compiler's numba tier runs its
shares on plain Python threads instead). Each sizes itself to the usable cores. They contend
when idle threads of one pool keep spinning while the other pool's threads need the cores:
measured on a 2-core machine, four int8 GEMV layers right after a BLAS GEMV took 68-84 ms with
OpenMP's default wait policy (its idle threads spin) and 3-10 ms with sleeping idle threads.

What nbaccel sets up, so that users need no environment variables (``docs/threads.md``):

* ``OMP_WAIT_POLICY=PASSIVE``: numba's OpenMP workers sleep as soon as a kernel ends, leaving
  the cores to BLAS and to the rest of the notebook. Read when OpenMP starts (numba's first
  parallel launch, which is after ``import nbaccel`` since numba loads on first use).
* ``NUMBA_THREADING_LAYER_PRIORITY="omp tbb workqueue"``: the OpenMP layer (whose wait policy
  is the one above) where it is installed, instead of TBB's, whose workers spin.
* Dynamic scheduling in the kernels (``nbaccel_kernels._parallel.dynamic_chunks``): a
  parallel loop hands out small chunks of rows, so a worker that is slow to wake (or whose core
  a spinning BLAS thread holds) costs at most one chunk: the other threads take the rest. With static halves the kernel
  waited for its slowest thread (11 ms or 85 ms for the same kernel, bimodally).

A value the user has set is kept. ``configure`` is idempotent.
"""
from __future__ import annotations

import os

SETTINGS = {"OMP_WAIT_POLICY": "PASSIVE", "NUMBA_THREADING_LAYER_PRIORITY": "omp tbb workqueue"}


def configure(env=None) -> dict:
    """Apply :data:`SETTINGS` where unset (the threading layer only when the user chose none);
    returns the values in effect."""
    env = os.environ if env is None else env
    for key, value in SETTINGS.items():
        if key == "NUMBA_THREADING_LAYER_PRIORITY" and env.get("NUMBA_THREADING_LAYER"):
            continue
        env.setdefault(key, value)
    return {k: env.get(k) for k in SETTINGS}
