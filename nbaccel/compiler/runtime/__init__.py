"""The runtime room: running a scheduled graph on a tier.

``runtime.py`` holds the kernel slots that switch from NumPy to numba versions, the graph
``Program`` on the CPU tier and the background numba compiler; ``triton_runtime.py`` the Triton
tier (a GPU through CuPy, or Triton's interpreter); ``fpflags.py`` issues NumPy's floating-point
warnings for the user's ops, never the kernels'.

May import: cache, codegen, config, schedule
"""
