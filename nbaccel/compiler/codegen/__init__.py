"""The codegen room: from a scheduled kernel to source, one renderer per tier.

``kernel_passes.py`` decides once, for every tier, what a kernel's reductions share and in which
passes they run; ``common.py`` holds the graph program and the dtype facts every renderer needs;
the renderers (``numpy.py``, ``numba.py`` with its mixins, ``triton.py``) only spell, each from
its own table. ``fastmath.py`` and ``numba_reduce.py`` are imported by generated kernels: their
module paths are part of the disk cache's files.

May import: schedule
"""
