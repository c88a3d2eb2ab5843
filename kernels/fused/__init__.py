"""Composite nn ops as single passes on raw arrays, for nbaccel's eager path (issue 36 item 3):
LayerNorm, BatchNorm (training mode), GELU (erf form), the softmaxes' backward, cross-entropy
forward and backward, embedding's backward, and Adam(W)'s update of one parameter in place.

Two implementations with one signature each:

* :mod:`.reference`  NumPy (the executable spec; the tests' oracle),
* :mod:`.cpu`        numba loops (``cache=True``): one pass per row, channel or element, the
                     sums in float64, no temporaries; Adam's update in the parameter's dtype,
                     rounding as nbaccel's array path does. BatchNorm's per-channel kernels
                     are :mod:`.batch_norm` (re-exported by ``cpu``), float32 GELU's and
                     cross-entropy's float32-lane loops :mod:`.gelu32` and :mod:`.xent32`
                     (``cpu`` dispatches float32 there); :mod:`._launch` holds the numba
                     flags and the split of a large call over the kernels' threads.

Arrays are C-contiguous; row kernels take 2-D ``(rows, n)`` views (the caller reshapes the
trailing normalised axes into ``n``), BatchNorm kernels (N, C, L) views. Outputs are written
into arrays the caller allocates. Nothing here imports nbaccel.
"""
