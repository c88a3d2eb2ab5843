"""What the fused kernels share: numba's flags for them, and running one over chunks of its
arrays on the kernels' own threads (``_tasks``) when the call is large enough to pay for it."""
from __future__ import annotations

from .. import _tasks

# Reassociation lets LLVM vectorise the float64 sums (a serial sum waits ~4 cycles per element
# on the previous add: BatchNorm's statistics ran 14x slower without it, 3.5x slower than
# NumPy's pairwise sums). No "nnan"/"ninf": NaN and inf propagate as in NumPy.
FASTMATH = {"reassoc", "contract", "nsz"}
# error_model="numpy": x / 0 is inf or NaN as in NumPy (Python's model raises and checks every
# division)
_JIT = dict(nogil=True, cache=True, boundscheck=False, error_model="numpy", fastmath=FASTMATH)


# cost per element (ns, one core, float32).
MIN_SPLIT_NS = 200_000


def _worth_splitting(size, ns_per_element):
    # the size first: the thread count reads the environment (~10 us on the loaded machine,
    # more than a small kernel's whole run)
    return size * ns_per_element >= MIN_SPLIT_NS and _tasks.num_threads() >= 2


def _split(kernel, arrays, args, ns_per_element):
    """Run ``kernel(*arrays, *args)`` as chunks of the arrays' first axis on the kernels'
    threads (every array is split alike; the chunks write disjoint rows)."""
    rows = arrays[0].shape[0]
    if rows < 2 or not _worth_splitting(arrays[0].size, ns_per_element):
        kernel(*arrays, *args)
        return
    parts = min(_tasks.num_threads(), rows)
    bounds = [rows * i // parts for i in range(parts + 1)]

    def work(i, state):
        lo, hi = bounds[i], bounds[i + 1]
        kernel(*(a[lo:hi] for a in arrays), *args)
    _tasks.run_tasks(range(parts), work, parts)
