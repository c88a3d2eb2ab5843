"""The schedule room: the graph, and its lowering into loop-nest kernels.

``ir.py`` is the graph every room passes around; ``views.py`` what NumPy's views and 0-d scalars
mean in it; ``passes.py`` prunes it (dead code, common subexpressions) before scheduling;
``schedule.py`` groups its primitives into kernels of the loop IR (``loops.py``, whose rolled,
padded and tiled axes read through ``index_maps.py``).

May import: nothing of the compiler

It sits at the bottom of the pipeline's rooms: every other room reads the graph.
"""
