"""How nbaccel's parallel kernels share the cores with NumPy's BLAS, arranged at import.

A notebook process holds OpenBLAS's thread pool (NumPy's matmuls) and the threads of nbaccel's
kernels. The quantized and 2:4 products run on the kernels' own launcher
(``nbaccel_kernels._pool``: the calling thread plus helper threads that sleep on an event
between calls, so they never spin, and no closing barrier, so the caller never waits for a
helper that has not started). OpenBLAS's workers spin for about 0.1 s after every BLAS call;
docs/threads.md measures what that costs the next kernel.

What is left to arrange here, so that users need no environment variables:

* ``NUMBA_THREADING_LAYER_PRIORITY="omp tbb workqueue"``: for nbaccel's remaining ``prange``
  kernels (2:4 compression, convolution loops), the OpenMP layer where it is installed rather
  than TBB's, whose idle workers spin. Read by numba at import, after ``import nbaccel`` since
  numba loads on first use; kept if the user chose a layer.

``OMP_WAIT_POLICY`` is no longer set. It was process-wide (every OpenMP library the notebook
loads later reads it) and it cannot be scoped: libgomp reads it once, when it starts. It is
not needed either: no per-call kernel of nbaccel runs on OpenMP any more, and with the policy
unset libgomp's idle workers spin only briefly before they sleep (measured in docs/threads.md).

A value the user has set is kept. ``configure`` is idempotent.
"""
from __future__ import annotations

import os

SETTINGS = {"NUMBA_THREADING_LAYER_PRIORITY": "omp tbb workqueue"}


def configure(env=None) -> dict:
    """Apply :data:`SETTINGS` where unset (the threading layer only when the user chose none);
    returns the values in effect."""
    env = os.environ if env is None else env
    for key, value in SETTINGS.items():
        if key == "NUMBA_THREADING_LAYER_PRIORITY" and env.get("NUMBA_THREADING_LAYER"):
            continue
        env.setdefault(key, value)
    return {k: env.get(k) for k in SETTINGS}
